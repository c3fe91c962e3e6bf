import DoorbellCore
import Foundation
import XCTest

/// A permanent 4xx parks the event (kept, shown, degraded); `agentctl queue retry` sends it again.
final class DeadLetterTests: XCTestCase {
    func testRefusedEventIsParkedThenRetriedAndDelivered() throws {
        try requireFile(Paths.agentBinary, "doorbell-agent")
        let dir = try TempDir()
        XCTAssertEqual(try runCommand("/bin/bash", [Paths.repoRoot + "/scripts/make-test-pki.sh", dir.file("pki")]).status, 0)
        let ready = dir.file("ready.json")
        let server = try Child("/usr/bin/python3", [Paths.repoRoot + "/Tests/helpers/https_test_server.py",
                                                    "--cert", dir.file("pki/server.pem"), "--key", dir.file("pki/server.key"),
                                                    "--script", "400,200", "--log", dir.file("requests.jsonl"),
                                                    "--ready-file", ready, "--max-seconds", "60"], dir: dir, name: "server")
        defer { server.stop() }
        eventually(20, "server ready") { FileManager.default.fileExists(atPath: ready) }
        let port = (try? JSONReader.parse(String(contentsOfFile: ready, encoding: .utf8)))?["port"]?.intValue ?? 0
        let secret = try dir.write("g.whsec", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n")
        let socket = dir.file("control.sock")
        let quiet = try dir.write("quiet.sh", "#!/bin/sh\nexec sleep 600\n")
        chmod(quiet, 0o755)
        let config = try dir.write("agent.toml", agentConfig(
            stateDir: dir.file("state"), socket: socket, radio: "[radio.rtl433]\nbinary = \"\(quiet)\"",
            devices: [("front-door", "{ code = 1 }")], url: "https://127.0.0.1:\(port)/events",
            caFile: dir.file("pki/ca.pem"), secretFile: secret))
        let agent = try Child(Paths.agentBinary, ["run", "--config", config], dir: dir, name: "agent")
        defer { agent.stop() }
        eventually(30, "agent answers") { agentStatus(socket) != nil }
        XCTAssertEqual(try runCommand(Paths.agentctlBinary, ["inject", "press", "--device", "front-door", "--socket", socket]).status, 0)

        eventually(30, "event parked as a dead letter") { agentStatus(socket)?["outbox"]?["dead"]?.intValue == 1 }
        let status = agentStatus(socket)
        XCTAssertEqual(status?["health"]?.stringValue, "degraded")
        XCTAssertEqual(status?["outbox"]?["depth"]?.intValue, 0, "a dead letter does not block the queue")
        let list = try runCommand(Paths.agentctlBinary, ["queue", "list", "--dead", "--socket", socket])
        XCTAssertTrue(list.stdout.contains("0 event(s) waiting, 1 dead letter(s)"), list.stdout)
        XCTAssertTrue(list.stdout.contains("HTTP 400"), list.stdout)
        XCTAssertEqual(try runCommand(Paths.agentctlBinary, ["queue", "purge", "--socket", socket]).status, 64, "purge needs --dead")

        let retry = try runCommand(Paths.agentctlBinary, ["queue", "retry", "--wait-seconds", "20", "--socket", socket])
        XCTAssertTrue(retry.stdout.contains("requeued 1 event(s)"), retry.stdout)
        eventually(30, "delivered after the retry") { agentStatus(socket)?["uplink"]?["delivered"]?.intValue == 1 }
        XCTAssertEqual(agentStatus(socket)?["outbox"]?["dead"]?.intValue, 0)
        let requests = ((try? String(contentsOfFile: dir.file("requests.jsonl"), encoding: .utf8)) ?? "").split(separator: "\n")
        XCTAssertEqual(requests.count, 2, "one refused attempt, one accepted; nothing else")
    }
}
