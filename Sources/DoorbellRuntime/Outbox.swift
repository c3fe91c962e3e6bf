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
    /// Recorded before the wall clock was synchronized and not corrected yet: how it was recorded.
    public var clock: ClockStamp?
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
    /// An evicted report's body, so the next report can carry on what it explained (nil otherwise).
    public var reportBody: [UInt8]? = nil
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
    /// Set for an event recorded before the wall clock was synchronized (`AgentEvent.clockStamp`).
    public var clock: ClockStamp?
    public var makeBody: (Int64) -> [UInt8]
    public init(id: String, type: String, createdAtMs: Int64, clock: ClockStamp? = nil, makeBody: @escaping (Int64) -> [UInt8]) {
        self.id = id
        self.type = type
        self.createdAtMs = createdAtMs
        self.clock = clock
        self.makeBody = makeBody
    }
}

public struct OutboxBatchResult: Sendable {
    /// In the order given, with consecutive sequences.
    public let entries: [OutboxEntry]
    /// Events removed to stay within bounds (may include some of `entries`).
    public let evicted: [EvictedEvent]
    public let report: OutboxEntry?
    /// The commit's number (`Outbox.commitCount` once it committed).
    public internal(set) var commit: Int64 = 0
    /// The events are for the cloud's uplink (the outbox stores for that sink).
    public internal(set) var forCloud = false
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

/// What the outbox knows of its table without counting it: kept by every write, inside the
/// write's transaction (under the lock, restored if it rolls back), so bounds checks and status
/// never scan the table and a concurrent write can never overwrite another's update.
struct OutboxTally: Equatable {
    var rows: Int64 = 0
    var bytes: Int64 = 0
    /// Parked (dead letters).
    var dead: Int64 = 0
    /// Still to be acknowledged by the MQTT broker.
    var mqtt: Int64 = 0
}

public struct OutboxError: Error, Sendable, CustomStringConvertible, Equatable {
    public enum Code: Sendable, Equatable { case cannotOpen, corrupt, full, readOnly, io, schema, closed }
    public let code: Code
    public let message: String
    public var description: String { message }
    public static func == (a: OutboxError, b: OutboxError) -> Bool { a.code == b.code }
}

public final class Outbox: @unchecked Sendable {
    /// The file's `user_version`: the oldest agent schema that can use it. Layout v8 (rows found
    /// by sequence, the id without an index) keeps 7: an agent of schema 7 finds rows by id with
    /// a scan instead, but uses the file unchanged — so after a RAUC fallback from a trial slot
    /// whose agent rebuilt the table, the previous release still opens its outbox (it refuses a
    /// larger number: "newer than this agent understands"). A layout the previous release
    /// cannot use is the only reason to raise it.
    public static let schemaVersion: Int32 = 7
    public let path: String
    /// The sinks new events are stored for.
    public private(set) var sinks: OutboxSinks
    var db: OpaquePointer?
    // On the heap: a pthread object must not move, and `&` on a stored property promises no fixed address.
    let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    var statements: [String: OpaquePointer] = [:]
    /// Rows, body bytes, dead letters and rows for the broker (see `OutboxTally`).
    var tally = OutboxTally()
    /// Write transactions committed since open (under the lock).
    var commits: Int64 = 0
    /// How many write transactions have committed: a read made after asking sees all of them.
    public var commitCount: Int64 {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return commits
    }
    /// Acknowledgements committed without an fsync, ever, and how many of them an fsync has
    /// covered since (a synced commit, or the syncer's fsync of the WAL).
    var acknowledgementsCommitted = 0
    var acknowledgementsDurable = 0
    /// Acknowledgements committed since the last fsync (see `unsyncedAcknowledgementLimit`).
    var unsyncedAcknowledgements: Int { acknowledgementsCommitted - acknowledgementsDurable }
    /// Which events go first when a bound is reached (each row's `priority` column).
    let eviction = EvictionPolicy()
    /// Appends committed without their fsync, the fsync running, who waits for which (see
    /// GroupSync); under `mutex`. Every fsync's return is broadcast on `syncedCondition`.
    var group = GroupSync<SyncWaiter>()
    /// The ticket of each row (by sequence) whose append's fsync has not returned yet (few: the
    /// last moments' presses): an acknowledgement of it is handed over until that fsync returned.
    var unsyncedRows: [Int64: UInt64] = [:]
    let syncedCondition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    /// The syncer thread runs (`startSyncer`): it makes the fsyncs; without it, whoever waits for
    /// one makes it. Under `mutex`.
    var syncerRunning = false
    var syncerStopping = false
    /// Wakes the syncer when a commit waits for its fsync.
    let syncWake = WakeSignal()
    /// Flushes the write-ahead log (a descriptor of it) to the device: the real `fdatasync`, except
    /// in tests that hold an fsync open to look at what happens meanwhile. Returns 0 or an errno.
    let flushLog: @Sendable (Int32) -> Int32
    /// The WAL file's inode whose directory entry was synced (see `flushWriteAheadLog`).
    var syncedLogInode: ino_t = 0
    /// The syncer's own connection, for checkpoints (Outbox+Checkpoint.swift), and when to make
    /// them; under `mutex`. Nil without a syncer: SQLite checkpoints by itself.
    var checkpointer: OpaquePointer?
    var checkpoints = CheckpointPlan()

    /// `sinks`: the configured sinks (see `setSinks` for what a removed one means).
    public convenience init(path: String, sinks: OutboxSinks = .cloud) throws(OutboxError) {
        try self.init(path: path, sinks: sinks, flushLog: Outbox.fdatasyncFile)
    }

    /// `flushLog`: how the write-ahead log reaches the device (tests hold it open; see `flushLog`).
    init(path: String, sinks: OutboxSinks = .cloud, flushLog: @escaping @Sendable (Int32) -> Int32) throws(OutboxError) {
        self.path = path
        self.sinks = sinks
        self.flushLog = flushLog
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(syncedCondition, nil)
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
            // A new file takes it here; an older one is rewritten once (`shrinkPages`).
            try exec("PRAGMA page_size=\(Self.pageSize)")
            try exec("PRAGMA journal_mode=WAL")
            try exec("PRAGMA synchronous=FULL")
            try migrate()
            try skipSequencesSentAhead()
            shrinkPages()
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
        pthread_cond_destroy(syncedCondition)
        syncedCondition.deallocate()
    }

    public func close() {
        syncPending()
        locked {
            if db != nil, group.isIdle { dropSequenceReservation() }
            for (_, s) in statements { sqlite3_finalize(s) }
            statements = [:]
            // A syncer still running keeps its connection (it may be checkpointing).
            if !syncerRunning, let checkpointer { sqlite3_close(checkpointer) }
            if !syncerRunning { checkpointer = nil }
            if let db { sqlite3_close(db) }
            db = nil
        }
    }

    func locked<R>(_ body: () throws(OutboxError) -> R) throws(OutboxError) -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }

    /// `body` in one write transaction (one fsync at COMMIT), rolled back if it throws. `body`
    /// keeps `tally` up to date as it writes; a rollback restores it, all under the one lock.
    /// `acknowledgements`: a transaction that only removes acknowledged rows (their count) may
    /// commit without its own fsync — see `unsyncedAcknowledgementLimit`.
    /// `deferringSync`: COMMIT without its fsync, which the syncer (or the caller) makes outside
    /// the lock (Outbox+Sync.swift); `waiter` is told when it has returned.
    func transaction<R>(acknowledgements: Int = 0, deferringSync: Bool = false,
                        waiter: SyncWaiter? = nil, _ body: () throws(OutboxError) -> R) throws(OutboxError) -> R {
        try locked { () throws(OutboxError) -> R in
            let synced = !deferringSync
                && (acknowledgements == 0 || unsyncedAcknowledgements + acknowledgements >= Self.unsyncedAcknowledgementLimit)
            if !synced { try exec("PRAGMA synchronous=NORMAL") }
            defer { if !synced { try? exec("PRAGMA synchronous=FULL") } }
            try step("BEGIN IMMEDIATE")
            let before = tally
            do throws(OutboxError) {
                let result = try body()
                try step("COMMIT")
                commits += 1
                if deferringSync {
                    let ticket = group.commit(waiter)
                    if let batch = waiter?.result {
                        for e in batch.entries { unsyncedRows[e.sequence] = ticket }
                        if let r = batch.report { unsyncedRows[r.sequence] = ticket }
                    }
                } else {
                    // A synced commit makes every earlier frame of the WAL durable too.
                    if synced { acknowledgementsDurable = acknowledgementsCommitted } else { acknowledgementsCommitted += acknowledgements }
                }
                return result
            } catch {
                try? step("ROLLBACK")
                tally = before
                throw error
            }
        }
    }

    /// How many acknowledged events a power cut may send again. Removing a delivered row needs
    /// no fsync of its own: were its commit lost, the event would only be delivered again, and
    /// the receiver deduplicates by event id (at least once). Every append, failure, parking
    /// and every this-many acknowledgements still commit with an fsync, so a drain pays one per
    /// 256 events instead of one per window, and a press is as durable as before.
    static let unsyncedAcknowledgementLimit = 256

    func locked(_ body: () -> Void) {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        body()
    }

    func migrate() throws(OutboxError) {
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
        if version < 5 { try migrateClockStamps() }
        if version < 6 { try migratePriorities() }
        let idIndexed = try hasIDIndex()
        if version < 7 || idIndexed { try migrateWithoutIDIndex() }
    }

    /// Layout v7 or older: the id still in its constraint's automatic index (an agent of schema 7
    /// writing into a v8 file does not bring it back).
    func hasIDIndex() throws(OutboxError) -> Bool {
        try queryInt("SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND tbl_name = 'events' AND name LIKE 'sqlite_autoindex_events_%'") ?? 0 > 0
    }

    /// The page size new outboxes get (see init): an outbox created before it (4 KiB pages, up to
    /// 2026-11-24) wrote 19 KB per press instead of 10.
    static let pageSize: Int64 = 1024

    /// An outbox with larger pages is rewritten once with 1 KiB ones. WAL mode cannot change its
    /// page size, so: rollback journal, VACUUM (atomic: a power cut leaves the old file or the
    /// new one), WAL again. Best effort: it needs free space for a copy of the file and no other
    /// connection; if it cannot, the outbox keeps working with its pages and tries at the next
    /// start.
    func shrinkPages() {
        guard let size = try? queryInt("PRAGMA page_size"), size > Self.pageSize else { return }
        defer { try? exec("PRAGMA journal_mode=WAL") }
        guard (try? exec("PRAGMA journal_mode=DELETE")) != nil else { return }
        try? exec("PRAGMA page_size=\(Self.pageSize)")
        try? exec("VACUUM")
    }

    /// v7 and v8: a press written in as few pages as SQLite allows, the table rebuilt (in one
    /// transaction, every row copied as it is) — an index SQLite made for a constraint cannot be
    /// dropped. v7: the sequence is the row's key (the rowid), so no separate index on it; the
    /// last sequence is no longer written at every append (the next one is the larger of the
    /// meta row and the table's last key), only where rows leave (`keepLastSequence`). v8: rows
    /// are found by their sequence, never by id, so the id has no index (v7 kept its `UNIQUE`).
    /// An append touches the table's last leaf and the priority index: two pages in the WAL
    /// (five until v7, three in v7), an acknowledgement three (four in v7). Ids stay unique
    /// without the constraint: each is a UUIDv7 the agent makes for the event as it stores it
    /// (`AgentIngest.store`; nothing from outside — control socket, MQTT, phone — brings an id of
    /// its own), 74 random bits per millisecond, and a row is stored once, by one append. v6 and
    /// v7 tables have the same columns, so one copy serves both. The file stays at user_version
    /// 7 (`schemaVersion`): the previous release can still use it after a fallback.
    func migrateWithoutIDIndex() throws(OutboxError) {
        try transaction { () throws(OutboxError) in
            let columns = "sequence, id, type, body, created_at_ms, attempts, next_attempt_at_ms, last_error, dead, sinks, clock_pending, monotonic_us, boot_id, priority"
            try exec("""
            CREATE TABLE events_v8 (
                sequence INTEGER PRIMARY KEY,
                id TEXT NOT NULL,
                type TEXT NOT NULL,
                body BLOB NOT NULL,
                created_at_ms INTEGER NOT NULL,
                attempts INTEGER NOT NULL DEFAULT 0,
                next_attempt_at_ms INTEGER NOT NULL DEFAULT 0,
                last_error TEXT,
                dead INTEGER NOT NULL DEFAULT 0,
                sinks INTEGER NOT NULL DEFAULT 1,
                clock_pending INTEGER NOT NULL DEFAULT 0,
                monotonic_us INTEGER,
                boot_id TEXT,
                priority INTEGER NOT NULL DEFAULT 0
            );
            INSERT INTO events_v8 (\(columns)) SELECT \(columns) FROM events ORDER BY sequence;
            \(Self.keepLastSequenceStatement);
            DROP TABLE events;
            ALTER TABLE events_v8 RENAME TO events;
            CREATE INDEX events_priority ON events (priority);
            PRAGMA user_version = 7;
            """)
        }
    }

    /// The next sequence comes after both the meta row and the table's last key (v7).
    static let lastSequenceQuery = """
        SELECT MAX((SELECT value FROM meta WHERE key = 'last_sequence'), COALESCE((SELECT MAX(sequence) FROM events), 0))
        """

    /// Before rows leave: the meta row remembers the last sequence, so it never goes back when
    /// the newest rows are the ones deleted.
    func keepLastSequence() throws(OutboxError) {
        try run(Self.keepLastSequenceStatement, [])
    }

    static let keepLastSequenceStatement = "UPDATE meta SET value = MAX(value, COALESCE((SELECT MAX(sequence) FROM events), 0)) WHERE key = 'last_sequence'"

    /// v6: each row's eviction tier in a column with an index on (priority, sequence), so the
    /// next victim is the index's first entry (no scan, no sort), and the newest presses its last.
    func migratePriorities() throws(OutboxError) {
        try transaction { () throws(OutboxError) in
            try exec("ALTER TABLE events ADD COLUMN priority INTEGER NOT NULL DEFAULT 0")
            var types: [String] = []
            let stmt = try prepare("SELECT DISTINCT type FROM events")
            defer { sqlite3_reset(stmt) }
            while true {
                let rc = sqlite3_step(stmt)
                if rc == SQLITE_DONE { break }
                guard rc == SQLITE_ROW else { throw fail(rc, "cannot read the outbox") }
                types.append(text(stmt, 0) ?? "")
            }
            for t in types { try run("UPDATE events SET priority = ? WHERE type = ?", [.int(Int64(eviction.tier(ofType: t))), .text(t)]) }
            try exec("CREATE INDEX IF NOT EXISTS events_priority ON events (priority, sequence)")
            try exec("PRAGMA user_version = 6")
        }
    }

    /// v5: an event recorded before the wall clock was synchronized keeps how it was recorded
    /// (monotonic time, boot) in columns, so correcting it later needs no parse of its body.
    /// Rows stored before read it from their bodies, once, here.
    func migrateClockStamps() throws(OutboxError) {
        try transaction { () throws(OutboxError) in
            try exec("""
            ALTER TABLE events ADD COLUMN clock_pending INTEGER NOT NULL DEFAULT 0;
            ALTER TABLE events ADD COLUMN monotonic_us INTEGER;
            ALTER TABLE events ADD COLUMN boot_id TEXT;
            """)
            var pending: [(id: String, stamp: ClockStamp)] = []
            let stmt = try prepare("SELECT id, body FROM events")
            defer { sqlite3_reset(stmt) }
            while true {
                let rc = sqlite3_step(stmt)
                if rc == SQLITE_DONE { break }
                guard rc == SQLITE_ROW else { throw fail(rc, "cannot read the outbox") }
                let body = blob(stmt, 1)
                guard ClockCorrection.needsCorrection(body) else { continue }
                // A body that is not JSON is sent as it is, as before.
                pending.append((text(stmt, 0) ?? "", ClockCorrection.stamp(of: body) ?? ClockStamp(monotonicMicros: nil, bootID: nil)))
            }
            for p in pending {
                try run("UPDATE events SET clock_pending = 1, monotonic_us = ?, boot_id = ? WHERE id = ?",
                        [p.stamp.monotonicMicros.map(Value.int) ?? .null, p.stamp.bootID.map(Value.text) ?? .null, .text(p.id)])
            }
            try exec("PRAGMA user_version = 5")
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

    func write(memory: [String: BTHomeButtonTracker.DeviceMemory]) throws(OutboxError) {
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

    /// The whole table counted: at open and after rare bulk writes (a sink removed, a purge).
    func recount() throws(OutboxError) {
        tally = try countedTally()
    }

    func countedTally() throws(OutboxError) -> OutboxTally {
        let row = try queryInts("""
            SELECT COUNT(*), COALESCE(SUM(LENGTH(body)), 0), COUNT(*) FILTER (WHERE dead = 1), COUNT(*) FILTER (WHERE sinks & 2 != 0) FROM events
            """) ?? []
        func column(_ i: Int) -> Int64 { i < row.count ? row[i] ?? 0 : 0 }
        return OutboxTally(rows: column(0), bytes: column(1), dead: column(2), mqtt: column(3))
    }

    /// Deletes one row (by its key) if `condition` holds for it (inside a transaction, which
    /// keeps the tally); returns whether it went.
    @discardableResult
    func delete(sequence: Int64, where condition: String) throws(OutboxError) -> Bool {
        let stmt = try prepare("DELETE FROM events WHERE sequence = ? AND \(condition) RETURNING LENGTH(body), dead, sinks & 2 != 0")
        defer { sqlite3_reset(stmt); sqlite3_clear_bindings(stmt) }
        sqlite3_bind_int64(stmt, 1, sequence)
        let rc = sqlite3_step(stmt)
        if rc == SQLITE_ROW {
            tally.rows -= 1
            tally.bytes -= sqlite3_column_int64(stmt, 0)
            tally.dead -= sqlite3_column_int64(stmt, 1) != 0 ? 1 : 0
            tally.mqtt -= sqlite3_column_int64(stmt, 2) != 0 ? 1 : 0
            _ = sqlite3_step(stmt) // finish the statement so the delete is complete
            return true
        }
        guard rc == SQLITE_DONE else { throw fail(rc, "outbox write failed") }
        return false
    }

    func restrict(to new: OutboxSinks) throws(OutboxError) {
        guard !new.contains(.mqtt) else { return }
        // Called with the lock held (setSinks) or before anyone has the outbox (init).
        try exec("""
            BEGIN IMMEDIATE;
            \(Self.keepLastSequenceStatement);
            UPDATE events SET sinks = sinks & ~2 WHERE sinks & 2 != 0; DELETE FROM events WHERE sinks = 0;
            COMMIT;
            """)
    }
}
