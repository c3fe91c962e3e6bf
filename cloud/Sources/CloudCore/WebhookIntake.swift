/// What arrived in one `POST /events`, before any checks. Header values are nil when absent.
public struct WebhookRequest: Sendable {
    public var webhookID: String?
    public var webhookTimestamp: String?
    public var webhookSignature: String?
    /// `doorbell-gateway-id`; optional.
    public var gatewayID: String?
    /// The body exactly as received.
    public var body: [UInt8]

    public init(webhookID: String?, webhookTimestamp: String?, webhookSignature: String?,
                gatewayID: String? = nil, body: [UInt8]) {
        self.webhookID = webhookID
        self.webhookTimestamp = webhookTimestamp
        self.webhookSignature = webhookSignature
        self.gatewayID = gatewayID
        self.body = body
    }
}

/// An event whose signature, timestamp and body passed every check.
public struct VerifiedEvent: Sendable, Equatable {
    public let envelope: EventEnvelope
    /// The signature versions that verified (at least one).
    public let verified: [SignatureVersion]
    /// The body exactly as received (valid UTF-8, since it decoded as JSON).
    public let bodyText: String
}

/// The receiver's checks, in order: headers present, timestamp within tolerance, a signature
/// verifies, body is a valid event whose `id` equals `webhook-id`. Pure: the clock is a parameter.
public struct WebhookIntake: Sendable {
    public let verifier: SignatureVerifier
    public let tolerance: TimestampTolerance

    public init(keys: GatewayKeys, tolerance: TimestampTolerance = .standard) {
        self.verifier = SignatureVerifier(keys: keys)
        self.tolerance = tolerance
    }

    /// - Parameter now: the receiver's clock, Unix seconds.
    public func verify(_ request: WebhookRequest, now: Int64) throws(Rejection) -> VerifiedEvent {
        let (id, _, verified) = try authenticate(request, now: now)
        let envelope = try EventEnvelope.parse(request.body)
        guard envelope.id == id else { throw .idMismatch(bodyID: envelope.id, headerID: id) }
        try Self.sameGateway(request, body: envelope.gatewayID)
        guard let bodyText = String(validating: request.body, as: UTF8.self) else {
            throw .invalidBody("not valid UTF-8")
        }
        return VerifiedEvent(envelope: envelope, verified: verified, bodyText: bodyText)
    }

    /// A heartbeat (`POST /heartbeat`) passes the same checks as an event, and its `sent_at`
    /// must be the signed `webhook-timestamp`. Replays within the tolerance are the store's to
    /// refuse (it remembers the ids it took).
    public func verifyHeartbeat(_ request: WebhookRequest, now: Int64) throws(Rejection) -> GatewayHeartbeat {
        let (id, timestamp, _) = try authenticate(request, now: now)
        let heartbeat = try GatewayHeartbeat.parse(request.body)
        guard heartbeat.id == id else { throw .idMismatch(bodyID: heartbeat.id, headerID: id) }
        try Self.sameGateway(request, body: heartbeat.gatewayID)
        guard heartbeat.sentAt == timestamp else {
            throw .invalidBody("field 'sent_at' (\(heartbeat.sentAt)) must equal webhook-timestamp (\(timestamp))")
        }
        return heartbeat
    }

    /// Headers present, timestamp within tolerance, a signature verifies: the sender holds the
    /// gateway's key now. Returns the id, the timestamp and the versions that verified.
    private func authenticate(_ request: WebhookRequest, now: Int64) throws(Rejection) -> (String, Int64, [SignatureVersion]) {
        let id = try Self.required(request.webhookID, "webhook-id")
        let timestamp = try Self.required(request.webhookTimestamp, "webhook-timestamp")
        let signature = try Self.required(request.webhookSignature, "webhook-signature")
        let seconds = try tolerance.check(timestamp, now: now)

        let verified = verifier.verifiedVersions(
            id: id, timestamp: timestamp, body: request.body, signatureHeader: signature)
        guard !verified.isEmpty else {
            throw .noValidSignature(versions: SignatureHeader.parse(signature).map(\.version))
        }
        return (id, seconds, verified)
    }

    private static func sameGateway(_ request: WebhookRequest, body gatewayID: String) throws(Rejection) {
        if let headerGateway = request.gatewayID, !headerGateway.isEmpty, headerGateway != gatewayID {
            throw .gatewayMismatch(bodyGatewayID: gatewayID, headerGatewayID: headerGateway)
        }
    }

    private static func required(_ value: String?, _ name: String) throws(Rejection) -> String {
        guard let value, !value.isEmpty else { throw .missingHeader(name) }
        return value
    }
}
