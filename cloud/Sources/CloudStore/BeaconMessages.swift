import CloudCore

/// Messages pushed to a phone when it reports a beacon region (the app watches iBeacon or
/// Eddystone-UID regions, as the agent's `[[region]]` tables do).
extension CloudStore {
    /// Sets the message for (region, event), scoped to one doorbell or to a site of the owner's
    /// doorbells. Replaces the account's previous message for the same region and event, which
    /// keeps its id: one region and event, one id. Refuses a message whose push would be larger
    /// than APNs takes (measured with the code that builds it).
    @discardableResult
    public func putBeaconMessage(
        accountID: String, region: BeaconRegion, event: String,
        doorbellID: String?, site: String?, title: String, body: String
    ) async throws -> BeaconMessage {
        guard ["entered", "exited"].contains(event) else { throw DirectoryError.invalid("event must be entered or exited") }
        guard (doorbellID == nil) != (site == nil) else {
            throw DirectoryError.invalid("give exactly one scope: doorbell_id (one doorbell) or site (all your doorbells at that site)")
        }
        if let site { try Self.checkName(site, field: "site") }
        if let problem = TextChecks.freeTextProblem(title, field: "title", characters: 200, bytes: 800)
            ?? TextChecks.freeTextProblem(body, field: "body", characters: 1000, bytes: 4000, newlines: true, empty: true) {
            throw DirectoryError.invalid(problem)
        }
        let bytes = PushPayload.beaconPayloadBytes(title: title, body: body, region: region.display)
        guard bytes <= PushPayload.maximumBytes else {
            throw DirectoryError.invalid(
                "title and body make a push of \(bytes) bytes and APNs takes at most \(PushPayload.maximumBytes): shorten them by \(bytes - PushPayload.maximumBytes) bytes of UTF-8")
        }
        if let doorbellID { _ = try await ownedDoorbell(doorbellID, by: accountID, toDo: "set its beacon messages") }
        let id = try await withConnection { (db) async throws(StoreError) in
            try await db.query(
                """
                INSERT INTO beacon_messages (id, account_id, region, doorbell_id, site, event, title, body)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
                ON CONFLICT (account_id, region, event)
                DO UPDATE SET doorbell_id = $4, site = $5, title = $7, body = $8
                RETURNING id
                """,
                [.text("bm_" + RandomID.make(bytes: 9)), .text(accountID), .text(region.key),
                 .optional(doorbellID), .optional(site), .text(event), .text(title), .text(body)],
                operation: "put beacon message").rows.first?.text(0)
        }
        guard let id else { throw DirectoryError.conflict("the beacon message was removed while it was being set; try again") }
        return BeaconMessage(id: id, accountID: accountID, region: region, doorbellID: doorbellID, site: site,
                             event: event, title: title, body: body)
    }

    static let beaconMessageColumns = "id, account_id, region, doorbell_id, site, event, title, body"

    static func beaconMessage(_ row: SQLRow) -> BeaconMessage? {
        guard let region = row.text(2).flatMap(BeaconRegion.init(key:)) else { return nil }
        return BeaconMessage(id: row.text(0) ?? "", accountID: row.text(1) ?? "", region: region, doorbellID: row.text(3),
                             site: row.text(4), event: row.text(5) ?? "", title: row.text(6) ?? "", body: row.text(7) ?? "")
    }

    /// The messages an account set, for `GET /beacon-messages`.
    public func beaconMessages(accountID: String) async throws(StoreError) -> [BeaconMessage] {
        try await withConnection { (db) async throws(StoreError) in
            try await db.query("SELECT \(Self.beaconMessageColumns) FROM beacon_messages WHERE account_id = $1 ORDER BY region, event",
                               [.text(accountID)], operation: "list beacon messages").rows.compactMap(Self.beaconMessage)
        }
    }

    /// Deletes one of the account's messages; another account's is answered like a missing one.
    public func deleteBeaconMessage(id: String, accountID: String) async throws {
        let removed = try await withConnection { (db) async throws(StoreError) in
            try await db.query("DELETE FROM beacon_messages WHERE id = $1 AND account_id = $2", [.text(id), .text(accountID)],
                               operation: "delete beacon message").changes
        }
        guard removed > 0 else { throw DirectoryError.notFound("this account has no beacon message \(id)") }
    }

    /// The message a phone of `accountID` gets for this report: one the account set itself, or one
    /// set by the owner of a doorbell shared with it (directly, or at the message's site). The
    /// region's own message before its namespace's (Eddystone).
    public func beaconMessage(for accountID: String, region: BeaconRegion,
                              event: String) async throws(StoreError) -> BeaconMessage? {
        let keys = region.matchingKeys
        return try await withConnection { (db) async throws(StoreError) in
            try await db.query(
                """
                SELECT m.id, m.account_id, m.region, m.doorbell_id, m.site, m.event, m.title, m.body
                FROM beacon_messages m
                WHERE m.region IN ($2, $3) AND m.event = $4 AND (
                    m.account_id = $1
                    OR m.doorbell_id IN (SELECT doorbell_id FROM shares WHERE account_id = $1)
                    OR (m.site IS NOT NULL AND EXISTS (
                        SELECT 1 FROM doorbells d JOIN shares s ON s.doorbell_id = d.id
                        WHERE d.site = m.site AND d.account_id = m.account_id AND s.account_id = $1)))
                ORDER BY CASE WHEN m.region = $2 THEN 0 ELSE 1 END, CASE WHEN m.account_id = $1 THEN 0 ELSE 1 END, m.id
                LIMIT 1
                """,
                [.text(accountID), .text(keys[0]), .text(keys.last ?? keys[0]), .text(event)],
                operation: "find beacon message"
            ).rows.first.flatMap(Self.beaconMessage)
        }
    }

    /// Rate limit per phone and region: true (and the time recorded) when the last push for this
    /// region to this phone was at least `interval` ago; false when it is too soon.
    public func claimBeaconPush(token: String, region: BeaconRegion,
                                now: Int64, intervalMilliseconds: Int64) async throws(StoreError) -> Bool {
        try await withConnection { (db) async throws(StoreError) in
            try await db.query(
                """
                INSERT INTO beacon_pushes (token, region, last_push_ms) VALUES ($1, $2, $3)
                ON CONFLICT (token, region) DO UPDATE SET last_push_ms = $3
                WHERE beacon_pushes.last_push_ms <= $4
                """,
                [.text(token.lowercased()), .text(region.key), .integer(now), .integer(now - intervalMilliseconds)],
                operation: "rate-limit beacon push"
            ).changes > 0
        }
    }
}
