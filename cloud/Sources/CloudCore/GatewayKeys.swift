import Crypto

/// The `whsec_<base64>` shared secret for `v1` (HMAC-SHA256) signatures.
public struct WebhookSecret: Sendable {
    /// The decoded key bytes (kept as bytes: swift-crypto's key types are not `Sendable`).
    public let keyBytes: [UInt8]

    public var key: SymmetricKey { SymmetricKey(data: keyBytes) }

    /// Parses `whsec_<base64>`; surrounding whitespace is ignored.
    public init(parsing text: String) throws(KeyError) {
        let trimmed = text.trimmingWhitespace()
        guard trimmed.hasPrefix("whsec_") else { throw .missingSecretPrefix }
        guard let bytes = Base64.decode(trimmed.dropFirst("whsec_".count)) else { throw .invalidSecretBase64 }
        guard !bytes.isEmpty else { throw .emptySecret }
        self.keyBytes = bytes
    }

    /// A random 32-byte secret nobody holds.
    static func random() -> WebhookSecret {
        WebhookSecret(keyBytes: SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) })
    }

    private init(keyBytes: [UInt8]) {
        self.keyBytes = keyBytes
    }
}

/// The gateway's Ed25519 device public key for `v1a` signatures.
public struct GatewayPublicKey: Sendable {
    /// The raw 32-byte key, validated at init.
    public let rawRepresentation: [UInt8]

    /// Parses the base64 of the raw 32-byte key, optionally prefixed `ed25519:`; surrounding
    /// whitespace is ignored.
    public init(parsing text: String) throws(KeyError) {
        var trimmed = Substring(text.trimmingWhitespace())
        if trimmed.hasPrefix("ed25519:") { trimmed = trimmed.dropFirst("ed25519:".count) }
        guard let bytes = Base64.decode(trimmed) else { throw .invalidPublicKeyBase64 }
        guard bytes.count == 32 else { throw .wrongPublicKeyLength(bytes.count) }
        guard (try? Curve25519.Signing.PublicKey(rawRepresentation: bytes)) != nil else { throw .invalidPublicKey }
        self.rawRepresentation = bytes
    }

    public init(_ key: Curve25519.Signing.PublicKey) {
        self.rawRepresentation = Array(key.rawRepresentation)
    }

    /// Whether `signature` is a valid Ed25519 signature of `content` by this key.
    public func isValidSignature(_ signature: [UInt8], for content: [UInt8]) -> Bool {
        guard let key = try? Curve25519.Signing.PublicKey(rawRepresentation: rawRepresentation) else { return false }
        return key.isValidSignature(signature, for: content)
    }
}

/// The keys the receiver holds for one gateway; at least one is present.
public struct GatewayKeys: Sendable {
    public let secret: WebhookSecret?
    public let publicKey: GatewayPublicKey?

    public init(secret: WebhookSecret?, publicKey: GatewayPublicKey?) throws(KeyError) {
        guard secret != nil || publicKey != nil else { throw .noKeys }
        self.secret = secret
        self.publicKey = publicKey
    }

    /// Keys nobody holds, for a gateway that is not enrolled: its events fail the signature
    /// check exactly as events signed with a wrong key do, so whether an id is enrolled cannot
    /// be probed.
    public static func nobodys() -> GatewayKeys {
        GatewayKeys(unchecked: .random())
    }

    private init(unchecked secret: WebhookSecret) {
        self.secret = secret
        self.publicKey = nil
    }
}

extension String {
    func trimmingWhitespace() -> String {
        guard let first = firstIndex(where: { !$0.isWhitespace }),
              let last = lastIndex(where: { !$0.isWhitespace })
        else { return "" }
        return String(self[first...last])
    }
}
