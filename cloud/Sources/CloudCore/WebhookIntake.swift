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
        let id = try Self.required(request.webhookID, "webhook-id")
        let timestamp = try Self.required(request.webhookTimestamp, "webhook-timestamp")
        let signature = try Self.required(request.webhookSignature, "webhook-signature")
        _ = try tolerance.check(timestamp, now: now)

        let verified = verifier.verifiedVersions(
            id: id, timestamp: timestamp, body: request.body, signatureHeader: signature)
        guard !verified.isEmpty else {
            throw .noValidSignature(versions: SignatureHeader.parse(signature).map(\.version))
        }

        let envelope = try EventEnvelope.parse(request.body)
        guard envelope.id == id else { throw .idMismatch(bodyID: envelope.id, headerID: id) }
        if let headerGateway = request.gatewayID, !headerGateway.isEmpty, headerGateway != envelope.gatewayID {
            throw .gatewayMismatch(bodyGatewayID: envelope.gatewayID, headerGatewayID: headerGateway)
        }
        guard let bodyText = String(validating: request.body, as: UTF8.self) else {
            throw .invalidBody("not valid UTF-8")
        }
        return VerifiedEvent(envelope: envelope, verified: verified, bodyText: bodyText)
    }

    private static func required(_ value: String?, _ name: String) throws(Rejection) -> String {
        guard let value, !value.isEmpty else { throw .missingHeader(name) }
        return value
    }
}
