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

/// Not Sendable: it holds the private key and lives on the delivery thread.
public struct WebhookSigner {
    public var hmacSecret: WebhookSecret?
    public var deviceKey: Ed25519SigningKey?

    public init(hmacSecret: WebhookSecret?, deviceKey: Ed25519SigningKey?) {
        self.hmacSecret = hmacSecret
        self.deviceKey = deviceKey
    }

    static func signedContent(id: String, timestamp: Int64, body: [UInt8]) -> [UInt8] {
        Array("\(id).\(timestamp).".utf8) + body
    }

    public func v1(id: String, timestamp: Int64, body: [UInt8]) -> String? {
        guard let hmacSecret else { return nil }
        let mac = HMACSHA256.authenticationCode(Self.signedContent(id: id, timestamp: timestamp, body: body), key: hmacSecret.keyBytes)
        return "v1," + Base64.encode(mac)
    }

    public func v1a(id: String, timestamp: Int64, body: [UInt8]) throws(SigningError) -> String? {
        guard let deviceKey else { return nil }
        do {
            let sig = try deviceKey.signature(for: Self.signedContent(id: id, timestamp: timestamp, body: body))
            return "v1a," + Base64.encode(sig)
        } catch {
            throw SigningError(description: "Ed25519 signing failed: \(error)")
        }
    }

    /// The `webhook-signature` header value: every signature we can make, space-separated.
    public func signatureHeader(id: String, timestamp: Int64, body: [UInt8]) throws(SigningError) -> String {
        let parts = [v1(id: id, timestamp: timestamp, body: body), try v1a(id: id, timestamp: timestamp, body: body)].compactMap { $0 }
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
