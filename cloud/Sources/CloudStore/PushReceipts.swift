import CloudCore

/// Receipts from base stations (`push.displayed`, `push.not_displayed`), recorded on the push
/// they are about, in the transaction that stores the receipt event itself.
extension CloudStore {
    /// How far back a reference is looked for: a notification read off a phone is about a press
    /// of the last day, and the candidates stay few (one gateway's pushes of a day).
    static let receiptWindowMilliseconds: Int64 = 24 * 3600 * 1000

    public enum ReceiptOutcome: Sendable, Equatable {
        /// Recorded on the push of `eventID` to `token`.
        case recorded(eventID: String, token: String)
        /// Nothing to record it on: no push of this gateway's doorbells carries the reference, or
        /// the phone was never seen displaying one (so its token is not known yet).
        case unmatched
    }

    static func recordReceipt(_ r: PushReceiptReport, gatewayID: String, now: Int64,
                              _ db: any SQLConnection) async throws(StoreError) -> ReceiptOutcome {
        switch r.kind {
        case .displayed:
            guard let reference = r.reference else { return .unmatched }
            var sql = """
                SELECT d.event_id, d.token FROM deliveries d JOIN doorbells b ON b.id = d.doorbell_id
                WHERE b.gateway_id = $1 AND d.created_at_ms >= $2
                """
            var values: [SQLValue] = [.text(gatewayID), .integer(now - receiptWindowMilliseconds)]
            if let press = r.pressEventID {
                sql += " AND d.event_id = $3"
                values.append(.text(press))
            }
            let candidates = try await db.query(sql, values, operation: "find the push of receipt \(reference)").rows
            guard let match = candidates.first(where: { row in
                PushReference.make(eventID: row.text(0) ?? "", token: row.text(1) ?? "") == reference
            }), let eventID = match.text(0), let token = match.text(1) else { return .unmatched }
            try await db.query(
                """
                UPDATE deliveries SET displayed_at_ms = COALESCE(displayed_at_ms, $3), displayed_on = $4, not_displayed_at_ms = NULL
                WHERE event_id = $1 AND token = $2
                """,
                [.text(eventID), .text(token), .integer(r.displayedAtMilliseconds ?? now), .text(r.phoneName ?? r.phoneID)],
                operation: "record push displayed")
            // The phone is now known by its token: a later "not displayed" from it can be placed.
            try await db.query(
                """
                INSERT INTO phone_links (gateway_id, phone_id, token, phone_name, linked_at_ms) VALUES ($1, $2, $3, $4, $5)
                ON CONFLICT (gateway_id, phone_id) DO UPDATE SET token = excluded.token, phone_name = excluded.phone_name,
                    linked_at_ms = excluded.linked_at_ms
                """,
                [.text(gatewayID), .text(r.phoneID), .text(token), .optional(r.phoneName), .integer(now)],
                operation: "link phone \(r.phoneID)")
            return .recorded(eventID: eventID, token: token)
        case .notDisplayed:
            guard let press = r.pressEventID,
                  let token = try await db.query("SELECT token FROM phone_links WHERE gateway_id = $1 AND phone_id = $2",
                                                 [.text(gatewayID), .text(r.phoneID)], operation: "read phone link").rows.first?.text(0)
            else { return .unmatched }
            let changed = try await db.query(
                "UPDATE deliveries SET not_displayed_at_ms = $3 WHERE event_id = $1 AND token = $2 AND displayed_at_ms IS NULL",
                [.text(press), .text(token), .integer(now)], operation: "record push not displayed").changes
            return changed > 0 ? .recorded(eventID: press, token: token) : .unmatched
        }
    }
}

extension CloudStore {
    /// Every push, by event id (for `doorbell-cloud events`).
    public func deliveriesByEvent() async throws(StoreError) -> [String: [Delivery]] {
        try await withConnection { (db) async throws(StoreError) in
            let rows = try await db.query("SELECT \(Self.deliveryColumns) FROM deliveries ORDER BY event_id, account_id, token", [],
                                          operation: "list deliveries").rows.compactMap(Self.delivery)
            return Dictionary(grouping: rows, by: \.eventID)
        }
    }
}

extension Delivery {
    /// APNs accepted the push (its 200) at the row's last update.
    public var acceptedAtMilliseconds: Int64? { state == .delivered ? updatedAtMilliseconds : nil }

    /// `displayed`, `not_displayed` (a phone connected to the base station never showed it:
    /// APNs accepted it and it did not arrive), or `none` (no base station watched).
    public var receipt: String {
        displayedAtMilliseconds != nil ? "displayed" : notDisplayedAtMilliseconds != nil ? "not_displayed" : "none"
    }

    /// The receipt and the latencies from the press (`occurred_at`, the gateway's clock) to APNs's
    /// acceptance (the cloud's clock) and to the notification on the phone (the gateway's clock).
    public func receiptFields(pressedAt occurredAt: String) -> [(String, JSONText.Value)] {
        let press = PushReceiptReport.milliseconds(occurredAt)
        func since(_ t: Int64?, _ from: Int64?) -> JSONText.Value { if let t, let from { .int(t - from) } else { .null } }
        return [
            ("receipt", .string(receipt)),
            ("accepted_at_ms", acceptedAtMilliseconds.map { .int($0) } ?? .null),
            ("displayed_at_ms", displayedAtMilliseconds.map { .int($0) } ?? .null),
            ("displayed_on", .string(displayedOn)),
            ("press_to_accepted_ms", since(acceptedAtMilliseconds, press)),
            ("press_to_displayed_ms", since(displayedAtMilliseconds, press)),
            ("accepted_to_displayed_ms", since(displayedAtMilliseconds, acceptedAtMilliseconds)),
        ]
    }
}
