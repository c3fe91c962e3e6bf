import DoorbellCore
import Foundation
import XCTest

/// The uplink against a misbehaving receiver: connections reset before and after the receiver
/// stored the event, and a live press overtaking a stuck backlog.
final class FaultInjectionTests: XCTestCase {
    var dir: TempDir!
    var server: Child?
    var agent: Child?
    var port = 0
    var socket: String { dir.file("control.sock") }

    override func tearDown() {
        agent?.stop()
        server?.stop()
    }

    func start(script: String) throws {
        try requireFile(Paths.agentBinary, "doorbell-agent")
        dir = try TempDir()
        XCTAssertEqual(try runCommand("/bin/bash", [Paths.repoRoot + "/scripts/make-test-pki.sh", dir.file("pki")]).status, 0)
        let ready = dir.file("ready.json")
        server = try Child("/usr/bin/python3", [Paths.repoRoot + "/Tests/helpers/https_test_server.py",
                                                "--cert", dir.file("pki/server.pem"), "--key", dir.file("pki/server.key"),
                                                "--script", script, "--log", dir.file("requests.jsonl"), "--ready-file", ready,
                                                "--max-seconds", "120"], dir: dir, name: "server")
        eventually(20, "server ready") { FileManager.default.fileExists(atPath: ready) }
        port = Int((try? JSONReader.parse(String(contentsOfFile: ready, encoding: .utf8)))?["port"]?.intValue ?? 0)
        let secret = try dir.write("g.whsec", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n")
        let quiet = try dir.write("quiet.sh", "#!/bin/sh\nexec sleep 600\n")
        chmod(quiet, 0o755)
        let config = agentConfig(stateDir: dir.file("state"), socket: socket, radio: "[radio.rtl433]\nbinary = \"\(quiet)\"",
                                 devices: [("front-door", "{ code = 1 }")], url: "https://127.0.0.1:\(port)/events",
                                 caFile: dir.file("pki/ca.pem"), secretFile: secret)
            + "\n[tracker.button]\ncooldown_ms = 0\nrepeat_gap_ms = 20\n"
        agent = try Child(Paths.agentBinary, ["run", "--config", try dir.write("agent.toml", config)], dir: dir, name: "agent")
        eventually(30, "agent answers") { agentStatus(socket) != nil }
    }

    func press() throws {
        usleep(30_000)
        XCTAssertEqual(try runCommand(Paths.agentctlBinary, ["inject", "press", "--device", "front-door", "--socket", socket]).status, 0)
    }

    var requests: [JSONValue] {
        ((try? String(contentsOfFile: dir.file("requests.jsonl"), encoding: .utf8)) ?? "")
            .split(separator: "\n").compactMap { try? JSONReader.parse(String($0)) }
    }

    func sequence(_ r: JSONValue) -> Int64? { (try? JSONReader.parse(r["body"]?.stringValue ?? ""))?["sequence"]?.intValue }

    func testResetsBeforeAndAfterStoringLoseNothing() throws {
        try start(script: "reset-before,reset-after,200,reset-after,reset-before,200")
        for _ in 0..<3 { try press() }
        eventually(60, "all delivered") { agentStatus(socket)?["uplink"]?["delivered"]?.intValue == 3 }
        // What the receiver stored: answered 200, or reset after storing.
        let stored = Set(requests.filter { ["200", "reset-after"].contains($0["answer"]?.stringValue ?? "") }.compactMap(sequence))
        XCTAssertEqual(stored, [1, 2, 3], "zero missing")
        XCTAssertEqual(agentStatus(socket)?["outbox"]?["depth"]?.intValue, 0)
        XCTAssertTrue(agentStatus(socket)?["uplink"]?["last_error"]?.stringValue?.contains("connection") ?? false)
    }

    func testLivePressOvertakesAStuckBacklog() throws {
        try start(script: "503")
        for _ in 0..<5 { try press() }
        eventually(30, "backlog failing") { (agentStatus(socket)?["uplink"]?["failed_attempts"]?.intValue ?? 0) >= 3 }
        let before = requests.count
        try press() // sequence 6, while the oldest waits out its backoff
        // At most one older request can already be in flight; right after it comes the live press.
        // (Without the rule, sequence 1 would be retried forever and 6 would never be sent.)
        eventually(30, "the live press is sent") { requests.count >= before + 2 }
        XCTAssertTrue(requests.dropFirst(before).prefix(2).compactMap(sequence).contains(6), "the new press goes first")
    }
}
