import DoorbellCore
import Foundation
import XCTest

/// Without a synchronized clock the agent records events but holds delivery; once the clock is
/// synchronized it corrects occurred_at from the monotonic clock and delivers.
final class ClockHoldTests: XCTestCase {
    func testDeliveryWaitsForClockSyncThenCorrects() throws {
        try requireFile(Paths.agentBinary, "doorbell-agent")
        let dir = try TempDir()
        XCTAssertEqual(try runCommand("/bin/bash", [Paths.repoRoot + "/scripts/make-test-pki.sh", dir.file("pki")]).status, 0)
        let ready = dir.file("ready.json")
        let server = try Child("/usr/bin/python3", [Paths.repoRoot + "/Tests/helpers/https_test_server.py",
                                                    "--cert", dir.file("pki/server.pem"), "--key", dir.file("pki/server.key"),
                                                    "--script", "200", "--log", dir.file("requests.jsonl"),
                                                    "--ready-file", ready, "--max-seconds", "60"], dir: dir, name: "server")
        defer { server.stop() }
        eventually(20, "server ready") { FileManager.default.fileExists(atPath: ready) }
        let port = (try? JSONReader.parse(String(contentsOfFile: ready, encoding: .utf8)))?["port"]?.intValue ?? 0
        let secret = try dir.write("g.whsec", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n")
        let quiet = try dir.write("quiet.sh", "#!/bin/sh\nexec sleep 600\n")
        chmod(quiet, 0o755)
        let socket = dir.file("control.sock")
        let syncFlag = dir.file("synchronized")
        let config = agentConfig(stateDir: dir.file("state"), socket: socket, radio: "[radio.rtl433]\nbinary = \"\(quiet)\"",
                                 devices: [("front-door", "{ code = 1 }")], url: "https://127.0.0.1:\(port)/events",
                                 caFile: dir.file("pki/ca.pem"), secretFile: secret)
            .replacingOccurrences(of: "require_sync = false", with: "require_sync = true\nsync_file = \"\(syncFlag)\"\nkernel_check = false")
        let path = try dir.write("agent.toml", config)
        let agent = try Child(Paths.agentBinary, ["run", "--config", path], dir: dir, name: "agent")
        defer { agent.stop() }
        eventually(30, "agent answers") { agentStatus(socket) != nil }
        XCTAssertEqual(try runCommand(Paths.agentctlBinary, ["inject", "press", "--device", "front-door", "--socket", socket]).status, 0)
        eventually(30, "delivery held for the clock") { agentStatus(socket)?["clock"]?["delivery_held"]?.boolValue == true }
        let held = agentStatus(socket)
        XCTAssertEqual(held?["health"]?.stringValue, "degraded")
        XCTAssertEqual(held?["outbox"]?["depth"]?.intValue, 1)
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir.file("requests.jsonl")), "nothing sent with an unsynchronized clock")

        FileManager.default.createFile(atPath: syncFlag, contents: nil)
        eventually(30, "delivered once the clock is synchronized") { agentStatus(socket)?["uplink"]?["delivered"]?.intValue == 1 }
        let line = ((try? String(contentsOfFile: dir.file("requests.jsonl"), encoding: .utf8)) ?? "").split(separator: "\n").first.map(String.init) ?? ""
        let body = try JSONReader.parse(try JSONReader.parse(line)["body"]?.stringValue ?? "")
        XCTAssertEqual(body["clock_synced"]?.boolValue, false)
        XCTAssertEqual(body["clock_corrected"]?.boolValue, true)
        XCTAssertNotNil(body["boot_id"]?.stringValue)
        XCTAssertEqual(agentStatus(socket)?["clock"]?["delivery_held"]?.boolValue, false)
    }
}
