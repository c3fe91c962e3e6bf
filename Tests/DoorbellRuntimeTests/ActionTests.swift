import DoorbellCore
import Foundation
import XCTest

/// Local actions: one run per press with the event in the environment, a hanging action killed
/// at its timeout, a storm bounded by max_running, failures in the status.
final class ActionTests: XCTestCase {
    func testExecActionsRunOncePerPressAndStayBounded() throws {
        try requireFile(Paths.agentBinary, "doorbell-agent")
        let dir = try TempDir()
        let socket = dir.file("control.sock")
        let outDir = dir.file("rings")
        try FileManager.default.createDirectory(atPath: outDir, withIntermediateDirectories: true)
        let ring = try dir.write("ring.sh", "#!/bin/sh\necho \"$DOORBELL_DEVICE_ID $DOORBELL_EVENT_TYPE $DOORBELL_TEST\" > \(outDir)/$$.txt\n")
        let hang = try dir.write("hang.sh", "#!/bin/sh\nsleep 60\n")
        let fail = try dir.write("fail.sh", "#!/bin/sh\necho 'relay not found' >&2\nexit 3\n")
        for f in [ring, hang, fail] { chmod(f, 0o755) }
        let config = try dir.write("agent.toml", """
        \(agentHeader(dir, socket: socket))
        [radio.rtl433]
        binary = "\(try quietRadio(dir))"
        [tracker.button]
        cooldown_ms = 0
        repeat_gap_ms = 20
        [[device]]
        id = "front-door"
        match = { code = 1 }
        [[action]]
        name = "chime"
        exec = ["\(ring)"]
        [[action]]
        name = "stuck-relay"
        exec = ["\(hang)"]
        timeout_ms = 2000
        max_running = 1
        [[action]]
        name = "broken"
        exec = ["\(fail)"]
        """)
        let agent = try startAgent(dir, config: config, socket: socket)
        defer { agent.stop() }
        for _ in 0..<3 {
            usleep(30_000)
            XCTAssertEqual(try injectPress(socket), 0)
        }
        eventually(30, "three chimes") { ((try? FileManager.default.contentsOfDirectory(atPath: outDir)) ?? []).count == 3 }
        let rings = try FileManager.default.contentsOfDirectory(atPath: outDir).map { try String(contentsOfFile: outDir + "/" + $0, encoding: .utf8) }
        XCTAssertEqual(rings, Array(repeating: "front-door doorbell.pressed 1\n", count: 3))

        eventually(30, "stuck relay timed out, broken one failed") {
            let a = agentStatus(socket)?["actions"]?.arrayValues ?? []
            let stuck = a.first { $0["name"]?.stringValue == "stuck-relay" }
            let broken = a.first { $0["name"]?.stringValue == "broken" }
            return (stuck?["timeouts"]?.intValue ?? 0) >= 1 && broken?["failures"]?.intValue == 3
        }
        let actions = agentStatus(socket)?["actions"]?.arrayValues ?? []
        let stuck = actions.first { $0["name"]?.stringValue == "stuck-relay" }
        // max_running = 1: presses that came while it hung were skipped, not queued; every press is
        // accounted for as a run that timed out, a skip, or the run still going.
        let accounted = ["timeouts", "skipped_busy", "running"].map { stuck?[$0]?.intValue ?? 0 }.reduce(0, +)
        XCTAssertEqual(accounted, 3, "\(String(describing: stuck))")
        XCTAssertGreaterThanOrEqual(stuck?["skipped_busy"]?.intValue ?? 0, 1)
        XCTAssertTrue(actions.first { $0["name"]?.stringValue == "broken" }?["last_error"]?.stringValue?.contains("exited with status 3") ?? false)
        XCTAssertTrue(agent.stderr.contains("relay not found"), "action stderr goes to the log")
        XCTAssertEqual(agentStatus(socket)?["health"]?.stringValue, "degraded")
    }
}
