import DoorbellCore
import Foundation
import XCTest

/// SIGHUP reloads the config atomically; a bad new config keeps the old one and says why.
final class ReloadTests: XCTestCase {
    func testGoodConfigIsAppliedAndBadOneIsRefused() throws {
        try requireFile(Paths.agentBinary, "doorbell-agent")
        let dir = try TempDir()
        let socket = dir.file("control.sock")
        func config(devices: [String], extra: String = "") -> String {
            var t = """
            gateway_id = "gw"
            \(extra)
            [paths]
            state_dir = "\(dir.file("state"))"
            control_socket = "\(socket)"
            [radio.rtl433]
            binary = "\(dir.file("quiet.sh"))"

            """
            for (i, d) in devices.enumerated() { t += "[[device]]\nid = \"\(d)\"\nmatch = { code = \(i + 1) }\n" }
            return t
        }
        let quiet = try dir.write("quiet.sh", "#!/bin/sh\nexec sleep 600\n")
        chmod(quiet, 0o755)
        let path = try dir.write("agent.toml", config(devices: ["front-door"]))
        let agent = try Child(Paths.agentBinary, ["run", "--config", path], dir: dir, name: "agent")
        defer { agent.stop() }
        eventually(30, "agent answers") { agentStatus(socket) != nil }
        func inject(_ device: String) throws -> Int32 {
            try runCommand(Paths.agentctlBinary, ["inject", "press", "--device", device, "--socket", socket]).status
        }
        XCTAssertEqual(try inject("garage"), 1)

        _ = try dir.write("agent.toml", config(devices: ["front-door", "garage"]))
        agent.signal(SIGHUP)
        eventually(30, "reload applied") { agentStatus(socket)?["config_reload"]?["ok"]?.boolValue == true }
        XCTAssertEqual(try inject("garage"), 0, "the new device exists after the reload")

        _ = try dir.write("agent.toml", config(devices: ["front-door"], extra: "colour = \"red\""))
        agent.signal(SIGHUP)
        eventually(30, "reload refused") { agentStatus(socket)?["config_reload"]?["ok"]?.boolValue == false }
        let status = agentStatus(socket)
        XCTAssertTrue(status?["config_reload"]?["error"]?.stringValue?.contains("colour: unknown key") ?? false, "\(String(describing: status))")
        XCTAssertTrue(agent.process.isRunning)
        XCTAssertTrue(agent.stderr.contains("config.reload_rejected"), agent.stderr)
        XCTAssertEqual(try inject("garage"), 1, "garage is still known, but inside its cooldown")
        let r = try runCommand(Paths.agentctlBinary, ["inject", "press", "--device", "garage", "--socket", socket])
        // Right after the last inject this one is a repeat of that press (within repeat_gap_ms):
        // either answer names garage as a known device, so the old config is still running.
        XCTAssertTrue(r.stderr.contains("within the cooldown") || r.stderr.contains("merged into the previous press of garage"),
                      "the old config (with garage) is still running: \(r.stderr)")
    }
}
