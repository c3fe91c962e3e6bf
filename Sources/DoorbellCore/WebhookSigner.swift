// Standard Webhooks signatures (docs/protocol.md): signed content is "<id>.<timestamp>.<body>".
// `v1` is HMAC-SHA256 with the per-gateway whsec_ secret; `v1a` is Ed25519 with the device key.

public struct SigningError: Error, Sendable, CustomStringConvertible {
    public let description: String
}

public struct WebhookSecret: Sendable {
    public let keyBytes: [UInt8]

    /// Accepts "whsec_<base64>" (what enrollment hands out). Surrounding whitespace is ignored.
    public init(parsing text: String) throws(SigningError) {
        let trimmed = text.trimmingCharacters(in: " \n\r\t")
        guard trimmed.hasPrefix("whsec_") else {
            throw SigningError(description: "the HMAC secret must start with whsec_ (as issued at enrollment), found \(trimmed.prefix(6))...")
        }
        guard let data = Base64.decode(trimmed.dropFirst(6)), data.count >= 16 else {
            throw SigningError(description: "the HMAC secret after whsec_ must be base64 of at least 16 bytes; re-copy it from enrollment")
        }
        keyBytes = data
    }
}

/// Not Sendable: it holds the private key and lives on the delivery thread. Both keys are set up
/// in libcrypto once, here, not per delivery.
public struct WebhookSigner {
    public let hmacSecret: WebhookSecret?
    public let deviceKey: Ed25519SigningKey?
    private let hmac: HMACSHA256.Keyed?

    public init(hmacSecret: WebhookSecret?, deviceKey: Ed25519SigningKey?) {
        self.hmacSecret = hmacSecret
        self.deviceKey = deviceKey
        hmac = hmacSecret.map { HMACSHA256.Keyed(key: $0.keyBytes) }
    }

    static func prefix(id: String, timestamp: Int64) -> [UInt8] { Array("\(id).\(timestamp).".utf8) }

    public func v1(id: String, timestamp: Int64, body: [UInt8]) -> String? {
        v1(prefix: Self.prefix(id: id, timestamp: timestamp), body: body)
    }

    func v1(prefix: [UInt8], body: [UInt8]) -> String? {
        guard let hmac else { return nil }
        return "v1," + Base64.encode(hmac.authenticationCode(prefix: prefix, body))
    }

    public func v1a(id: String, timestamp: Int64, body: [UInt8]) throws(SigningError) -> String? {
        try v1a(prefix: Self.prefix(id: id, timestamp: timestamp), body: body)
    }

    func v1a(prefix: [UInt8], body: [UInt8]) throws(SigningError) -> String? {
        guard let deviceKey else { return nil }
        var content = prefix
        content.append(contentsOf: body)
        do {
            return "v1a," + Base64.encode(try deviceKey.signature(for: content))
        } catch {
            throw SigningError(description: "Ed25519 signing failed: \(error)")
        }
    }

    /// The `webhook-signature` header value: every signature we can make, space-separated.
    public func signatureHeader(id: String, timestamp: Int64, body: [UInt8]) throws(SigningError) -> String {
        let prefix = Self.prefix(id: id, timestamp: timestamp)
        let parts = [v1(prefix: prefix, body: body), try v1a(prefix: prefix, body: body)].compactMap { $0 }
        guard !parts.isEmpty else { throw SigningError(description: "no signing key configured") }
        return parts.joined(separator: " ")
    }

    /// Headers for one delivery attempt; `timestamp` is the attempt's own time.
    public func headers(id: String, timestamp: Int64, body: [UInt8], gatewayID: String, userAgent: String) throws(SigningError) -> [(String, String)] {
        [
            ("Content-Type", "application/json"),
            ("webhook-id", id),
            ("webhook-timestamp", String(timestamp)),
            ("webhook-signature", try signatureHeader(id: id, timestamp: timestamp, body: body)),
            ("doorbell-gateway-id", gatewayID),
            ("User-Agent", userAgent),
        ]
    }
}

public enum DeviceKey {
    /// Key id for enrollment: first 8 bytes of SHA-256 of the raw public key, hex.
    public static func keyID(_ publicKey: [UInt8]) -> String {
        Hex.encode(SHA256.hash(publicKey).prefix(8))
    }
}

public enum AgentVersion {
    public static let current = "0.1.0"
}
