@testable import DoorbellRuntime

/// The tests name rows by the event ids they appended; the outbox finds rows by sequence (v8:
/// the id has no index). Each id is looked up by a scan — fine for a test's few rows. An id not
/// in the table maps to a sequence no row has.
extension Outbox {
    /// The sequence of the row with event id `id`, if any (a scan of the table).
    func sequence(ofID id: String) throws -> Int64? {
        try locked { () throws(OutboxError) -> Int64? in try queryInt("SELECT sequence FROM events WHERE id = ?", .text(id)) }
    }

    func markDelivered(id: String) throws {
        guard let sequence = try sequence(ofID: id) else { return }
        try settle(delivered: [sequence])
    }

    func sequences(_ ids: [String]) throws -> [Int64] { try ids.map { try sequence(ofID: $0) ?? -1 } }

    func settle(deliveredIDs: [String], failed: [(id: String, error: String, nextAttemptAtMs: Int64)] = [],
                dead: [(id: String, error: String)] = []) throws {
        try settle(delivered: sequences(deliveredIDs),
                   failed: failed.map { (try sequence(ofID: $0.id) ?? -1, $0.error, $0.nextAttemptAtMs) },
                   dead: dead.map { (try sequence(ofID: $0.id) ?? -1, $0.error) })
    }

    func acknowledgeMQTT(ids: [String]) throws { try acknowledgeMQTT(sequences(ids)) }

    func replaceBodies(ids: [(id: String, body: [UInt8])]) throws {
        try replaceBodies(ids.map { (try sequence(ofID: $0.id) ?? -1, $0.body) })
    }

    func recordFailure(id: String, error: String, nextAttemptAtMs: Int64) throws {
        try recordFailure(sequence: try sequence(ofID: id) ?? -1, error: error, nextAttemptAtMs: nextAttemptAtMs)
    }
}
