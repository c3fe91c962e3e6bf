import CloudCore
import Crypto

/// Everything the cloud keeps: events, accounts, gateways, doorbells, shares, phone tokens,
/// deliveries and beacon messages, in SQLite or PostgreSQL. Every method is one statement or one
/// transaction, so a crash leaves either all of an operation or none; every method is `async`
/// and waits for the database without holding a thread.
public final class CloudStore: Sendable {
    let database: any SQLDatabase
    public let backend: String

    public init(database: any SQLDatabase) async throws(StoreError) {
        backend = database.backend
        try await CloudSchema.migrate(database)
        self.database = database
    }

    /// `sqlite:PATH`, a plain path, or a `postgres://` / `postgresql://` URL.
    public convenience init(url: String) async throws(StoreError) {
        try await self.init(database: Database.open(url: url))
    }

    /// Closes the database (PostgreSQL: the pool's connections).
    public func close() async {
        await database.close()
    }

    /// One session for `body`: its statements do not interleave with other callers'.
    func withConnection<T: Sendable>(
        _ body: (any SQLConnection) async throws(StoreError) -> T
    ) async throws(StoreError) -> T {
        try await database.withConnection(body)
    }

    // MARK: Accounts

    /// Creates an account and returns it with its bearer token, which is shown only now: the
    /// store keeps its SHA-256.
    public func createAccount(name: String, now: Int64) async throws -> (Account, token: String) {
        let name = name.trimmingSpaces
        try Self.checkName(name, field: "account name")
        let account = Account(id: "acct_" + RandomID.make(bytes: 9), name: name)
        let token = "dbk_" + RandomID.make(bytes: 32)
        try await withConnection { (db) async throws(StoreError) in
            try await db.query(
                "INSERT INTO accounts (id, name, token_sha256, created_at_ms) VALUES ($1, $2, $3, $4)",
                [.text(account.id), .text(name), .text(Self.tokenHash(token)), .integer(now)],
                operation: "create account")
        }
        return (account, token)
    }

    /// The account a bearer token belongs to, or nil.
    public func account(bearer token: String) async throws(StoreError) -> Account? {
        try await withConnection { (db) async throws(StoreError) in
            try await db.query("SELECT id, name FROM accounts WHERE token_sha256 = $1", [.text(Self.tokenHash(token))],
                         operation: "authenticate").rows.first.map { Account(id: $0.text(0) ?? "", name: $0.text(1) ?? "") }
        }
    }

    public func account(id: String) async throws(StoreError) -> Account? {
        try await withConnection { (db) async throws(StoreError) in
            try await db.query("SELECT id, name FROM accounts WHERE id = $1", [.text(id)], operation: "read account")
                .rows.first.map { Account(id: $0.text(0) ?? "", name: $0.text(1) ?? "") }
        }
    }

    /// Hex SHA-256 of a bearer token: what the store keeps instead of the token.
    public static func tokenHash(_ token: String) -> String {
        SHA256.hash(data: Array(token.utf8)).map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }

    // MARK: Gateways

    /// Enrolls `id` for `accountID`, or replaces its keys when that account enrolled it before.
    public func enrollGateway(id: String, accountID: String, publicKey: String?, secret: String?, now: Int64) async throws {
        try Self.checkGateway(id: id, publicKey: publicKey, secret: secret)
        let owner = try await withConnection { (db) async throws(StoreError) -> String? in
            try await Self.bindGateway(id: id, accountID: accountID, publicKey: publicKey, secret: secret, now: now, db)
        }
        if let owner, owner != accountID { throw Self.gatewayTaken(id) }
    }

    /// Checks a gateway id and keys as `enrollGateway` takes them.
    static func checkGateway(id: String, publicKey: String?, secret: String?) throws {
        guard Self.isIdentifier(id) else {
            throw DirectoryError.invalid("gateway id must be 1 to 64 of A-Z a-z 0-9 . _ - (the agent's gateway_id)")
        }
        if let publicKey { _ = try GatewayPublicKey(parsing: publicKey) }
        if let secret { _ = try WebhookSecret(parsing: secret) }
        guard publicKey != nil || secret != nil else {
            throw DirectoryError.invalid("give public_key (from `agentctl pubkey`), secret (whsec_…), or both")
        }
    }

    /// Binds the gateway to the account (or replaces its keys) unless another account holds it;
    /// returns the holder found before, so the caller can refuse. One statement pair on `db`.
    static func bindGateway(id: String, accountID: String, publicKey: String?, secret: String?, now: Int64,
                            _ db: any SQLConnection) async throws(StoreError) -> String? {
        let existing = try await db.query("SELECT account_id FROM gateways WHERE id = $1", [.text(id)],
                                          operation: "read gateway").rows.first?.text(0)
        if existing == nil || existing == accountID {
            try await db.query(
                """
                INSERT INTO gateways (id, account_id, public_key, secret, enrolled_at_ms) VALUES ($1, $2, $3, $4, $5)
                ON CONFLICT (id) DO UPDATE SET public_key = $3, secret = $4, enrolled_at_ms = $5
                """,
                [.text(id), .text(accountID), .optional(publicKey), .optional(secret), .integer(now)],
                operation: "enroll gateway")
        }
        return existing
    }

    static func gatewayTaken(_ id: String) -> DirectoryError {
        .conflict("gateway \(id) is enrolled by another account; that account must remove it first")
    }

    public func gateway(id: String) async throws(StoreError) -> Gateway? {
        try await withConnection { (db) async throws(StoreError) in
            try await db.query("SELECT id, account_id, public_key, secret FROM gateways WHERE id = $1", [.text(id)],
                         operation: "read gateway").rows.first.map {
                Gateway(id: $0.text(0) ?? "", accountID: $0.text(1) ?? "", publicKey: $0.text(2), secret: $0.text(3))
            }
        }
    }

    // MARK: Doorbells and shares

    /// Creates or renames a doorbell of a gateway the account enrolled.
    @discardableResult
    public func putDoorbell(gatewayID: String, deviceID: String, name: String?, site: String?,
                            accountID: String, now: Int64) async throws -> Doorbell {
        // Another account's gateway is answered like a missing one: whether it exists is not
        // the caller's business.
        guard let gateway = try await gateway(id: gatewayID), gateway.accountID == accountID else {
            throw DirectoryError.notFound("this account has no gateway \(gatewayID): enroll it first (POST /gateways)")
        }
        guard Self.isIdentifier(deviceID) else {
            throw DirectoryError.invalid("device id must be 1 to 64 of A-Z a-z 0-9 . _ - (the agent's [[device]] id)")
        }
        if let name { try Self.checkName(name.trimmingSpaces, field: "doorbell name") }
        if let site { try Self.checkName(site, field: "site") }
        let id = Doorbell.id(gatewayID: gatewayID, deviceID: deviceID)
        try await withConnection { (db) async throws(StoreError) in
            try await db.query(
                """
                INSERT INTO doorbells (id, gateway_id, device_id, account_id, name, site, created_at_ms)
                VALUES ($1, $2, $3, $4, $5, $6, $7)
                ON CONFLICT (id) DO UPDATE SET name = COALESCE($8, doorbells.name), site = COALESCE($6, doorbells.site)
                """,
                [.text(id), .text(gatewayID), .text(deviceID), .text(accountID), .text(name?.trimmingSpaces ?? deviceID),
                 .optional(site), .integer(now), .optional(name?.trimmingSpaces)],
                operation: "put doorbell")
        }
        guard let doorbell = try await doorbell(id: id) else { throw DirectoryError.notFound("doorbell \(id) vanished") }
        return doorbell
    }

    public func doorbell(id: String) async throws(StoreError) -> Doorbell? {
        try await withConnection { (db) async throws(StoreError) in
            try await Self.doorbell(id: id, db)
        }
    }

    static let doorbellColumns = "id, gateway_id, device_id, account_id, name, site"

    static func doorbell(id: String, _ db: any SQLConnection) async throws(StoreError) -> Doorbell? {
        try await db.query("SELECT \(doorbellColumns) FROM doorbells WHERE id = $1", [.text(id)], operation: "read doorbell")
            .rows.first.map(doorbell)
    }

    static func doorbell(_ row: SQLRow) -> Doorbell {
        Doorbell(id: row.text(0) ?? "", gatewayID: row.text(1) ?? "", deviceID: row.text(2) ?? "",
                 accountID: row.text(3) ?? "", name: row.text(4) ?? "", site: row.text(5))
    }

    /// The doorbells an account owns or has been given.
    public func doorbells(visibleTo accountID: String) async throws(StoreError) -> [(Doorbell, owned: Bool)] {
        try await withConnection { (db) async throws(StoreError) in
            try await db.query(
                """
                SELECT \(Self.doorbellColumns) FROM doorbells
                WHERE account_id = $1 OR id IN (SELECT doorbell_id FROM shares WHERE account_id = $1)
                ORDER BY id
                """, [.text(accountID)], operation: "list doorbells"
            ).rows.map { row in
                let doorbell = Self.doorbell(row)
                return (doorbell, owned: doorbell.accountID == accountID)
            }
        }
    }

    /// Whether `accountID` owns the doorbell or was given it.
    public func canSee(doorbellID: String, accountID: String) async throws(StoreError) -> Bool {
        try await withConnection { (db) async throws(StoreError) in
            try await !db.query(
                """
                SELECT 1 FROM doorbells WHERE id = $1 AND (account_id = $2
                    OR EXISTS (SELECT 1 FROM shares WHERE doorbell_id = $1 AND account_id = $2))
                """, [.text(doorbellID), .text(accountID)], operation: "check access").rows.isEmpty
        }
    }

    public func share(doorbellID: String, with guestID: String, by ownerID: String, now: Int64) async throws {
        let doorbell = try await ownedDoorbell(doorbellID, by: ownerID)
        guard guestID != doorbell.accountID else {
            throw DirectoryError.invalid("the owner already gets every push of \(doorbellID)")
        }
        guard try await account(id: guestID) != nil else {
            throw DirectoryError.notFound("no account \(guestID)")
        }
        try await withConnection { (db) async throws(StoreError) in
            try await db.query(
                """
                INSERT INTO shares (doorbell_id, account_id, granted_at_ms) VALUES ($1, $2, $3)
                ON CONFLICT (doorbell_id, account_id) DO NOTHING
                """, [.text(doorbellID), .text(guestID), .integer(now)], operation: "share doorbell")
        }
    }

    /// Revokes a share; the guest's phones stop getting pushes for events stored from now on.
    public func unshare(doorbellID: String, from guestID: String, by ownerID: String) async throws {
        _ = try await ownedDoorbell(doorbellID, by: ownerID)
        let removed = try await withConnection { (db) async throws(StoreError) in
            try await db.query("DELETE FROM shares WHERE doorbell_id = $1 AND account_id = $2",
                         [.text(doorbellID), .text(guestID)], operation: "unshare doorbell").changes
        }
        guard removed > 0 else { throw DirectoryError.notFound("\(doorbellID) is not shared with \(guestID)") }
    }

    public func shares(doorbellID: String, ownerID: String) async throws -> [String] {
        _ = try await ownedDoorbell(doorbellID, by: ownerID)
        return try await withConnection { (db) async throws(StoreError) in
            try await db.query("SELECT account_id FROM shares WHERE doorbell_id = $1 ORDER BY account_id",
                         [.text(doorbellID)], operation: "list shares").rows.compactMap { $0.text(0) }
        }
    }

    /// The doorbell if `accountID` owns it. A doorbell the account cannot see is answered like
    /// a missing one (404 alike); a guest, who knows it exists, is told it is not the owner.
    func ownedDoorbell(_ id: String, by accountID: String, toDo action: String = "change who it is shared with") async throws -> Doorbell {
        guard let doorbell = try await doorbell(id: id), try await canSee(doorbellID: id, accountID: accountID) else {
            throw DirectoryError.notFound("this account has no doorbell \(id): it appears with the first event from its gateway, or create it with PUT /doorbells/\(id)")
        }
        guard doorbell.accountID == accountID else {
            throw DirectoryError.forbidden("only the owner of \(id) can \(action)")
        }
        return doorbell
    }

    // MARK: Phones

    /// Registers (or re-registers) a token for an account, for the app installation whose secret
    /// comes with it (`PhoneClaim`): the same installation may move it to the account now signed
    /// in on that phone, the account holding it may bind it to a new installation, nobody else
    /// may touch it. Clears its BadDeviceToken flag. Returns what was done.
    @discardableResult
    public func registerPhone(token: String, accountID: String, installationSecret: String, environment: APNsEnvironment,
                              bundleID: String, name: String? = nil, shareName: Bool = false,
                              now: Int64) async throws -> PhoneClaim.Decision {
        guard Self.isDeviceToken(token) else {
            throw DirectoryError.invalid("device token must be the APNs token as 64 hex digits (32 bytes), as the app gets it in didRegisterForRemoteNotificationsWithDeviceToken")
        }
        guard !bundleID.isEmpty, bundleID.count <= 200, bundleID.allSatisfy({ $0.isASCII && !$0.isWhitespace && !$0.isCCharacterControl }) else {
            throw DirectoryError.invalid("bundle_id must be the app's bundle identifier, e.g. com.example.doorbell")
        }
        guard PhoneClaim.isSecret(installationSecret) else {
            throw DirectoryError.invalid("installation_secret must be 43 to 128 of A-Z a-z 0-9 - _: 32 random bytes the app makes once per installation and keeps in its Keychain (docs/protocol.md)")
        }
        let name = name?.trimmingSpaces
        if let name { try Self.checkName(name, field: "phone name", characters: 64) }
        let token = token.lowercased()
        let hash = PhoneClaim.installationHash(installationSecret)
        // Read, decide, then write only if the row is still as read; a concurrent change makes
        // the write match nothing and the decision is taken again (bounded).
        for _ in 0..<3 {
            let existing = try await withConnection { (db) async throws(StoreError) in
                try await db.query("SELECT account_id, installation_sha256 FROM phones WHERE token = $1", [.text(token)],
                                   operation: "read phone").rows.first.map {
                    PhoneClaim.Holder(accountID: $0.text(0) ?? "", installationHash: $0.text(1))
                }
            }
            let decision = PhoneClaim.decide(existing: existing, caller: accountID, presentedHash: hash)
            let values: [SQLValue] = [.text(token), .text(accountID), .text(environment.rawValue), .text(bundleID), .integer(now),
                                      .text(hash), .optional(name), .integer(shareName ? 1 : 0),
                                      .text(existing?.accountID ?? ""), .text(existing?.installationHash ?? "")]
            let written: Int
            switch decision {
            case .refuse:
                throw DirectoryError.forbidden(
                    "this device token is registered by another account from another app installation; only the app that registered it can move it (with its installation_secret), or that account can remove it (DELETE /phones/{token})")
            case .register:
                written = try await withConnection { (db) async throws(StoreError) in
                    try await db.query(
                        """
                        INSERT INTO phones (token, account_id, environment, bundle_id, registered_at_ms, bad_token_count,
                            installation_sha256, name, name_shared)
                        VALUES ($1, $2, $3, $4, $5, 0, $6, $7, $8)
                        ON CONFLICT (token) DO NOTHING
                        """, Array(values.prefix(8)), operation: "register phone").changes
                }
            case .refresh, .move, .rebind:
                written = try await withConnection { (db) async throws(StoreError) in
                    try await db.query(
                        """
                        UPDATE phones SET account_id = $2, environment = $3, bundle_id = $4, registered_at_ms = $5,
                            bad_token_count = 0, installation_sha256 = $6, name = $7, name_shared = $8
                        WHERE token = $1 AND account_id = $9 AND COALESCE(installation_sha256, '') = $10
                        """, values, operation: "register phone").changes
                }
            }
            if written > 0 { return decision }
        }
        throw DirectoryError.conflict("this device token was registered by someone else at the same moment; try again")
    }

    public func unregisterPhone(token: String, accountID: String) async throws {
        let removed = try await withConnection { (db) async throws(StoreError) in
            try await db.query("DELETE FROM phones WHERE token = $1 AND account_id = $2",
                         [.text(token.lowercased()), .text(accountID)], operation: "unregister phone").changes
        }
        guard removed > 0 else { throw DirectoryError.notFound("this account has no phone with that token") }
    }

    public func phones(accountID: String) async throws(StoreError) -> [Phone] {
        try await withConnection { (db) async throws(StoreError) in
            try await db.query(
                "SELECT \(Self.phoneColumns) FROM phones WHERE account_id = $1 ORDER BY token",
                [.text(accountID)], operation: "list phones"
            ).rows.compactMap(Self.phone)
        }
    }

    public func phone(token: String) async throws(StoreError) -> Phone? {
        try await withConnection { (db) async throws(StoreError) in
            try await db.query("SELECT \(Self.phoneColumns) FROM phones WHERE token = $1", [.text(token.lowercased())],
                         operation: "read phone").rows.first.flatMap(Self.phone)
        }
    }

    static let phoneColumns = "token, account_id, environment, bundle_id, registered_at_ms, bad_token_count, name, name_shared"

    static func phone(_ row: SQLRow) -> Phone? {
        guard let environment = row.text(2).flatMap(APNsEnvironment.init(rawValue:)) else { return nil }
        return Phone(token: row.text(0) ?? "", accountID: row.text(1) ?? "", environment: environment,
                     bundleID: row.text(3) ?? "", registeredAtMilliseconds: row.integer(4) ?? 0,
                     badTokenCount: row.integer(5) ?? 0, name: row.text(6), nameShared: row.integer(7) == 1)
    }

    // MARK: Validation

    static func isName(_ text: String) -> Bool {
        TextChecks.freeTextProblem(text, field: "", characters: 100, bytes: 400) == nil
    }

    /// Names and sites: `TextChecks.freeTextProblem` with our limits, as a 400.
    static func checkName(_ text: String, field: String, characters: Int = 100) throws(DirectoryError) {
        if let problem = TextChecks.freeTextProblem(text, field: field, characters: characters, bytes: characters * 4) {
            throw .invalid(problem)
        }
    }

    static func isIdentifier(_ text: String) -> Bool {
        (1...64).contains(text.utf8.count)
            && text.utf8.allSatisfy { $0.isASCIIAlphanumeric || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: "-") }
    }

    /// APNs device tokens are 32 bytes on every iOS release so far. Anything else is refused
    /// here rather than costing a BadDeviceToken round trip per press; should Apple lengthen
    /// them, widen `deviceTokenHexDigits` (the schema stores any length).
    static let deviceTokenHexDigits = 64...64

    static func isDeviceToken(_ text: String) -> Bool {
        TextChecks.isHex(text, lengths: deviceTokenHexDigits)
    }
}

extension UInt8 {
    var isASCIIAlphanumeric: Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self) || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(self | 0x20)
    }
}

extension Character {
    /// A C0 or C1 control character or DEL.
    var isCCharacterControl: Bool { unicodeScalars.contains { $0.properties.generalCategory == .control } }
}

extension String {
    var trimmingSpaces: String {
        String(drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
    }
}

/// Unguessable ids and tokens: base64url of system-random bytes.
enum RandomID {
    static func make(bytes count: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<count).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        return Base64URL.encode(bytes)
    }
}
