import DoorbellCore
import Foundation
import XCTest

/// The state directory on a tiny tmpfs that fills up: the agent keeps running, says
/// `storage: full`, holds new events in memory, and stores them all once space returns.
final class DiskFullTests: XCTestCase {
    func testFullDiskHoldsEventsAndRecoversByItself() throws {
        try requireFile(Paths.agentBinary, "doorbell-agent")
        let dir = try TempDir()
        let state = dir.file("state")
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        guard getuid() == 0, (try? runCommand("/bin/mount", ["-t", "tmpfs", "-o", "size=2m", "tmpfs", state]))?.status == 0 else {
            throw skip("SKIPPED: needs root and mount for a small tmpfs")
        }
        defer { _ = try? runCommand("/bin/umount", ["-l", state]) }
        let quiet = try dir.write("quiet.sh", "#!/bin/sh\nexec sleep 600\n")
        chmod(quiet, 0o755)
        let socket = dir.file("control.sock")
        let config = try dir.write("agent.toml", """
        gateway_id = "gw"
        [paths]
        state_dir = "\(state)"
        control_socket = "\(socket)"
        [radio.rtl433]
        binary = "\(quiet)"
        [tracker.button]
        cooldown_ms = 0
        repeat_gap_ms = 20
        [[device]]
        id = "front-door"
        match = { code = 1 }
        """)
        let agent = try Child(Paths.agentBinary, ["run", "--config", config], dir: dir, name: "agent")
        defer { agent.stop() }
        eventually(30, "agent answers") { agentStatus(socket) != nil }
        func press() throws {
            usleep(30_000) // past the repeat gap: a new press each time
            XCTAssertNotEqual(try runCommand(Paths.agentctlBinary, ["inject", "press", "--device", "front-door", "--socket", socket]).status, 69)
        }
        for _ in 0..<3 { try press() }
        // Fill the filesystem to the last byte.
        _ = try runCommand("/bin/sh", ["-c", "dd if=/dev/zero of=\(state)/filler bs=4k 2>/dev/null; sync"])
        for _ in 0..<5 { try press() }
        eventually(30, "status says storage full") { agentStatus(socket)?["outbox"]?["storage"]?.stringValue == "full" }
        let full = agentStatus(socket)
        XCTAssertEqual(full?["health"]?.stringValue, "degraded")
        XCTAssertGreaterThan(full?["outbox"]?["held_in_memory"]?.intValue ?? 0, 0)
        XCTAssertTrue(agent.process.isRunning)

        try FileManager.default.removeItem(atPath: state + "/filler")
        eventually(30, "every press stored once space returned") {
            let s = agentStatus(socket)
            return s?["outbox"]?["storage"]?.stringValue == "ok" && s?["outbox"]?["depth"]?.intValue == 8
        }
        XCTAssertEqual(agentStatus(socket)?["outbox"]?["last_sequence"]?.intValue, 8, "in order, none lost, no gaps")
    }
}
