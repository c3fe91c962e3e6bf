import CloudCore

/// Removing what an account owns, and the account itself. Each removal is one transaction, and
/// each is the owner's alone: another account's gateway or doorbell is answered like a missing
/// one. What goes with what (cloud/README.md, "A doorbell's whole life"):
/// - a doorbell: its shares, its beacon messages and its pushes not yet sent; the events its
///   gateway stored stay with the gateway (and the doorbell comes back with its next event
///   unless it is removed from the agent's config too);
/// - a gateway: its doorbells (as above), every event it sent with every push of them, and its
///   phone links, so that whoever enrolls it next sees nothing from before and its old owner
///   nothing after;
/// - an account: its gateways (as above), the shares given to it, its beacon messages, its phones
///   with every push to them, and its token.
extension CloudStore {
    public func removeDoorbell(id: String, accountID: String) async throws {
        _ = try await ownedDoorbell(id, by: accountID, toDo: "remove it")
        try await withConnection { (db) async throws(StoreError) in
            try await db.transaction("remove doorbell \(id)") { () async throws(StoreError) in
                try await Self.removeDoorbells(where: "id = $1", [.text(id)], db)
            }
        }
    }

    /// - Parameter accountID: the caller, who must own it; nil: the operator (`doorbell-cloud
    ///   gateway remove`), for a gateway whose owner cannot be asked.
    public func removeGateway(id: String, accountID: String?) async throws {
        let removed = try await withConnection { (db) async throws(StoreError) -> Bool in
            try await db.transaction("remove gateway \(id)") { () async throws(StoreError) -> Bool in
                let owner = try await db.query("SELECT account_id FROM gateways WHERE id = $1", [.text(id)],
                                               operation: "read gateway").rows.first?.text(0)
                guard let owner, owner == accountID ?? owner else { return false }
                try await Self.removeGateway(id, db)
                return true
            }
        }
        guard removed else { throw DirectoryError.notFound(accountID == nil ? "no gateway \(id)" : "this account has no gateway \(id)") }
    }

    /// Deletes the account and everything above; its token stops working at once.
    public func deleteAccount(id: String) async throws {
        let removed = try await withConnection { (db) async throws(StoreError) -> Int in
            try await db.transaction("delete account \(id)") { () async throws(StoreError) -> Int in
                let account: [SQLValue] = [.text(id)]
                for gateway in try await db.query("SELECT id FROM gateways WHERE account_id = $1", account,
                                                  operation: "list gateways").rows.compactMap({ $0.text(0) }) {
                    try await Self.removeGateway(gateway, db)
                }
                // Doorbells are their gateway's owner's, so none is left; the rest by account.
                let phones = "SELECT token FROM phones WHERE account_id = $1"
                for (sql, what) in [
                    ("DELETE FROM shares WHERE account_id = $1", "shares given to it"),
                    ("DELETE FROM beacon_messages WHERE account_id = $1", "beacon messages"),
                    ("DELETE FROM beacon_pushes WHERE token IN (\(phones))", "beacon rate limits"),
                    ("DELETE FROM phone_links WHERE token IN (\(phones))", "phone links"),
                    ("DELETE FROM deliveries WHERE account_id = $1", "pushes"),
                    ("DELETE FROM phones WHERE account_id = $1", "phones"),
                    ("DELETE FROM enrolment_tokens WHERE account_id = $1", "enrolment tokens"),
                    ("DELETE FROM provisioning_reports WHERE account_id = $1", "provisioning reports"),
                ] {
                    try await db.query(sql, account, operation: "delete the account's \(what)")
                }
                return try await db.query("DELETE FROM accounts WHERE id = $1", account, operation: "delete account").changes
            }
        }
        guard removed > 0 else { throw DirectoryError.notFound("no account \(id)") }
    }

    private static func removeGateway(_ id: String, _ db: any SQLConnection) async throws(StoreError) {
        let gateway: [SQLValue] = [.text(id)]
        try await removeDoorbells(where: "gateway_id = $1", gateway, db)
        for (sql, what) in [
            ("DELETE FROM deliveries WHERE event_id IN (SELECT id FROM events WHERE gateway_id = $1)", "pushes of its events"),
            ("DELETE FROM events WHERE gateway_id = $1", "events"),
            ("DELETE FROM phone_links WHERE gateway_id = $1", "phone links"),
            ("DELETE FROM gateway_heartbeats WHERE gateway_id = $1", "last heartbeat"),
            ("DELETE FROM gateways WHERE id = $1", "gateway"),
        ] {
            try await db.query(sql, gateway, operation: "remove the gateway's \(what)")
        }
    }

    /// The doorbells `condition` selects, with their shares, beacon messages and unsent pushes
    /// (foreign keys would cascade some of it; said here so it holds whatever the pragma).
    private static func removeDoorbells(where condition: String, _ values: [SQLValue],
                                        _ db: any SQLConnection) async throws(StoreError) {
        let doorbells = "SELECT id FROM doorbells WHERE \(condition)"
        for (sql, what) in [
            ("DELETE FROM deliveries WHERE state = 'pending' AND doorbell_id IN (\(doorbells))", "pushes not yet sent"),
            ("DELETE FROM shares WHERE doorbell_id IN (\(doorbells))", "shares"),
            ("DELETE FROM beacon_messages WHERE doorbell_id IN (\(doorbells))", "beacon messages"),
            ("DELETE FROM doorbells WHERE \(condition)", "doorbells"),
        ] {
            try await db.query(sql, values, operation: "remove the doorbells' \(what)")
        }
    }
}
