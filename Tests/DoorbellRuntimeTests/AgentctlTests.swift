import DoorbellCore
import Foundation
import XCTest

/// agentctl against a running agent: inject, events --follow, queue, status exit codes, and the
/// control socket's peer check.
final class AgentctlTests: XCTestCase {
    /// An agent whose radio hears nothing (a stand-in for rtl_433), with one device, front-door;
    /// `tracker` is its [tracker.button] section, `extra` follows the device.
    func quietAgent(_ dir: TempDir, socket: String, tracker: String, extra: String = "") throws -> Child {
        let config = try dir.write("agent.toml", """
        \(agentHeader(dir, socket: socket))
        [radio.rtl433]
        binary = "\(try quietRadio(dir))"
        [tracker.button]
        \(tracker)
        [[device]]
        id = "front-door"
        match = { code = "0x5A3C91" }
        \(extra)
        """)
        return try startAgent(dir, config: config, socket: socket)
    }

    func testInjectedPressIsFollowedQueuedAndMarkedTest() throws {
        try requireFile(Paths.agentBinary, "doorbell-agent")
        let dir = try TempDir()
        let socket = dir.file("control.sock")
        let agent = try quietAgent(dir, socket: socket, tracker: "repeat_gap_ms = 20 # the second inject below is a new press, inside the cooldown",
                                   extra: "[metrics]\nfile = \"\(dir.file("agent.prom"))\"\ninterval_s = 1")
        defer { agent.stop() }
        XCTAssertEqual(try runCommand(Paths.agentctlBinary, ["status", "--socket", socket]).status, 0, "healthy exits 0")
        // Every long-lived loop is watched, the spill retries, the outbox's syncer and the metrics writer too.
        let loops = (agentStatus(socket)?["loops"]?.arrayValues ?? []).map { ($0["name"]?.stringValue ?? "?", $0["state"]?.stringValue ?? "?") }
        let watched: Set = ["control", "spill", "outbox-sync", "metrics"]
        XCTAssertEqual(Set(loops.map(\.0)).intersection(watched), watched, "\(loops)")
        XCTAssertEqual(loops.filter { $0.1 != "running" }.count, 0, "\(loops)")

        let follower = try Child(Paths.agentctlBinary, ["events", "--follow", "--json", "--socket", socket], dir: dir, name: "follow")
        defer { follower.signal(SIGKILL) }
        usleep(300_000) // let the follower subscribe; the injected event is also replayed from the recent list

        let r = try runCommand(Paths.agentctlBinary, ["inject", "press", "--device", "front-door", "--socket", socket])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stdout.contains("injected a test press of front-door"), r.stdout)
        usleep(50_000) // longer than repeat_gap_ms
        let again = try runCommand(Paths.agentctlBinary, ["inject", "press", "--device", "front-door", "--socket", socket])
        XCTAssertEqual(again.status, 1, "a second press inside the cooldown is not forwarded")
        XCTAssertTrue(again.stderr.contains("within the cooldown"), again.stderr)
        let unknown = try runCommand(Paths.agentctlBinary, ["inject", "press", "--device", "garage", "--socket", socket])
        XCTAssertTrue(unknown.stderr.contains("no device \"garage\" in the config; configured: front-door"), unknown.stderr)

        eventually(20, "follower prints the event") { follower.stdout.contains("doorbell.pressed") }
        let line = follower.stdout.split(separator: "\n").first { $0.contains("doorbell.pressed") }.map(String.init) ?? ""
        let event = try JSONReader.parse(line)
        XCTAssertEqual(event["test"]?.boolValue, true)
        XCTAssertEqual(event["device"]?["id"]?.stringValue, "front-door")

        eventually(20, "metrics file shows the press") {
            ((try? String(contentsOfFile: dir.file("agent.prom"), encoding: .utf8)) ?? "").contains("doorbell_events_total{type=\"doorbell.pressed\"} 1")
        }
        let metrics = (try? String(contentsOfFile: dir.file("agent.prom"), encoding: .utf8)) ?? ""
        XCTAssertTrue(metrics.contains("doorbell_outbox_depth 1"), metrics)
        XCTAssertTrue(metrics.contains("# TYPE doorbell_resident_memory_bytes gauge"), metrics)
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir.file("agent.prom.tmp")))

        let queue = try runCommand(Paths.agentctlBinary, ["queue", "--json", "--socket", socket])
        let q = try JSONReader.parse(queue.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        XCTAssertEqual(q["depth"]?.intValue, 1, "no uplink: the event waits in the outbox")
        XCTAssertEqual(q["events"]?.arrayFirst?["type"]?.stringValue, "doorbell.pressed")
    }

    /// Two injected presses within repeat_gap_ms are one press (a button repeats its code while
    /// held); agentctl says so, not "within the cooldown (0 ms)".
    func testAPressWithinTheRepeatGapIsSaidToBeMerged() throws {
        try requireFile(Paths.agentBinary, "doorbell-agent")
        let dir = try TempDir()
        let socket = dir.file("control.sock")
        let agent = try quietAgent(dir, socket: socket, tracker: "cooldown_ms = 0\nrepeat_gap_ms = 10000")
        defer { agent.stop() }
        XCTAssertEqual(try runCommand(Paths.agentctlBinary, ["inject", "press", "--device", "front-door", "--socket", socket]).status, 0)
        let again = try runCommand(Paths.agentctlBinary, ["inject", "press", "--device", "front-door", "--socket", socket])
        XCTAssertEqual(again.status, 1)
        XCTAssertTrue(again.stderr.contains("merged into the previous press of front-door"), again.stderr)
        XCTAssertTrue(again.stderr.contains("repeat_gap_ms (10000 ms)"), again.stderr)
        XCTAssertFalse(again.stderr.contains("cooldown"), again.stderr)
    }

    func testControlSocketRefusesOtherUsers() throws {
        try requireFile(Paths.agentBinary, "doorbell-agent")
        guard getuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv") else {
            throw skip("SKIPPED: needs root and setpriv to act as another user")
        }
        let dir = try TempDir()
        chmod(dir.path, 0o755)
        let socket = dir.file("control.sock")
        let config = try dir.write("agent.toml", """
        \(agentHeader(dir, socket: socket))
        """)
        let agent = try Child(Paths.agentBinary, ["run", "--config", config], dir: dir, name: "agent")
        defer { agent.stop() }
        eventually(30, "agent answers") { agentStatus(socket) != nil }
        // Even with the socket file opened up, the peer check refuses a stranger (uid 65534).
        chmod(socket, 0o666)
        let r = try runCommand("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", Paths.agentctlBinary, "status", "--socket", socket])
        XCTAssertNotEqual(r.status, 0)
        XCTAssertTrue(r.stderr.contains("permission denied for uid 65534"), r.stderr)
        XCTAssertTrue(agent.stderr.contains("control.refused"), agent.stderr)
    }
}
