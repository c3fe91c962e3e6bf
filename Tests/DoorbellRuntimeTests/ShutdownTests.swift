import DoorbellCore
import Foundation
import XCTest

/// SIGTERM while a request hangs: the agent stops within its bound, exits 0, and the event is
/// still in the outbox for the next start (at-least-once, the receiver deduplicates).
final class ShutdownTests: XCTestCase {
    func testSigtermWithAnInFlightRequestExitsCleanlyAndKeepsTheEvent() throws {
        try requireFile(Paths.agentBinary, "doorbell-agent")
        let dir = try TempDir()
        let receiver = try ScriptedReceiver(dir: dir, ["--script", "hang"])
        defer { receiver.stop() }
        let secret = try dir.write("g.whsec", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n")
        let socket = dir.file("control.sock")
        let quiet = try quietRadio(dir)
        let config = agentConfig(
            stateDir: dir.file("state"), socket: socket, radio: "[radio.rtl433]\nbinary = \"\(quiet)\"",
            devices: [("front-door", "{ code = 1 }")], url: receiver.url,
            caFile: receiver.caFile, secretFile: secret, extra: "")
            .replacingOccurrences(of: "request_timeout_ms = 5000", with: "request_timeout_ms = 120000")
        let path = try dir.write("agent2.toml", config)
        let agent = try startAgent(dir, config: path, socket: socket)
        XCTAssertEqual(try injectPress(socket), 0)
        eventually(30, "the request reached the receiver and hangs there") {
            FileManager.default.fileExists(atPath: dir.file("requests.jsonl"))
        }
        agent.signal(SIGTERM)
        // The unit gives 20 s (TimeoutStopSec); the agent abandons the request after 5 s.
        XCTAssertEqual(agent.wait(seconds: 15), 0, agent.stderr)
        XCTAssertTrue(agent.stderr.contains("uplink.stop_abandoned_request"), agent.stderr)

        // The event is still there for the next start.
        let again = try startAgent(dir, config: path, socket: socket, name: "agent-again")
        defer { again.stop() }
        XCTAssertEqual(agentStatus(socket)?["outbox"]?["depth"]?.intValue, 1)
    }
}

/// After a SIGKILL of the agent (no systemd to clean up), the next start stops the rtl_433 the
/// dead agent left running, so the SDR is free again.
final class OrphanRadioTests: XCTestCase {
    func testRestartStopsTheOrphanedRadio() throws {
        try requireFile(Paths.agentBinary, "doorbell-agent")
        let dir = try TempDir()
        let radio = try dir.write("fake-rtl433.sh", "#!/bin/sh\nwhile true; do sleep 1; done\n")
        chmod(radio, 0o755)
        let socket = dir.file("control.sock")
        let config = try dir.write("agent.toml", """
        \(agentHeader(dir, socket: socket))
        [radio.rtl433]
        binary = "\(radio)"
        """)
        let first = try Child(Paths.agentBinary, ["run", "--config", config], dir: dir, name: "agent-1")
        eventually(30, "radio running") { agentStatus(socket)?["radios"]?.arrayFirst?["state"]?.stringValue == "running" }
        let pids = ((try? String(contentsOfFile: dir.file("state/rtl433.pid"), encoding: .utf8)) ?? "").split(separator: " ")
        let orphan = Int32(pids.first ?? "") ?? 0
        XCTAssertGreaterThan(orphan, 1)
        first.signal(SIGKILL)
        first.wait(seconds: 10)
        XCTAssertEqual(kill(orphan, 0), 0, "the radio outlived its agent")

        let second = try Child(Paths.agentBinary, ["run", "--config", config], dir: dir, name: "agent-2")
        defer { second.stop() }
        eventually(30, "the orphan is gone") { kill(orphan, 0) != 0 || (try? String(contentsOfFile: "/proc/\(orphan)/stat", encoding: .utf8))?.contains(") Z ") == true }
        XCTAssertTrue(second.stderr.contains("radio.orphan_stopped"), second.stderr)
    }
}
