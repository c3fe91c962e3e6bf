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

/// When to sign a new provider token, and what a rejection means. APNs answers
/// `TooManyProviderTokenUpdates` to a provider that refreshes more often than every 20 minutes
/// and `ExpiredProviderToken` to one older than 60, so a token is reused until `refreshAfter`
/// (default 50 min). A token APNs rejected (`ExpiredProviderToken`/`InvalidProviderToken`) is
/// replaced once: every other push that was on the wire with it and is rejected too just uses
/// the replacement. If the replacement is rejected as well, the key (or key id, team id) is
/// wrong: no token is signed again until `minimumAge` after the replacement, and the health says
/// so. Every `iat` is the wall clock's. Pure: the time is a parameter.
public struct ProviderTokenSchedule: Sendable {
    public static let minimumAge: Int64 = 20 * 60
    public static let maximumAge: Int64 = 60 * 60

    public let refreshAfter: Int64
    public private(set) var current: APNsProviderToken?
    public private(set) var health: ProviderTokenHealth = .ok
    /// Tokens signed since start (a metric: more than one per `refreshAfter` means rejections).
    public private(set) var signed = 0
    /// When the last token was signed because APNs rejected its predecessor.
    private var lastRejectionRefresh: Int64?

    public init(refreshAfterSeconds: Int64 = 50 * 60) {
        refreshAfter = min(max(refreshAfterSeconds, Self.minimumAge), Self.maximumAge - 60)
    }

    /// The token to send now, signing a new one (`iat` = `now`) when there is none or it has aged
    /// out. A token from a clock that has since stepped back is kept: its age is below zero, not
    /// above `refreshAfter`.
    public mutating func token(now: Int64, sign: (Int64) throws -> APNsProviderToken) rethrows -> APNsProviderToken {
        if let current, now - current.issuedAt < refreshAfter { return current }
        let fresh = try sign(now)
        current = fresh
        signed += 1
        return fresh
    }

    /// What to do with a push whose token APNs just rejected.
    public enum RejectionAction: Sendable, Equatable {
        /// Send it again now with `token(now:)`: the rejected token was replaced (just now, or by
        /// another push of the same burst).
        case resend
        /// Do not send with any token before `notBefore` (Unix seconds): the replacement was
        /// rejected too. `firstTime` is true once per failure, for the one alert an operator needs.
        case hold(notBefore: Int64, firstTime: Bool)
    }

    /// APNs rejected `rejected` (403 Expired/Invalid/MissingProviderToken) at `now`.
    public mutating func rejected(_ rejected: APNsProviderToken, reason: String, now: Int64) -> RejectionAction {
        guard let current, current == rejected else {
            // An older token of the same burst: its replacement exists already.
            if case .failing(_, _, let until) = health, now < until { return .hold(notBefore: until, firstTime: false) }
            return .resend
        }
        if let last = lastRejectionRefresh, now - last < Self.minimumAge {
            let until = last + Self.minimumAge
            if case .failing = health { return .hold(notBefore: until, firstTime: false) }
            health = .failing(reason: reason, since: now, until: until)
            return .hold(notBefore: until, firstTime: true)
        }
        self.current = nil
        lastRejectionRefresh = now
        return .resend
    }

    /// While a rejected replacement holds pushes: until when (Unix seconds).
    public func heldUntil(now: Int64) -> Int64? {
        if case .failing(_, _, let until) = health, now < until { return until }
        return nil
    }

    /// APNs accepted a push sent with `token`: the key works.
    public mutating func accepted(_ token: APNsProviderToken) {
        if token == current, case .failing = health { health = .ok }
    }
}

/// Whether APNs accepts our provider tokens (`/healthz`'s `apns_provider_token`).
public enum ProviderTokenHealth: Sendable, Equatable {
    case ok
    /// A freshly signed token was rejected with `reason`: the key, key id or team id is wrong or
    /// the key was revoked. The next try is at `until` (Unix seconds).
    case failing(reason: String, since: Int64, until: Int64)

    public var name: String {
        switch self {
        case .ok: "ok"
        case .failing: "failing"
        }
    }
}
