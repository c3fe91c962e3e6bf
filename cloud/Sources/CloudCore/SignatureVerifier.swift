import Crypto

/// The signature schemes of docs/protocol.md.
public enum SignatureVersion: String, Sendable, CaseIterable, Comparable {
    /// HMAC-SHA256 with the gateway's `whsec_` secret (Standard Webhooks).
    case v1
    /// Ed25519 with the gateway's device key.
    case v1a

    private var rank: Int {
        switch self {
        case .v1: return 0
        case .v1a: return 1
        }
    }

    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rank < rhs.rank }
}

/// Checks `webhook-signature` entries against the keys held for a gateway.
public struct SignatureVerifier: Sendable {
    public let keys: GatewayKeys

    public init(keys: GatewayKeys) {
        self.keys = keys
    }

    /// The bytes that are signed: `<id>.<timestamp>.<body>`, with the body exactly as received.
    public static func signedContent(id: String, timestamp: String, body: [UInt8]) -> [UInt8] {
        var content = [UInt8]()
        content.reserveCapacity(id.utf8.count + timestamp.utf8.count + body.count + 2)
        content.append(contentsOf: id.utf8)
        content.append(UInt8(ascii: "."))
        content.append(contentsOf: timestamp.utf8)
        content.append(UInt8(ascii: "."))
        content.append(contentsOf: body)
        return content
    }

    /// Every version with at least one entry that verifies, in `SignatureVersion` order.
    /// Unknown versions, undecodable entries and versions without a configured key are ignored.
    public func verifiedVersions(
        id: String, timestamp: String, body: [UInt8], signatureHeader: String
    ) -> [SignatureVersion] {
        let content = Self.signedContent(id: id, timestamp: timestamp, body: body)
        var verified = Set<SignatureVersion>()
        for entry in SignatureHeader.parse(signatureHeader) {
            guard let version = SignatureVersion(rawValue: entry.version),
                  !verified.contains(version),
                  let signature = entry.signature
            else { continue }
            if verify(version, signature: signature, content: content) {
                verified.insert(version)
            }
        }
        return verified.sorted()
    }

    private func verify(_ version: SignatureVersion, signature: [UInt8], content: [UInt8]) -> Bool {
        switch version {
        case .v1:
            guard let secret = keys.secret, signature.count == SHA256.byteCount else { return false }
            return HMAC<SHA256>.isValidAuthenticationCode(signature, authenticating: content, using: secret.key)
        case .v1a:
            guard let publicKey = keys.publicKey, signature.count == 64 else { return false }
            return publicKey.isValidSignature(signature, for: content)
        }
    }

    /// Produces a `v1,<base64>` entry; for tests and tooling.
    public static func v1Signature(secret: WebhookSecret, id: String, timestamp: String, body: [UInt8]) -> String {
        let mac = HMAC<SHA256>.authenticationCode(
            for: signedContent(id: id, timestamp: timestamp, body: body), using: secret.key)
        return "v1," + Base64.encode(mac)
    }

    /// Produces a `v1a,<base64>` entry; for tests and tooling.
    public static func v1aSignature(
        privateKey: Curve25519.Signing.PrivateKey, id: String, timestamp: String, body: [UInt8]
    ) throws -> String {
        let signature = try privateKey.signature(for: signedContent(id: id, timestamp: timestamp, body: body))
        return "v1a," + Base64.encode(signature)
    }
}
