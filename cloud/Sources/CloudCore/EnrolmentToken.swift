/// The rules of one-time enrolment tokens (issue #29, "first boot, no keyboard"): an account makes
/// a token, the installer writes it into the boot partition's doorbell.toml, and the gateway
/// enrols itself with it and its device key (`POST /enrol`). Pure: the store reads a token's row
/// and asks `decide`; the answer is what the API says.
///
/// A token is 32 system-random bytes (`dbe_` + base64url): guessing one is hopeless, so no rate
/// limit is needed beyond the connection cap; the store keeps its SHA-256 only (`CloudStore.tokenHash`). It expires
/// (`ttl`, default 24 h, at most 30 days) and is single use — except that the same gateway
/// presenting the same public key again is told it is enrolled, so a gateway whose power failed
/// between the cloud's answer and its own record can retry without a new token.
public enum EnrolmentToken {
    public static let prefix = "dbe_"
    public static let defaultTTLSeconds: Int64 = 24 * 3600
    public static let ttlSeconds: ClosedRange<Int64> = 60...(30 * 24 * 3600)
    /// Problems one token may report: a gateway retrying on every boot must not fill the table.
    public static let maxReports = 20
    /// A reported problem's text: one config issue per line, a screenful.
    public static let maxProblemCharacters = 2000

    /// A token as stored (hashed), with what happened to it.
    public struct Row: Sendable, Equatable {
        public let accountID: String
        /// The gateway the token was made for, or nil: any.
        public let gatewayID: String?
        public let expiresAtMilliseconds: Int64
        /// Set once used: which gateway, with which key.
        public let usedByGatewayID: String?
        public let usedWithPublicKey: String?

        public init(accountID: String, gatewayID: String?, expiresAtMilliseconds: Int64,
                    usedByGatewayID: String? = nil, usedWithPublicKey: String? = nil) {
            self.accountID = accountID
            self.gatewayID = gatewayID
            self.expiresAtMilliseconds = expiresAtMilliseconds
            self.usedByGatewayID = usedByGatewayID
            self.usedWithPublicKey = usedWithPublicKey
        }
    }

    public enum Decision: Sendable, Equatable {
        /// Bind the gateway to this account and mark the token used.
        case enrol(accountID: String)
        /// The same gateway and key as the use that spent it: answer as enrolled, change nothing.
        case alreadyEnrolled(accountID: String)
        case unknown
        case expired
        case used
        /// Made for another gateway id.
        case otherGateway
    }

    /// What to do with `presented` (gateway id and key) against the token's row at `now`.
    /// Expiry is checked before use, so a spent token also reads "expired" once its time is over:
    /// either way the installer needs a new one.
    public static func decide(_ row: Row?, gatewayID: String, publicKey: String, now: Int64) -> Decision {
        guard let row else { return .unknown }
        if let used = row.usedByGatewayID {
            guard now < row.expiresAtMilliseconds else { return .expired }
            return used == gatewayID && row.usedWithPublicKey == publicKey ? .alreadyEnrolled(accountID: row.accountID) : .used
        }
        guard now < row.expiresAtMilliseconds else { return .expired }
        if let wanted = row.gatewayID, wanted != gatewayID { return .otherGateway }
        return .enrol(accountID: row.accountID)
    }

    /// Whether a token may report a provisioning problem: it exists and has not expired (used
    /// or not: a gateway that enrolled may still find its file wrong afterwards).
    public static func mayReport(_ row: Row?, now: Int64) -> Bool {
        guard let row else { return false }
        return now < row.expiresAtMilliseconds
    }

    /// The requested lifetime, checked; nil: the default.
    public static func ttl(_ requested: Int64?) -> Result<Int64, TokenProblem> {
        guard let requested else { return .success(defaultTTLSeconds) }
        guard ttlSeconds.contains(requested) else { return .failure(.badTTL) }
        return .success(requested)
    }

    /// The shape of a token, before any lookup: a typo is told apart from an unknown token.
    public static func isWellFormed(_ token: String) -> Bool {
        token.hasPrefix(prefix) && token.utf8.count == prefix.utf8.count + 43
            && token.utf8.dropFirst(prefix.utf8.count).allSatisfy(\.isBase64URLCharacter)
    }

    /// Errors the API answers, each with what the installer or owner should do. None says whose
    /// token it was or which accounts exist.
    public enum TokenProblem: Error, Sendable, Equatable, CustomStringConvertible {
        case malformed, unknown, expired, used, otherGateway, badTTL

        public var code: String {
            switch self {
            case .malformed, .unknown: return "enrolment_token_unknown"
            case .expired: return "enrolment_token_expired"
            case .used: return "enrolment_token_used"
            case .otherGateway: return "enrolment_token_other_gateway"
            case .badTTL: return "invalid_request"
            }
        }

        public var description: String {
            switch self {
            case .malformed:
                return "the enrolment token is not one this cloud makes (dbe_ and 43 characters); copy it again from the app or POST /enrolment-tokens"
            case .unknown:
                return "no such enrolment token; make a new one (POST /enrolment-tokens) and put it in the boot partition's doorbell.toml"
            case .expired:
                return "the enrolment token has expired; make a new one (POST /enrolment-tokens) and put it in doorbell.toml"
            case .used:
                return "the enrolment token was already used by another gateway or key; each token enrols one gateway once: make a new one"
            case .otherGateway:
                return "the enrolment token was made for another gateway id; make one for this gateway or without gateway_id"
            case .badTTL:
                return "ttl_s must be \(ttlSeconds.lowerBound) to \(ttlSeconds.upperBound) seconds (default \(defaultTTLSeconds))"
            }
        }
    }

    public static func problem(_ decision: Decision) -> TokenProblem? {
        switch decision {
        case .enrol, .alreadyEnrolled: return nil
        case .unknown: return .unknown
        case .expired: return .expired
        case .used: return .used
        case .otherGateway: return .otherGateway
        }
    }
}
