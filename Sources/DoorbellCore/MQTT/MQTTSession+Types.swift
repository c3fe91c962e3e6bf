// The values around MQTTSession: what the sink shows in status, what it reads from the outbox,
// what it publishes for one event, how it sees Home Assistant, and the pure helpers it uses.

public struct MQTTSinkStatus: Sendable, Equatable {
    public var broker: String
    public var connected = false
    /// Events the broker acknowledged.
    public var acknowledged = 0
    public var connects = 0
    public var lastAckWallMicros: Int64?
    public var lastError: String?
    public var lastErrorWallMicros: Int64?
    public var discoveryMessages = 0
    public var discoveryPublishedWallMicros: Int64?
    /// Home Assistant as the session sees it (`MQTTSession.HomeAssistant`); nil without discovery.
    public var homeAssistant: String?
    /// Messages on our subscriptions that were not Home Assistant's status, by reason.
    public var ignored: [String: Int] = [:]
    public init(broker: String) { self.broker = broker }
}

/// One stored event waiting for the broker: the session reads its body only to build its messages.
public struct MQTTOutboxRow: Sendable, Equatable {
    public let id: String
    public let sequence: Int64
    public let body: [UInt8]
    public init(id: String, sequence: Int64, body: [UInt8]) {
        self.id = id
        self.sequence = sequence
        self.body = body
    }
}

/// The messages of one event, published together; the event is acknowledged once all are.
public struct MQTTEventPublication: Sendable, Equatable {
    public let id: String
    public let sequence: Int64
    public let messages: [MQTTMessage]
}

extension MQTTSession {
    /// Whether Home Assistant listens, as far as its status topic tells.
    public enum HomeAssistant: Sendable, Equatable {
        /// Not waited for: discovery off, or `homeAssistantWaitMicros` 0.
        case notWaitedFor
        /// Since this monotonic time (a connect, or its `offline`), events wait for its birth message.
        case awaitingBirth(sinceMonoMicros: Int64)
        /// Its birth message came: events go once it has had the discovery.
        case online
        /// No birth message within the wait: events go out anyway (it may be listening already,
        /// or there is none); its birth later still brings the discovery again.
        case notHeard

        var text: String? {
            switch self {
            case .notWaitedFor: nil
            case .awaitingBirth: "waiting for its birth message"
            case .online: "online"
            case .notHeard: "not heard since the connect: publishing without waiting"
            }
        }
    }

    static func classify(topic: String, payload: some Collection<UInt8>, statusTopic: String) -> Heard {
        guard topic == statusTopic else { return .ignored(reason: "unknown_topic") }
        guard payload.count <= maxStatusPayload else { return .ignored(reason: "oversized_payload") }
        switch String(decoding: payload, as: UTF8.self) {
        case "online": return .homeAssistantOnline
        case "offline": return .homeAssistantOffline
        default: return .ignored(reason: "unexpected_payload")
        }
    }

    /// What to publish for discovery: an empty retained config for each entity that left the
    /// config (Home Assistant removes it), then the current entities.
    public static func discoveryMessages(current: [MQTTMessage], previouslyPublished: [String]) -> [MQTTMessage] {
        let now = Set(current.map(\.topic))
        let removals = previouslyPublished.filter { !now.contains($0) }.map { MQTTMessage(topic: $0, payload: [], retain: true) }
        return removals + current
    }
}
