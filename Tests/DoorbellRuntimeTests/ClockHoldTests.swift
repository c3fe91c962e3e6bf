import DoorbellCore
import Foundation
import XCTest

/// Without a synchronized clock the agent records events but holds delivery; once the clock is
/// synchronized it corrects occurred_at from the monotonic clock and delivers.
final class ClockHoldTests: XCTestCase {
    func testDeliveryWaitsForClockSyncThenCorrects() throws {
        try requireFile(Paths.agentBinary, "doorbell-agent")
        let dir = try TempDir()
        let receiver = try ScriptedReceiver(dir: dir, ["--script", "200"])
        defer { receiver.stop() }
        let secret = try dir.write("g.whsec", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n")
        let quiet = try quietRadio(dir)
        let socket = dir.file("control.sock")
        let syncFlag = dir.file("synchronized")
        let config = agentConfig(stateDir: dir.file("state"), socket: socket, radio: "[radio.rtl433]\nbinary = \"\(quiet)\"",
                                 devices: [("front-door", "{ code = 1 }")], url: receiver.url,
                                 caFile: receiver.caFile, secretFile: secret)
            .replacingOccurrences(of: "require_sync = false", with: "require_sync = true\nsync_file = \"\(syncFlag)\"\nkernel_check = false")
        let path = try dir.write("agent.toml", config)
        let agent = try startAgent(dir, config: path, socket: socket)
        defer { agent.stop() }
        XCTAssertEqual(try injectPress(socket), 0)
        eventually(30, "delivery held for the clock") { agentStatus(socket)?["clock"]?["delivery_held"]?.boolValue == true }
        let held = agentStatus(socket)
        XCTAssertEqual(held?["health"]?.stringValue, "degraded")
        XCTAssertEqual(held?["outbox"]?["depth"]?.intValue, 1)
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir.file("requests.jsonl")), "nothing sent with an unsynchronized clock")

        FileManager.default.createFile(atPath: syncFlag, contents: nil)
        eventually(30, "delivered once the clock is synchronized") { agentStatus(socket)?["uplink"]?["delivered"]?.intValue == 1 }
        let body = try JSONReader.parse(receiver.requests.first?["body"]?.stringValue ?? "")
        XCTAssertEqual(body["clock_synced"]?.boolValue, false)
        XCTAssertEqual(body["clock_corrected"]?.boolValue, true)
        XCTAssertNotNil(body["boot_id"]?.stringValue)
        XCTAssertEqual(agentStatus(socket)?["clock"]?["delivery_held"]?.boolValue, false)
    }
}
