import CloudCore

/// Messages pushed to a phone when it reports a beacon region (the app monitors iBeacons).
extension CloudStore {
    /// Sets the message for (uuid, major, minor, event), scoped to one doorbell or to a site of
    /// the owner's doorbells. Replaces the account's previous message for the same key.
    @discardableResult
    public func putBeaconMessage(
        accountID: String, uuid: String, major: Int64, minor: Int64, event: String,
        doorbellID: String?, site: String?, title: String, body: String
    ) async throws -> BeaconMessage {
        let uuid = uuid.uppercased()
        guard TextChecks.isCanonicalUUID(uuid) else { throw DirectoryError.invalid("uuid must be a UUID like E2C56DB5-DFFB-48D2-B060-D0F5A71096E0") }
        guard (0...65535).contains(major), (0...65535).contains(minor) else {
            throw DirectoryError.invalid("major and minor must be 0…65535")
        }
        guard ["entered", "exited"].contains(event) else { throw DirectoryError.invalid("event must be entered or exited") }
        guard (doorbellID == nil) != (site == nil) else {
            throw DirectoryError.invalid("give exactly one scope: doorbell_id (one doorbell) or site (all your doorbells at that site)")
        }
        guard !title.isEmpty, title.count <= 200, body.count <= 1000 else {
            throw DirectoryError.invalid("title must be 1 to 200 characters and body at most 1000")
        }
        if let doorbellID {
            guard let doorbell = try await doorbell(id: doorbellID) else { throw DirectoryError.notFound("no doorbell \(doorbellID)") }
            guard doorbell.accountID == accountID else {
                throw DirectoryError.forbidden("only the owner of \(doorbellID) can set its beacon messages")
            }
        }
        let message = BeaconMessage(
            id: "bm_" + RandomID.make(bytes: 9), accountID: accountID, uuid: uuid, major: major, minor: minor,
            doorbellID: doorbellID, site: site, event: event, title: title, body: body)
        try await withConnection { (db) async throws(StoreError) in
            try await db.query(
                """
                INSERT INTO beacon_messages (id, account_id, uuid, major, minor, doorbell_id, site, event, title, body)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
                ON CONFLICT (account_id, uuid, major, minor, event)
                DO UPDATE SET doorbell_id = $6, site = $7, title = $9, body = $10
                """,
                [.text(message.id), .text(accountID), .text(uuid), .integer(major), .integer(minor),
                 .optional(doorbellID), .optional(site), .text(event), .text(title), .text(body)],
                operation: "put beacon message")
        }
        return message
    }

    /// The message a phone of `accountID` gets for this report: one the account set itself, or one
    /// set by the owner of a doorbell shared with it (directly, or at the message's site).
    public func beaconMessage(for accountID: String, uuid: String, major: Int64, minor: Int64,
                              event: String) async throws(StoreError) -> BeaconMessage? {
        try await withConnection { (db) async throws(StoreError) in
            try await db.query(
                """
                SELECT m.id, m.account_id, m.uuid, m.major, m.minor, m.doorbell_id, m.site, m.event, m.title, m.body
                FROM beacon_messages m
                WHERE m.uuid = $2 AND m.major = $3 AND m.minor = $4 AND m.event = $5 AND (
                    m.account_id = $1
                    OR m.doorbell_id IN (SELECT doorbell_id FROM shares WHERE account_id = $1)
                    OR (m.site IS NOT NULL AND EXISTS (
                        SELECT 1 FROM doorbells d JOIN shares s ON s.doorbell_id = d.id
                        WHERE d.site = m.site AND d.account_id = m.account_id AND s.account_id = $1)))
                ORDER BY CASE WHEN m.account_id = $1 THEN 0 ELSE 1 END, m.id
                LIMIT 1
                """,
                [.text(accountID), .text(uuid.uppercased()), .integer(major), .integer(minor), .text(event)],
                operation: "find beacon message"
            ).rows.first.map {
                BeaconMessage(id: $0.text(0) ?? "", accountID: $0.text(1) ?? "", uuid: $0.text(2) ?? "",
                              major: $0.integer(3) ?? 0, minor: $0.integer(4) ?? 0, doorbellID: $0.text(5),
                              site: $0.text(6), event: $0.text(7) ?? "", title: $0.text(8) ?? "", body: $0.text(9) ?? "")
            }
        }
    }

    /// Rate limit per phone and region: true (and the time recorded) when the last push for this
    /// region to this phone was at least `interval` ago; false when it is too soon.
    public func claimBeaconPush(token: String, uuid: String, major: Int64, minor: Int64,
                                now: Int64, intervalMilliseconds: Int64) async throws(StoreError) -> Bool {
        try await withConnection { (db) async throws(StoreError) in
            try await db.query(
                """
                INSERT INTO beacon_pushes (token, uuid, major, minor, last_push_ms) VALUES ($1, $2, $3, $4, $5)
                ON CONFLICT (token, uuid, major, minor) DO UPDATE SET last_push_ms = $5
                WHERE beacon_pushes.last_push_ms <= $6
                """,
                [.text(token.lowercased()), .text(uuid.uppercased()), .integer(major), .integer(minor), .integer(now),
                 .integer(now - intervalMilliseconds)],
                operation: "rate-limit beacon push"
            ).changes > 0
        }
    }
}
