import Crypto

/// The `.p8` signing key for APNs token-based authentication, with the ids Apple gave with it.
public struct APNsSigningKey: Sendable {
    public let teamID: String
    public let keyID: String
    /// Raw scalar; the Crypto key type is not Sendable, and signing happens once per refresh.
    private let keyBytes: [UInt8]

    /// - Parameter pem: the contents of Apple's `AuthKey_<KEYID>.p8` (PKCS#8 PEM, P-256).
    public init(pem: String, teamID: String, keyID: String) throws(APNsKeyError) {
        guard !teamID.isEmpty, teamID.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) else {
            throw .badTeamID(teamID)
        }
        guard !keyID.isEmpty, keyID.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) else {
            throw .badKeyID(keyID)
        }
        do {
            keyBytes = Array(try P256.Signing.PrivateKey(pemRepresentation: pem).rawRepresentation)
        } catch {
            throw .notAP256Key
        }
        self.teamID = teamID
        self.keyID = keyID
    }

    public init(privateKey: P256.Signing.PrivateKey, teamID: String, keyID: String) {
        keyBytes = Array(privateKey.rawRepresentation)
        self.teamID = teamID
        self.keyID = keyID
    }

    /// A provider token (JWT, ES256): header `{"alg":"ES256","kid":…}`, claims `{"iss":…,"iat":…}`.
    public func providerToken(issuedAt: Int64) throws -> APNsProviderToken {
        let header = JSONText.object(["alg": .string("ES256"), "kid": .string(keyID)])
        let claims = JSONText.object(["iss": .string(teamID), "iat": .int(issuedAt)])
        let signingInput = Base64URL.encode(header.utf8) + "." + Base64URL.encode(claims.utf8)
        let privateKey = try P256.Signing.PrivateKey(rawRepresentation: keyBytes)
        let signature = try privateKey.signature(for: Array(signingInput.utf8))
        // JWS ES256 is the raw r‖s pair (64 bytes), not DER.
        return APNsProviderToken(jwt: signingInput + "." + Base64URL.encode(signature.rawRepresentation),
                                 issuedAt: issuedAt)
    }
}

public enum APNsKeyError: Error, Equatable, Sendable, CustomStringConvertible {
    case badTeamID(String)
    case badKeyID(String)
    case notAP256Key

    public var description: String {
        switch self {
        case .badTeamID(let id):
            return "APNs team id '\(id)' is not valid: give the 10-character Team ID from the Apple developer account"
        case .badKeyID(let id):
            return "APNs key id '\(id)' is not valid: give the 10-character Key ID shown beside the .p8 key"
        case .notAP256Key:
            return "the APNs key is not a PKCS#8 PEM P-256 private key: give the AuthKey_<KEYID>.p8 file downloaded from Apple"
        }
    }
}

public struct APNsProviderToken: Sendable, Equatable {
    public let jwt: String
    /// Unix seconds; APNs refuses tokens older than an hour and refreshes more often than every 20 minutes.
    public let issuedAt: Int64
}

/// When to sign a new provider token. APNs answers `TooManyProviderTokenUpdates` to a provider
/// that refreshes more often than every 20 minutes and `ExpiredProviderToken` to one older than
/// 60, so a token is reused until `refreshAfter` (default 50 min) and replaced early only when
/// APNs has rejected that very token. Pure: the time is a parameter.
public struct ProviderTokenSchedule: Sendable {
    public static let minimumAge: Int64 = 20 * 60
    public static let maximumAge: Int64 = 60 * 60

    public let refreshAfter: Int64
    public private(set) var current: APNsProviderToken?
    /// A replacement is issued at least a second after the token it replaces, so APNs (and a
    /// log) can tell the two apart.
    private var lastIssuedAt: Int64 = .min

    public init(refreshAfterSeconds: Int64 = 50 * 60) {
        refreshAfter = min(max(refreshAfterSeconds, Self.minimumAge), Self.maximumAge - 60)
    }

    /// The token to send now, signing a new one when there is none or it has aged out.
    public mutating func token(now: Int64, sign: (Int64) throws -> APNsProviderToken) rethrows -> APNsProviderToken {
        if let current, now - current.issuedAt < refreshAfter, now >= current.issuedAt {
            return current
        }
        let fresh = try sign(max(now, lastIssuedAt &+ 1))
        current = fresh
        lastIssuedAt = fresh.issuedAt
        return fresh
    }

    /// APNs rejected `rejected` (403 Expired/InvalidProviderToken): drop it so the next `token`
    /// signs afresh. A rejection of an older token, after another request already refreshed, is ignored.
    public mutating func rejected(_ rejected: APNsProviderToken) {
        if current == rejected { current = nil }
    }
}
