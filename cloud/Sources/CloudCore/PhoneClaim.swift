import Crypto

/// Who may register an APNs device token: the app installation that holds it, and nobody else.
///
/// The token alone proves nothing (it is shown to the owner's gateway, logged, and was shown to
/// other accounts), so each registration carries the installation's secret: random bytes the app
/// makes once per installation and keeps in the Keychain (this device only). The store keeps its
/// SHA-256. A registration may move a token to another account only with the same secret (the
/// phone signed into another account); the account that holds a token may bind it to a new
/// secret (the app was reinstalled and lost its Keychain item, or the registration predates
/// secrets: schema 3 and older); anyone else is refused. Pure: the store asks and applies.
public enum PhoneClaim {
    /// A registration as stored.
    public struct Holder: Sendable, Equatable {
        public let accountID: String
        /// nil: registered before installation secrets existed.
        public let installationHash: String?

        public init(accountID: String, installationHash: String?) {
            self.accountID = accountID
            self.installationHash = installationHash
        }
    }

    public enum Decision: Sendable, Equatable {
        /// A token nobody registered.
        case register
        /// Same installation, same account: refresh.
        case refresh
        /// Same installation, signed into `from`, now into the caller.
        case move(from: String)
        /// The caller's own registration, presented with another (or a first) secret.
        case rebind
        /// Another account's registration and another installation's secret.
        case refuse
    }

    public static func decide(existing: Holder?, caller: String, presentedHash: String) -> Decision {
        guard let existing else { return .register }
        if existing.installationHash == presentedHash {
            return existing.accountID == caller ? .refresh : .move(from: existing.accountID)
        }
        return existing.accountID == caller ? .rebind : .refuse
    }

    /// 43 to 128 of A–Z a–z 0–9 - _: 32 random bytes as base64url (43 characters) or hex (64).
    public static let secretLengths = 43...128

    public static func isSecret(_ text: String) -> Bool {
        secretLengths.contains(text.utf8.count) && text.utf8.allSatisfy(\.isBase64URLCharacter)
    }

    /// What the store keeps: hex SHA-256, with a label so it is no other hash of the same text.
    public static func installationHash(_ secret: String) -> String {
        hex(SHA256.hash(data: Array(("doorbell-installation\n" + secret).utf8)))
    }

    /// The phone as other accounts' views name it (a delivery shown to a doorbell's owner): a
    /// stable id that reveals nothing of the token (a hash of 256 unguessable bits, cut to 16
    /// hex digits: one phone among billions stays unique in practice, and the token cannot be
    /// found from it).
    public static func phoneID(token: String) -> String {
        "ph_" + String(hex(SHA256.hash(data: Array(("doorbell-phone-id\n" + token.lowercased()).utf8))).prefix(16))
    }

    private static func hex(_ digest: SHA256.Digest) -> String {
        digest.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }
}

extension UInt8 {
    var isBase64URLCharacter: Bool {
        (0x30...0x39).contains(self) || (0x41...0x5A).contains(self) || (0x61...0x7A).contains(self)
            || self == UInt8(ascii: "-") || self == UInt8(ascii: "_")
    }
}
