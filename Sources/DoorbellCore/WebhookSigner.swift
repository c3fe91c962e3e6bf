import Crypto
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// Standard Webhooks signatures (docs/protocol.md): signed content is "<id>.<timestamp>.<body>".
// `v1` is HMAC-SHA256 with the per-gateway whsec_ secret; `v1a` is Ed25519 with the device key.

public struct SigningError: Error, Sendable, CustomStringConvertible {
    public let description: String
}

public struct WebhookSecret: Sendable {
    public let keyBytes: [UInt8]
    public var key: SymmetricKey { SymmetricKey(data: keyBytes) }

    /// Accepts "whsec_<base64>" (what enrollment hands out). Surrounding whitespace is ignored.
    public init(parsing text: String) throws(SigningError) {
        let trimmed = text.trimmingCharacters(in: " \n\r\t")
        guard trimmed.hasPrefix("whsec_") else {
            throw SigningError(description: "the HMAC secret must start with whsec_ (as issued at enrollment), found \(trimmed.prefix(6))...")
        }
        guard let data = Data(base64Encoded: String(trimmed.dropFirst(6))), data.count >= 16 else {
            throw SigningError(description: "the HMAC secret after whsec_ must be base64 of at least 16 bytes; re-copy it from enrollment")
        }
        keyBytes = Array(data)
    }
}

/// Not Sendable: it holds the private key and lives on the delivery thread.
public struct WebhookSigner {
    public var hmacSecret: WebhookSecret?
    public var deviceKey: Curve25519.Signing.PrivateKey?

    public init(hmacSecret: WebhookSecret?, deviceKey: Curve25519.Signing.PrivateKey?) {
        self.hmacSecret = hmacSecret
        self.deviceKey = deviceKey
    }

    static func signedContent(id: String, timestamp: Int64, body: [UInt8]) -> [UInt8] {
        Array("\(id).\(timestamp).".utf8) + body
    }

    public func v1(id: String, timestamp: Int64, body: [UInt8]) -> String? {
        guard let hmacSecret else { return nil }
        let mac = HMAC<SHA256>.authenticationCode(for: Self.signedContent(id: id, timestamp: timestamp, body: body), using: hmacSecret.key)
        return "v1," + Data(mac).base64EncodedString()
    }

    public func v1a(id: String, timestamp: Int64, body: [UInt8]) throws(SigningError) -> String? {
        guard let deviceKey else { return nil }
        do {
            let sig = try deviceKey.signature(for: Self.signedContent(id: id, timestamp: timestamp, body: body))
            return "v1a," + Data(sig).base64EncodedString()
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
    public static func keyID(_ publicKey: Curve25519.Signing.PublicKey) -> String {
        SHA256.hash(data: publicKey.rawRepresentation).prefix(8).map { b in
            let s = String(b, radix: 16)
            return s.count == 1 ? "0" + s : s
        }.joined()
    }
}

public enum AgentVersion {
    public static let current = "0.1.0"
}
