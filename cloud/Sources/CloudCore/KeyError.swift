/// A gateway key that could not be used. Messages name the expected format.
public enum KeyError: Error, Equatable, Sendable {
    case missingSecretPrefix
    case invalidSecretBase64
    case emptySecret
    case invalidPublicKeyBase64
    case wrongPublicKeyLength(Int)
    case invalidPublicKey
    case noKeys
}

extension KeyError: CustomStringConvertible {
    public var description: String {
        switch self {
        case .missingSecretPrefix:
            return "gateway secret must be written whsec_<base64> (the 'whsec_' prefix is missing)"
        case .invalidSecretBase64:
            return "gateway secret: the part after 'whsec_' is not valid base64 (standard alphabet, with padding)"
        case .emptySecret:
            return "gateway secret: the key after 'whsec_' is empty"
        case .invalidPublicKeyBase64:
            return "gateway public key must be the base64 of a raw 32-byte Ed25519 key, optionally prefixed 'ed25519:' (not valid base64)"
        case .wrongPublicKeyLength(let count):
            return "gateway public key must be 32 raw bytes (Ed25519), got \(count) bytes after base64 decoding"
        case .invalidPublicKey:
            return "gateway public key is not a valid Ed25519 public key"
        case .noKeys:
            return "no gateway key configured: give a whsec_ secret, an Ed25519 public key, or both"
        }
    }
}
