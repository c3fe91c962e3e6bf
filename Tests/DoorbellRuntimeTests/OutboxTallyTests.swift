import CSQLite
import DoorbellCore
@testable import DoorbellRuntime
import Foundation
import XCTest

/// The outbox's kept counts under real threads, and eviction by one policy served by an index.
/// Real SQLite files in a temp directory.
final class OutboxTallyTests: XCTestCase {
    /// Appends (under bounds, so evictions and reports happen), cloud settles (delivered,
    /// retried, parked), broker acknowledgements, retries of dead letters and stats, from
    /// several threads at once: afterwards what the outbox believes (rows, bytes, dead, for the
    /// broker) equals what a count of the file says. Randomized per seed; a failing seed replays
    /// its choices (the interleaving is the threads').
    func testTheTallyMatchesTheFileAfterConcurrentAppendsSettlesAndAcknowledgements() throws {
        for seed in 1...6 {
            let dir = try TempDir()
            let outbox = try Outbox(path: dir.file("outbox.sqlite"), sinks: [.cloud, .mqtt])
            let bounds = OutboxBounds(maxEvents: 40, maxBytes: 12_000)
            let failures = Locked<[String]>([])
            let types = ["doorbell.pressed", "beacon.entered", "phone.notification", "door.answered"]
            DispatchQueue.concurrentPerform(iterations: 6) { worker in
                var rng = SeededGenerator(seed: UInt64(seed * 100 + worker))
                for step in 0..<50 {
                    do {
                        switch (worker + step) % 3 == 0 ? 0 : Int.random(in: 1...5, using: &rng) {
                        case 0, 1:
                            let batch = (0..<Int.random(in: 1...3, using: &rng)).map { i -> OutboxNewEvent in
                                let size = Int.random(in: 10...600, using: &rng)
                                return OutboxNewEvent(id: "w\(worker)-\(step)-\(i)", type: types[Int.random(in: 0..<types.count, using: &rng)],
                                                      createdAtMs: Int64(step)) { _ in [UInt8](repeating: 0x61, count: size) }
                            }
                            _ = try outbox.append(batch, bounds: bounds) { seq, victims in
                                ("r\(seq)", "gateway.evicted", Array("\(victims.count)".utf8))
                            }
                        case 2:
                            let ids = try outbox.pending(limit: 4).map(\.id)
                            try outbox.settle(deliveredIDs: Array(ids.prefix(2)), failed: ids.dropFirst(2).map { ($0, "HTTP 500", 0) })
                        case 3:
                            try outbox.acknowledgeMQTT(try outbox.pendingForMQTT(after: 0, limit: 3).map(\.sequence))
                        case 4:
                            if let id = try outbox.pending(limit: 1).first?.id { try outbox.settle(deliveredIDs: [], dead: [(id, "HTTP 400")]) }
                        default:
                            if step % 10 == 0 { try outbox.retryDead() } else { _ = try outbox.stats() }
                        }
                    } catch {
                        failures.withLock { $0.append("\(error)") }
                    }
                }
            }
            XCTAssertEqual(failures.snapshot, [], "seed \(seed)")
            XCTAssertEqual(try outbox.stats(), try outbox.countedStats(), "seed \(seed)")
        }
    }

    /// The query plan of a statement, one line per step.
    func plan(_ path: String, _ sql: String) -> [String] {
        var db: OpaquePointer?
        guard sqlite3_open(path, &db) == SQLITE_OK else { return ["cannot open"] }
        defer { sqlite3_close(db) }
        var stmt: OpaquePointer?
        guard sqlite3_prepare_v2(db, "EXPLAIN QUERY PLAN " + sql, -1, &stmt, nil) == SQLITE_OK else {
            return ["cannot prepare: " + String(cString: sqlite3_errmsg(db))]
        }
        defer { sqlite3_finalize(stmt) }
        var out: [String] = []
        while sqlite3_step(stmt) == SQLITE_ROW { out.append(sqlite3_column_text(stmt, 3).map { String(cString: $0) } ?? "") }
        return out
    }

    /// No step reads the events table without an index (the sequence is the table's own key
    /// since v7: a search by it, or its largest, is one descent), and nothing is sorted.
    func assertIndexed(_ lines: [String], _ what: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertFalse(lines.isEmpty, what, file: file, line: line)
        for l in lines where l.contains("events") {
            let indexed = (l.contains("USING") && (l.contains("INDEX") || l.contains("INTEGER PRIMARY KEY")))
                || l.trimmingCharacters(in: .whitespaces).hasSuffix("SEARCH events")
            XCTAssertTrue(indexed, "\(what) scans the table: \(lines)", file: file, line: line)
        }
        XCTAssertFalse(lines.contains { $0.contains("TEMP B-TREE") }, "\(what) sorts: \(lines)", file: file, line: line)
    }

    /// At the bound during a long outage every append evicts: the victim is the first entry of an
    /// index, and status ticks read the kept tally, not the table.
    func testTheVictimAndTheStatusComeFromIndexesWithoutAScanOrASort() throws {
        let dir = try TempDir()
        let path = dir.file("outbox.sqlite")
        let outbox = try Outbox(path: path)
        for i in 0..<200 { _ = try outbox.append(id: "e\(i)", type: i % 2 == 0 ? "beacon.entered" : "doorbell.pressed", createdAtMs: 0) { _ in [1] } }
        outbox.close()
        var db: OpaquePointer?
        XCTAssertEqual(sqlite3_open(path, &db), SQLITE_OK)
        sqlite3_exec(db, "ANALYZE", nil, nil, nil)
        sqlite3_close(db)
        assertIndexed(plan(path, Outbox.victimQuery), "the victim query")
        assertIndexed(plan(path, Outbox.statsQuery), "the status query")
        assertIndexed(plan(path, Outbox.newestPressesQuery), "the newest presses query")
    }

    /// A long outage at the bound with nothing but presses: each append evicts and adds a report.
    /// Reports rank below presses, so the bound holds and the presses stay (kept before reports,
    /// the outbox would fill with reports and evict each new press on arrival), and every missing
    /// sequence is still named by the one report left: each report carries on the one it evicted.
    func testALongOutageAtTheBoundKeepsTheBoundThePressesAndEveryExplanation() throws {
        let dir = try TempDir()
        let outbox = try Outbox(path: dir.file("outbox.sqlite"))
        let bounds = OutboxBounds(maxEvents: 10, maxBytes: 1 << 20)
        for i in 0..<60 {
            _ = try outbox.append(id: "e\(i)", type: "doorbell.pressed", createdAtMs: 0, bounds: bounds) { seq, victims in
                let carried = victims.compactMap { $0.reportBody.map { String(decoding: $0, as: UTF8.self) } }
                return ("r\(seq)", "gateway.evicted", Array((victims.map { String($0.sequence) } + carried).joined(separator: ",").utf8))
            } makeBody: { _ in [1] }
            XCTAssertLessThanOrEqual(try outbox.stats().depth, bounds.maxEvents + 1, "after append \(i)")
        }
        let rows = try outbox.pending(limit: 100)
        XCTAssertEqual(rows.filter { $0.type == "doorbell.pressed" }.count, bounds.maxEvents, "\(rows.map(\.type))")
        XCTAssertTrue(rows.contains { $0.id == "e59" }, "the newest press is kept")
        var explained = Set(rows.map(\.sequence))
        for r in rows where r.type == "gateway.evicted" {
            for s in String(decoding: r.body, as: UTF8.self).split(separator: ",") { explained.insert(Int64(s) ?? -1) }
        }
        XCTAssertEqual(explained, Set(1...(try outbox.stats().lastSequence)))
        XCTAssertEqual(try outbox.stats(), try outbox.countedStats())
    }

    /// An outbox written before v6 gains the priority column (filled by the policy from each
    /// row's type) and its index; eviction then follows the policy for the old rows too.
    func testAVersion5OutboxGainsItsPrioritiesAndIndex() throws {
        let dir = try TempDir()
        let path = dir.file("outbox.sqlite")
        var db: OpaquePointer?
        XCTAssertEqual(sqlite3_open(path, &db), SQLITE_OK)
        XCTAssertEqual(sqlite3_exec(db, """
            CREATE TABLE events (id TEXT PRIMARY KEY, sequence INTEGER NOT NULL UNIQUE, type TEXT NOT NULL, body BLOB NOT NULL,
                created_at_ms INTEGER NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, next_attempt_at_ms INTEGER NOT NULL DEFAULT 0,
                last_error TEXT, dead INTEGER NOT NULL DEFAULT 0, sinks INTEGER NOT NULL DEFAULT 1,
                clock_pending INTEGER NOT NULL DEFAULT 0, monotonic_us INTEGER, boot_id TEXT);
            CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
            INSERT INTO meta VALUES ('last_sequence', 4), ('delivered', 0), ('evicted', 0);
            CREATE TABLE button_memory (address TEXT PRIMARY KEY, packet_id INTEGER, counter INTEGER);
            INSERT INTO events (id, sequence, type, body, created_at_ms) VALUES
                ('report', 1, 'gateway.evicted', x'7b7d', 0), ('press', 2, 'doorbell.pressed', x'7b7d', 0),
                ('seen', 3, 'beacon.entered', x'7b7d', 0), ('phone', 4, 'phone.notification', x'7b7d', 0);
            PRAGMA user_version = 5;
            """, nil, nil, nil), SQLITE_OK)
        sqlite3_close(db)
        let outbox = try Outbox(path: path)
        outbox.close()
        XCTAssertEqual(sqlite3_open(path, &db), SQLITE_OK)
        var stmt: OpaquePointer?
        XCTAssertEqual(sqlite3_prepare_v2(db, "SELECT id, priority FROM events ORDER BY sequence", -1, &stmt, nil), SQLITE_OK)
        var priorities: [String: Int64] = [:]
        while sqlite3_step(stmt) == SQLITE_ROW { priorities[String(cString: sqlite3_column_text(stmt, 0))] = sqlite3_column_int64(stmt, 1) }
        sqlite3_finalize(stmt)
        sqlite3_close(db)
        let policy = EvictionPolicy()
        XCTAssertEqual(priorities, ["report": Int64(policy.tier(ofType: "gateway.evicted")), "press": Int64(policy.tier(ofType: "doorbell.pressed")),
                                    "seen": Int64(policy.tier(ofType: "beacon.entered")), "phone": Int64(policy.tier(ofType: "phone.notification"))])
        assertIndexed(plan(path, Outbox.victimQuery), "the victim query after the migration")
        let reopened = try Outbox(path: path)
        let result = try reopened.append([OutboxNewEvent(id: "new", type: "doorbell.pressed", createdAtMs: 1) { _ in [1] }],
                                         bounds: OutboxBounds(maxEvents: 2, maxBytes: 1 << 20), report: nil)
        XCTAssertEqual(result.evicted.map(\.id), ["phone", "seen", "report"], "telemetry, presence, then the report; presses last")
    }

    /// Events held in memory while storage is full are trimmed by the same policy: telemetry,
    /// presence, the gateway's reports, presses last, the oldest first within a tier.
    func testHeldInMemoryTrimsByTheOutboxPolicy() {
        func event(_ type: EventType) -> AgentEvent {
            AgentEvent(type: type, device: DeviceRef(id: "d", name: "d", radio: "none"), occurredAtMicros: 0, clockSynced: true)
        }
        var c = AgentCounters()
        c.spilled = [event(.gatewayEvicted), event(.doorbellPressed), event(.beaconEntered), event(.phoneNotification), event(.beaconExited)]
        var dropped: [EventType] = []
        while let d = Agent.trimSpill(&c, bound: 1) { dropped.append(d.type) }
        XCTAssertEqual(dropped, [.phoneNotification, .beaconEntered, .beaconExited, .gatewayEvicted])
        XCTAssertEqual(c.spilled.map(\.type), [.doorbellPressed])
        XCTAssertEqual(c.evicted, 4)
    }
}
