import CloudCore

/// Events in, deliveries out: the fan-out's durable queue.
extension CloudStore {
    public enum IngestResult: Sendable, Equatable {
        /// Already stored: an at-least-once redelivery. Nothing is pushed again.
        case duplicate
        /// Already stored with another body: not a redelivery but a gateway reusing an id (a bug
        /// or a replayed signing key). Nothing is stored or pushed; the caller logs and counts it.
        case conflicting
        /// Stored now, with this many pushes queued.
        case stored(pushes: Int)
        /// A base station's delivery receipt, stored, and recorded on its push (or not found).
        case receipt(ReceiptOutcome)
    }

    /// Stores a verified event and, in the same transaction, queues one delivery per phone of the
    /// doorbell's owner and of every account it is shared with. Deduplication by event id comes
    /// first, so a redelivered event never queues a second push; and since the queue is written
    /// before the agent gets its 200, a crash after that loses no push.
    ///
    /// - Parameter payload: the APNs payload for the event at that doorbell; nil: no push.
    public func ingest(
        _ event: StoredEvent, envelope: EventEnvelope, now: Int64, pushTTLMilliseconds: Int64,
        payload: (PushPayload.Doorbell) -> String?
    ) async throws(StoreError) -> IngestResult {
        try await withConnection { (db) async throws(StoreError) -> IngestResult in
            try await db.transaction("store event \(event.id)") { () async throws(StoreError) -> IngestResult in
                let inserted = try await db.query(EventRows.insert, EventRows.parameters(event),
                                            operation: "insert event \(event.id)").changes
                guard inserted > 0 else {
                    let stored = try await db.query("SELECT body FROM events WHERE id = $1", [.text(event.id)],
                                              operation: "read event \(event.id)").rows.first?.text(0)
                    return stored == event.body ? .duplicate : .conflicting
                }
                if let receipt = PushReceiptReport.parse(type: envelope.type, body: Array(event.body.utf8)) {
                    return .receipt(try await Self.recordReceipt(receipt, gatewayID: envelope.gatewayID, now: now, db))
                }
                // Only doorbell events make doorbells; a beacon event's device is a region.
                guard envelope.type.hasPrefix("doorbell."), let deviceID = envelope.deviceID,
                      let owner = try await db.query("SELECT account_id FROM gateways WHERE id = $1",
                                               [.text(envelope.gatewayID)], operation: "read gateway").rows.first?.text(0)
                else { return .stored(pushes: 0) }

                let doorbellID = Doorbell.id(gatewayID: envelope.gatewayID, deviceID: deviceID)
                // The first event of a device makes it a doorbell of the gateway's owner.
                try await db.query(
                    """
                    INSERT INTO doorbells (id, gateway_id, device_id, account_id, name, site, created_at_ms)
                    VALUES ($1, $2, $3, $4, $5, NULL, $6) ON CONFLICT (id) DO NOTHING
                    """,
                    [.text(doorbellID), .text(envelope.gatewayID), .text(deviceID), .text(owner),
                     .text(envelope.deviceName.flatMap { Self.isName($0) ? $0 : nil } ?? deviceID), .integer(now)],
                    operation: "create doorbell \(doorbellID)")
                guard let doorbell = try await Self.doorbell(id: doorbellID, db),
                      let body = payload(PushPayload.Doorbell(id: doorbell.id, name: doorbell.name, gatewayID: doorbell.gatewayID))
                else { return .stored(pushes: 0) }

                let queued = try await db.query(
                    """
                    INSERT INTO deliveries (event_id, token, account_id, environment, bundle_id, doorbell_id, payload,
                        apns_id, collapse_id, expires_at_ms, state, attempts, next_attempt_at_ms, created_at_ms, updated_at_ms)
                    SELECT $1, token, account_id, environment, bundle_id, $2, $3, $4, $5, $6, 'pending', 0, $7, $7, $7
                    FROM phones
                    WHERE account_id = $8 OR account_id IN (SELECT account_id FROM shares WHERE doorbell_id = $2)
                    ON CONFLICT (event_id, token) DO NOTHING
                    """,
                    [.text(event.id), .text(doorbell.id), .text(body), .text(""),
                     .text(Self.collapseID(doorbellID: doorbell.id)), .integer(now + pushTTLMilliseconds),
                     .integer(now), .text(doorbell.accountID)],
                    operation: "queue pushes for \(event.id)").changes
                return .stored(pushes: queued)
            }
        }
    }

    /// `apns-collapse-id` (≤ 64 bytes): a phone that was offline shows the latest ring of a
    /// doorbell, not a stack of them.
    static func collapseID(doorbellID: String) -> String {
        let id = "ring-" + doorbellID
        return id.utf8.count <= 64 ? id : "ring-" + String(tokenHash(doorbellID).prefix(40))
    }

    /// Queues one push that is not an event (a beacon message) to one phone.
    public func queuePush(id: String, to phone: Phone, payload: String, collapseID: String?, now: Int64,
                          ttlMilliseconds: Int64) async throws(StoreError) {
        try await withConnection { (db) async throws(StoreError) in
            try await db.query(
                """
                INSERT INTO deliveries (event_id, token, account_id, environment, bundle_id, doorbell_id, payload,
                    apns_id, collapse_id, expires_at_ms, state, attempts, next_attempt_at_ms, created_at_ms, updated_at_ms)
                VALUES ($1, $2, $3, $4, $5, NULL, $6, $7, $8, $9, 'pending', 0, $10, $10, $10)
                ON CONFLICT (event_id, token) DO NOTHING
                """,
                [.text(id), .text(phone.token), .text(phone.accountID), .text(phone.environment.rawValue),
                 .text(phone.bundleID), .text(payload), .text(""), .optional(collapseID),
                 .integer(now + ttlMilliseconds), .integer(now)],
                operation: "queue push \(id)")
        }
    }

    static let deliveryColumns = """
        event_id, token, account_id, environment, bundle_id, doorbell_id, payload, apns_id, collapse_id,
        expires_at_ms, state, attempts, next_attempt_at_ms, last_status, last_reason, updated_at_ms,
        displayed_at_ms, displayed_on, not_displayed_at_ms
        """

    /// A delivery row. Its `apns-id` is derived from the event id and the token (one per
    /// request); the `apns_id` column (one per event, schema 1) is no longer read.
    static func delivery(_ row: SQLRow) -> Delivery? {
        guard let environment = row.text(3).flatMap(APNsEnvironment.init(rawValue:)),
              let state = row.text(10).flatMap(DeliveryState.init(rawValue:)),
              let eventID = row.text(0), let token = row.text(1)
        else { return nil }
        return Delivery(
            eventID: eventID, token: token, accountID: row.text(2) ?? "",
            environment: environment, bundleID: row.text(4) ?? "", doorbellID: row.text(5), payload: row.text(6) ?? "",
            apnsID: PushPayload.apnsID(eventID: eventID, token: token), collapseID: row.text(8), expiresAtMilliseconds: row.integer(9) ?? 0,
            state: state, attempts: row.integer(11) ?? 0, nextAttemptAtMilliseconds: row.integer(12) ?? 0,
            lastStatus: row.integer(13), lastReason: row.text(14), updatedAtMilliseconds: row.integer(15) ?? 0,
            displayedAtMilliseconds: row.integer(16), displayedOn: row.text(17), notDisplayedAtMilliseconds: row.integer(18))
    }

    /// Takes up to `limit` due deliveries for sending: each is moved `leaseMilliseconds` into the
    /// future and marked with `owner` in the same statement, so another fan-out on the same
    /// database (several `serve` processes on one PostgreSQL) does not take it too, a process
    /// that dies mid-send leaves it to the others when the lease runs out, and the same process
    /// restarted takes it back at once (`reclaimLeases`). Ordered by the due time alone, so the
    /// `deliveries_due` index yields the batch without sorting every pending row (a whole event's
    /// pushes share one due time anyway).
    ///
    /// PostgreSQL: the batch is chosen and locked `FOR UPDATE SKIP LOCKED` in a MATERIALIZED CTE,
    /// so two servers claiming at once take disjoint batches without waiting on each other's
    /// row locks. Not as `… IN (SELECT … LIMIT n FOR UPDATE SKIP LOCKED)`: without statistics
    /// (a young table) PostgreSQL plans that as a nested-loop semi-join that runs the subquery
    /// again for every outer row, each run locking and returning further rows, so one claim took
    /// the whole queue past its limit and the other server found nothing (issue #27, 10). A CTE
    /// is run once. SQLite has one writer: nothing to skip, the plain form.
    public func claimDue(now: Int64, limit: Int, leaseMilliseconds: Int64, owner: String) async throws(StoreError) -> [Delivery] {
        try await withConnection { (db) async throws(StoreError) in
            let sql = db.backend == "PostgreSQL"
                ? """
                  WITH batch AS MATERIALIZED (
                      SELECT event_id AS batch_event, token AS batch_token FROM deliveries
                      WHERE state = 'pending' AND next_attempt_at_ms <= $1
                      ORDER BY next_attempt_at_ms LIMIT $3
                      FOR UPDATE SKIP LOCKED)
                  UPDATE deliveries SET next_attempt_at_ms = $2, lease_owner = $4
                  FROM batch WHERE event_id = batch_event AND token = batch_token
                  RETURNING \(Self.deliveryColumns)
                  """
                : """
                  UPDATE deliveries SET next_attempt_at_ms = $2, lease_owner = $4
                  WHERE state = 'pending' AND next_attempt_at_ms <= $1 AND (event_id, token) IN (
                      SELECT event_id, token FROM deliveries
                      WHERE state = 'pending' AND next_attempt_at_ms <= $1
                      ORDER BY next_attempt_at_ms LIMIT $3)
                  RETURNING \(Self.deliveryColumns)
                  """
            return try await db.query(
                sql, [.integer(now), .integer(now + leaseMilliseconds), .integer(Int64(limit)), .text(owner)],
                operation: "claim due deliveries"
            ).rows.compactMap(Self.delivery)
        }
    }

    /// At start: pushes a previous run of this process (`owner`) had claimed and not finished
    /// (it crashed) are due now instead of when their lease runs out. Only `owner`'s leases:
    /// another live process's stay its own. Returns how many.
    @discardableResult
    public func reclaimLeases(owner: String, now: Int64) async throws(StoreError) -> Int {
        try await withConnection { (db) async throws(StoreError) in
            try await db.query(
                """
                UPDATE deliveries SET next_attempt_at_ms = $2, lease_owner = NULL
                WHERE state = 'pending' AND lease_owner = $1 AND next_attempt_at_ms > $2
                """, [.text(owner), .integer(now)], operation: "reclaim own leases").changes
        }
    }

    /// Claimed pushes this process will not send after all (it is stopping): due now, for the
    /// next process, instead of when their lease runs out.
    public func releaseLeases(_ deliveries: [Delivery], owner: String, now: Int64) async throws(StoreError) {
        guard !deliveries.isEmpty else { return }
        try await withConnection { (db) async throws(StoreError) in
            try await db.transaction("release \(deliveries.count) leases") { () async throws(StoreError) in
                for delivery in deliveries {
                    try await db.query(
                        """
                        UPDATE deliveries SET next_attempt_at_ms = $3, lease_owner = NULL
                        WHERE event_id = $1 AND token = $2 AND state = 'pending' AND lease_owner = $4
                        """, [.text(delivery.eventID), .text(delivery.token), .integer(now), .text(owner)],
                        operation: "release lease")
                }
            }
        }
    }

    /// When the earliest pending delivery is due, or nil when none is pending.
    public func nextDueTime() async throws(StoreError) -> Int64? {
        try await withConnection { (db) async throws(StoreError) in
            try await db.query("SELECT MIN(next_attempt_at_ms) FROM deliveries WHERE state = 'pending'", [],
                         operation: "read next due time").rows.first?.integer(0)
        }
    }

    public func deliveries(eventID: String) async throws(StoreError) -> [Delivery] {
        try await withConnection { (db) async throws(StoreError) in
            try await db.query("SELECT \(Self.deliveryColumns) FROM deliveries WHERE event_id = $1 ORDER BY account_id, token",
                         [.text(eventID)], operation: "list deliveries").rows.compactMap(Self.delivery)
        }
    }

    /// The phones an event was pushed to, by token: the name each gave and whether it lets the
    /// owners of doorbells shared with it see that name.
    public func phoneNames(eventID: String) async throws(StoreError) -> [String: (name: String?, shared: Bool)] {
        try await withConnection { (db) async throws(StoreError) in
            var names: [String: (name: String?, shared: Bool)] = [:]
            for row in try await db.query(
                "SELECT token, name, name_shared FROM phones WHERE token IN (SELECT token FROM deliveries WHERE event_id = $1)",
                [.text(eventID)], operation: "read phone names").rows {
                if let token = row.text(0) { names[token] = (row.text(1), row.integer(2) == 1) }
            }
            return names
        }
    }

    /// Counts by state, for `/healthz` and the status line.
    public func deliveryCounts() async throws(StoreError) -> [DeliveryState: Int64] {
        try await withConnection { (db) async throws(StoreError) in
            var counts: [DeliveryState: Int64] = [:]
            for row in try await db.query("SELECT state, COUNT(*) FROM deliveries GROUP BY state", [],
                                    operation: "count deliveries").rows {
                if let state = row.text(0).flatMap(DeliveryState.init(rawValue:)) { counts[state] = row.integer(1) ?? 0 }
            }
            return counts
        }
    }

    /// What the fan-out learned from one attempt.
    public enum Outcome: Sendable, Equatable {
        case delivered
        /// 410: delete the phone unless it registered again after `timestampMs` (or, without a
        /// timestamp, after the attempt began).
        case unregistered(reason: String, timestampMs: Int64)
        /// 400 BadDeviceToken: flag the phone; delete it once it is flagged twice.
        case badDeviceToken
        case retry(status: Int64?, reason: String, at: Int64)
        case failed(status: Int64?, reason: String)
    }

    /// What recording an outcome did to the phone.
    public enum TokenEffect: Sendable, Equatable {
        case none
        case pruned
        case flagged
        case kept
        /// Not recorded: the push is no longer this fan-out's (its lease ran out and another
        /// server claimed it, or it was settled meanwhile). The new owner's outcome stands.
        case superseded
    }

    /// Records one attempt's outcome in one transaction.
    @discardableResult
    public func record(_ outcome: Outcome, for delivery: Delivery, now: Int64,
                       owner: String? = nil) async throws(StoreError) -> TokenEffect {
        try await record([(outcome, delivery)], now: now, owner: owner)[0]
    }

    /// Records several outcomes in one transaction: one fsync for a group of pushes instead of
    /// one each, which is what lets the fan-out keep up with APNs.
    ///
    /// - Parameter owner: the fan-out that claimed them; a push whose `lease_owner` is no longer
    ///   `owner` (another server took it when the lease ran out) is left alone, `.superseded`.
    ///   nil: unfenced (a push recorded outside a fan-out).
    public func record(_ outcomes: [(Outcome, Delivery)], now: Int64, owner: String? = nil) async throws(StoreError) -> [TokenEffect] {
        guard !outcomes.isEmpty else { return [] }
        return try await withConnection { (db) async throws(StoreError) -> [TokenEffect] in
            try await db.transaction("record \(outcomes.count) push outcomes") { () async throws(StoreError) -> [TokenEffect] in
                var effects: [TokenEffect] = []
                effects.reserveCapacity(outcomes.count)
                for (outcome, delivery) in outcomes {
                    effects.append(try await Self.record(outcome, for: delivery, now: now, owner: owner, db))
                }
                return effects
            }
        }
    }

    private static func record(_ outcome: Outcome, for delivery: Delivery, now: Int64, owner: String?,
                               _ db: any SQLConnection) async throws(StoreError) -> TokenEffect {
        // Fenced: only a pending push still leased to `owner` is this fan-out's to settle.
        let fence = owner == nil ? "" : " AND state = 'pending' AND lease_owner = $8"
        func update(_ state: DeliveryState, status: Int64?, reason: String?, next: Int64? = nil) async throws(StoreError) -> Bool {
            var parameters: [SQLValue] = [
                .text(delivery.eventID), .text(delivery.token), .text(state.rawValue), status.map(SQLValue.integer) ?? .null,
                .optional(reason), next.map(SQLValue.integer) ?? .null, .integer(now)]
            if let owner { parameters.append(.text(owner)) }
            return try await db.query(
                """
                UPDATE deliveries SET state = $3, attempts = attempts + 1, last_status = $4, last_reason = $5,
                    next_attempt_at_ms = COALESCE($6, next_attempt_at_ms), updated_at_ms = $7, lease_owner = NULL
                WHERE event_id = $1 AND token = $2\(fence)
                """, parameters, operation: "record push").changes > 0
        }
        switch outcome {
        case .delivered:
            return try await update(.delivered, status: 200, reason: nil) ? .none : .superseded
        case .unregistered(let reason, let timestamp):
            guard try await update(.unregistered, status: 410, reason: reason) else { return .superseded }
            // A phone that registered the token again after APNs saw it die has the app back.
            let pruned = try await db.query(
                "DELETE FROM phones WHERE token = $1 AND registered_at_ms <= $2",
                [.text(delivery.token), .integer(timestamp)], operation: "prune token").changes
            return pruned > 0 ? .pruned : .kept
        case .badDeviceToken:
            guard try await update(.failed, status: 400, reason: "BadDeviceToken") else { return .superseded }
            try await db.query("UPDATE phones SET bad_token_count = bad_token_count + 1 WHERE token = $1",
                         [.text(delivery.token)], operation: "flag token")
            let pruned = try await db.query("DELETE FROM phones WHERE token = $1 AND bad_token_count >= 2",
                                      [.text(delivery.token)], operation: "prune token").changes
            return pruned > 0 ? .pruned : .flagged
        case .retry(let status, let reason, let at):
            let recorded = at > delivery.expiresAtMilliseconds
                ? try await update(.expired, status: status, reason: reason)
                : try await update(.pending, status: status, reason: reason, next: at)
            return recorded ? .none : .superseded
        case .failed(let status, let reason):
            return try await update(.failed, status: status, reason: reason) ? .none : .superseded
        }
    }
}

extension CloudStore {
    /// All stored events, ordered by gateway and sequence.
    public func allEvents() async throws(StoreError) -> [StoredEvent] {
        try await withConnection { (db) async throws(StoreError) in
            try await db.query("SELECT \(EventRows.columns) FROM events ORDER BY gateway_id, sequence, received_at_ms", [],
                         operation: "list events").rows.map(EventRows.event)
        }
    }

    public func event(id: String) async throws(StoreError) -> StoredEvent? {
        try await withConnection { (db) async throws(StoreError) in
            try await db.query("SELECT \(EventRows.columns) FROM events WHERE id = $1", [.text(id)], operation: "read event")
                .rows.first.map(EventRows.event)
        }
    }
}
