import CSQLite
import DoorbellCore
import DoorbellRuntime
import Foundation
import XCTest

/// How an event was recorded before the clock was synchronized is kept in the row's own columns
/// (v5), so the correction reads no body; an older outbox gets them from its bodies once.
final class OutboxClockStampTests: XCTestCase {
    func body(synced: Bool, boot: String?, mono: Int64?, id: String = "e", corrected: Bool = false) -> [UInt8] {
        var e = AgentEvent(type: .doorbellPressed, device: DeviceRef(id: "d", name: "d", radio: "rtl433"), occurredAtMicros: 1_000_000, clockSynced: synced)
        e.bootID = boot
        e.monotonicMicros = mono
        let b = e.body(id: id, sequence: 1, gatewayID: "gw", agentVersion: "0")
        return corrected ? (ClockCorrection.correct(b, nowWallMicros: 0, nowMonoMicros: 0, bootID: "other") ?? b) : b
    }

    func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    func testAVersion4OutboxGainsTheStampsOfItsRowsFromTheirBodies() throws {
        let dir = try TempDir()
        let path = dir.file("outbox.sqlite")
        let waiting = body(synced: false, boot: "boot-a", mono: 5_000_000, id: "waiting")
        let noMono = body(synced: false, boot: nil, mono: nil, id: "no-mono")
        let synced = body(synced: true, boot: "boot-a", mono: 6_000_000, id: "synced")
        let done = body(synced: false, boot: "boot-a", mono: 7_000_000, id: "done", corrected: true)
        XCTAssertEqual(writeLegacyOutbox(path, version: 4, rows: """
            INSERT INTO events (id, sequence, type, body, created_at_ms) VALUES
                ('waiting', 1, 'doorbell.pressed', x'\(hex(waiting))', 0),
                ('no-mono', 2, 'doorbell.pressed', x'\(hex(noMono))', 0),
                ('synced', 3, 'doorbell.pressed', x'\(hex(synced))', 0),
                ('done', 4, 'doorbell.pressed', x'\(hex(done))', 0),
                ('not-json', 5, 'doorbell.pressed', x'\(hex(Array(#"x"clock_synced":false"#.utf8)))', 0);
            """), SQLITE_OK)

        let outbox = try Outbox(path: path)
        let rows = try outbox.pending(limit: 10)
        XCTAssertEqual(rows.map(\.id), ["waiting", "no-mono", "synced", "done", "not-json"])
        XCTAssertEqual(rows.map(\.clock), [ClockStamp(monotonicMicros: 5_000_000, bootID: "boot-a"), ClockStamp(monotonicMicros: nil, bootID: nil),
                                          nil, nil, ClockStamp(monotonicMicros: nil, bootID: nil)])
        XCTAssertEqual(rows[0].body, waiting, "the bytes are kept as signed")
        // Corrected: no longer waiting, across a reopen.
        try outbox.replaceBodies(ids: [("waiting", waiting)])
        outbox.close()
        let reopened = try Outbox(path: path)
        XCTAssertEqual(try reopened.pending(limit: 10).first?.clock, nil)
        var check: OpaquePointer?
        XCTAssertEqual(sqlite3_open(path, &check), SQLITE_OK)
        defer { sqlite3_close(check) }
        var stmt: OpaquePointer?
        sqlite3_prepare_v2(check, "PRAGMA user_version", -1, &stmt, nil)
        XCTAssertEqual(sqlite3_step(stmt), SQLITE_ROW)
        XCTAssertEqual(sqlite3_column_int64(stmt, 0), Int64(Outbox.schemaVersion))
        sqlite3_finalize(stmt)
        reopened.close()
    }

    func testANewEventKeepsItsStampUntilCorrected() throws {
        let dir = try TempDir()
        let outbox = try Outbox(path: dir.file("outbox.sqlite"))
        let stamp = ClockStamp(monotonicMicros: 42, bootID: "boot-a")
        let result = try outbox.append([OutboxNewEvent(id: "a", type: "doorbell.pressed", createdAtMs: 0, clock: stamp) { _ in [1] },
                                        OutboxNewEvent(id: "b", type: "doorbell.pressed", createdAtMs: 0) { _ in [2] }], bounds: nil, report: nil)
        XCTAssertEqual(result.entries.map(\.clock), [stamp, nil])
        XCTAssertEqual(try outbox.pending(limit: 10).map(\.clock), [stamp, nil])
        try outbox.replaceBodies(ids: [("a", [3])])
        XCTAssertEqual(try outbox.pending(limit: 10).map(\.clock), [nil, nil])
        XCTAssertEqual(try outbox.pending(limit: 10).first?.body, [3])
        outbox.close()
    }
}

/// An outbox file as an agent of schema `version` (3 or 4) left it, with `rows` inserted.
func writeLegacyOutbox(_ path: String, version: Int32, rows: String) -> Int32 {
    var db: OpaquePointer?
    guard sqlite3_open(path, &db) == SQLITE_OK else { return SQLITE_CANTOPEN }
    defer { sqlite3_close(db) }
    return sqlite3_exec(db, """
        CREATE TABLE events (id TEXT PRIMARY KEY, sequence INTEGER NOT NULL UNIQUE, type TEXT NOT NULL, body BLOB NOT NULL,
            created_at_ms INTEGER NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, next_attempt_at_ms INTEGER NOT NULL DEFAULT 0,
            last_error TEXT, dead INTEGER NOT NULL DEFAULT 0, sinks INTEGER NOT NULL DEFAULT 1);
        CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
        INSERT INTO meta VALUES ('last_sequence', 5), ('delivered', 4), ('evicted', 0);
        \(version >= 4 ? "CREATE TABLE button_memory (address TEXT PRIMARY KEY, packet_id INTEGER, counter INTEGER);" : "")
        \(rows)
        PRAGMA user_version = \(version);
        """, nil, nil, nil)
}
