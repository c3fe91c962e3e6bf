import DoorbellCore
import Foundation
import XCTest

/// The queue's head holds nothing, against a real HTTPS receiver that fails a fraction with 5xx,
/// answers 429 with Retry-After, has outages, and never takes one poison event. No timing is
/// asserted on: "one round trip" is counted in requests the receiver logged; every wait is bounded.
final class UplinkQueueTests: XCTestCase {
    var dir: TempDir!
    var receiver: ScriptedReceiver?
    var agent: Child?
    var socket: String { dir.file("control.sock") }
    var down: String { dir.file("receiver-down") }
    let maxInFlight = 8

    override func setUpWithError() throws {
        try requireFile(Paths.agentBinary, "doorbell-agent")
        dir = try TempDir()
    }

    override func tearDown() {
        agent?.stop()
        receiver?.stop()
    }

    func start(receiverArgs: [String], uplinkExtra: String) throws {
        let receiver = try ScriptedReceiver(dir: dir, ["--script", "200", "--down-file", down] + receiverArgs)
        self.receiver = receiver
        let secret = try dir.write("g.whsec", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n")
        let config = agentConfig(stateDir: dir.file("state"), socket: socket, radio: "[radio.rtl433]\nbinary = \"\(try quietRadio(dir))\"",
                                 devices: [("front-door", "{ code = 1 }")], url: receiver.url, caFile: receiver.caFile, secretFile: secret,
                                 extra: "max_in_flight = \(maxInFlight)\n" + uplinkExtra)
            + "\n[tracker.button]\ncooldown_ms = 0\nrepeat_gap_ms = 20\n"
        agent = try startAgent(dir, config: try dir.write("agent.toml", config), socket: socket)
    }

    /// A backlog made while the receiver is down (each press a separate event).
    func pressWhileDown(_ count: Int) throws {
        FileManager.default.createFile(atPath: down, contents: nil)
        for _ in 0..<count {
            usleep(25_000) // past repeat_gap_ms: a new press each time
            XCTAssertEqual(try injectPress(socket), 0)
        }
        eventually(30, "\(count) presses stored") { agentStatus(socket)?["outbox"]?["last_sequence"]?.intValue == Int64(count) }
    }

    var requests: [JSONValue] { receiver?.requests ?? [] }

    /// 100 presses wait (more than the 64 rows the uplink reads at once); the receiver heals but
    /// keeps failing 30 % with 500 and 10 % with 429 + Retry-After. A press stored now (agentctl
    /// returns once it is) is in the first window after the one in flight: at most max_in_flight
    /// requests reach the receiver between the store and the press — wherever it sits behind the
    /// backlog, whatever the head is doing. Then everything drains, none lost.
    func testAFreshPressGoesInTheNextWindowWhateverTheBacklog() throws {
        try start(receiverArgs: ["--fail-rate", "0.3", "--fail-status", "500", "--rate-429", "0.1", "--retry-after", "1",
                                 "--spare-from", "101", "--seed", "3"],
                  uplinkExtra: "")
        try pressWhileDown(100)
        eventually(30, "the outage was tried") { requests.count >= 2 }
        try FileManager.default.removeItem(atPath: down)
        XCTAssertEqual(try injectPress(socket), 0)
        let stored = requests.count
        eventually(60, "the fresh press reached the receiver") { requests.contains { $0["sequence"]?.intValue == 101 } }
        let log = requests
        let index = log.firstIndex { $0["sequence"]?.intValue == 101 }
        XCTAssertNotNil(index)
        if let index {
            XCTAssertLessThanOrEqual(index - stored, maxInFlight,
                                     "requests after the store, before the press: \(log[stored...].prefix(index - stored + 1).compactMap { $0["sequence"]?.intValue })")
            XCTAssertEqual(log[index]["answer"]?.stringValue, "200")
        }
        eventually(120, "the backlog drained") { agentStatus(socket)?["outbox"]?["depth"]?.intValue == 0 }
        let received = Set(requests.filter { $0["answer"]?.stringValue == "200" }.compactMap { $0["sequence"]?.intValue })
        XCTAssertEqual(received, Set(1...101), "nothing lost")
    }

    /// The oldest event is refused with 500 forever while the receiver takes everything else: the
    /// rest drains past it, it is parked as a dead letter after park_after_failures, a
    /// `gateway.dead_letter` report names it, status shows it, and `agentctl queue retry` sends it
    /// again (refused again, parked again).
    func testAPoisonEventHoldsNothingAndIsParkedAndReported() throws {
        try start(receiverArgs: ["--poison", "1"], uplinkExtra: "park_after_failures = 3")
        try pressWhileDown(20)
        try FileManager.default.removeItem(atPath: down)
        eventually(60, "the rest delivered and the poison parked") {
            let s = agentStatus(socket)
            return s?["outbox"]?["dead"]?.intValue == 1 && s?["outbox"]?["depth"]?.intValue == 0
        }
        let status = agentStatus(socket)
        XCTAssertEqual(status?["health"]?.stringValue, "degraded")
        let stored = requests.filter { $0["answer"]?.stringValue == "200" }
        XCTAssertEqual(Set(stored.compactMap { $0["sequence"]?.intValue }).intersection(1...20), Set(2...20))
        let reports = stored.compactMap { try? JSONReader.parse($0["body"]?.stringValue ?? "") }.filter { $0["type"]?.stringValue == "gateway.dead_letter" }
        XCTAssertEqual(reports.count, 1)
        XCTAssertEqual(reports.first?["data"]?["sequence"]?.intValue, 1)
        XCTAssertEqual(reports.first?["data"]?["reason"]?.stringValue, "failing")
        XCTAssertEqual(reports.first?["data"]?["status"]?.intValue, 500)
        // The poison was tried a bounded number of times, not forever.
        let tries = requests.filter { $0["sequence"]?.intValue == 1 && $0["answer"]?.stringValue == "500" }.count
        XCTAssertLessThanOrEqual(tries, 3 + 2)
        let dead = try runCommand(Paths.agentctlBinary, ["queue", "--dead", "--socket", socket])
        XCTAssertEqual(dead.status, 0, dead.stderr)
        XCTAssertTrue(dead.stdout.contains("500"), dead.stdout)
    }
}
