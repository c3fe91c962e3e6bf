import CSQLite
import DoorbellCore
@testable import DoorbellRuntime
import Foundation
import XCTest

/// A press sent while its fsync runs (Outbox+Sync.swift), on real SQLite files: the fsync is the
/// real fdatasync, held open by a gate so the test can look at what happens meanwhile.
final class OutboxSyncTests: XCTestCase {
    /// Holds every flush of the WAL until `release()`; records the order of what happened.
    final class Gate: @unchecked Sendable {
        let entered = DispatchSemaphore(value: 0)
        let open = DispatchSemaphore(value: 0)
        private let lock = NSLock()
        private var events: [String] = []
        var held = true
        func record(_ e: String) { lock.lock(); events.append(e); lock.unlock() }
        var order: [String] { lock.lock(); defer { lock.unlock() }; return events }
        func flush(_ fd: Int32) -> Int32 {
            guard held else { return fdatasync(fd) == 0 ? 0 : errno }
            entered.signal()
            _ = open.wait(timeout: .now() + 20)
            let rc = fdatasync(fd) == 0 ? 0 : errno
            record("fsync returned")
            return rc
        }
    }

    static func press(_ id: String) -> OutboxNewEvent {
        OutboxNewEvent(id: id, type: "doorbell.pressed", createdAtMs: 1) { sequence in Array("{\"sequence\":\(sequence)}".utf8) }
    }

    /// The uplink is woken and can read the press before its fsync returns; its acknowledgement
    /// is handed over at once and applied only once the fsync returned — meanwhile the row stays
    /// in the table and the queue does not offer it again (mutations: flushing under the outbox
    /// lock hangs the read; applying the acknowledgement at once empties the table during the
    /// fsync; not skipping held rows in `due` offers "press" again).
    func testThePressIsReadableDuringItsFsyncAndItsAcknowledgementWaitsForIt() throws {
        let dir = try TempDir()
        let gate = Gate()
        let outbox = try Outbox(path: dir.file("outbox.sqlite"), flushLog: { gate.flush($0) })
        gate.held = false
        _ = try outbox.append([Self.press("before")], bounds: nil, report: nil, whileSyncing: {}) // creates the WAL
        gate.held = true

        let appended = DispatchSemaphore(value: 0)
        let woken = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            _ = try? outbox.append([Self.press("press")], bounds: nil, report: nil, whileSyncing: { woken.signal() })
            gate.record("stored")
            appended.signal()
        }
        XCTAssertEqual(woken.wait(timeout: .now() + 20), .success, "the uplink was woken")
        XCTAssertEqual(gate.entered.wait(timeout: .now() + 20), .success, "the fsync started")

        // The uplink's read while the fsync is held: it sees the press (with the outbox lock free).
        let read = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var seen: [String] = []
        Thread.detachNewThread {
            seen = ((try? outbox.due(nowWallMs: 10, limit: 10)) ?? []).map(\.id)
            read.signal()
        }
        XCTAssertEqual(read.wait(timeout: .now() + 20), .success, "the outbox answers during the fsync")
        XCTAssertEqual(seen, ["before", "press"])

        // Its 2xx came back: the uplink does not wait for the fsync; the acknowledgement does.
        let settled = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            try? outbox.settle(deliveredIDs: ["press"])
            settled.signal()
        }
        XCTAssertEqual(settled.wait(timeout: .now() + 20), .success, "the uplink goes on during the fsync")
        XCTAssertEqual(try outbox.pending(limit: 10).map(\.id), ["before", "press"], "not applied before its fsync")
        XCTAssertEqual(try outbox.due(nowWallMs: 10, limit: 10).map(\.id), ["before"], "not offered again meanwhile")
        XCTAssertEqual(try outbox.newestPresses(limit: 10).map(\.id), ["before"])
        XCTAssertEqual(gate.order, [], "nothing is stored while the fsync runs")
        gate.open.signal()
        XCTAssertEqual(appended.wait(timeout: .now() + 20), .success)
        XCTAssertEqual(gate.order, ["fsync returned", "stored"])
        XCTAssertEqual(try outbox.pending(limit: 10).map(\.id), ["before"], "applied by whoever made the fsync")
        XCTAssertEqual(outbox.unsyncedAppends, 0)
        XCTAssertEqual(try outbox.stats(), try outbox.countedStats())
        outbox.close()
    }

    /// With the syncer thread, an append returns at COMMIT: the next presses commit (and could be
    /// sent) while the last one's fsync runs, one later fsync covers all of them, each counts as
    /// stored only once its own fsync returned, and their acknowledgements, handed over, wait for
    /// it (mutations: the append waiting for its fsync, as before the syncer, times the second
    /// append out; settling the fsync's target when it returns instead of when it starts reports
    /// "b stored" after the first fsync; applying acknowledgements at once empties the table).
    func testTheSyncerLetsTheNextPressesCommitDuringAnFsyncAndOneFsyncCoversThem() throws {
        let dir = try TempDir()
        let gate = Gate()
        gate.held = false
        nonisolated(unsafe) var flushes = 0
        let outbox = try Outbox(path: dir.file("outbox.sqlite"), flushLog: { fd in flushes += 1; return gate.flush(fd) })
        _ = try outbox.append([Self.press("first")], bounds: nil, report: nil, whileSyncing: {}) // the reservation, the WAL
        try outbox.startSyncer(.unmonitored("outbox-sync", periodMicros: 1_000_000))
        gate.held = true
        flushes = 0
        func append(_ id: String) -> DispatchSemaphore {
            let returned = DispatchSemaphore(value: 0)
            Thread.detachNewThread {
                _ = try? outbox.append([Self.press(id)], bounds: nil, report: nil) { _, error in gate.record(error == nil ? "\(id) stored" : "\(id) failed") }
                returned.signal()
            }
            return returned
        }
        XCTAssertEqual(append("a").wait(timeout: .now() + 20), .success, "a returned at COMMIT")
        XCTAssertEqual(gate.entered.wait(timeout: .now() + 20), .success, "the syncer's fsync for a started")
        XCTAssertEqual(append("b").wait(timeout: .now() + 20), .success, "b committed while a's fsync runs")
        XCTAssertEqual(append("c").wait(timeout: .now() + 20), .success, "c too")
        XCTAssertEqual(try outbox.due(nowWallMs: 10, limit: 10).map(\.id), ["first", "a", "b", "c"], "all readable for the uplink")
        try outbox.settle(deliveredIDs: ["a", "b", "c"]) // returns at once: handed over
        XCTAssertEqual(try outbox.pending(limit: 10).map(\.id), ["first", "a", "b", "c"], "none applied before its fsync")
        XCTAssertEqual(try outbox.due(nowWallMs: 10, limit: 10).map(\.id), ["first"], "none offered again")
        XCTAssertEqual(gate.order, [], "nothing stored while the fsync runs")
        gate.held = false
        gate.open.signal()
        outbox.stopSyncer() // a clean stop applies what is owed
        XCTAssertEqual(Array(gate.order.prefix(2)), ["fsync returned", "a stored"], "\(gate.order)")
        XCTAssertEqual(Set(gate.order), ["fsync returned", "a stored", "b stored", "c stored"])
        XCTAssertLessThan(gate.order.firstIndex(of: "a stored") ?? 99, gate.order.firstIndex(of: "b stored") ?? -1)
        XCTAssertEqual(flushes, 2, "one fsync for a, one for b and c together")
        XCTAssertEqual(outbox.unsyncedAppends, 0)
        XCTAssertEqual(try outbox.pending(limit: 10).map(\.id), ["first"])
        outbox.close()
    }

    /// An outbox whose syncer runs: "first" stored (the reservation, the WAL), then "a"
    /// committed with its fsync held by `gate` ("a stored" recorded when it returns).
    func outboxWithHeldFsync(_ dir: TempDir, _ gate: Gate) throws -> Outbox {
        gate.held = false
        let outbox = try Outbox(path: dir.file("outbox.sqlite"), flushLog: { gate.flush($0) })
        _ = try outbox.append([Self.press("first")], bounds: nil, report: nil, whileSyncing: {})
        try outbox.startSyncer(.unmonitored("outbox-sync", periodMicros: 1_000_000))
        gate.held = true
        _ = try outbox.append([Self.press("a")], bounds: nil, report: nil) { _, _ in gate.record("a stored") }
        XCTAssertEqual(gate.entered.wait(timeout: .now() + 20), .success, "a's fsync started")
        return outbox
    }

    /// An acknowledgement waits for the fsync of the rows it removes, not for the fsync of
    /// presses committed since (mutation: waiting for every commit made so far holds the
    /// settle of "a" until b's fsync returns, past the test's bound).
    func testAnAcknowledgementWaitsOnlyForItsOwnRowsFsync() throws {
        let dir = try TempDir()
        let gate = Gate()
        let outbox = try outboxWithHeldFsync(dir, gate)
        _ = try outbox.append([Self.press("b")], bounds: nil, report: nil) { _, _ in gate.record("b stored") }
        gate.open.signal()
        XCTAssertEqual(gate.entered.wait(timeout: .now() + 20), .success, "b's fsync started (and is held)")
        let settled = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            try? outbox.settle(deliveredIDs: ["a"])
            settled.signal()
        }
        XCTAssertEqual(settled.wait(timeout: .now() + 10), .success, "a's acknowledgement applied while b's fsync runs")
        XCTAssertFalse(gate.order.contains("b stored"))
        gate.held = false
        gate.open.signal()
        outbox.stopSyncer()
        XCTAssertEqual(gate.order, ["fsync returned", "a stored", "fsync returned", "b stored"])
        XCTAssertEqual(try outbox.pending(limit: 10).map(\.id), ["first", "b"])
        outbox.close()
    }

    /// A clean stop makes the fsync still owed before the syncer ends (mutation: ending the
    /// syncer without draining leaves "a stored" unrecorded when stopSyncer returns).
    func testStoppingTheSyncerMakesTheFsyncStillOwed() throws {
        let dir = try TempDir()
        let gate = Gate()
        let outbox = try outboxWithHeldFsync(dir, gate)
        let stopped = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            outbox.stopSyncer()
            gate.record("stopped")
            stopped.signal()
        }
        usleep(100_000)
        gate.held = false
        gate.open.signal()
        XCTAssertEqual(stopped.wait(timeout: .now() + 20), .success)
        XCTAssertEqual(gate.order, ["fsync returned", "a stored", "stopped"])
        // Appends after the stop make their own fsync.
        _ = try outbox.append([Self.press("b")], bounds: nil, report: nil) { _, _ in gate.record("b stored") }
        XCTAssertEqual(gate.order.last, "b stored")
        XCTAssertEqual(outbox.unsyncedAppends, 0)
        outbox.close()
    }

    /// An append that waits for storage (agentctl inject, the spill retries) wakes the syncer:
    /// it does not wait for the syncer's heartbeat (mutation: waking it only from the append
    /// that does not wait left `agentctl inject` waiting for the syncer's 30 s beat, and this
    /// append for the 600 s one here).
    func testAnAppendWaitingForStorageWakesTheSyncer() throws {
        let dir = try TempDir()
        let outbox = try Outbox(path: dir.file("outbox.sqlite"))
        try outbox.startSyncer(.unmonitored("outbox-sync", periodMicros: 600_000_000))
        usleep(50_000) // the syncer sits in its wait
        let stored = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            for i in 0..<3 { _ = try? outbox.append([Self.press("p\(i)")], bounds: nil, report: nil, whileSyncing: {}) }
            stored.signal()
        }
        XCTAssertEqual(stored.wait(timeout: .now() + 20), .success, "stored without waiting for the syncer's heartbeat")
        outbox.stopSyncer()
        XCTAssertEqual(try outbox.pending(limit: 10).count, 3)
        outbox.close()
    }

    /// A failed fsync is an error that says what to do; the row stays (it is delivered) and an
    /// acknowledgement does not wait for ever (mutation: not counting the failed fsync as done
    /// hangs the settle until the test's bound).
    func testAFailedFsyncIsReportedAndReleasesTheAcknowledgements() throws {
        let dir = try TempDir()
        let outbox = try Outbox(path: dir.file("outbox.sqlite"), flushLog: { _ in EIO })
        XCTAssertThrowsError(try outbox.append([Self.press("press")], bounds: nil, report: nil, whileSyncing: {})) { error in
            XCTAssertEqual((error as? OutboxError)?.code, .io)
            XCTAssertTrue("\(error)".contains("Check the storage device"), "\(error)")
        }
        XCTAssertEqual(try outbox.pending(limit: 10).map(\.id), ["press"])
        let settled = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            try? outbox.settle(deliveredIDs: ["press"])
            settled.signal()
        }
        XCTAssertEqual(settled.wait(timeout: .now() + 20), .success, "the acknowledgement was applied")
        XCTAssertEqual(try outbox.pending(limit: 10).map(\.id), [])
        outbox.close()
    }

    /// The real path end to end: the deferred commit is durable once append returns — another
    /// connection (a restart) reads it, and the WAL holds one commit's frames like a synced one.
    func testADeferredFsyncStoresLikeASyncedCommit() throws {
        let dir = try TempDir()
        let path = dir.file("outbox.sqlite")
        var outbox: Outbox? = try Outbox(path: path)
        for i in 0..<20 { _ = try outbox?.append([Self.press("p\(i)")], bounds: nil, report: nil, whileSyncing: {}) }
        XCTAssertEqual(outbox?.unsyncedAppends, 0)
        outbox?.close()
        outbox = nil
        let reopened = try Outbox(path: path)
        XCTAssertEqual(try reopened.pending(limit: 50).map(\.sequence), Array(1...20))
        reopened.close()
    }

    /// Sequences sent ahead of their fsync are reserved on the device first: the press that moves
    /// the reservation is flushed before the uplink is woken, the next ones after (mutation:
    /// waking first puts "woken" first in the first press's order).
    func testTheReservationOfSequencesIsOnTheDeviceBeforeAnyIsSent() throws {
        let dir = try TempDir()
        let gate = Gate()
        gate.held = false
        let flushes = Gate()
        let outbox = try Outbox(path: dir.file("outbox.sqlite"), flushLog: { fd in flushes.record("flush"); return gate.flush(fd) })
        _ = try outbox.append([Self.press("a")], bounds: nil, report: nil, whileSyncing: { flushes.record("woken") })
        XCTAssertEqual(flushes.order, ["flush", "woken"])
        _ = try outbox.append([Self.press("b")], bounds: nil, report: nil, whileSyncing: { flushes.record("woken") })
        XCTAssertEqual(flushes.order, ["flush", "woken", "woken", "flush"])
        XCTAssertEqual(try outbox.queryInt("SELECT value FROM meta WHERE key = 'reserved_sequence'"), 1 + Outbox.sequenceReserve)
        outbox.close()
    }

    /// After an unclean reboot the next sequence comes after the reservation (a press sent and
    /// then lost with its row never has its sequence reused by another id); after a crash of the
    /// process alone, or a clean close, sequences go on without a gap (mutations: not skipping
    /// reuses sequence 4; skipping whatever the boot fails the same-boot case).
    func testAfterAnUncleanRebootSequencesGoOnAfterTheReservation() throws {
        let dir = try TempDir()
        let path = dir.file("outbox.sqlite")
        let outbox = try Outbox(path: path)
        for i in 0..<3 { _ = try outbox.append([Self.press("p\(i)")], bounds: nil, report: nil, whileSyncing: {}) }
        // The files as a crash leaves them (the outbox still open): same boot, then another one.
        func copy(_ name: String) throws -> String {
            let to = dir.file(name)
            for suffix in ["", "-wal"] { try FileManager.default.copyItem(atPath: path + suffix, toPath: to + suffix) }
            return to
        }
        let sameBoot = try copy("same-boot.sqlite")
        let otherBoot = try copy("other-boot.sqlite")
        outbox.close()

        func nextSequence(_ path: String) throws -> Int64 {
            let o = try Outbox(path: path)
            defer { o.close() }
            return try o.append(id: "next", type: "doorbell.pressed", createdAtMs: 2) { _ in [1] }.sequence
        }
        XCTAssertEqual(try nextSequence(path), 4, "a clean close: no gap")
        XCTAssertEqual(try nextSequence(sameBoot), 4, "a crash of the process: every row is there, no gap")
        // The reboot finds the reservation of another boot.
        var db: OpaquePointer?
        XCTAssertEqual(sqlite3_open(otherBoot, &db), SQLITE_OK)
        XCTAssertEqual(sqlite3_exec(db, "UPDATE meta SET value = value + 1 WHERE key = 'reserved_boot'", nil, nil, nil), SQLITE_OK)
        sqlite3_close(db)
        XCTAssertEqual(try nextSequence(otherBoot), 1 + Outbox.sequenceReserve + 1, "after the reservation the first press made")
    }
}
