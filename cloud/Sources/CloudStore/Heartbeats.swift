import CloudCore

/// A gateway as its owner sees it: enrolled when, and what its last heartbeat said.
public struct GatewaySummary: Sendable, Equatable {
    public let id: String
    public let enrolledAtMilliseconds: Int64
    /// nil until the gateway's first heartbeat.
    public let lastSeenMilliseconds: Int64?
    public let agentVersion: String?
    public let bootSlot: String?
}

/// Gateway heartbeats (`POST /heartbeat`): the last one per gateway, and the ids taken within
/// the timestamp tolerance, so a recorded heartbeat sent again is refused rather than taken as
/// a sign of life.
extension CloudStore {
    /// Records `heartbeat` received at `now` (Unix ms) in one transaction. Returns false, and
    /// changes nothing, when its id was taken before (a replay). Ids older than `forgetBefore`
    /// are dropped: a heartbeat that old fails the timestamp check before it gets here.
    public func recordHeartbeat(_ heartbeat: GatewayHeartbeat, now: Int64, forgetBefore: Int64) async throws(StoreError) -> Bool {
        try await withConnection { (db) async throws(StoreError) -> Bool in
            try await db.transaction("record heartbeat of \(heartbeat.gatewayID)") { () async throws(StoreError) -> Bool in
                try await db.query("DELETE FROM heartbeat_ids WHERE received_at_ms < $1", [.integer(forgetBefore)],
                                   operation: "forget old heartbeat ids")
                let fresh = try await db.query(
                    "INSERT INTO heartbeat_ids (id, received_at_ms) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING",
                    [.text(heartbeat.id), .integer(now)], operation: "remember heartbeat id")
                guard fresh.changes == 1 else { return false }
                try await db.query(
                    """
                    INSERT INTO gateway_heartbeats (gateway_id, last_seen_ms, agent_version, boot_slot) VALUES ($1, $2, $3, $4)
                    ON CONFLICT (gateway_id) DO UPDATE SET last_seen_ms = $2, agent_version = $3, boot_slot = $4
                    """, [.text(heartbeat.gatewayID), .integer(now), .text(heartbeat.agentVersion), .optional(heartbeat.bootSlot)],
                    operation: "record heartbeat")
                return true
            }
        }
    }

    /// The gateways `accountID` enrolled, by id, with their last heartbeat.
    public func gateways(accountID: String) async throws(StoreError) -> [GatewaySummary] {
        try await withConnection { (db) async throws(StoreError) in
            try await db.query(
                """
                SELECT g.id, g.enrolled_at_ms, h.last_seen_ms, h.agent_version, h.boot_slot
                FROM gateways g LEFT JOIN gateway_heartbeats h ON h.gateway_id = g.id
                WHERE g.account_id = $1 ORDER BY g.id
                """, [.text(accountID)], operation: "list gateways"
            ).rows.map {
                GatewaySummary(id: $0.text(0) ?? "", enrolledAtMilliseconds: $0.integer(1) ?? 0, lastSeenMilliseconds: $0.integer(2),
                               agentVersion: $0.text(3), bootSlot: $0.text(4))
            }
        }
    }
}
