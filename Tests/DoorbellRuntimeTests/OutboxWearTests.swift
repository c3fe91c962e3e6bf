import CSQLite
import DoorbellCore
@testable import DoorbellRuntime
import Foundation
import XCTest

/// What a press and a drain cost the storage (v8): real SQLite files in a temp directory.
final class OutboxWearTests: XCTestCase {
    /// Frames one commit adds to the WAL: emptied first (TRUNCATE), then measured by its size
    /// (a 32-byte header, then 24 bytes + one page per frame).
    func walFrames(_ path: String, pageSize: Int = 1024, after write: () throws -> Void) throws -> Int {
        var db: OpaquePointer?
        XCTAssertEqual(sqlite3_open(path, &db), SQLITE_OK)
        XCTAssertEqual(sqlite3_exec(db, "PRAGMA wal_checkpoint(TRUNCATE)", nil, nil, nil), SQLITE_OK)
        sqlite3_close(db)
        XCTAssertEqual(fileSize(path + "-wal"), 0, "the WAL was emptied")
        try write()
        return (fileSize(path + "-wal") - 32) / (24 + pageSize)
    }

    func fileSize(_ path: String) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.intValue ?? -1
    }

    /// A press (into an outbox with a backlog, so the trees have depth) writes the table's last
    /// leaf and the priority index: two pages, and two more when the leaf is full (the new leaf,
    /// its parent) — every other press at this body size. v7 also wrote the id's unique index
    /// (3 and 5), before v7 the sequence's own index and the meta row too (5 and 7). Mutation:
    /// on the v7 schema (`UNIQUE` on id) this sees 3 and 5.
    func testAPressWritesTwoPagesIntoTheWALAndFourWhenTheLeafIsFull() throws {
        let dir = try TempDir()
        let path = dir.file("outbox.sqlite")
        let outbox = try Outbox(path: path)
        let body = [UInt8](repeating: 0x61, count: 336)
        _ = try outbox.append((0..<500).map { i in OutboxNewEvent(id: "backlog-\(i)", type: "doorbell.pressed", createdAtMs: 0) { _ in body } },
                              bounds: nil, report: nil)
        var frames: [Int] = []
        for i in 0..<8 {
            frames.append(try walFrames(path) {
                _ = try outbox.append(id: "press-\(i)", type: "doorbell.pressed", createdAtMs: 1) { _ in body }
            })
        }
        XCTAssertEqual(frames.filter { $0 == 2 }.count, 4, "\(frames)")
        XCTAssertEqual(frames.filter { $0 == 4 }.count, 4, "\(frames)")
        XCTAssertEqual(try outbox.stats().lastSequence, 508)
        outbox.close()
    }

    /// A live press on an empty queue (the common case): stored in two pages, its acknowledgement
    /// — found by its sequence, removed, the meta row's last sequence and `delivered` counter
    /// kept — in three (the leaf, the priority index, the meta page). v7: 3 and 4.
    func testALivePressAndItsAcknowledgementWriteFivePages() throws {
        let dir = try TempDir()
        let path = dir.file("outbox.sqlite")
        let outbox = try Outbox(path: path)
        let body = [UInt8](repeating: 0x61, count: 336)
        var cycles: [[Int]] = []
        for i in 0..<6 {
            var entry: OutboxEntry?
            let press = try walFrames(path) { entry = try outbox.append(id: "live-\(i)", type: "doorbell.pressed", createdAtMs: 1) { _ in body } }
            let sequence = try XCTUnwrap(entry?.sequence)
            let ack = try walFrames(path) { try outbox.settle(delivered: [sequence]) }
            cycles.append([press, ack])
        }
        XCTAssertEqual(cycles, Array(repeating: [2, 3], count: 6))
        XCTAssertEqual(try outbox.stats().depth, 0)
        outbox.close()
    }

    /// Acknowledgements commit without an fsync of their own, at most
    /// `unsyncedAcknowledgementLimit` of them in a row; an append, a failure or a parking commits
    /// with one, which makes the acknowledgements before it durable too.
    func testAcknowledgementsGoUnsyncedAtMostUpToTheLimit() throws {
        let dir = try TempDir()
        let outbox = try Outbox(path: dir.file("outbox.sqlite"))
        let limit = Outbox.unsyncedAcknowledgementLimit
        _ = try outbox.append((0..<(limit + 40)).map { i in OutboxNewEvent(id: "e\(i)", type: "doorbell.pressed", createdAtMs: 0) { _ in [1] } },
                              bounds: nil, report: nil)
        XCTAssertEqual(outbox.unsyncedAcknowledgements, 0)
        var highest = 0
        for batch in 0..<((limit + 30) / 8) {
            try outbox.settle(deliveredIDs: (0..<8).map { "e\(batch * 8 + $0)" })
            highest = max(highest, outbox.unsyncedAcknowledgements)
            XCTAssertLessThan(outbox.unsyncedAcknowledgements, limit, "after window \(batch)")
        }
        XCTAssertGreaterThan(highest, 0, "acknowledgements did go without their own fsync")
        try outbox.settle(deliveredIDs: ["e\(limit + 35)"], failed: [("e\(limit + 36)", "HTTP 500", 0)])
        XCTAssertEqual(outbox.unsyncedAcknowledgements, 0, "a failure commits with an fsync")
        try outbox.settle(deliveredIDs: ["e\(limit + 37)"])
        _ = try outbox.append(id: "press", type: "doorbell.pressed", createdAtMs: 1) { _ in [1] }
        XCTAssertEqual(outbox.unsyncedAcknowledgements, 0, "an append commits with an fsync")
        XCTAssertEqual(try outbox.stats(), try outbox.countedStats())
        outbox.close()
    }

    /// The syncer's fsync of the WAL makes the acknowledgements committed before it durable:
    /// the count toward the next synced acknowledgement starts again (mutation: leaving the count
    /// as it was keeps 200 after the deferred append's fsync, and the 256th acknowledgement then
    /// fsyncs under the outbox's lock in the radio's way).
    func testAnFsyncOfTheWALCoversTheAcknowledgementsBeforeIt() throws {
        let dir = try TempDir()
        let outbox = try Outbox(path: dir.file("outbox.sqlite"))
        _ = try outbox.append((0..<200).map { i in OutboxNewEvent(id: "e\(i)", type: "doorbell.pressed", createdAtMs: 0) { _ in [1] } },
                              bounds: nil, report: nil)
        for batch in 0..<25 { try outbox.settle(deliveredIDs: (0..<8).map { "e\(batch * 8 + $0)" }) }
        XCTAssertEqual(outbox.unsyncedAcknowledgements, 200)
        _ = try outbox.append([OutboxNewEvent(id: "press", type: "doorbell.pressed", createdAtMs: 1) { _ in [1] }],
                              bounds: nil, report: nil, whileSyncing: {}) // deferred commit, then the WAL's fsync
        XCTAssertEqual(outbox.unsyncedAcknowledgements, 0)
        try outbox.settle(deliveredIDs: ["press"])
        XCTAssertEqual(outbox.unsyncedAcknowledgements, 1)
        XCTAssertEqual(try outbox.stats(), try outbox.countedStats())
        outbox.close()
    }

    /// A broker's acknowledgements keep their fsync: Home Assistant does not deduplicate by event
    /// id, so one lost to a power cut would publish (and ring) a press again.
    func testBrokerAcknowledgementsCommitWithAnFsync() throws {
        let dir = try TempDir()
        let outbox = try Outbox(path: dir.file("outbox.sqlite"), sinks: [.cloud, .mqtt])
        _ = try outbox.append((0..<16).map { i in OutboxNewEvent(id: "e\(i)", type: "doorbell.pressed", createdAtMs: 0) { _ in [1] } },
                              bounds: nil, report: nil)
        try outbox.settle(deliveredIDs: (0..<8).map { "e\($0)" })
        XCTAssertGreaterThan(outbox.unsyncedAcknowledgements, 0, "the cloud's acknowledgements go unsynced")
        try outbox.acknowledgeMQTT(ids: (0..<8).map { "e\($0)" })
        XCTAssertEqual(outbox.unsyncedAcknowledgements, 0, "a broker's acknowledgement commits with an fsync")
        try outbox.acknowledgeMQTT(ids: (8..<16).map { "e\($0)" })
        XCTAssertEqual(outbox.unsyncedAcknowledgements, 0)
        XCTAssertEqual(try outbox.stats(), try outbox.countedStats())
        outbox.close()
    }

    /// An outbox from before 1 KiB pages (4 KiB, created up to 2026-11-24: 19 KB per press) is
    /// rewritten with 1 KiB pages at the next start — WAL mode cannot change its page size, so
    /// through a rollback journal and VACUUM — keeping every row, and then writes a press in
    /// two or four 1 KiB pages like any (mutation: without `shrinkPages` the page size stays 4096).
    func testAnOutboxWith4KiBPagesIsRewrittenWith1KiBPagesWithoutLoss() throws {
        let dir = try TempDir()
        let path = dir.file("outbox.sqlite")
        let outbox = try Outbox(path: path, sinks: [.cloud, .mqtt])
        let body = [UInt8](repeating: 0x61, count: 336)
        _ = try outbox.append((0..<300).map { i in OutboxNewEvent(id: "e\(i)", type: i % 3 == 0 ? "beacon.entered" : "doorbell.pressed",
                                                                  createdAtMs: Int64(i)) { _ in body } }, bounds: nil, report: nil)
        try outbox.settle(deliveredIDs: (0..<40).map { "e\($0)" })
        outbox.close()
        var db: OpaquePointer?
        XCTAssertEqual(sqlite3_open(path, &db), SQLITE_OK)
        XCTAssertEqual(sqlite3_exec(db, "PRAGMA journal_mode=DELETE; PRAGMA page_size=4096; VACUUM; PRAGMA journal_mode=WAL;", nil, nil, nil), SQLITE_OK)
        XCTAssertEqual(rows(db, "PRAGMA page_size"), [["4096"]], "a v7 outbox with 4 KiB pages on disk")
        let allRows = "SELECT id, sequence, type, hex(body), sinks, priority FROM events ORDER BY sequence"
        let before = rows(db, allRows)
        let memory = rows(db, "SELECT * FROM meta ORDER BY key")
        sqlite3_close(db)

        let reopened = try Outbox(path: path, sinks: [.cloud, .mqtt])
        XCTAssertEqual(try reopened.stats(), try reopened.countedStats())
        XCTAssertEqual(try reopened.stats().lastSequence, 300)
        XCTAssertEqual(try reopened.pending(limit: 1000).count, 260)
        // VACUUM packs the leaves: the first press opens a new one (4 frames), the next fits (2).
        let frames = try (0..<2).map { i in try walFrames(path) { _ = try reopened.append(id: "press\(i)", type: "doorbell.pressed", createdAtMs: 1) { _ in body } } }
        XCTAssertEqual(frames, [4, 2])
        reopened.close()

        XCTAssertEqual(sqlite3_open(path, &db), SQLITE_OK)
        defer { sqlite3_close(db) }
        XCTAssertEqual(rows(db, "PRAGMA page_size"), [["1024"]])
        XCTAssertEqual(rows(db, "PRAGMA journal_mode"), [["wal"]])
        XCTAssertEqual(rows(db, "PRAGMA integrity_check"), [["ok"]])
        XCTAssertEqual(rows(db, allRows + " LIMIT \(before.count)"), before, "every row kept")
        XCTAssertEqual(rows(db, "SELECT * FROM meta ORDER BY key"), memory)
    }

    /// An outbox written by v6 (sequence in its own unique index, the last sequence in meta ahead
    /// of the table's last row) is re-keyed in place: every row and column kept, the sequence
    /// never goes back, and the next press gets the next one.
    func testAVersion6OutboxIsRekeyedBySequenceWithoutLoss() throws {
        let dir = try TempDir()
        let path = dir.file("outbox.sqlite")
        var db = writeOutboxFile(path, keys: "id TEXT PRIMARY KEY, sequence INTEGER NOT NULL UNIQUE",
                                 index: "(priority, sequence)", meta: (12, 30, 2), button: (7, 1234), then: """
            INSERT INTO events VALUES
                ('press', 3, 'doorbell.pressed', x'7b7d', 100, 2, 5000, 'HTTP 500', 0, 1, 0, NULL, NULL, 3),
                ('parked', 5, 'beacon.entered', x'7b2278227d', 200, 4, 0, 'HTTP 400', 1, 3, 0, NULL, NULL, 1),
                ('early', 7, 'doorbell.pressed', x'7b7d7b', 300, 0, 0, NULL, 0, 2, 1, 42, 'boot-a', 3);
            PRAGMA user_version = 6;
            """)
        let before = closed(db, Self.everyColumn)
        XCTAssertEqual(before.count, 3)

        let outbox = try Outbox(path: path, sinks: [.cloud, .mqtt])
        XCTAssertEqual(try outbox.stats().lastSequence, 12)
        XCTAssertEqual(try outbox.stats(), try outbox.countedStats())
        XCTAssertEqual(try outbox.buttonMemory()["AA:BB"], BTHomeButtonTracker.DeviceMemory(packetID: 7, counter: 1234))
        XCTAssertEqual(try outbox.append(id: "next", type: "doorbell.pressed", createdAtMs: 400) { _ in [1] }.sequence, 13)
        outbox.close()

        XCTAssertEqual(sqlite3_open(path, &db), SQLITE_OK)
        defer { sqlite3_close(db) }
        XCTAssertEqual(rows(db, Self.everyColumn + " LIMIT 3"), before, "every row and column kept")
        XCTAssertEqual(rows(db, "PRAGMA user_version"), [["7"]], "user_version stays 7: the previous release opens the file")
        XCTAssertEqual(rows(db, "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'events' ORDER BY name"),
                       [["events_priority"]], "the sequence is the key, the id has no index (v8)")
        XCTAssertEqual(rows(db, "SELECT value FROM meta WHERE key = 'delivered'"), [["30"]])
    }

    /// An outbox written by v7 (the sequence the key, the id in a UNIQUE constraint's automatic
    /// index, which cannot be dropped) is rebuilt without the id's index: every row and column,
    /// the meta counters and the button memory kept; the last sequence never goes back; rows are
    /// then settled and acknowledged by sequence (mutation: without the `hasIDIndex` check the
    /// file keeps `sqlite_autoindex_events_1`).
    func testAVersion7OutboxLosesItsIDIndexWithoutLoss() throws {
        let dir = try TempDir()
        let path = dir.file("outbox.sqlite")
        var db = writeOutboxFile(path, keys: "sequence INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE",
                                 index: "(priority)", meta: (20, 31, 4), button: (9, 77), then: """
            INSERT INTO events VALUES
                (3, 'press', 'doorbell.pressed', x'7b7d', 100, 2, 5000, 'HTTP 500', 0, 1, 0, NULL, NULL, 3),
                (5, 'parked', 'beacon.entered', x'7b2278227d', 200, 4, 0, 'HTTP 400', 1, 3, 0, NULL, NULL, 1),
                (7, 'early', 'doorbell.pressed', x'7b7d7b', 300, 0, 0, NULL, 0, 3, 1, 42, 'boot-a', 3);
            PRAGMA user_version = 7;
            """)
        let before = closed(db, Self.everyColumn)
        XCTAssertEqual(before.count, 3)

        let outbox = try Outbox(path: path, sinks: [.cloud, .mqtt])
        XCTAssertEqual(try outbox.stats().lastSequence, 20)
        XCTAssertEqual(try outbox.stats().evicted, 4)
        XCTAssertEqual(try outbox.stats(), try outbox.countedStats())
        XCTAssertEqual(try outbox.buttonMemory()["AA:BB"], BTHomeButtonTracker.DeviceMemory(packetID: 9, counter: 77))
        XCTAssertEqual(try outbox.pending(limit: 10).map(\.id), ["press", "early"])
        XCTAssertEqual(try outbox.pendingForMQTT(after: 0, limit: 10).map(\.sequence), [5, 7])
        outbox.close()

        XCTAssertEqual(sqlite3_open(path, &db), SQLITE_OK)
        XCTAssertEqual(rows(db, Self.everyColumn), before, "every row and column kept")
        XCTAssertEqual(rows(db, "PRAGMA user_version"), [["7"]], "user_version stays 7: the previous release opens the file")
        XCTAssertEqual(rows(db, "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'events' ORDER BY name"),
                       [["events_priority"]], "the id has no index")
        XCTAssertEqual(rows(db, "SELECT key, value FROM meta ORDER BY key"), [["delivered", "31"], ["evicted", "4"], ["last_sequence", "20"]])
        XCTAssertEqual(rows(db, "PRAGMA integrity_check"), [["ok"]])
        sqlite3_close(db)

        // Rows are found by sequence: settled, parked and acknowledged as before.
        let reopened = try Outbox(path: path, sinks: [.cloud, .mqtt])
        XCTAssertEqual(try reopened.append(id: "next", type: "doorbell.pressed", createdAtMs: 400) { _ in [1] }.sequence, 21)
        try reopened.settle(delivered: [3], dead: [(21, "HTTP 400")])
        try reopened.acknowledgeMQTT([5, 7])
        XCTAssertEqual(try reopened.pending(limit: 10).map(\.sequence), [7])
        XCTAssertEqual(try reopened.deadLetters(limit: 10).map(\.sequence), [5, 21])
        XCTAssertEqual(try reopened.stats(), try reopened.countedStats())
        XCTAssertEqual(try reopened.stats().lastSequence, 21)
        reopened.close()
    }

    /// After a RAUC fallback from a trial slot the previous release (outbox schema 7) opens the
    /// file this agent rebuilt: user_version is still 7 (schema 7 refuses a larger one, and the
    /// box would have no agent), and schema 7's own statements — a press inserted with its id and
    /// sequence, rows found by id — work on it; this agent then opens it again and goes on
    /// (mutation: the rebuild stamping user_version 8 fails the first assertion).
    func testThePreviousReleaseUsesTheFileAfterAFallback() throws {
        let dir = try TempDir()
        let path = dir.file("outbox.sqlite")
        let outbox = try Outbox(path: path, sinks: [.cloud])
        _ = try outbox.append(id: "first", type: "doorbell.pressed", createdAtMs: 100) { _ in [1] }
        _ = try outbox.append(id: "second", type: "doorbell.pressed", createdAtMs: 200) { _ in [2] }
        outbox.close()

        var db: OpaquePointer?
        XCTAssertEqual(sqlite3_open(path, &db), SQLITE_OK)
        XCTAssertEqual(rows(db, "PRAGMA user_version"), [["7"]], "an agent of schema 7 opens it")
        // Schema 7's statements (Outbox.swift and Outbox+Queue.swift as of a52d34e), as that release runs them.
        XCTAssertEqual(sqlite3_exec(db, """
            BEGIN IMMEDIATE;
            INSERT INTO events (id, sequence, type, body, created_at_ms, sinks, clock_pending, monotonic_us, boot_id, priority)
                SELECT 'third', 3, 'doorbell.pressed', x'33', 300, 1, 0, NULL, NULL, priority FROM events WHERE id = 'second';
            UPDATE events SET attempts = attempts + 1, last_error = 'HTTP 500', next_attempt_at_ms = 9 WHERE id = 'second';
            UPDATE meta SET value = MAX(value, COALESCE((SELECT MAX(sequence) FROM events), 0)) WHERE key = 'last_sequence';
            DELETE FROM events WHERE id = 'first' AND sinks = 1;
            UPDATE meta SET value = value + 1 WHERE key = 'delivered';
            COMMIT;
            """, nil, nil, nil), SQLITE_OK)
        sqlite3_close(db)

        let again = try Outbox(path: path, sinks: [.cloud])
        defer { again.close() }
        XCTAssertEqual(try again.pending(limit: 10).map(\.id), ["second", "third"])
        XCTAssertEqual(try again.stats(), try again.countedStats())
        XCTAssertEqual(try again.append(id: "fourth", type: "doorbell.pressed", createdAtMs: 400) { _ in [4] }.sequence, 4)
    }

    /// An outbox file as an older agent wrote it: the events table with `keys` (how its id and
    /// sequence were declared) and the priority index on `index`, the meta counters (last
    /// sequence, delivered, evicted) and one button's memory; then `then` (its rows, its version).
    func writeOutboxFile(_ path: String, keys: String, index: String, meta: (Int, Int, Int), button: (Int, Int), then: String) -> OpaquePointer? {
        var db: OpaquePointer?
        XCTAssertEqual(sqlite3_open(path, &db), SQLITE_OK)
        XCTAssertEqual(sqlite3_exec(db, """
            PRAGMA page_size = 1024;
            PRAGMA journal_mode = WAL;
            CREATE TABLE events (\(keys), type TEXT NOT NULL, body BLOB NOT NULL,
                created_at_ms INTEGER NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, next_attempt_at_ms INTEGER NOT NULL DEFAULT 0,
                last_error TEXT, dead INTEGER NOT NULL DEFAULT 0, sinks INTEGER NOT NULL DEFAULT 1,
                clock_pending INTEGER NOT NULL DEFAULT 0, monotonic_us INTEGER, boot_id TEXT, priority INTEGER NOT NULL DEFAULT 0);
            CREATE INDEX events_priority ON events \(index);
            CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
            INSERT INTO meta VALUES ('last_sequence', \(meta.0)), ('delivered', \(meta.1)), ('evicted', \(meta.2));
            CREATE TABLE button_memory (address TEXT PRIMARY KEY, packet_id INTEGER, counter INTEGER);
            INSERT INTO button_memory VALUES ('AA:BB', \(button.0), \(button.1));
            \(then)
            """, nil, nil, nil), SQLITE_OK)
        return db
    }

    static let everyColumn = "SELECT sequence, id, type, hex(body), created_at_ms, attempts, next_attempt_at_ms, last_error, dead, sinks, clock_pending, monotonic_us, boot_id, priority FROM events ORDER BY sequence"

    /// `sql`'s rows, then the connection closed (before the outbox opens the file).
    func closed(_ db: OpaquePointer?, _ sql: String) -> [[String]] {
        defer { sqlite3_close(db) }
        return rows(db, sql)
    }

    func rows(_ db: OpaquePointer?, _ sql: String) -> [[String]] {
        var stmt: OpaquePointer?
        guard sqlite3_prepare_v2(db, sql, -1, &stmt, nil) == SQLITE_OK else { return [["cannot prepare: " + String(cString: sqlite3_errmsg(db))]] }
        defer { sqlite3_finalize(stmt) }
        var out: [[String]] = []
        while sqlite3_step(stmt) == SQLITE_ROW {
            out.append((0..<sqlite3_column_count(stmt)).map { sqlite3_column_text(stmt, $0).map { String(cString: $0) } ?? "NULL" })
        }
        return out
    }
}
