import CSQLite
import DoorbellCore
@testable import DoorbellRuntime
import Foundation
import XCTest

/// Checkpoints of the outbox's write-ahead log made by the syncer, off the outbox's lock
/// (Outbox+Checkpoint.swift), on real SQLite files.
final class OutboxCheckpointTests: XCTestCase {
    func fileSize(_ path: String) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.intValue ?? -1
    }

    static func press(_ id: String) -> OutboxNewEvent {
        OutboxNewEvent(id: id, type: "doorbell.pressed", createdAtMs: 1) { sequence in
            Array("{\"id\":\"\(id)\",\"sequence\":\(sequence),\"type\":\"doorbell.pressed\",\"device\":\"front-door\"}".utf8)
        }
    }

    /// 3,000 presses, each acknowledged as the uplink does (the press committed without its
    /// fsync, the 2xx handed over or applied): with SQLite's own checkpoint off, the syncer's
    /// keep the log under its limit, every press is stored and every row left (mutation: no
    /// `checkpointIfDue` in the syncer's loop — the log grows to ≈ 50 MB).
    func testTheLogStaysBoundedOverThousandsOfPressesAndAcknowledgements() throws {
        let dir = try TempDir()
        let path = dir.file("outbox.sqlite")
        let outbox = try Outbox(path: path)
        try outbox.startSyncer(.unmonitored("outbox-sync", periodMicros: 1_000_000))
        let plan = CheckpointPlan()
        // The limit, one retry step and one drain's worth of commits, in 1 KiB pages and headers.
        let bound = 32 + (plan.limitFrames + plan.retryFrames + 100) * (1024 + 24)
        let stored = Counter()
        var largest = 0
        for i in 0..<3_000 {
            let id = "press-\(i)"
            _ = try outbox.append([Self.press(id)], bounds: nil, report: nil) { _, error in
                if error == nil { stored.add() }
            }
            try outbox.settle(deliveredIDs: [id])
            largest = max(largest, fileSize(path + "-wal"))
        }
        outbox.stopSyncer()
        XCTAssertEqual(stored.value, 3_000, "every press stored")
        XCTAssertEqual(try outbox.stats().depth, 0, "every acknowledgement applied")
        XCTAssertLessThanOrEqual(largest, bound, "the log stayed under \(bound) bytes")
        XCTAssertGreaterThan(largest, 0)
        outbox.close()
    }

    /// A reader in another process (agentctl) keeps an old snapshot: no checkpoint can copy past
    /// it, the log grows past the limit, and the TRUNCATE that bounds it fails (busy) while the
    /// reader stays — tried again only after more frames, never in a loop — and empties the log
    /// once the reader is gone (mutation: no `checkpointIfDue` in the syncer's loop — the file
    /// stays at 13 MB).
    func testAReaderHoldsTheLogAndTheTruncateEmptiesItOnceItIsGone() throws {
        let dir = try TempDir()
        let path = dir.file("outbox.sqlite")
        let outbox = try Outbox(path: path)
        try outbox.startSyncer(.unmonitored("outbox-sync", periodMicros: 1_000_000))
        _ = try outbox.append([Self.press("first")], bounds: nil, report: nil, whileSyncing: {})
        var reader: OpaquePointer?
        XCTAssertEqual(sqlite3_open(path, &reader), SQLITE_OK)
        XCTAssertEqual(sqlite3_exec(reader, "BEGIN; SELECT COUNT(*) FROM events;", nil, nil, nil), SQLITE_OK)
        let limitBytes = CheckpointPlan().limitFrames * (1024 + 24)
        var i = 0
        while fileSize(path + "-wal") < limitBytes + 300 * (1024 + 24) && i < 5_000 {
            _ = try outbox.append([Self.press("held-\(i)")], bounds: nil, report: nil, whileSyncing: {})
            try outbox.settle(deliveredIDs: ["held-\(i)"])
            i += 1
        }
        XCTAssertGreaterThan(fileSize(path + "-wal"), limitBytes, "the reader kept the log from starting over")
        XCTAssertEqual(sqlite3_exec(reader, "COMMIT", nil, nil, nil), SQLITE_OK)
        sqlite3_close(reader)
        var emptied = false
        for j in 0..<600 where !emptied {
            _ = try outbox.append([Self.press("after-\(j)")], bounds: nil, report: nil, whileSyncing: {})
            try outbox.settle(deliveredIDs: ["after-\(j)"])
            emptied = fileSize(path + "-wal") < limitBytes / 4
        }
        XCTAssertTrue(emptied, "the log was cut back once the reader was gone: \(fileSize(path + "-wal")) bytes")
        outbox.stopSyncer()
        XCTAssertEqual(try outbox.stats().depth, 1, "only the first press is left")
        outbox.close()
    }

    final class Counter: @unchecked Sendable {
        private let lock = NSLock()
        private var n = 0
        func add() { lock.lock(); n += 1; lock.unlock() }
        var value: Int { lock.lock(); defer { lock.unlock() }; return n }
    }
}
