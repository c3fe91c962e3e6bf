import DoorbellCore
import Testing

/// What Home Assistant gets over MQTT: discovery configs that its MQTT integration accepts (the
/// keys its schemas require, unique ids, topics it can subscribe to) and the per-event messages.
struct HomeAssistantDiscoveryTests {
    static let toml = """
    gateway_id = "gw-0001"
    [radio.rtl433]
    [radio.ble]
    transport = "tcp"
    address = "127.0.0.1:9100"
    [[device]]
    id = "front-door"
    name = "Front door"
    radio = "rtl433"
    match = { code = "0x5A3C91" }
    [[device]]
    id = "garden.gate"
    name = "Garden gate"
    radio = "ble"
    match = { address = "C0:11:22:33:44:02" }
    [[region]]
    id = "porch"
    name = "Porch"
    uuid = "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0"
    [mqtt]
    host = "hass.local"
    """

    static func messages() throws -> (AgentConfig, [MQTTMessage]) {
        let config = try ConfigLoader.parse(text: toml, file: "agent.toml")
        let settings = try #require(config.mqtt)
        return (config, HomeAssistantDiscovery.messages(config: config, settings: settings, agentVersion: "0.1.0"))
    }

    @Test func everyConfigIsWellFormedForHomeAssistant() throws {
        let (_, messages) = try Self.messages()
        var uniqueIDs: Set<String> = []
        for m in messages {
            let levels = m.topic.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
            #expect(levels.count == 5 && levels[0] == "homeassistant" && levels[4] == "config", "\(m.topic)")
            #expect(levels.allSatisfy { !$0.isEmpty && !$0.contains(" ") && !$0.contains("#") && !$0.contains("+") }, "\(m.topic)")
            #expect(m.retain)
            let json = try JSONReader.parse(bytes: m.payload)
            #expect(json["device"]?["identifiers"]?.arrayValues?.isEmpty == false, "\(m.topic)")
            switch levels[1] {
            case "device_automation":
                for key in ["automation_type", "topic", "type", "subtype"] { #expect(json[key]?.stringValue != nil, "\(m.topic) lacks \(key)") }
            case "event":
                #expect(json["event_types"]?.arrayValues?.isEmpty == false)
                #expect(json["state_topic"]?.stringValue != nil)
            default:
                #expect(json["state_topic"]?.stringValue != nil, "\(m.topic)")
            }
            if let id = json["unique_id"]?.stringValue { #expect(uniqueIDs.insert(id).inserted, "unique_id \(id) twice") }
        }
    }

    @Test func devicesRegionsAndTheGatewayBecomeEntities() throws {
        let (_, messages) = try Self.messages()
        let topics = Set(messages.map(\.topic))
        #expect(topics.contains("homeassistant/event/doorbell_gw-0001/front-door/config"))
        #expect(topics.contains("homeassistant/event/doorbell_gw-0001/garden_gate/config"), "ids become safe topic levels")
        #expect(topics.contains("homeassistant/sensor/doorbell_gw-0001/garden_gate_battery/config"), "BTHome buttons report their battery")
        #expect(!topics.contains("homeassistant/sensor/doorbell_gw-0001/front-door_battery/config"), "RF buttons have none")
        #expect(topics.contains("homeassistant/binary_sensor/doorbell_gw-0001/porch_presence/config"))
        #expect(topics.contains("homeassistant/device_automation/doorbell_gw-0001/garden_gate_double_press/config"))
        #expect(topics.contains("homeassistant/binary_sensor/doorbell_gw-0001/gateway_problem/config"))
        let gate = try JSONReader.parse(bytes: try #require(messages.first { $0.topic.hasSuffix("/garden_gate/config") }).payload)
        #expect(gate["device"]?["via_device"]?.stringValue == "doorbell_gw-0001")
        #expect(gate["event_types"]?.arrayValues?.count == 7)
        // Nothing secret in discovery.
        #expect(!messages.contains { String(decoding: $0.payload, as: UTF8.self).contains("bindkey") })
    }

    @Test func aPressABatteryAndAVisitBecomeEntityStates() throws {
        let topics = MQTTTopics(prefix: "doorbell", gatewayID: "gw-0001")
        var press = AgentEvent(type: .doorbellDoublePressed, device: DeviceRef(id: "garden.gate", name: "Garden gate", radio: "ble"),
                               occurredAtMicros: 1_764_000_000_000_000, clockSynced: true,
                               data: .object([("button", .number(0)), ("battery_pct", .number(87))]))
        press.monotonicMicros = 5
        let body = press.body(id: "e-1", sequence: 7, gatewayID: "gw-0001", agentVersion: "0.1.0")
        let out = try #require(MQTTPublications.forEvent(body: body, topics: topics))
        #expect(out.map(\.topic) == ["doorbell/gw-0001/events", "doorbell/gw-0001/garden_gate/event", "doorbell/gw-0001/garden_gate/battery"])
        #expect(out[0].payload == body, "the events topic carries the exact stored body")
        let state = try JSONReader.parse(bytes: out[1].payload)
        #expect(state["event_type"]?.stringValue == "double_press")
        #expect(state["id"]?.stringValue == "e-1")
        #expect(String(decoding: out[2].payload, as: UTF8.self) == "87" && out[2].retain)

        let visit = AgentEvent(type: .beaconExited, device: DeviceRef(id: "porch", name: "Porch", radio: "ble"),
                               occurredAtMicros: 1_764_000_000_000_000, clockSynced: true, data: .object([("dwell_s", .number(42))]))
        let v = try #require(MQTTPublications.forEvent(body: visit.body(id: "e-2", sequence: 8, gatewayID: "gw-0001", agentVersion: "0.1.0"), topics: topics))
        #expect(v.map(\.topic) == ["doorbell/gw-0001/events", "doorbell/gw-0001/porch/presence", "doorbell/gw-0001/porch/attributes"])
        #expect(String(decoding: v[1].payload, as: UTF8.self) == "OFF" && v[1].retain)
        #expect(try JSONReader.parse(bytes: v[2].payload)["dwell_s"]?.intValue == 42)
    }

    /// Home Assistant's rules for an event entity (homeassistant/components/event): a doorbell-class
    /// entity offers the standard `ring` type (HA 2025+ warns "will stop working in Home Assistant
    /// 2027.4" otherwise), every event_type a message carries is one of the entity's event_types (HA
    /// drops it otherwise), and every device trigger fires on one of them. Checked for each kind of
    /// device on each radio, against the events that device produces.
    @Test(arguments: [("rtl433", DeviceKind.doorbell), ("ble", .doorbell), ("rtl433", .answerButton), ("ble", .answerButton)])
    func everyEventEntityFollowsHomeAssistantsRules(radio: String, kind: DeviceKind) throws {
        let config = try ConfigLoader.parse(text: """
            gateway_id = "gw"
            [radio.rtl433]
            [radio.ble]
            transport = "tcp"
            address = "127.0.0.1:9100"
            [[device]]
            id = "d"
            kind = "\(kind.rawValue)"
            radio = "\(radio)"
            match = \(radio == "ble" ? "{ address = \"C0:11:22:33:44:02\" }" : "{ code = 1 }")
            [mqtt]
            host = "hass.local"
            """, file: "agent.toml")
        let messages = HomeAssistantDiscovery.messages(config: config, settings: try #require(config.mqtt), agentVersion: "0.1.0")
        let entity = try JSONReader.parse(bytes: try #require(messages.first { $0.topic.hasPrefix("homeassistant/event/") }).payload)
        let offered = Set(entity["event_types"]?.arrayValues?.compactMap(\.stringValue) ?? [])
        let doorbellClass = entity["device_class"]?.stringValue == "doorbell"
        #expect(doorbellClass == (kind == .doorbell))
        if doorbellClass { #expect(offered.contains("ring"), "a doorbell event entity must offer ring: \(offered)") }
        // What the device's presses become on its state topic.
        let produced: [EventType] = kind == .answerButton ? [.doorAnswered]
            : radio == "ble" ? [.doorbellPressed, .doorbellDoublePressed, .doorbellTriplePressed, .doorbellLongPressed,
                                .doorbellLongDoublePressed, .doorbellLongTriplePressed, .doorbellHeld]
            : [.doorbellPressed, .doorbellHeld]
        let topics = MQTTTopics(prefix: "doorbell", gatewayID: "gw")
        for type in produced {
            let event = AgentEvent(type: type, device: DeviceRef(id: "d", name: "D", radio: radio), occurredAtMicros: 1_764_000_000_000_000,
                                   clockSynced: true, data: .object([]))
            let out = try #require(MQTTPublications.forEvent(body: event.body(id: "e", sequence: 1, gatewayID: "gw", agentVersion: "0.1.0"), topics: topics))
            let state = try #require(out.first { $0.topic == topics.deviceEvent("d") })
            let sent = try #require(try JSONReader.parse(bytes: state.payload)["event_type"]?.stringValue)
            #expect(offered.contains(sent), "\(type.rawValue) is sent as \(sent), not one of \(offered)")
        }
        if kind == .doorbell {
            let press = AgentEvent(type: .doorbellPressed, device: DeviceRef(id: "d", name: "D", radio: radio), occurredAtMicros: 1,
                                   clockSynced: true, data: .object([]))
            let out = try #require(MQTTPublications.forEvent(body: press.body(id: "e", sequence: 1, gatewayID: "gw", agentVersion: "0.1.0"), topics: topics))
            #expect(try JSONReader.parse(bytes: out[1].payload)["event_type"]?.stringValue == "ring", "a doorbell's press rings")
        }
        let triggers = messages.filter { $0.topic.hasPrefix("homeassistant/device_automation/") }
        #expect(!triggers.isEmpty)
        for t in triggers {
            let payload = try JSONReader.parse(bytes: t.payload)["payload"]?.stringValue ?? ""
            #expect(offered.contains(payload), "\(t.topic) fires on \(payload), which is never sent")
        }
        // The press trigger keeps its topic (automations built on it keep working).
        #expect(triggers.contains { $0.topic == "homeassistant/device_automation/doorbell_gw/d_press/config" })
    }

    @Test func bodiesThatAreNotOurEventsAreRefusedNotCrashed() {
        let topics = MQTTTopics(prefix: "doorbell", gatewayID: "gw")
        for bad in ["", "{", "[]", "{\"type\":\"doorbell.pressed\"}", "{\"id\":\"x\",\"type\":\"nope\"}"] {
            #expect(MQTTPublications.forEvent(body: Array(bad.utf8), topics: topics) == nil, "\(bad)")
        }
    }
}
