import DoorbellCore
import Foundation
import XCTest

/// Power-cut behaviour: a stream of presses while the receiver fails at random, the agent
/// SIGKILLed at random moments a hundred times and restarted. At the end the receiver holds
/// every sequence the agent ever committed, each at least once, and nothing else.
final class CrashConsistencyTests: XCTestCase {
    func testHundredKillsLoseNothing() throws {
        try requireFile(Paths.agentBinary, "doorbell-agent")
        let dir = try TempDir()
        XCTAssertEqual(try runCommand("/bin/bash", [Paths.repoRoot + "/scripts/make-test-pki.sh", dir.file("pki")]).status, 0)
        let port = try freeLoopbackPort()
        func startServer(failRate: String, name: String) throws -> Child {
            let ready = dir.file("ready-\(name).json")
            let server = try Child("/usr/bin/python3", [Paths.repoRoot + "/Tests/helpers/https_test_server.py", "--port", String(port),
                                                        "--cert", dir.file("pki/server.pem"), "--key", dir.file("pki/server.key"),
                                                        "--script", "200", "--fail-rate", failRate, "--seed", "7",
                                                        "--log", dir.file("requests.jsonl"), "--ready-file", ready, "--max-seconds", "600"],
                                   dir: dir, name: name)
            eventually(20, "server ready") { FileManager.default.fileExists(atPath: ready) }
            return server
        }
        // During the storm the receiver fails 30 % of requests.
        let stormServer = try startServer(failRate: "0.3", name: "server-storm")
        let secret = try dir.write("g.whsec", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n")
        // A press every 40 ms; the radio dies with the agent (it watches its parent).
        let presses = try dir.write("presses.sh", """
        #!/bin/sh
        while kill -0 $PPID 2>/dev/null; do echo '{"model" : "EV1527", "code" : 1}'; sleep 0.04; done
        """)
        chmod(presses, 0o755)
        let socket = dir.file("control.sock")
        func config(radio: Bool) -> String {
            agentConfig(stateDir: dir.file("state"), socket: socket, radio: radio ? "[radio.rtl433]\nbinary = \"\(presses)\"" : nil,
                        devices: radio ? [("front-door", "{ code = 1 }")] : [], url: "https://127.0.0.1:\(port)/events",
                        caFile: dir.file("pki/ca.pem"), secretFile: secret)
                + "\n[tracker.button]\ncooldown_ms = 0\nrepeat_gap_ms = 20\n"
        }
        let stormy = try dir.write("stormy.toml", config(radio: true))
        var rng = SeededRandom(seed: 42)
        for round in 0..<100 {
            let agent = try Child(Paths.agentBinary, ["run", "--config", stormy], dir: dir, name: "agent-\(round % 2)")
            usleep(UInt32(Int.random(in: 50_000...400_000, using: &rng)))
            agent.signal(SIGKILL)
            XCTAssertNotNil(agent.wait(seconds: 10))
        }
        stormServer.stop()
        // Calm: no radio, a receiver that answers; everything left must drain.
        let server = try startServer(failRate: "0", name: "server-calm")
        defer { server.stop() }
        let calm = try dir.write("calm.toml", config(radio: false))
        let agent = try Child(Paths.agentBinary, ["run", "--config", calm], dir: dir, name: "agent-calm")
        defer { agent.stop() }
        eventually(120, "outbox drained") { agentStatus(socket)?["outbox"]?["depth"]?.intValue == 0 }
        let last = agentStatus(socket)?["outbox"]?["last_sequence"]?.intValue ?? 0
        XCTAssertGreaterThan(last, 100, "the storm created events")

        var accepted: [Int64: Set<String>] = [:]
        for line in ((try? String(contentsOfFile: dir.file("requests.jsonl"), encoding: .utf8)) ?? "").split(separator: "\n") {
            guard let r = try? JSONReader.parse(String(line)), r["answer"]?.stringValue == "200",
                  let body = try? JSONReader.parse(r["body"]?.stringValue ?? ""),
                  let seq = body["sequence"]?.intValue, let id = body["id"]?.stringValue else { continue }
            accepted[seq, default: []].insert(id)
        }
        XCTAssertEqual(Set(accepted.keys), Set(1...last), "every committed sequence reached the receiver")
        XCTAssertTrue(accepted.values.allSatisfy { $0.count == 1 }, "one id per sequence: retries resend the same event")
    }
}
