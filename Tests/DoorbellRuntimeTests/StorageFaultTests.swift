import CSQLite
import DoorbellCore
import Foundation
import XCTest

/// A damaged outbox is moved aside and replaced; an unwritable state directory is a clear
/// start-up error with a sysexits code.
final class StorageFaultTests: XCTestCase {
    func minimalConfig(_ dir: TempDir, stateDir: String) throws -> String {
        try dir.write("agent.toml", """
        gateway_id = "gw"
        [paths]
        state_dir = "\(stateDir)"
        control_socket = "\(dir.file("control.sock"))"
        [radio.rtl433]
        binary = "\(try quietRadio(dir))"
        [[device]]
        id = "front-door"
        match = { code = 1 }
        """)
    }

    func quietRadio(_ dir: TempDir) throws -> String {
        let quiet = try dir.write("quiet.sh", "#!/bin/sh\nexec sleep 600\n")
        chmod(quiet, 0o755)
        return quiet
    }

    func assertMovedAsideAndWorking(prepare: (String) throws -> Void, file: StaticString = #filePath, line: UInt = #line) throws {
        try requireFile(Paths.agentBinary, "doorbell-agent")
        let dir = try TempDir()
        let state = dir.file("state")
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        try prepare(state + "/outbox.sqlite")
        let socket = dir.file("control.sock")
        let agent = try Child(Paths.agentBinary, ["run", "--config", try minimalConfig(dir, stateDir: state)], dir: dir, name: "agent")
        defer { agent.stop() }
        eventually(30, "agent answers", file: file, line: line) { agentStatus(socket) != nil }
        let status = agentStatus(socket)
        let aside = status?["outbox"]?["moved_aside"]?.stringValue ?? ""
        XCTAssertTrue(aside.contains("outbox.sqlite.broken-"), "\(String(describing: status))", file: file, line: line)
        XCTAssertTrue(FileManager.default.fileExists(atPath: aside), "the damaged file is kept for support", file: file, line: line)
        XCTAssertEqual(status?["health"]?.stringValue, "degraded", file: file, line: line)
        XCTAssertTrue(agent.stderr.contains("outbox.moved_aside"), agent.stderr, file: file, line: line)
        XCTAssertEqual(try runCommand(Paths.agentctlBinary, ["inject", "press", "--device", "front-door", "--socket", socket]).status, 0,
                       "the new outbox takes events", file: file, line: line)
        XCTAssertEqual(agentStatus(socket)?["outbox"]?["depth"]?.intValue, 1, file: file, line: line)
    }

    func testGarbageOutboxIsMovedAside() throws {
        try assertMovedAsideAndWorking { path in
            try String(repeating: "not a database at all ", count: 300).write(toFile: path, atomically: true, encoding: .utf8)
        }
    }

    func testOutboxFromTheFutureIsMovedAside() throws {
        try assertMovedAsideAndWorking { path in
            var db: OpaquePointer?
            XCTAssertEqual(sqlite3_open(path, &db), SQLITE_OK)
            sqlite3_exec(db, "CREATE TABLE x(a); PRAGMA user_version = 42", nil, nil, nil)
            sqlite3_close(db)
        }
    }

    func testReadOnlyStateDirectoryExits73WithAHint() throws {
        try requireFile(Paths.agentBinary, "doorbell-agent")
        let dir = try TempDir()
        let state = dir.file("state")
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        // Root ignores file modes, so make the directory truly read-only: a read-only tmpfs.
        guard getuid() == 0, (try? runCommand("/bin/mount", ["-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", state]))?.status == 0 else {
            throw skip("SKIPPED: needs root and mount to make a read-only directory")
        }
        defer { _ = try? runCommand("/bin/umount", [state]) }
        let r = try runCommand(Paths.agentBinary, ["run", "--config", try minimalConfig(dir, stateDir: state)])
        XCTAssertEqual(r.status, 73, r.stderr)
        XCTAssertTrue(r.stderr.contains("is not writable") && r.stderr.contains("doorbell-agent user"), r.stderr)
    }
}
