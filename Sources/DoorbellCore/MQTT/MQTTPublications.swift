// What the agent publishes to the house's MQTT broker for one stored event: the event itself on
// `<prefix>/<gateway>/events` (the exact signed body, for Node-RED and friends) and, for Home
// Assistant, the state of the entity it belongs to — a doorbell's `event` entity, a region's
// presence, a button's battery. Pure: built from the stored body, so what the broker gets and
// what the cloud gets are the same event, with the same id to de-duplicate at-least-once copies.

public struct MQTTMessage: Sendable, Equatable {
    public var topic: String
    public var payload: [UInt8]
    public var retain: Bool
    public init(topic: String, payload: [UInt8], retain: Bool) {
        self.topic = topic
        self.payload = payload
        self.retain = retain
    }
    public init(topic: String, json: JSONValue, retain: Bool) { self.init(topic: topic, payload: JSONWriter.encode(json), retain: retain) }
    public init(topic: String, text: String, retain: Bool) { self.init(topic: topic, payload: Array(text.utf8), retain: retain) }
}

public struct MQTTTopics: Sendable, Equatable {
    public let base: String

    public init(prefix: String, gatewayID: String) { base = prefix + "/" + Self.level(gatewayID) }

    /// Availability: `online` while connected, `offline` as the broker's last will.
    public var status: String { base + "/status" }
    public var events: String { base + "/events" }
    public var diagnostics: String { base + "/diagnostics" }
    public func deviceEvent(_ id: String) -> String { base + "/" + Self.level(id) + "/event" }
    public func battery(_ id: String) -> String { base + "/" + Self.level(id) + "/battery" }
    public func presence(_ id: String) -> String { base + "/" + Self.level(id) + "/presence" }
    public func presenceAttributes(_ id: String) -> String { base + "/" + Self.level(id) + "/attributes" }

    /// One topic level (or a Home Assistant object id) from an id: letters, digits, '-' and '_'.
    public static func level(_ id: String) -> String {
        String(id.unicodeScalars.map { c -> Character in
            (("0"..."9").contains(c) || ("a"..."z").contains(c) || ("A"..."Z").contains(c) || c == "-" || c == "_") ? Character(c) : "_"
        })
    }
}

public enum MQTTPublications {
    /// Home Assistant's event type for each doorbell event (one of its entity's `event_types`).
    public static func homeAssistantEventType(_ type: EventType) -> String? {
        let agentType: String
        switch type {
        case .doorbellPressed: agentType = "press"
        case .doorbellHeld: agentType = "hold"
        case .doorbellDoublePressed: agentType = "double_press"
        case .doorbellTriplePressed: agentType = "triple_press"
        case .doorbellLongPressed: agentType = "long_press"
        case .doorbellLongDoublePressed: agentType = "long_double_press"
        case .doorbellLongTriplePressed: agentType = "long_triple_press"
        case .doorAnswered: return "press"  // the answer button's own entity (device_class button)
        case .beaconEntered, .beaconExited, .gatewayEvicted, .gatewayDeadLetter, .pushDisplayed, .pushNotDisplayed, .phoneNotification, .phoneNotificationModified, .phoneNotificationRemoved, .phonePaired,
             .phonePairingFailed, .phoneForgotten: return nil
        }
        // doorbell.* events come from doorbell-kind devices only.
        return HomeAssistantDiscovery.sentEventType(agentType, kind: .doorbell)
    }

    /// The messages of one stored event, in order; nil when the body is not an event we wrote.
    public static func forEvent(body: [UInt8], topics: MQTTTopics) -> [MQTTMessage]? {
        guard let event = try? JSONReader.parse(bytes: body), let typeText = event["type"]?.stringValue,
              let type = EventType(rawValue: typeText), let id = event["id"]?.stringValue else { return nil }
        var out = [MQTTMessage(topic: topics.events, payload: body, retain: false)]
        guard let device = event["device"]?["id"]?.stringValue else { return out }
        let data = event["data"] ?? .object([])
        var dataMembers: [(String, JSONValue)] = []
        if case let .object(m) = data { dataMembers = m }
        let common: [(String, JSONValue)] = [("id", .string(id)), ("sequence", event["sequence"] ?? .null),
                                             ("occurred_at", event["occurred_at"] ?? .null), ("test", event["test"] ?? .bool(false))]
        if let haType = homeAssistantEventType(type) {
            out.append(MQTTMessage(topic: topics.deviceEvent(device), json: .object([("event_type", .string(haType))] + common + dataMembers), retain: false))
            if let battery = data["battery_pct"]?.intValue {
                out.append(MQTTMessage(topic: topics.battery(device), text: String(battery), retain: true))
            }
        } else if type == .beaconEntered || type == .beaconExited {
            let inside = type == .beaconEntered
            out.append(MQTTMessage(topic: topics.presence(device), text: inside ? "ON" : "OFF", retain: true))
            out.append(MQTTMessage(topic: topics.presenceAttributes(device),
                                   json: .object([(inside ? "entered_at" : "exited_at", event["occurred_at"] ?? .null)] + dataMembers), retain: true))
        }
        return out
    }
}
