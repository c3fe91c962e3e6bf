import DoorbellCore
import DoorbellRuntime
import Foundation
import XCTest

/// `[memory] release_clean_pages`: the clean pages of the loaded objects' read-only segments are
/// unmapped and everything still works — in this very process (libcrypto, libcurl's TLS, SQLite
/// and the Swift runtime run on after their code was unmapped), and in an agent that then takes
/// a press to a real HTTPS receiver.
final class CleanPageReleaseTests: XCTestCase {
    func testReleasedCodeAndConstantsFaultBackAndTheLibrariesStillGiveTheSameAnswers() throws {
        let key = try Ed25519SigningKey(seed: Array(repeating: 7, count: 32))
        let message = Array("a press at the front door".utf8)
        let signature = try key.signature(for: message)
        let digest = SHA256.hash(message)
        let outbox = try TempDir()
        let sqlite = try Outbox(path: outbox.file("outbox.sqlite"))
        _ = try sqlite.append(id: "press-1", type: "doorbell.pressed", createdAtMs: 1_700_000_000_000) { sequence in
            Array("{\"sequence\":\(sequence),\"device\":\"front-door\"}".utf8)
        }

        guard let outcome = CleanPageRelease.run() else { return XCTFail("/proc/self/smaps unreadable") }
        XCTAssertEqual(outcome.failures, 0)
        XCTAssertGreaterThan(outcome.unmappedKiB, 1024, "the test process maps megabytes of library code: \(outcome)")
        XCTAssertLessThan(outcome.residentAfterKiB, outcome.residentBeforeKiB, "\(outcome)")
        // What the rule kept (relocated data, heap, the outbox's shared memory) is intact, and
        // what it unmapped comes back from the page cache as it was.
        XCTAssertEqual(try key.signature(for: message), signature)
        XCTAssertTrue(Ed25519.isValidSignature(signature, for: message, publicKey: key.publicKey))
        XCTAssertEqual(SHA256.hash(message), digest)
        XCTAssertEqual(try sqlite.stats().depth, 1)
        XCTAssertEqual(try sqlite.due(nowWallMs: 1_700_000_060_000, limit: 10).first.map { String(decoding: $0.body, as: UTF8.self) },
                       #"{"sequence":1,"device":"front-door"}"#)
        // A second release right away finds the pages those calls mapped again, and only those.
        guard let again = CleanPageRelease.run() else { return XCTFail("/proc/self/smaps unreadable") }
        XCTAssertEqual(again.failures, 0)
        XCTAssertLessThanOrEqual(again.residentAfterKiB, again.residentBeforeKiB, "\(again)")
    }

    func testAnAgentGivesItsCleanPagesBackAfterStartAndStillDeliversASignedPress() throws {
        try requireFile(Paths.agentBinary, "doorbell-agent")
        let dir = try TempDir()
        let receiver = try ScriptedReceiver(dir: dir, ["--script", "200"])
        defer { receiver.stop() }
        let socket = dir.file("control.sock")
        let config = try dir.write("agent.toml", agentConfig(
            stateDir: dir.file("state"), socket: socket, radio: "[radio.rtl433]\nbinary = \"\(try quietRadio(dir))\"",
            devices: [("front-door", "{ code = \"0x5A3C91\" }")], url: receiver.url, caFile: receiver.caFile,
            secretFile: try webhookSecret(dir)))
        let agent = try startAgent(dir, config: config, socket: socket)
        defer { agent.stop() }
        eventually(20, "the agent logs its release") { agent.stderr.contains("memory.released") }
        let line = agent.stderr.split(separator: "\n").first { $0.contains("memory.released") }.map(String.init) ?? ""
        func field(_ name: String) -> Int? {
            guard let r = line.range(of: "\(name)=") else { return nil }
            return Int(line[r.upperBound...].prefix { $0.isNumber })
        }
        XCTAssertEqual(field("failed"), 0, line)
        XCTAssertGreaterThan(field("unmapped_kib") ?? 0, 1024, line)
        XCTAssertLessThan(field("rss_after_kib") ?? .max, field("rss_before_kib") ?? 0, line)

        XCTAssertEqual(try injectPress(socket), 0)
        eventually(20, "the press reaches the receiver") { receiver.requests.contains { ($0["body"]?.stringValue ?? "").contains("doorbell.pressed") } }
        let request = receiver.requests.first { ($0["body"]?.stringValue ?? "").contains("doorbell.pressed") }
        XCTAssertEqual(request?["answer"]?.stringValue, "200")
        // Signed as ever (HMAC from libcrypto, whose code the release unmapped).
        let headers = request?["headers"]
        let secret = try WebhookSecret(parsing: String(contentsOfFile: try webhookSecret(dir), encoding: .utf8))
        let v1 = WebhookSigner(hmacSecret: secret, deviceKey: nil).v1(
            id: headers?["webhook-id"]?.stringValue ?? "", timestamp: Int64(headers?["webhook-timestamp"]?.stringValue ?? "") ?? 0,
            body: Array((request?["body"]?.stringValue ?? "").utf8))
        XCTAssertNotNil(v1)
        XCTAssertTrue((headers?["webhook-signature"]?.stringValue ?? "").split(separator: " ").contains { $0 == v1 ?? "" },
                      "\(String(describing: headers))")
        XCTAssertEqual(agentStatus(socket)?["uplink"]?["delivered"]?.intValue, 1)
        XCTAssertFalse(agent.stderr.contains("panic") || agent.stderr.contains("Fatal error"), agent.stderr)
    }

    func testReleaseCleanPagesFalseLeavesTheMappingsAlone() throws {
        try requireFile(Paths.agentBinary, "doorbell-agent")
        let dir = try TempDir()
        let socket = dir.file("control.sock")
        let config = try dir.write("agent.toml", agentHeader(dir, socket: socket) + "\n[log]\nlevel = \"debug\"\n[memory]\nrelease_clean_pages = false\n")
        let agent = try startAgent(dir, config: config, socket: socket)
        defer { agent.stop() }
        // Three times the first release's delay: with the key on it would have run by then.
        usleep(3_000_000)
        XCTAssertNotNil(agentStatus(socket))
        XCTAssertFalse(agent.stderr.contains("memory.released"), agent.stderr)
    }
}
