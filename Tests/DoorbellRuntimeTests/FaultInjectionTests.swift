import DoorbellCore
import Foundation
import XCTest

/// The uplink against a misbehaving receiver: connections reset before and after the receiver
/// stored the event, and a live press overtaking a stuck backlog.
final class FaultInjectionTests: XCTestCase {
    var dir: TempDir!
    var receiver: ScriptedReceiver?
    var agent: Child?
    var socket: String { dir.file("control.sock") }

    override func tearDown() {
        agent?.stop()
        receiver?.stop()
    }

    func start(script: String) throws {
        try requireFile(Paths.agentBinary, "doorbell-agent")
        dir = try TempDir()
        let receiver = try ScriptedReceiver(dir: dir, ["--script", script])
        self.receiver = receiver
        let secret = try dir.write("g.whsec", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n")
        let config = agentConfig(stateDir: dir.file("state"), socket: socket, radio: "[radio.rtl433]\nbinary = \"\(try quietRadio(dir))\"",
                                 devices: [("front-door", "{ code = 1 }")], url: receiver.url, caFile: receiver.caFile, secretFile: secret)
            + "\n[tracker.button]\ncooldown_ms = 0\nrepeat_gap_ms = 20\n"
        agent = try startAgent(dir, config: try dir.write("agent.toml", config), socket: socket)
    }

    func press() throws {
        usleep(30_000)
        XCTAssertEqual(try injectPress(socket), 0)
    }

    var requests: [JSONValue] { receiver?.requests ?? [] }

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
