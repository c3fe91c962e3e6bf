import CloudCore

/// A problem a gateway reported while provisioning itself, as its account sees it.
public struct ProvisioningReport: Sendable, Equatable {
    public let id: String
    public let gatewayID: String
    public let problem: String
    public let reportedAtMilliseconds: Int64
}

/// Why `enrol` refused because of the token (a gateway id another account holds is a
/// `DirectoryError.conflict`, as for `POST /gateways`).
public enum EnrolmentRefusal: Error, Sendable, Equatable {
    case token(EnrolmentToken.TokenProblem)
}

enum EnrolOutcome: Sendable {
    case done(String, Bool)
    case refused(EnrolmentToken.TokenProblem)
    case taken
}

/// One-time enrolment tokens (`EnrolmentToken` has the rules): made by an account, spent by a
/// gateway that enrols itself with its device key. Kept as SHA-256, like account tokens.
extension CloudStore {
    /// Makes a token for `accountID` (optionally for one gateway id); returns it (shown only now)
    /// and when it expires.
    public func createEnrolmentToken(accountID: String, gatewayID: String?, ttlSeconds: Int64,
                                     now: Int64) async throws -> (token: String, expiresAtMilliseconds: Int64) {
        if let gatewayID, !Self.isIdentifier(gatewayID) {
            throw DirectoryError.invalid("gateway_id must be 1 to 64 of A-Z a-z 0-9 . _ - (the agent's gateway_id)")
        }
        let token = EnrolmentToken.prefix + RandomID.make(bytes: 32)
        let expires = now + ttlSeconds * 1000
        _ = try await withConnection { (db) async throws(StoreError) in
            try await db.query(
                """
                INSERT INTO enrolment_tokens (token_sha256, account_id, gateway_id, created_at_ms, expires_at_ms)
                VALUES ($1, $2, $3, $4, $5)
                """, [.text(Self.tokenHash(token)), .text(accountID), .optional(gatewayID), .integer(now), .integer(expires)],
                operation: "create enrolment token")
        }
        return (token, expires)
    }

    static func enrolmentRow(hash: String, _ db: any SQLConnection) async throws(StoreError) -> EnrolmentToken.Row? {
        try await db.query(
            "SELECT account_id, gateway_id, expires_at_ms, used_by_gateway, used_public_key FROM enrolment_tokens WHERE token_sha256 = $1",
            [.text(hash)], operation: "read enrolment token"
        ).rows.first.map {
            EnrolmentToken.Row(accountID: $0.text(0) ?? "", gatewayID: $0.text(1), expiresAtMilliseconds: $0.integer(2) ?? 0,
                               usedByGatewayID: $0.text(3), usedWithPublicKey: $0.text(4))
        }
    }

    /// Spends `token` to bind `gatewayID` with `publicKey` to the token's account, as
    /// `enrollGateway` would. One transaction: the token is marked used only if the gateway was
    /// bound, and only if nobody used it first (the conditional UPDATE: two gateways presenting
    /// one token at once get one success and one `used`, on SQLite and PostgreSQL alike).
    /// Returns the account and whether this call enrolled it (false: the same gateway and key
    /// enrolled with it before, nothing changed).
    public func enrol(token: String, gatewayID: String, publicKey: String,
                      now: Int64) async throws -> (accountID: String, enrolled: Bool) {
        guard EnrolmentToken.isWellFormed(token) else { throw EnrolmentRefusal.token(.malformed) }
        try Self.checkGateway(id: gatewayID, publicKey: publicKey, secret: nil)
        let hash = Self.tokenHash(token)
        let outcome = try await withConnection { (db) async throws(StoreError) -> EnrolOutcome in
            try await db.transaction("enrol gateway \(gatewayID)") { () async throws(StoreError) -> EnrolOutcome in
                // Bounded: a lost race is decided again on the row as the winner left it.
                for _ in 0..<2 {
                    let decision = EnrolmentToken.decide(try await Self.enrolmentRow(hash: hash, db), gatewayID: gatewayID,
                                                         publicKey: publicKey, now: now)
                    switch decision {
                    case .alreadyEnrolled(let account):
                        return .done(account, false)
                    case .enrol(let account):
                        let claimed = try await db.query(
                            """
                            UPDATE enrolment_tokens SET used_at_ms = $2, used_by_gateway = $3, used_public_key = $4
                            WHERE token_sha256 = $1 AND used_at_ms IS NULL
                            """, [.text(hash), .integer(now), .text(gatewayID), .text(publicKey)], operation: "spend enrolment token")
                        guard claimed.changes == 1 else { continue }
                        let holder = try await Self.bindGateway(id: gatewayID, accountID: account, publicKey: publicKey,
                                                                secret: nil, now: now, db)
                        if let holder, holder != account {
                            // Not spent after all (same transaction): good again once the id is free.
                            try await db.query(
                                "UPDATE enrolment_tokens SET used_at_ms = NULL, used_by_gateway = NULL, used_public_key = NULL WHERE token_sha256 = $1",
                                [.text(hash)], operation: "keep enrolment token")
                            return .taken
                        }
                        return .done(account, true)
                    default:
                        return .refused(EnrolmentToken.problem(decision) ?? .unknown)
                    }
                }
                return .refused(.used)
            }
        }
        switch outcome {
        case let .done(account, enrolled): return (account, enrolled)
        case let .refused(problem): throw EnrolmentRefusal.token(problem)
        case .taken: throw Self.gatewayTaken(gatewayID)
        }
    }

    /// Keeps a problem a gateway reported with a token that has not expired; at most
    /// `EnrolmentToken.maxReports` per token (the oldest are kept: the first boot's is the one).
    /// Returns false when the token cannot report (unknown or expired); one beyond the limit is
    /// answered as recorded but dropped.
    public func reportProvisioningProblem(token: String, gatewayID: String, problem: String, now: Int64) async throws -> Bool {
        guard EnrolmentToken.isWellFormed(token) else { throw EnrolmentRefusal.token(.malformed) }
        guard Self.isIdentifier(gatewayID) else {
            throw DirectoryError.invalid("gateway_id must be 1 to 64 of A-Z a-z 0-9 . _ - (the agent's gateway_id)")
        }
        if let trouble = TextChecks.freeTextProblem(problem, field: "problem", characters: EnrolmentToken.maxProblemCharacters,
                                                    bytes: EnrolmentToken.maxProblemCharacters * 4, newlines: true) {
            throw DirectoryError.invalid(trouble)
        }
        let hash = Self.tokenHash(token)
        let id = "prov_" + RandomID.make(bytes: 9)
        return try await withConnection { (db) async throws(StoreError) -> Bool in
            try await db.transaction("report provisioning problem") { () async throws(StoreError) -> Bool in
                let row = try await Self.enrolmentRow(hash: hash, db)
                guard let row, EnrolmentToken.mayReport(row, now: now) else {
                    return false
                }
                let count = try await db.query("SELECT COUNT(*) FROM provisioning_reports WHERE token_sha256 = $1", [.text(hash)],
                                               operation: "count provisioning reports").rows.first?.integer(0) ?? 0
                guard count < EnrolmentToken.maxReports else { return true }
                try await db.query(
                    """
                    INSERT INTO provisioning_reports (id, token_sha256, account_id, gateway_id, problem, reported_at_ms)
                    VALUES ($1, $2, $3, $4, $5, $6)
                    """, [.text(id), .text(hash), .text(row.accountID), .text(gatewayID), .text(problem), .integer(now)],
                    operation: "store provisioning report")
                return true
            }
        }
    }

    /// The problems reported with this account's tokens, newest first.
    public func provisioningReports(accountID: String) async throws(StoreError) -> [ProvisioningReport] {
        try await withConnection { (db) async throws(StoreError) in
            try await db.query(
                """
                SELECT id, gateway_id, problem, reported_at_ms FROM provisioning_reports WHERE account_id = $1
                ORDER BY reported_at_ms DESC, id LIMIT 200
                """, [.text(accountID)], operation: "list provisioning reports"
            ).rows.map {
                ProvisioningReport(id: $0.text(0) ?? "", gatewayID: $0.text(1) ?? "", problem: $0.text(2) ?? "",
                                   reportedAtMilliseconds: $0.integer(3) ?? 0)
            }
        }
    }
}
