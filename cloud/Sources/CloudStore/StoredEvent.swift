import CloudCore

/// One row of the `events` table.
public struct StoredEvent: Sendable, Equatable {
    public let id: String
    public let sequence: Int64
    public let type: String
    public let gatewayID: String
    public let deviceID: String?
    public let occurredAt: String
    /// The body exactly as received.
    public let body: String
    /// When the receiver stored it, Unix milliseconds.
    public let receivedAtMilliseconds: Int64
    /// Signature versions that verified, e.g. `["v1", "v1a"]`.
    public let verified: [String]

    public init(_ event: VerifiedEvent, receivedAtMilliseconds: Int64) {
        id = event.envelope.id
        sequence = event.envelope.sequence
        type = event.envelope.type
        gatewayID = event.envelope.gatewayID
        deviceID = event.envelope.deviceID
        occurredAt = event.envelope.occurredAt
        body = event.bodyText
        self.receivedAtMilliseconds = receivedAtMilliseconds
        verified = event.verified.map(\.rawValue)
    }

    public init(id: String, sequence: Int64, type: String, gatewayID: String, deviceID: String?, occurredAt: String,
         body: String, receivedAtMilliseconds: Int64, verified: [String]) {
        self.id = id
        self.sequence = sequence
        self.type = type
        self.gatewayID = gatewayID
        self.deviceID = deviceID
        self.occurredAt = occurredAt
        self.body = body
        self.receivedAtMilliseconds = receivedAtMilliseconds
        self.verified = verified
    }

    /// One JSON line for `doorbell-cloud events`; `body` is embedded as the JSON it was received as.
    public var jsonLine: String {
        JSONText.object([
            "id": .string(id),
            "sequence": .int(sequence),
            "type": .string(type),
            "gateway_id": .string(gatewayID),
            "device": .string(deviceID),
            "occurred_at": .string(occurredAt),
            "received_at_ms": .int(receivedAtMilliseconds),
            "verified": .array(verified.map { .string($0) }),
            "body": JSONText.Value(raw: body),
        ])
    }
}
