import CSQLite
import DoorbellCore
import Glibc

// The durable event queue. SQLite in WAL mode with synchronous=FULL: append() is one
// transaction, and when it returns the event survives a power cut. A row leaves only when every
// configured sink acknowledged it — the cloud's 2xx and the MQTT broker's PUBACK are tracked
// apart, one bit each in `sinks`. The per-gateway sequence lives in a meta row, so it never goes
// back even after rows are deleted. The last BTHome packet id and counter of each button live
// here too, written in the transaction that stores the press they produced: one store, one fsync.

/// Where events go: one bit per sink in each row's `sinks` column.
public struct OutboxSinks: OptionSet, Sendable, Hashable {
    public let rawValue: Int64
    public init(rawValue: Int64) { self.rawValue = rawValue }
    public static let cloud = OutboxSinks(rawValue: 1)
    public static let mqtt = OutboxSinks(rawValue: 2)
}

public struct OutboxEntry: Sendable, Equatable {
    public let id: String
    public let sequence: Int64
    public let type: String
    public let body: [UInt8]
    public let createdAtMs: Int64
    public var attempts: Int
    public var lastError: String?
    /// Refused for good by the receiver (a permanent 4xx): kept, never retried by itself.
    public var dead: Bool = false
}

public struct OutboxBounds: Sendable, Equatable {
    public var maxEvents: Int
    public var maxBytes: Int
    public init(maxEvents: Int, maxBytes: Int) { self.maxEvents = maxEvents; self.maxBytes = maxBytes }
}

public struct EvictedEvent: Sendable, Equatable {
    public let id: String
    public let sequence: Int64
    public let type: String
}

public struct OutboxAppendResult: Sendable {
    public let entry: OutboxEntry
    /// Events removed to stay within bounds (may include `entry` itself when it had the lowest priority).
    public let evicted: [EvictedEvent]
    public let report: OutboxEntry?
}

/// An event to append; its body is made once its sequence is known.
public struct OutboxNewEvent {
    public var id: String
    public var type: String
    public var createdAtMs: Int64
    public var makeBody: (Int64) -> [UInt8]
    public init(id: String, type: String, createdAtMs: Int64, makeBody: @escaping (Int64) -> [UInt8]) {
        self.id = id
        self.type = type
        self.createdAtMs = createdAtMs
        self.makeBody = makeBody
    }
}

public struct OutboxBatchResult: Sendable {
    /// In the order given, with consecutive sequences.
    public let entries: [OutboxEntry]
    /// Events removed to stay within bounds (may include some of `entries`).
    public let evicted: [EvictedEvent]
    public let report: OutboxEntry?
}

public struct OutboxStats: Sendable, Equatable {
    public var depth: Int
    public var oldestCreatedAtMs: Int64?
    public var lastSequence: Int64
    public var dead: Int = 0
    /// Evicted since the outbox was created (counted, logged and reported, never silent).
    public var evicted: Int = 0
    public var bytes: Int = 0
    /// Waiting for the broker's PUBACK (0 without [mqtt]).
    public var mqttPending: Int = 0
    public init(depth: Int, oldestCreatedAtMs: Int64?, lastSequence: Int64, dead: Int = 0, evicted: Int = 0, bytes: Int = 0) {
        self.depth = depth
        self.oldestCreatedAtMs = oldestCreatedAtMs
        self.lastSequence = lastSequence
        self.dead = dead
        self.evicted = evicted
        self.bytes = bytes
    }
}

public struct OutboxError: Error, Sendable, CustomStringConvertible, Equatable {
    public enum Code: Sendable, Equatable { case cannotOpen, corrupt, full, readOnly, io, schema, closed }
    public let code: Code
    public let message: String
    public var description: String { message }
    public static func == (a: OutboxError, b: OutboxError) -> Bool { a.code == b.code }
}

public final class Outbox: @unchecked Sendable {
    public static let schemaVersion: Int32 = 4
    public let path: String
    /// The sinks new events are stored for.
    public private(set) var sinks: OutboxSinks
    private var db: OpaquePointer?
    // On the heap: a pthread object must not move, and `&` on a stored property promises no fixed address.
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private var statements: [String: OpaquePointer] = [:]
    /// Rows and body bytes in the table, kept up to date by every write (under the lock, changed
    /// only after a commit), so checking the bounds on each append costs no table scan.
    private var size = (rows: Int64(0), bytes: Int64(0))

    /// `sinks`: the configured sinks (see `setSinks` for what a removed one means).
    public init(path: String, sinks: OutboxSinks = .cloud) throws(OutboxError) {
        self.path = path
        self.sinks = sinks
        pthread_mutex_init(mutex, nil)
        var handle: OpaquePointer?
        let rc = sqlite3_open_v2(path, &handle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nil)
        db = handle
        guard rc == SQLITE_OK else {
            let error = fail(rc, "cannot open outbox \(path)")
            sqlite3_close(handle)
            db = nil
            throw error
        }
        sqlite3_busy_timeout(handle, 5_000)
        do {
            // Small pages: a commit rewrites whole pages (into the WAL, then the database), so
            // 1 KiB pages write less than half what 4 KiB ones do per event on the SD card.
            // Only a new file takes it; an existing outbox keeps its page size.
            try exec("PRAGMA page_size=1024")
            try exec("PRAGMA journal_mode=WAL")
            try exec("PRAGMA synchronous=FULL")
            try migrate()
            try restrict(to: sinks)
            try recount()
        } catch {
            sqlite3_close(handle)
            db = nil
            throw error
        }
    }

    deinit {
        close()
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    public func close() {
        locked {
            for (_, s) in statements { sqlite3_finalize(s) }
            statements = [:]
            if let db { sqlite3_close(db) }
            db = nil
        }
    }

    private func locked<R>(_ body: () throws(OutboxError) -> R) throws(OutboxError) -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }

    /// `body` in one write transaction (one fsync at COMMIT), rolled back if it throws.
    private func transaction<R>(_ body: () throws(OutboxError) -> R) throws(OutboxError) -> R {
        try locked { () throws(OutboxError) -> R in
            try exec("BEGIN IMMEDIATE")
            do throws(OutboxError) {
                let result = try body()
                try exec("COMMIT")
                return result
            } catch {
                try? exec("ROLLBACK")
                throw error
            }
        }
    }

    private func locked(_ body: () -> Void) {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        body()
    }

    private func migrate() throws(OutboxError) {
        let version = try queryInt("PRAGMA user_version") ?? 0
        if version > Int64(Self.schemaVersion) {
            throw OutboxError(code: .schema, message: "outbox \(path) has schema version \(version), newer than this agent understands (\(Self.schemaVersion)). Install the newer agent again, or move the file aside to start an empty outbox.")
        }
        if version == 0 {
            try exec("""
            BEGIN IMMEDIATE;
            CREATE TABLE IF NOT EXISTS events (
                id TEXT PRIMARY KEY,
                sequence INTEGER NOT NULL UNIQUE,
                type TEXT NOT NULL,
                body BLOB NOT NULL,
                created_at_ms INTEGER NOT NULL,
                attempts INTEGER NOT NULL DEFAULT 0,
                next_attempt_at_ms INTEGER NOT NULL DEFAULT 0,
                last_error TEXT
            );
            CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
            INSERT OR IGNORE INTO meta (key, value) VALUES ('last_sequence', 0), ('delivered', 0), ('evicted', 0);
            PRAGMA user_version = 1;
            COMMIT;
            """)
        }
        if version < 2 {
            // v2: dead letters (permanent rejections) stay in the table, marked.
            try exec("""
            BEGIN IMMEDIATE;
            ALTER TABLE events ADD COLUMN dead INTEGER NOT NULL DEFAULT 0;
            INSERT OR IGNORE INTO meta (key, value) VALUES ('evicted', 0);
            PRAGMA user_version = 2;
            COMMIT;
            """)
        }
        if version < 3 {
            // v3: one bit per sink that still has to take the row (1 cloud, 2 MQTT).
            try exec("""
            BEGIN IMMEDIATE;
            ALTER TABLE events ADD COLUMN sinks INTEGER NOT NULL DEFAULT 1;
            PRAGMA user_version = 3;
            COMMIT;
            """)
        }
        if version < 4 {
            // v4: a button's last packet id and counter, so a re-broadcast or a replay after a
            // restart is not a press (until v3 a separate file, ble-buttons.json, without fsync).
            try exec("""
            BEGIN IMMEDIATE;
            CREATE TABLE IF NOT EXISTS button_memory (address TEXT PRIMARY KEY, packet_id INTEGER, counter INTEGER);
            PRAGMA user_version = 4;
            COMMIT;
            """)
        }
    }

    /// The last packet id and counter of every button that sent one.
    public func buttonMemory() throws(OutboxError) -> [String: BTHomeButtonTracker.DeviceMemory] {
        try locked { () throws(OutboxError) -> [String: BTHomeButtonTracker.DeviceMemory] in
            let stmt = try prepare("SELECT address, packet_id, counter FROM button_memory")
            defer { sqlite3_reset(stmt) }
            var out: [String: BTHomeButtonTracker.DeviceMemory] = [:]
            while true {
                let rc = sqlite3_step(stmt)
                guard rc == SQLITE_ROW else {
                    guard rc == SQLITE_DONE else { throw fail(rc, "cannot read the button memory") }
                    return out
                }
                guard let address = text(stmt, 0) else { continue }
                let id = sqlite3_column_type(stmt, 1) == SQLITE_NULL ? nil : UInt8(exactly: sqlite3_column_int64(stmt, 1))
                let counter = sqlite3_column_type(stmt, 2) == SQLITE_NULL ? nil : UInt32(exactly: sqlite3_column_int64(stmt, 2))
                out[address] = BTHomeButtonTracker.DeviceMemory(packetID: id, counter: counter)
            }
        }
    }

    private func write(memory: [String: BTHomeButtonTracker.DeviceMemory]) throws(OutboxError) {
        for (address, m) in memory.sorted(by: { $0.key < $1.key }) {
            try run("""
                INSERT INTO button_memory (address, packet_id, counter) VALUES (?, ?, ?)
                ON CONFLICT (address) DO UPDATE SET packet_id = excluded.packet_id, counter = excluded.counter
                """, [.text(address), m.packetID.map { .int(Int64($0)) } ?? .null, m.counter.map { .int(Int64($0)) } ?? .null])
        }
    }

    /// The configured sinks changed (start, reload): later events go to these. A sink added later
    /// starts with the events after it. Without [mqtt] no row waits for the broker any more (rows
    /// only it still needed leave); rows for the cloud are never dropped this way — with [uplink]
    /// commented out they wait for it, as before there was a second sink.
    public func setSinks(_ new: OutboxSinks) throws(OutboxError) {
        try locked { () throws(OutboxError) in
            try restrict(to: new)
            try recount()
            sinks = new
        }
    }

    private func recount() throws(OutboxError) {
        size = (try queryInt("SELECT COUNT(*) FROM events") ?? 0, try queryInt("SELECT COALESCE(SUM(LENGTH(body)), 0) FROM events") ?? 0)
    }

    /// Deletes one row if `condition` holds for it; returns its body's length, nil if nothing went.
    private func delete(id: String, where condition: String) throws(OutboxError) -> Int64? {
        let stmt = try prepare("DELETE FROM events WHERE id = ? AND \(condition) RETURNING LENGTH(body)")
        defer { sqlite3_reset(stmt); sqlite3_clear_bindings(stmt) }
        sqlite3_bind_text(stmt, 1, id, -1, doorbell_sqlite_transient())
        let rc = sqlite3_step(stmt)
        if rc == SQLITE_ROW {
            let length = sqlite3_column_int64(stmt, 0)
            _ = sqlite3_step(stmt) // finish the statement so the delete is complete
            return length
        }
        guard rc == SQLITE_DONE else { throw fail(rc, "outbox write failed") }
        return nil
    }

    private func restrict(to new: OutboxSinks) throws(OutboxError) {
        guard !new.contains(.mqtt) else { return }
        try exec("BEGIN IMMEDIATE; UPDATE events SET sinks = sinks & ~2 WHERE sinks & 2 != 0; DELETE FROM events WHERE sinks = 0; COMMIT;")
    }

    // MARK: - Operations

    public func append(id: String, type: String, createdAtMs: Int64, makeBody: @escaping (Int64) -> [UInt8]) throws(OutboxError) -> OutboxEntry {
        try append(id: id, type: type, createdAtMs: createdAtMs, bounds: nil, report: nil, makeBody: makeBody).entry
    }

    /// Appends one event and, when `bounds` are exceeded, evicts by priority — presence and
    /// telemetry before any doorbell press, the oldest first — all in the same transaction as a
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
        guard !events.isEmpty || !memory.isEmpty else { return OutboxBatchResult(entries: [], evicted: [], report: nil) }
        var after = size
        let result = try transaction { () throws(OutboxError) -> OutboxBatchResult in
            after = size
            try write(memory: memory)
            guard !events.isEmpty else { return OutboxBatchResult(entries: [], evicted: [], report: nil) }
            var sequence = try queryInt("SELECT value FROM meta WHERE key = 'last_sequence'") ?? 0
            var entries: [OutboxEntry] = []
            entries.reserveCapacity(events.count)
            for event in events {
                sequence += 1
                let body = event.makeBody(sequence)
                try run("INSERT INTO events (id, sequence, type, body, created_at_ms, sinks) VALUES (?, ?, ?, ?, ?, ?)",
                        [.text(event.id), .int(sequence), .text(event.type), .blob(body), .int(event.createdAtMs), .int(sinks.rawValue)])
                entries.append(OutboxEntry(id: event.id, sequence: sequence, type: event.type, body: body, createdAtMs: event.createdAtMs,
                                           attempts: 0, lastError: nil))
                after.rows += 1
                after.bytes += Int64(body.count)
            }
            var evicted: [EvictedEvent] = []
            if let bounds { evicted = try evict(to: bounds, size: &after) }
            var reportEntry: OutboxEntry?
            if !evicted.isEmpty {
                try run("UPDATE meta SET value = value + ? WHERE key = 'evicted'", [.int(Int64(evicted.count))])
                if let report {
                    sequence += 1
                    let r = report(sequence, evicted)
                    let createdAtMs = events[events.count - 1].createdAtMs
                    try run("INSERT INTO events (id, sequence, type, body, created_at_ms, sinks) VALUES (?, ?, ?, ?, ?, ?)",
                            [.text(r.id), .int(sequence), .text(r.type), .blob(r.body), .int(createdAtMs), .int(sinks.rawValue)])
                    after.rows += 1
                    after.bytes += Int64(r.body.count)
                    reportEntry = OutboxEntry(id: r.id, sequence: sequence, type: r.type, body: r.body, createdAtMs: createdAtMs, attempts: 0, lastError: nil)
                }
            }
            try run("UPDATE meta SET value = ? WHERE key = 'last_sequence'", [.int(sequence)])
            return OutboxBatchResult(entries: entries, evicted: evicted, report: reportEntry)
        }
        locked { size = after }
        return result
    }

    /// Eviction order: lowest priority first, then oldest. Reports (gateway.*) are never victims.
    private func evict(to bounds: OutboxBounds, size: inout (rows: Int64, bytes: Int64)) throws(OutboxError) -> [EvictedEvent] {
        var evicted: [EvictedEvent] = []
        while true {
            guard size.rows > Int64(bounds.maxEvents) || size.bytes > Int64(bounds.maxBytes) else { return evicted }
            let stmt = try prepare("""
                SELECT id, sequence, type FROM events WHERE type NOT LIKE 'gateway.%'
                ORDER BY CASE WHEN type LIKE 'doorbell.%' THEN 2 WHEN type LIKE 'beacon.%' THEN 1 ELSE 0 END, sequence LIMIT 1
                """)
            let rc = sqlite3_step(stmt)
            guard rc == SQLITE_ROW else {
                sqlite3_reset(stmt)
                if rc == SQLITE_DONE { return evicted } // only reports left: nothing more to take
                throw fail(rc, "cannot choose an event to evict")
            }
            let victim = EvictedEvent(id: text(stmt, 0) ?? "", sequence: sqlite3_column_int64(stmt, 1), type: text(stmt, 2) ?? "")
            sqlite3_reset(stmt)
            if let length = try delete(id: victim.id, where: "1") {
                size.rows -= 1
                size.bytes -= length
            }
            evicted.append(victim)
        }
    }

    /// The cloud's queue, in sequence order.
    public func pending(limit: Int) throws(OutboxError) -> [OutboxEntry] { try entries(dead: false, limit: limit) }

    public func deadLetters(limit: Int) throws(OutboxError) -> [OutboxEntry] { try entries(dead: true, limit: limit) }

    private func entries(dead: Bool, limit: Int) throws(OutboxError) -> [OutboxEntry] {
        try select("SELECT id, sequence, type, body, created_at_ms, attempts, last_error, dead FROM events WHERE dead = ? AND sinks & 1 != 0 ORDER BY sequence LIMIT ?",
                   [dead ? 1 : 0, Int64(limit)])
    }

    /// What the MQTT sink has still to publish after `sequence`, in order (dead letters too: the
    /// cloud refusing an event is no reason to keep it from the house).
    public func pendingForMQTT(after sequence: Int64, limit: Int) throws(OutboxError) -> [OutboxEntry] {
        try select("SELECT id, sequence, type, body, created_at_ms, attempts, last_error, dead FROM events WHERE sequence > ? AND sinks & 2 != 0 ORDER BY sequence LIMIT ?",
                   [sequence, Int64(limit)])
    }

    /// The broker acknowledged these (PUBACK); rows no other sink waits for leave. One transaction.
    public func acknowledgeMQTT(_ ids: [String]) throws(OutboxError) {
        guard !ids.isEmpty else { return }
        let gone = try transaction { () throws(OutboxError) -> (rows: Int64, bytes: Int64) in
            var gone = (rows: Int64(0), bytes: Int64(0))
            for id in ids {
                try run("UPDATE events SET sinks = sinks & ~2 WHERE id = ?", [.text(id)])
                if let length = try delete(id: id, where: "sinks = 0") { gone.rows += 1; gone.bytes += length }
            }
            return gone
        }
        locked { size.rows -= gone.rows; size.bytes -= gone.bytes }
    }

    private func select(_ sql: String, _ ints: [Int64]) throws(OutboxError) -> [OutboxEntry] {
        try locked { () throws(OutboxError) -> [OutboxEntry] in
            let stmt = try prepare(sql)
            defer { sqlite3_reset(stmt) }
            for (i, v) in ints.enumerated() { sqlite3_bind_int64(stmt, Int32(i + 1), v) }
            var out: [OutboxEntry] = []
            while true {
                let rc = sqlite3_step(stmt)
                if rc == SQLITE_DONE { break }
                guard rc == SQLITE_ROW else { throw fail(rc, "cannot read the outbox") }
                let count = Int(sqlite3_column_bytes(stmt, 3))
                var body = [UInt8](repeating: 0, count: count)
                if count > 0, let blob = sqlite3_column_blob(stmt, 3) {
                    body.withUnsafeMutableBytes { $0.copyMemory(from: UnsafeRawBufferPointer(start: blob, count: count)) }
                }
                out.append(OutboxEntry(
                    id: text(stmt, 0) ?? "", sequence: sqlite3_column_int64(stmt, 1), type: text(stmt, 2) ?? "",
                    body: body, createdAtMs: sqlite3_column_int64(stmt, 4), attempts: Int(sqlite3_column_int64(stmt, 5)),
                    lastError: text(stmt, 6), dead: sqlite3_column_int64(stmt, 7) != 0))
            }
            return out
        }
    }

    public func markDelivered(id: String) throws(OutboxError) { try settle(delivered: [id]) }

    /// What became of a window of deliveries: acknowledged rows leave, refused ones are parked,
    /// failed ones count an attempt — all in one transaction (one fsync, shared page writes).
    /// A power cut before the commit sends the acknowledged ones again; receivers deduplicate.
    public func settle(delivered: [String], failed: [(id: String, error: String, nextAttemptAtMs: Int64)] = [],
                       dead: [(id: String, error: String)] = []) throws(OutboxError) {
        guard !delivered.isEmpty || !failed.isEmpty || !dead.isEmpty else { return }
        let gone = try transaction { () throws(OutboxError) -> (rows: Int64, bytes: Int64) in
            var removed: Int64 = 0
            var gone = (rows: Int64(0), bytes: Int64(0))
            for id in delivered {
                try run("UPDATE events SET sinks = sinks & ~1 WHERE id = ? AND sinks & 1 != 0", [.text(id)])
                removed += Int64(sqlite3_changes(db))
                if let length = try delete(id: id, where: "sinks = 0") { gone.rows += 1; gone.bytes += length }
            }
            if removed > 0 { try run("UPDATE meta SET value = value + ? WHERE key = 'delivered'", [.int(removed)]) }
            for f in failed {
                try run("UPDATE events SET attempts = attempts + 1, last_error = ?, next_attempt_at_ms = ? WHERE id = ?",
                        [.text(String(f.error.prefix(500))), .int(f.nextAttemptAtMs), .text(f.id)])
            }
            for d in dead {
                try run("UPDATE events SET dead = 1, attempts = attempts + 1, last_error = ? WHERE id = ?",
                        [.text(String(d.error.prefix(500))), .text(d.id)])
            }
            return gone
        }
        locked { size.rows -= gone.rows; size.bytes -= gone.bytes }
    }

    /// Rewrites the bodies of several events before their first delivery (clock correction), in one transaction.
    public func replaceBodies(_ bodies: [(id: String, body: [UInt8])]) throws(OutboxError) {
        guard !bodies.isEmpty else { return }
        try transaction { () throws(OutboxError) in
            for b in bodies { try run("UPDATE events SET body = ? WHERE id = ?", [.blob(b.body), .text(b.id)]) }
        }
        try locked { () throws(OutboxError) in try recount() } // rare (clock correction): a scan is fine
    }

    public func recordFailure(id: String, error message: String, nextAttemptAtMs: Int64) throws(OutboxError) {
        try settle(delivered: [], failed: [(id, message, nextAttemptAtMs)])
    }

    public func stats() throws(OutboxError) -> OutboxStats {
        try locked { () throws(OutboxError) -> OutboxStats in
            let depth = try queryInt("SELECT COUNT(*) FROM events WHERE dead = 0") ?? 0
            let oldest = try queryInt("SELECT MIN(created_at_ms) FROM events WHERE dead = 0")
            let last = try queryInt("SELECT value FROM meta WHERE key = 'last_sequence'") ?? 0
            let dead = try queryInt("SELECT COUNT(*) FROM events WHERE dead = 1") ?? 0
            let evicted = try queryInt("SELECT value FROM meta WHERE key = 'evicted'") ?? 0
            let bytes = size.bytes
            let mqtt = sinks.contains(.mqtt) ? try queryInt("SELECT COUNT(*) FROM events WHERE sinks & 2 != 0") ?? 0 : 0
            var stats = OutboxStats(depth: Int(depth), oldestCreatedAtMs: oldest, lastSequence: last, dead: Int(dead),
                                    evicted: Int(evicted), bytes: Int(bytes))
            stats.mqttPending = Int(mqtt)
            return stats
        }
    }

    /// The watchdog's question: does the database answer? One indexed row, no scan.
    public func ping() -> Bool {
        (try? locked { () throws(OutboxError) -> Int64? in try queryInt("SELECT value FROM meta WHERE key = 'last_sequence'") }) != nil
    }

    /// Moves dead letters back to the queue; returns how many.
    @discardableResult
    public func retryDead() throws(OutboxError) -> Int {
        try locked { () throws(OutboxError) -> Int in
            try run("UPDATE events SET dead = 0, attempts = 0 WHERE dead = 1", [])
            return Int(sqlite3_changes(db))
        }
    }

    /// Deletes dead letters (the only way an accepted event is ever dropped); returns how many.
    @discardableResult
    public func purgeDead() throws(OutboxError) -> Int {
        try locked { () throws(OutboxError) -> Int in
            try run("DELETE FROM events WHERE dead = 1", [])
            let n = Int(sqlite3_changes(db))
            try recount()
            return n
        }
    }

    // MARK: - SQLite plumbing

    enum Value { case int(Int64), text(String), blob([UInt8]), null }

    private func fail(_ rc: Int32, _ what: String) -> OutboxError {
        let detail = db.flatMap { sqlite3_errmsg($0) }.map { String(cString: $0) } ?? String(cString: sqlite3_errstr(rc))
        switch rc & 0xFF {
        case SQLITE_FULL:
            return OutboxError(code: .full, message: "\(what): the disk is full (\(path)). Free space on the state directory's filesystem; events are kept as long as possible.")
        case SQLITE_READONLY:
            return OutboxError(code: .readOnly, message: "\(what): \(path) is read-only (\(detail)). The state directory must be writable by the doorbell-agent user.")
        case SQLITE_CANTOPEN, SQLITE_PERM, SQLITE_AUTH:
            return OutboxError(code: .cannotOpen, message: "\(what): \(detail). The state directory must exist and be writable by the doorbell-agent user (StateDirectory= in the unit).")
        case SQLITE_CORRUPT, SQLITE_NOTADB:
            return OutboxError(code: .corrupt, message: "\(what): \(path) is damaged (\(detail)). Stop the agent and move the file aside; a new outbox is created at the next start.")
        default:
            return OutboxError(code: .io, message: "\(what): \(detail)")
        }
    }

    private func exec(_ sql: String) throws(OutboxError) {
        guard let db else { throw OutboxError(code: .closed, message: "the outbox is closed") }
        let rc = sqlite3_exec(db, sql, nil, nil, nil)
        guard rc == SQLITE_OK else { throw fail(rc, "outbox statement failed") }
    }

    private func prepare(_ sql: String) throws(OutboxError) -> OpaquePointer {
        guard let db else { throw OutboxError(code: .closed, message: "the outbox is closed") }
        if let s = statements[sql] { return s }
        var stmt: OpaquePointer?
        let rc = sqlite3_prepare_v2(db, sql, -1, &stmt, nil)
        guard rc == SQLITE_OK, let stmt else { throw fail(rc, "cannot prepare an outbox statement") }
        statements[sql] = stmt
        return stmt
    }

    private func run(_ sql: String, _ values: [Value]) throws(OutboxError) {
        let stmt = try prepare(sql)
        defer { sqlite3_reset(stmt); sqlite3_clear_bindings(stmt) }
        for (i, v) in values.enumerated() {
            let index = Int32(i + 1)
            switch v {
            case let .int(n): sqlite3_bind_int64(stmt, index, n)
            case let .text(s): sqlite3_bind_text(stmt, index, s, -1, doorbell_sqlite_transient())
            case let .blob(b): b.withUnsafeBytes { _ = sqlite3_bind_blob(stmt, index, $0.baseAddress, Int32($0.count), doorbell_sqlite_transient()) }
            case .null: sqlite3_bind_null(stmt, index)
            }
        }
        let rc = sqlite3_step(stmt)
        guard rc == SQLITE_DONE || rc == SQLITE_ROW else { throw fail(rc, "outbox write failed") }
    }

    private func queryInt(_ sql: String) throws(OutboxError) -> Int64? {
        let stmt = try prepare(sql)
        defer { sqlite3_reset(stmt) }
        let rc = sqlite3_step(stmt)
        guard rc == SQLITE_ROW else {
            if rc == SQLITE_DONE { return nil }
            throw fail(rc, "cannot read the outbox")
        }
        return sqlite3_column_type(stmt, 0) == SQLITE_NULL ? nil : sqlite3_column_int64(stmt, 0)
    }

    private func text(_ stmt: OpaquePointer, _ column: Int32) -> String? {
        guard let p = sqlite3_column_text(stmt, column) else { return nil }
        return String(cString: p)
    }
}
