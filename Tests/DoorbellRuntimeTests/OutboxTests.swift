import CSQLite
import DoorbellCore
import DoorbellRuntime
import Foundation
import XCTest

/// The outbox on a real SQLite file in a temp directory.
final class OutboxTests: XCTestCase {
    func body(_ s: Int64) -> [UInt8] { Array("{\"sequence\":\(s),\"bytes\":\"\u{0}\u{1}é\"}".utf8) + [0, 255] }

    func testAppendPendingDeliverKeepsOrderAndExactBytes() throws {
        let dir = try TempDir()
        let outbox = try Outbox(path: dir.file("outbox.sqlite"))
        var ids: [String] = []
        for i in 0..<5 {
            let e = try outbox.append(id: "e\(i)", type: "doorbell.pressed", createdAtMs: 1_000 + Int64(i)) { self.body($0) }
            XCTAssertEqual(e.sequence, Int64(i + 1))
            ids.append(e.id)
        }
        let pending = try outbox.pending(limit: 10)
        XCTAssertEqual(pending.map(\.id), ids)
        XCTAssertEqual(pending.map(\.body), (1...5).map { body(Int64($0)) })
        try outbox.markDelivered(id: "e0")
        try outbox.recordFailure(id: "e1", error: "HTTP 503", nextAttemptAtMs: 99)
        let after = try outbox.pending(limit: 2)
        XCTAssertEqual(after.map(\.id), ["e1", "e2"])
        XCTAssertEqual(after.first?.attempts, 1)
        XCTAssertEqual(after.first?.lastError, "HTTP 503")
        let stats = try outbox.stats()
        XCTAssertEqual([stats.depth, Int(stats.oldestCreatedAtMs ?? 0), Int(stats.lastSequence), stats.dead, stats.evicted], [4, 1_001, 5, 0, 0])
    }

    /// Each sink takes the event on its own; the row leaves when the last one has it, and a
    /// sink that leaves the config no longer holds rows back.
    func testAnEventIsKeptUntilEverySinkHasIt() throws {
        let dir = try TempDir()
        let path = dir.file("outbox.sqlite")
        var outbox: Outbox? = try Outbox(path: path, sinks: [.cloud, .mqtt])
        for i in 0..<3 { _ = try outbox?.append(id: "e\(i)", type: "doorbell.pressed", createdAtMs: Int64(i)) { self.body($0) } }
        try outbox?.markDelivered(id: "e0") // the cloud's 2xx
        XCTAssertEqual(try outbox?.pending(limit: 10).map(\.id), ["e1", "e2"])
        XCTAssertEqual(try outbox?.pendingForMQTT(after: 0, limit: 10).map(\.id), ["e0", "e1", "e2"])
        XCTAssertEqual(try outbox?.pendingForMQTT(after: 1, limit: 10).map(\.id), ["e1", "e2"], "after the cursor only")
        try outbox?.acknowledgeMQTT(ids: ["e0", "e1"]) // the broker's PUBACKs
        XCTAssertEqual(try outbox?.pendingForMQTT(after: 0, limit: 10).map(\.id), ["e2"])
        XCTAssertEqual(try outbox?.pending(limit: 10).map(\.id), ["e1", "e2"], "the cloud still waits for e1")
        var stats = try XCTUnwrap(outbox?.stats())
        XCTAssertEqual([stats.depth, stats.mqttPending], [2, 1])
        // A refusal by the cloud does not keep the event from the broker.
        try outbox?.settle(deliveredIDs: [], dead: [("e2", "HTTP 400")])
        XCTAssertEqual(try outbox?.pendingForMQTT(after: 0, limit: 10).map(\.id), ["e2"])
        // Across a restart nothing is forgotten.
        outbox?.close()
        outbox = try Outbox(path: path, sinks: [.cloud, .mqtt])
        XCTAssertEqual(try outbox?.pending(limit: 10).map(\.id), ["e1"])
        // MQTT removed from the config: e1 still waits for the cloud; nothing waits for MQTT.
        try outbox?.setSinks(.cloud)
        stats = try XCTUnwrap(outbox?.stats())
        XCTAssertEqual(stats.mqttPending, 0)
        try outbox?.markDelivered(id: "e1")
        XCTAssertEqual(try outbox?.stats().depth, 0)
        // Later events are for the cloud only.
        _ = try outbox?.append(id: "e3", type: "doorbell.pressed", createdAtMs: 3) { self.body($0) }
        XCTAssertEqual(try outbox?.pendingForMQTT(after: 0, limit: 10).map(\.id), [])
        // [uplink] commented out, only [mqtt]: the cloud's backlog is kept for it, never dropped.
        try outbox?.setSinks(.mqtt)
        XCTAssertEqual(try outbox?.pending(limit: 10).map(\.id), ["e3"])
        XCTAssertEqual(try outbox?.deadLetters(limit: 10).map(\.id), ["e2"])
    }

    /// The outbox keeps its size (rows, bytes) without scanning the table on each append; after
    /// any mix of appends under bounds, deliveries, broker acknowledgements, refusals and purges,
    /// what it believes equals what a fresh count of the file says.
    func testTheKeptSizeMatchesTheFileAfterAnyMixOfWrites() throws {
        for seed in 1...20 {
            var rng = SeededGenerator(seed: UInt64(seed))
            let dir = try TempDir()
            let path = dir.file("outbox.sqlite")
            var outbox: Outbox? = try Outbox(path: path, sinks: [.cloud, .mqtt])
            let bounds = OutboxBounds(maxEvents: 25, maxBytes: 4_000)
            var next = 0
            for _ in 0..<60 {
                switch Int.random(in: 0..<6, using: &rng) {
                case 0, 1:
                    let n = Int.random(in: 1...5, using: &rng)
                    let batch = (0..<n).map { _ -> OutboxNewEvent in
                        next += 1
                        let size = Int.random(in: 10...400, using: &rng)
                        return OutboxNewEvent(id: "e\(next)", type: next % 3 == 0 ? "beacon.entered" : "doorbell.pressed", createdAtMs: Int64(next)) { _ in
                            [UInt8](repeating: 0x61, count: size)
                        }
                    }
                    _ = try outbox?.append(batch, bounds: bounds) { seq, victims in ("r\(seq)", "gateway.evicted", Array("\(victims.count)".utf8)) }
                case 2:
                    let ids = try outbox?.pending(limit: 3).map(\.id) ?? []
                    try outbox?.settle(deliveredIDs: ids)
                case 3:
                    let ids = try outbox?.pendingForMQTT(after: 0, limit: 4).map(\.id) ?? []
                    try outbox?.acknowledgeMQTT(ids: ids)
                case 4:
                    if let id = try outbox?.pending(limit: 1).first?.id { try outbox?.settle(deliveredIDs: [], dead: [(id, "HTTP 400")]) }
                default:
                    if Bool.random(using: &rng) { try outbox?.purgeDead() }
                }
            }
            let believed = try XCTUnwrap(outbox?.stats().bytes)
            outbox?.close()
            outbox = try Outbox(path: path, sinks: [.cloud, .mqtt])
            XCTAssertEqual(believed, try outbox?.stats().bytes, "seed \(seed)")
        }
    }

    func testSequenceNeverGoesBackAcrossDeletesAndReopen() throws {
        let dir = try TempDir()
        let path = dir.file("outbox.sqlite")
        do {
            let outbox = try Outbox(path: path)
            for i in 0..<3 { _ = try outbox.append(id: "a\(i)", type: "t", createdAtMs: 0) { _ in [] } }
            for i in 0..<3 { try outbox.markDelivered(id: "a\(i)") }
            outbox.close()
        }
        let reopened = try Outbox(path: path)
        XCTAssertEqual(try reopened.stats().depth, 0)
        let next = try reopened.append(id: "b", type: "t", createdAtMs: 0) { _ in [] }
        XCTAssertEqual(next.sequence, 4)
    }

    func testUndeliveredEventsSurviveReopen() throws {
        let dir = try TempDir()
        let path = dir.file("outbox.sqlite")
        let first = try Outbox(path: path)
        _ = try first.append(id: "keep", type: "doorbell.pressed", createdAtMs: 5) { self.body($0) }
        first.close()
        let second = try Outbox(path: path)
        XCTAssertEqual(try second.pending(limit: 5).map(\.id), ["keep"])
    }

    /// An insert SQLite refuses leaves no row and does not consume its sequence. (Until v8 the
    /// refusal here was a duplicate id; ids have no UNIQUE since — each is a UUIDv7 the agent
    /// makes as it stores the event, and nothing brings an id from outside.)
    func testARefusedInsertDoesNotConsumeTheSequence() throws {
        let dir = try TempDir()
        let path = dir.file("outbox.sqlite")
        let outbox = try Outbox(path: path)
        _ = try outbox.append(id: "first", type: "t", createdAtMs: 0) { _ in [] }
        refuseBadInserts(path)
        XCTAssertThrowsError(try outbox.append(id: "bad", type: "t", createdAtMs: 0) { _ in [] })
        XCTAssertEqual(try outbox.append(id: "other", type: "t", createdAtMs: 0) { _ in [] }.sequence, 2)
        XCTAssertEqual(try outbox.pending(limit: 5).map(\.id), ["first", "other"])
    }

    /// Makes SQLite refuse the insert of a row with id "bad" (a failure in the middle of a batch),
    /// through a connection of its own.
    func refuseBadInserts(_ path: String) {
        var db: OpaquePointer?
        XCTAssertEqual(sqlite3_open(path, &db), SQLITE_OK)
        XCTAssertEqual(sqlite3_exec(db, "CREATE TRIGGER refuse_bad BEFORE INSERT ON events WHEN NEW.id = 'bad' BEGIN SELECT RAISE(ABORT, 'refused'); END",
                                    nil, nil, nil), SQLITE_OK)
        sqlite3_close(db)
    }

    func testGroupCommitStoresABurstTogetherOrNotAtAll() throws {
        let dir = try TempDir()
        let path = dir.file("outbox.sqlite")
        let outbox = try Outbox(path: path)
        _ = try outbox.append(id: "before", type: "t", createdAtMs: 0) { self.body($0) }
        let burst = (0..<5).map { i in OutboxNewEvent(id: "b\(i)", type: "beacon.entered", createdAtMs: 10) { self.body($0) } }
        let result = try outbox.append(burst, bounds: nil, report: nil)
        XCTAssertEqual(result.entries.map(\.sequence), [2, 3, 4, 5, 6])
        XCTAssertEqual(result.entries.map(\.body), (2...6).map { body(Int64($0)) })
        // One transaction: a bad event in the middle (one SQLite refuses: a trigger here, as ids
        // have no UNIQUE since v8) leaves none of the burst.
        refuseBadInserts(path)
        let bad = [OutboxNewEvent(id: "c0", type: "t", createdAtMs: 0) { _ in [] },
                   OutboxNewEvent(id: "bad", type: "t", createdAtMs: 0) { _ in [] },
                   OutboxNewEvent(id: "c2", type: "t", createdAtMs: 0) { _ in [] }]
        XCTAssertThrowsError(try outbox.append(bad, bounds: nil, report: nil))
        outbox.close()
        let reopened = try Outbox(path: path)
        XCTAssertEqual(try reopened.pending(limit: 20).map(\.id), ["before", "b0", "b1", "b2", "b3", "b4"])
        XCTAssertEqual(try reopened.stats().lastSequence, 6)
    }

    func testABurstOverTheBoundsEvictsOnceWithOneReport() throws {
        let dir = try TempDir()
        let outbox = try Outbox(path: dir.file("outbox.sqlite"))
        let burst = (0..<6).map { i in OutboxNewEvent(id: "p\(i)", type: "beacon.entered", createdAtMs: Int64(i)) { _ in [1] } }
        var reports = 0
        let result = try outbox.append(burst, bounds: OutboxBounds(maxEvents: 4, maxBytes: 1 << 20)) { sequence, evicted in
            reports += 1
            return ("r", "gateway.evicted", Array("\(sequence):\(evicted.map(\.sequence))".utf8))
        }
        XCTAssertEqual(reports, 1)
        XCTAssertEqual(result.evicted.map(\.sequence), [1, 2])
        XCTAssertEqual(result.report?.sequence, 7)
        XCTAssertEqual(try outbox.pending(limit: 10).map(\.id), ["p2", "p3", "p4", "p5", "r"])
    }

    func testSettleWritesAWindowsOutcomesTogether() throws {
        let dir = try TempDir()
        let path = dir.file("outbox.sqlite")
        let outbox = try Outbox(path: path)
        for i in 0..<5 { _ = try outbox.append(id: "w\(i)", type: "doorbell.pressed", createdAtMs: Int64(i)) { self.body($0) } }
        try outbox.replaceBodies(ids: [(id: "w3", body: [7, 7]), (id: "w4", body: [8])])
        try outbox.settle(deliveredIDs: ["w0", "w2", "no-such-id"], failed: [(id: "w1", error: "HTTP 500", nextAttemptAtMs: 42)],
                          dead: [(id: "w3", error: "receiver answered HTTP 400")])
        outbox.close()
        let reopened = try Outbox(path: path)
        let pending = try reopened.pending(limit: 10)
        XCTAssertEqual(pending.map(\.id), ["w1", "w4"])
        XCTAssertEqual(pending.map(\.attempts), [1, 0])
        XCTAssertEqual(pending.first?.lastError, "HTTP 500")
        XCTAssertEqual(pending.last?.body, [8])
        let dead = try reopened.deadLetters(limit: 10)
        XCTAssertEqual(dead.map(\.id), ["w3"])
        XCTAssertEqual(dead.first?.body, [7, 7])
        let stats = try reopened.stats()
        XCTAssertEqual([stats.depth, stats.dead, Int(stats.lastSequence)], [2, 1, 5])
    }

    func pageSize(_ path: String) -> Int32 {
        var db: OpaquePointer?
        guard sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, nil) == SQLITE_OK else { return -1 }
        defer { sqlite3_close(db) }
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(db, "PRAGMA page_size", -1, &statement, nil) == SQLITE_OK else { return -1 }
        defer { sqlite3_finalize(statement) }
        return sqlite3_step(statement) == SQLITE_ROW ? sqlite3_column_int(statement, 0) : -1
    }

    func testANewOutboxUsesSmallPagesAndAnOldOneIsRewrittenWithThem() throws {
        let dir = try TempDir()
        let fresh = dir.file("new.sqlite")
        let outbox = try Outbox(path: fresh)
        _ = try outbox.append(id: "a", type: "t", createdAtMs: 0) { self.body($0) }
        outbox.close()
        XCTAssertEqual(pageSize(fresh), 1024)
        // A file made before the change (4 KiB pages) opens, migrates, is rewritten with 1 KiB
        // pages (Outbox.shrinkPages) and works; what else it held stays.
        let old = dir.file("old.sqlite")
        var db: OpaquePointer?
        XCTAssertEqual(sqlite3_open_v2(old, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nil), SQLITE_OK)
        XCTAssertEqual(sqlite3_exec(db, "PRAGMA page_size=4096; CREATE TABLE unrelated (x INTEGER)", nil, nil, nil), SQLITE_OK)
        sqlite3_close(db)
        let reopened = try Outbox(path: old)
        _ = try reopened.append(id: "b", type: "t", createdAtMs: 0) { self.body($0) }
        XCTAssertEqual(try reopened.pending(limit: 5).map(\.id), ["b"])
        reopened.close()
        XCTAssertEqual(pageSize(old), 1024)
        XCTAssertEqual(sqlite3_open_v2(old, &db, SQLITE_OPEN_READONLY, nil), SQLITE_OK)
        XCTAssertEqual(sqlite3_exec(db, "SELECT x FROM unrelated", nil, nil, nil), SQLITE_OK)
        sqlite3_close(db)
    }

    func testGarbageFileIsReportedAsCorruptWithWhatToDo() throws {
        let dir = try TempDir()
        let path = try dir.write("outbox.sqlite", String(repeating: "this is not a database ", count: 200))
        XCTAssertThrowsError(try Outbox(path: path)) { error in
            guard let e = error as? OutboxError else { return XCTFail("\(error)") }
            XCTAssertEqual(e.code, .corrupt)
            XCTAssertTrue(e.message.contains("move the file aside"), e.message)
        }
    }

    /// A button's packet id and counter are stored in the transaction of the press they produced:
    /// both or neither, across a reopen; alone when a re-sent packet only moves the counter.
    func testButtonMemoryIsStoredWithItsPressOrNotAtAll() throws {
        let dir = try TempDir()
        let path = dir.file("outbox.sqlite")
        let outbox = try Outbox(path: path)
        typealias Memory = BTHomeButtonTracker.DeviceMemory
        _ = try outbox.append([OutboxNewEvent(id: "p1", type: "doorbell.pressed", createdAtMs: 0) { self.body($0) }],
                              memory: ["C0:11:22:33:44:02": Memory(packetID: 7, counter: nil)], bounds: nil, report: nil)
        // A failing batch (an insert SQLite refuses) stores neither its events nor its packet ids.
        refuseBadInserts(path)
        XCTAssertThrowsError(try outbox.append([OutboxNewEvent(id: "bad", type: "doorbell.pressed", createdAtMs: 0) { self.body($0) }],
                                               memory: ["C0:11:22:33:44:02": Memory(packetID: 8, counter: nil)], bounds: nil, report: nil))
        XCTAssertEqual(try outbox.buttonMemory()["C0:11:22:33:44:02"], Memory(packetID: 7, counter: nil))
        // Packet ids alone (no event): stored, and the sequence does not move.
        let empty = try outbox.append([], memory: ["C0:11:22:33:44:03": Memory(packetID: 2, counter: 4_000_000_000)], bounds: nil, report: nil)
        XCTAssertTrue(empty.entries.isEmpty)
        outbox.close()
        let reopened = try Outbox(path: path)
        XCTAssertEqual(try reopened.buttonMemory(), ["C0:11:22:33:44:02": Memory(packetID: 7, counter: nil),
                                                     "C0:11:22:33:44:03": Memory(packetID: 2, counter: 4_000_000_000)])
        XCTAssertEqual(try reopened.stats().lastSequence, 1)
        XCTAssertEqual(try reopened.pending(limit: 10).map(\.id), ["p1"])
    }

    /// An outbox written by the agent before v4 keeps its rows and gains the table.
    func testAVersion3OutboxIsUpgradedInPlace() throws {
        let dir = try TempDir()
        let path = dir.file("outbox.sqlite")
        XCTAssertEqual(writeLegacyOutbox(path, version: 3, rows: """
            INSERT INTO events (id, sequence, type, body, created_at_ms) VALUES ('old', 5, 'doorbell.pressed', x'7b7d', 0);
            """), SQLITE_OK)
        let outbox = try Outbox(path: path)
        XCTAssertEqual(try outbox.pending(limit: 10).map(\.id), ["old"])
        XCTAssertEqual(try outbox.buttonMemory(), [:])
        _ = try outbox.append([], memory: ["a": BTHomeButtonTracker.DeviceMemory(packetID: 1, counter: 2)], bounds: nil, report: nil)
        XCTAssertEqual(try outbox.buttonMemory()["a"]?.counter, 2)
    }

    func testNewerSchemaIsRefused() throws {
        let dir = try TempDir()
        let path = dir.file("outbox.sqlite")
        var db: OpaquePointer?
        XCTAssertEqual(sqlite3_open(path, &db), SQLITE_OK)
        sqlite3_exec(db, "PRAGMA user_version = 9", nil, nil, nil)
        sqlite3_close(db)
        XCTAssertThrowsError(try Outbox(path: path)) { error in
            XCTAssertEqual((error as? OutboxError)?.code, .schema)
            XCTAssertTrue("\(error)".contains("schema version 9"), "\(error)")
        }
    }

    func testMissingDirectoryIsCannotOpen() {
        XCTAssertThrowsError(try Outbox(path: "/nonexistent-dir-\(UUID().uuidString)/outbox.sqlite")) { error in
            XCTAssertEqual((error as? OutboxError)?.code, .cannotOpen)
            XCTAssertTrue("\(error)".contains("writable by the doorbell-agent user"), "\(error)")
        }
    }

    func testConcurrentAppendsGetDistinctSequences() throws {
        let dir = try TempDir()
        let outbox = try Outbox(path: dir.file("outbox.sqlite"))
        let sequences = Locked<[Int64]>([])
        DispatchQueue.concurrentPerform(iterations: 4) { worker in
            for i in 0..<25 {
                if let e = try? outbox.append(id: "w\(worker)-\(i)", type: "t", createdAtMs: 0, makeBody: { _ in [] }) {
                    sequences.withLock { $0.append(e.sequence) }
                }
            }
        }
        XCTAssertEqual(sequences.snapshot.sorted(), Array(1...100))
    }
}

/// Bounds and priority eviction, with a report in the same transaction.
final class OutboxEvictionTests: XCTestCase {
    /// Names the victims, and carries on what an evicted report named.
    func report(_ sequence: Int64, _ evicted: [EvictedEvent]) -> (id: String, type: String, body: [UInt8]) {
        let carried = evicted.compactMap { $0.reportBody.map { String(decoding: $0, as: UTF8.self) } }
        return ("r\(sequence)", "gateway.evicted", Array((evicted.map { String($0.sequence) } + carried).joined(separator: ",").utf8))
    }

    func testPresenceGoesBeforeAnyPressOldestFirstAndEveryGapIsReported() throws {
        let dir = try TempDir()
        let outbox = try Outbox(path: dir.file("outbox.sqlite"))
        let bounds = OutboxBounds(maxEvents: 5, maxBytes: 1 << 20)
        let types = ["doorbell.pressed", "beacon.entered", "doorbell.pressed", "beacon.exited", "doorbell.pressed"]
        for (i, t) in types.enumerated() {
            let r = try outbox.append(id: "e\(i + 1)", type: t, createdAtMs: 0, bounds: bounds, report: report) { _ in [1] }
            XCTAssertTrue(r.evicted.isEmpty)
        }
        // The sixth event is over the bound: the oldest presence event (sequence 2) goes.
        let sixth = try outbox.append(id: "e6", type: "doorbell.pressed", createdAtMs: 0, bounds: bounds, report: report) { _ in [1] }
        XCTAssertEqual(sixth.evicted.map(\.sequence), [2])
        XCTAssertEqual(sixth.report?.sequence, 7)
        XCTAssertEqual(sixth.report.map { String(decoding: $0.body, as: UTF8.self) }, "2")
        let seventh = try outbox.append(id: "e8", type: "doorbell.pressed", createdAtMs: 0, bounds: bounds, report: report) { _ in [1] }
        XCTAssertEqual(seventh.evicted.map(\.type), ["beacon.exited", "gateway.evicted"], "presence first, then the report (it is carried on), presses last")
        let remaining = try outbox.pending(limit: 20)
        XCTAssertTrue(remaining.contains { $0.type == "gateway.evicted" })
        XCTAssertFalse(remaining.contains { $0.type.hasPrefix("beacon.") })
        // Every sequence is either still here or named in a report.
        var explained = Set(remaining.map(\.sequence))
        for r in remaining where r.type == "gateway.evicted" {
            for s in String(decoding: r.body, as: UTF8.self).split(separator: ",") { explained.insert(Int64(s) ?? -1) }
        }
        let last = try outbox.stats().lastSequence
        XCTAssertEqual(explained, Set(1...last))
        XCTAssertEqual(try outbox.stats().evicted, 3)
    }

    func testByteBoundEvictsToo() throws {
        let dir = try TempDir()
        let outbox = try Outbox(path: dir.file("outbox.sqlite"))
        let bounds = OutboxBounds(maxEvents: 1_000, maxBytes: 2_500)
        var evicted = 0
        for i in 0..<10 {
            evicted += try outbox.append(id: "e\(i)", type: "doorbell.pressed", createdAtMs: 0, bounds: bounds, report: nil) { _ in
                [UInt8](repeating: 0x41, count: 1_000)
            }.evicted.count
        }
        XCTAssertEqual(evicted, 8)
        XCTAssertLessThanOrEqual(try outbox.stats().bytes, 2_500)
    }
}

/// A reproducible generator for randomized tests (SplitMix64): a failing seed replays exactly.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
