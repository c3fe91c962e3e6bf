import DoorbellCore
import Foundation
import XCTest

/// A permanent 4xx parks the event (kept, shown, degraded, reported in a `gateway.dead_letter`
/// event); `agentctl queue retry` sends it again.
final class DeadLetterTests: XCTestCase {
    func testRefusedEventIsParkedThenRetriedAndDelivered() throws {
        try requireFile(Paths.agentBinary, "doorbell-agent")
        let dir = try TempDir()
        let receiver = try ScriptedReceiver(dir: dir, ["--script", "400,200"])
        defer { receiver.stop() }
        let secret = try dir.write("g.whsec", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n")
        let socket = dir.file("control.sock")
        let config = try dir.write("agent.toml", agentConfig(
            stateDir: dir.file("state"), socket: socket, radio: "[radio.rtl433]\nbinary = \"\(try quietRadio(dir))\"",
            devices: [("front-door", "{ code = 1 }")], url: receiver.url, caFile: receiver.caFile, secretFile: secret))
        let agent = try startAgent(dir, config: config, socket: socket)
        defer { agent.stop() }
        XCTAssertEqual(try injectPress(socket), 0)

        eventually(30, "event parked as a dead letter and reported") {
            let s = agentStatus(socket)
            return s?["outbox"]?["dead"]?.intValue == 1 && s?["uplink"]?["delivered"]?.intValue == 1
        }
        let status = agentStatus(socket)
        XCTAssertEqual(status?["health"]?.stringValue, "degraded")
        XCTAssertEqual(status?["outbox"]?["depth"]?.intValue, 0, "a dead letter does not block the queue")
        let report = receiver.requests.last.flatMap { try? JSONReader.parse($0["body"]?.stringValue ?? "") }
        XCTAssertEqual(report?["type"]?.stringValue, "gateway.dead_letter")
        XCTAssertEqual(report?["data"]?["reason"]?.stringValue, "refused")
        XCTAssertEqual(report?["data"]?["status"]?.intValue, 400)
        XCTAssertEqual(report?["data"]?["sequence"]?.intValue, 1)
        let list = try runCommand(Paths.agentctlBinary, ["queue", "list", "--dead", "--socket", socket])
        XCTAssertTrue(list.stdout.contains("0 event(s) waiting, 1 dead letter(s)"), list.stdout)
        XCTAssertTrue(list.stdout.contains("HTTP 400"), list.stdout)
        XCTAssertEqual(try runCommand(Paths.agentctlBinary, ["queue", "purge", "--socket", socket]).status, 64, "purge needs --dead")

        let retry = try runCommand(Paths.agentctlBinary, ["queue", "retry", "--wait-seconds", "20", "--socket", socket])
        XCTAssertTrue(retry.stdout.contains("requeued 1 event(s)"), retry.stdout)
        eventually(30, "delivered after the retry") { agentStatus(socket)?["uplink"]?["delivered"]?.intValue == 2 }
        XCTAssertEqual(agentStatus(socket)?["outbox"]?["dead"]?.intValue, 0)
        XCTAssertEqual(receiver.requests.count, 3, "one refused attempt, the report, one accepted; nothing else")
    }
}
