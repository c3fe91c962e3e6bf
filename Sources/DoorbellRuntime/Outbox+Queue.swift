import CSQLite
import DoorbellCore
import Glibc

// The outbox's operations: append with eviction (group commit), what each sink still has to
// take, settling a delivery window, dead letters, statistics.

extension Outbox {
    public func append(id: String, type: String, createdAtMs: Int64, makeBody: @escaping (Int64) -> [UInt8]) throws(OutboxError) -> OutboxEntry {
        try append(id: id, type: type, createdAtMs: createdAtMs, bounds: nil, report: nil, makeBody: makeBody).entry
    }

    /// Appends one event and, when `bounds` are exceeded, evicts by `EvictionPolicy` — telemetry,
    /// then presence, then presses, reports last; the oldest first — all in the same transaction as a
    /// report event (`report` builds it from its sequence and the victims), so the receiver can
    /// explain every gap in the sequence even across a power cut.
    public func append(id: String, type: String, createdAtMs: Int64, bounds: OutboxBounds?,
                       report: ((Int64, [EvictedEvent]) -> (id: String, type: String, body: [UInt8]))?,
                       makeBody: @escaping (Int64) -> [UInt8]) throws(OutboxError) -> OutboxAppendResult {
        let batch = try append([OutboxNewEvent(id: id, type: type, createdAtMs: createdAtMs, makeBody: makeBody)], bounds: bounds, report: report)
        return OutboxAppendResult(entry: batch.entries[0], evicted: batch.evicted, report: batch.report)
    }

    /// Group commit: several events (a burst from one radio read) in one transaction, so one
    /// fsync and one set of page writes serve them all. Same eviction rules as one event.
    /// `memory`: button packet ids and counters stored in the same transaction (none, some, or
    /// only those: a re-sent packet moves the counter without an event).
    public func append(_ events: [OutboxNewEvent], memory: [String: BTHomeButtonTracker.DeviceMemory] = [:], bounds: OutboxBounds?,
                       report: ((Int64, [EvictedEvent]) -> (id: String, type: String, body: [UInt8]))?) throws(OutboxError) -> OutboxBatchResult {
        try append(events, memory: memory, bounds: bounds, report: report, deferringSync: nil).result
    }

    /// `deferringSync`: commit without the fsync, which `waiter` is told of (it is given the
    /// result first). `reserved`: the commit also moved the sequences that may be sent before
    /// their fsync (`reserveSequences`), so it must be on the device before anything is sent.
    func append(_ events: [OutboxNewEvent], memory: [String: BTHomeButtonTracker.DeviceMemory], bounds: OutboxBounds?,
                report: ((Int64, [EvictedEvent]) -> (id: String, type: String, body: [UInt8]))?,
                deferringSync waiter: SyncWaiter?,
                beforeCommit: (([(id: String, body: [UInt8])]) -> Void)? = nil) throws(OutboxError) -> (result: OutboxBatchResult, reserved: Bool) {
        guard !events.isEmpty || !memory.isEmpty else { return (OutboxBatchResult(entries: [], evicted: [], report: nil), false) }
        var reserved = false
        let deferringSync = waiter != nil
        let result = try transaction(deferringSync: deferringSync, waiter: waiter) { () throws(OutboxError) -> OutboxBatchResult in
            try write(memory: memory)
            guard !events.isEmpty else { return OutboxBatchResult(entries: [], evicted: [], report: nil) }
            var sequence = try queryInt(Self.lastSequenceQuery) ?? 0
            var entries: [OutboxEntry] = []
            entries.reserveCapacity(events.count)
            for event in events {
                sequence += 1
                let body = event.makeBody(sequence)
                try insert(id: event.id, sequence: sequence, type: event.type, body: body, createdAtMs: event.createdAtMs, clock: event.clock)
                entries.append(OutboxEntry(id: event.id, sequence: sequence, type: event.type, body: body, createdAtMs: event.createdAtMs,
                                           attempts: 0, lastError: nil, clock: event.clock))
            }
            beforeCommit?(entries.map { ($0.id, $0.body) })
            var evicted: [EvictedEvent] = []
            if let bounds { evicted = try evict(to: bounds) }
            var reportEntry: OutboxEntry?
            if !evicted.isEmpty {
                try run("UPDATE meta SET value = value + ? WHERE key = 'evicted'", [.int(Int64(evicted.count))])
                if let report {
                    sequence += 1
                    let r = report(sequence, evicted)
                    let createdAtMs = events[events.count - 1].createdAtMs
                    // The report has no monotonic time of its own: recorded unsynchronized, it is marked
                    // `clock_corrected: false` before delivery (a byte search, no parse).
                    let clock = ClockCorrection.needsCorrection(r.body) ? ClockStamp(monotonicMicros: nil, bootID: nil) : nil
                    try insert(id: r.id, sequence: sequence, type: r.type, body: r.body, createdAtMs: createdAtMs, clock: clock)
                    reportEntry = OutboxEntry(id: r.id, sequence: sequence, type: r.type, body: r.body, createdAtMs: createdAtMs, attempts: 0,
                                              lastError: nil, clock: clock)
                }
            }
            // Only when rows left (the newest may have been evicted); otherwise the table's last
            // key is the last sequence and the meta page stays out of the commit.
            if !evicted.isEmpty { try run("UPDATE meta SET value = MAX(value, ?) WHERE key = 'last_sequence'", [.int(sequence)]) }
            if deferringSync { reserved = try reserveSequences(through: sequence) }
            var batch = OutboxBatchResult(entries: entries, evicted: evicted, report: reportEntry)
            batch.commit = commits + 1 // COMMIT follows at once, under the same lock
            batch.forCloud = sinks.contains(.cloud)
            waiter?.result = batch
            return batch
        }
        return (result, reserved)
    }

    /// The next victim: the first entry of the (priority, sequence) index — lowest tier, oldest.
    static let victimQuery = "SELECT id, sequence, type, priority, body FROM events ORDER BY priority, sequence LIMIT 1"

    /// Evicts until `bounds` hold (inside the append's transaction; the tally says when).
    func evict(to bounds: OutboxBounds) throws(OutboxError) -> [EvictedEvent] {
        var evicted: [EvictedEvent] = []
        while tally.rows > Int64(bounds.maxEvents) || tally.bytes > Int64(bounds.maxBytes) {
            let stmt = try prepare(Self.victimQuery)
            let rc = sqlite3_step(stmt)
            guard rc == SQLITE_ROW else {
                sqlite3_reset(stmt)
                if rc == SQLITE_DONE { return evicted }
                throw fail(rc, "cannot choose an event to evict")
            }
            let isReport = sqlite3_column_int64(stmt, 3) == Int64(EvictionPolicy.report)
            let victim = EvictedEvent(id: text(stmt, 0) ?? "", sequence: sqlite3_column_int64(stmt, 1), type: text(stmt, 2) ?? "",
                                      reportBody: isReport ? blob(stmt, 4) : nil)
            sqlite3_reset(stmt)
            guard try delete(sequence: victim.sequence, where: "1") else { return evicted }
            evicted.append(victim)
        }
        return evicted
    }

    /// The cloud's queue, in sequence order.
    public func pending(limit: Int) throws(OutboxError) -> [OutboxEntry] { try entries(dead: false, limit: limit) }

    public func deadLetters(limit: Int) throws(OutboxError) -> [OutboxEntry] { try entries(dead: true, limit: limit) }

    func entries(dead: Bool, limit: Int) throws(OutboxError) -> [OutboxEntry] {
        try select("SELECT \(Self.columns) FROM events WHERE dead = ? AND sinks & 1 != 0 ORDER BY sequence LIMIT ?",
                   [dead ? 1 : 0, Int64(limit)])
    }

    static let columns = "id, sequence, type, body, created_at_ms, attempts, last_error, dead, clock_pending, monotonic_us, boot_id"

    /// The cloud's queue without the events still waiting out their own backoff
    /// (`next_attempt_at_ms`), oldest first: what the uplink may send now, so a page of events in
    /// backoff never hides the due ones behind it. A due time more than `UplinkMachine.maxRetryAfterMillis`
    /// ahead can only come from a wall clock that went back: due.
    public func due(nowWallMs: Int64, limit: Int) throws(OutboxError) -> [OutboxEntry] {
        try select("""
            SELECT \(Self.columns) FROM events WHERE dead = 0 AND sinks & 1 != 0 AND (next_attempt_at_ms <= ?1 OR next_attempt_at_ms > ?2)
            ORDER BY sequence LIMIT ?3
            """, [nowWallMs, nowWallMs + Int64(UplinkMachine.maxRetryAfterMillis), Int64(limit)], keep: notHeld)
    }

    static let newestPressesQuery = "SELECT \(columns), sinks FROM events WHERE priority = \(EvictionPolicy.press) ORDER BY sequence DESC LIMIT ?"

    /// The newest presses for the cloud, newest first, from the end of the priority index (a
    /// handful of rows, whatever the backlog): where the uplink finds a live press.
    public func newestPresses(limit: Int) throws(OutboxError) -> [OutboxEntry] {
        // Filtered here, not in SQL: a filter there could walk the whole index to fill the limit.
        try select(Self.newestPressesQuery, [Int64(limit)], keep: { stmt in sqlite3_column_int64(stmt, 11) & 1 != 0 && notHeld(stmt) }).filter { !$0.dead }
    }

    /// Under the lock (`select`): a row whose 2xx is in hand but not applied yet is not sent again.
    func notHeld(_ stmt: OpaquePointer) -> Bool {
        !group.owesAcknowledgements || !group.isHeld(sqlite3_column_int64(stmt, 1))
    }

    /// Backoffs start afresh when the uplink starts (an installer who fixed the network and
    /// restarted expects delivery at once); touches only rows that were waiting.
    public func clearBackoffs() throws(OutboxError) {
        try locked { () throws(OutboxError) in try run("UPDATE events SET next_attempt_at_ms = 0 WHERE next_attempt_at_ms != 0", []) }
    }

    /// What the MQTT sink has still to publish after `sequence`, in order (dead letters too: the
    /// cloud refusing an event is no reason to keep it from the house).
    public func pendingForMQTT(after sequence: Int64, limit: Int) throws(OutboxError) -> [OutboxEntry] {
        try select("SELECT \(Self.columns) FROM events WHERE sequence > ? AND sinks & 2 != 0 ORDER BY sequence LIMIT ?",
                   [sequence, Int64(limit)])
    }

    /// The broker acknowledged these rows (PUBACK; their sequences); rows no other sink waits for leave. One transaction,
    /// with its fsync: unlike the cloud, a broker's subscribers (Home Assistant automations) do not
    /// deduplicate by event id, so an acknowledgement lost to a power cut would ring the house twice.
    public func acknowledgeMQTT(_ sequences: [Int64]) throws(OutboxError) {
        guard !sequences.isEmpty else { return }
        try transaction { () throws(OutboxError) in
            try keepLastSequence()
            for s in sequences {
                try run("UPDATE events SET sinks = sinks & ~2 WHERE sequence = ? AND sinks & 2 != 0", [.int(s)])
                tally.mqtt -= Int64(sqlite3_changes(db))
                try delete(sequence: s, where: "sinks = 0")
            }
        }
    }

    /// One row (inside a transaction, which keeps the tally).
    func insert(id: String, sequence: Int64, type: String, body: [UInt8], createdAtMs: Int64, clock: ClockStamp?) throws(OutboxError) {
        try run("""
            INSERT INTO events (id, sequence, type, body, created_at_ms, sinks, clock_pending, monotonic_us, boot_id, priority)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """,
                [.text(id), .int(sequence), .text(type), .blob(body), .int(createdAtMs), .int(sinks.rawValue), .int(clock == nil ? 0 : 1),
                 clock?.monotonicMicros.map(Value.int) ?? .null, clock?.bootID.map(Value.text) ?? .null, .int(Int64(eviction.tier(ofType: type)))])
        tally.rows += 1
        tally.bytes += Int64(body.count)
        if sinks.contains(.mqtt) { tally.mqtt += 1 }
    }

    func select(_ sql: String, _ ints: [Int64], keep: (OpaquePointer) -> Bool = { _ in true }) throws(OutboxError) -> [OutboxEntry] {
        try locked { () throws(OutboxError) -> [OutboxEntry] in
            let stmt = try prepare(sql)
            defer { sqlite3_reset(stmt) }
            for (i, v) in ints.enumerated() { sqlite3_bind_int64(stmt, Int32(i + 1), v) }
            var out: [OutboxEntry] = []
            while true {
                let rc = sqlite3_step(stmt)
                if rc == SQLITE_DONE { break }
                guard rc == SQLITE_ROW else { throw fail(rc, "cannot read the outbox") }
                guard keep(stmt) else { continue }
                let clock = sqlite3_column_int64(stmt, 8) == 0 ? nil : ClockStamp(
                    monotonicMicros: sqlite3_column_type(stmt, 9) == SQLITE_NULL ? nil : sqlite3_column_int64(stmt, 9), bootID: text(stmt, 10))
                out.append(OutboxEntry(
                    id: text(stmt, 0) ?? "", sequence: sqlite3_column_int64(stmt, 1), type: text(stmt, 2) ?? "",
                    body: blob(stmt, 3), createdAtMs: sqlite3_column_int64(stmt, 4), attempts: Int(sqlite3_column_int64(stmt, 5)),
                    lastError: text(stmt, 6), dead: sqlite3_column_int64(stmt, 7) != 0, clock: clock))
            }
            return out
        }
    }

    /// What became of a window of deliveries: acknowledged rows leave, refused ones are parked,
    /// failed ones count an attempt — all in one transaction (one fsync, shared page writes).
    /// A power cut before the commit sends the acknowledged ones again; receivers deduplicate.
    /// An acknowledgement of a row whose append's fsync has not returned yet is handed over
    /// (GroupSync) and applied by whoever makes that fsync once it has: the uplink goes on at
    /// once, and the queue's reads skip the row meanwhile (Outbox+Sync.swift).
    /// Rows are named by their sequence (their key), as read from `OutboxEntry.sequence`.
    public func settle(delivered: [Int64], failed: [(sequence: Int64, error: String, nextAttemptAtMs: Int64)] = [],
                       dead: [(sequence: Int64, error: String)] = []) throws(OutboxError) {
        guard !delivered.isEmpty || !failed.isEmpty || !dead.isEmpty else { return }
        var now: [Int64] = []
        locked {
            for s in delivered where group.acknowledge(s, ticket: unsyncedRows[s] ?? 0) { now.append(s) }
        }
        guard !now.isEmpty || !failed.isEmpty || !dead.isEmpty else { return }
        // Failures and parkings keep their fsync: their counts and backoffs must survive.
        try transaction(acknowledgements: failed.isEmpty && dead.isEmpty ? now.count : 0) { () throws(OutboxError) in
            try removeDelivered(now)
            for f in failed {
                try run("UPDATE events SET attempts = attempts + 1, last_error = ?, next_attempt_at_ms = ? WHERE sequence = ?",
                        [.text(String(f.error.prefix(500))), .int(f.nextAttemptAtMs), .int(f.sequence)])
            }
            for d in dead {
                try run("UPDATE events SET dead = 1, attempts = attempts + 1, last_error = ? WHERE sequence = ? AND dead = 0",
                        [.text(String(d.error.prefix(500))), .int(d.sequence)])
                tally.dead += Int64(sqlite3_changes(db))
            }
        }
    }

    /// The cloud's acknowledgements (inside a transaction, which keeps the tally): rows no other
    /// sink waits for leave, the others lose the cloud's bit.
    func removeDelivered(_ delivered: [Int64]) throws(OutboxError) {
        guard !delivered.isEmpty else { return }
        var removed: Int64 = 0
        try keepLastSequence()
        for s in delivered {
            // The cloud alone (no [mqtt]): one statement.
            if try delete(sequence: s, where: "sinks = 1") {
                removed += 1
                continue
            }
            try run("UPDATE events SET sinks = sinks & ~1 WHERE sequence = ? AND sinks & 1 != 0", [.int(s)])
            removed += Int64(sqlite3_changes(db))
            try delete(sequence: s, where: "sinks = 0")
        }
        if removed > 0 { try run("UPDATE meta SET value = value + ? WHERE key = 'delivered'", [.int(removed)]) }
    }

    /// Rewrites the bodies of several events before their first delivery (clock correction), in
    /// one transaction; they no longer wait for a correction.
    public func replaceBodies(_ bodies: [(sequence: Int64, body: [UInt8])]) throws(OutboxError) {
        guard !bodies.isEmpty else { return }
        try transaction { () throws(OutboxError) in
            for b in bodies {
                guard let old = try queryInt("SELECT LENGTH(body) FROM events WHERE sequence = ?", .int(b.sequence)) else { continue }
                try run("UPDATE events SET body = ?, clock_pending = 0 WHERE sequence = ?", [.blob(b.body), .int(b.sequence)])
                tally.bytes += Int64(b.body.count) - old
            }
        }
    }

    public func recordFailure(sequence: Int64, error message: String, nextAttemptAtMs: Int64) throws(OutboxError) {
        try settle(delivered: [], failed: [(sequence, message, nextAttemptAtMs)])
    }

    /// Status, metrics and STATUS= ask for this on every tick: the tally and three indexed rows
    /// (the two meta counters, the first waiting row by sequence), never a scan of the table.
    /// `oldestCreatedAtMs` is the creation time of the lowest waiting sequence.
    public func stats() throws(OutboxError) -> OutboxStats {
        try locked { () throws(OutboxError) -> OutboxStats in
            let row = try queryInts(Self.statsQuery) ?? []
            func column(_ i: Int) -> Int64? { i < row.count ? row[i] : nil }
            return stats(tally, lastSequence: column(0) ?? 0, evicted: column(1) ?? 0, oldest: column(2))
        }
    }

    /// The same figures counted from the whole table: what `stats()` must always agree with.
    public func countedStats() throws(OutboxError) -> OutboxStats {
        try locked { () throws(OutboxError) -> OutboxStats in
            let row = try queryInts(Self.statsQuery) ?? []
            func column(_ i: Int) -> Int64? { i < row.count ? row[i] : nil }
            return stats(try countedTally(), lastSequence: column(0) ?? 0, evicted: column(1) ?? 0, oldest: column(2))
        }
    }

    static let statsQuery = """
        SELECT MAX((SELECT value FROM meta WHERE key = 'last_sequence'), COALESCE((SELECT MAX(sequence) FROM events), 0)),
               (SELECT value FROM meta WHERE key = 'evicted'),
               (SELECT created_at_ms FROM events WHERE sequence > 0 AND dead = 0 ORDER BY sequence LIMIT 1)
        """

    private func stats(_ t: OutboxTally, lastSequence: Int64, evicted: Int64, oldest: Int64?) -> OutboxStats {
        var stats = OutboxStats(depth: Int(t.rows - t.dead), oldestCreatedAtMs: oldest, lastSequence: lastSequence, dead: Int(t.dead),
                                evicted: Int(evicted), bytes: Int(t.bytes))
        stats.mqttPending = sinks.contains(.mqtt) ? Int(t.mqtt) : 0
        return stats
    }

    /// The watchdog's question: does the database answer? One indexed row, no scan.
    public func ping() -> Bool {
        (try? locked { () throws(OutboxError) -> Int64? in try queryInt(Self.lastSequenceQuery) }) != nil
    }

    /// Moves dead letters back to the queue; returns how many.
    @discardableResult
    public func retryDead() throws(OutboxError) -> Int {
        try locked { () throws(OutboxError) -> Int in
            try run("UPDATE events SET dead = 0, attempts = 0, next_attempt_at_ms = 0 WHERE dead = 1", [])
            let n = Int(sqlite3_changes(db))
            tally.dead -= Int64(n)
            return n
        }
    }

    /// Deletes dead letters (the only way an accepted event is ever dropped); returns how many.
    @discardableResult
    public func purgeDead() throws(OutboxError) -> Int {
        let n = try transaction { () throws(OutboxError) -> Int in
            try keepLastSequence()
            try run("DELETE FROM events WHERE dead = 1", [])
            return Int(sqlite3_changes(db))
        }
        try locked { () throws(OutboxError) in try recount() }
        return n
    }
}
