import DoorbellCore
import Foundation
import XCTest

/// The uplink's heartbeat against the real doorbell-cloud: with nothing to deliver (a quiet
/// house after a night-time update), status still says the cloud answered since start — what a
/// field image's slot check marks a slot good on — and a gateway with the wrong key does not.
final class HeartbeatIntegrationTests: XCTestCase {
    var dir: TempDir!
    var cloud: CloudFixture?
    var agent: Child?
    var socket: String { dir.file("control.sock") }

    override func setUpWithError() throws {
        try requireFile(Paths.agentBinary, "doorbell-agent")
        dir = try TempDir()
    }

    override func tearDown() {
        agent?.stop()
        cloud?.stop()
    }

    func start(stateDir: String, secretFile: String) throws {
        let cloud = try XCTUnwrap(cloud)
        let config = agentConfig(stateDir: stateDir, socket: socket, radio: "[radio.rtl433]\nbinary = \"\(try quietRadio(dir))\"",
                                 devices: [("front-door", "{ code = 1 }")], url: cloud.url, caFile: cloud.caFile, secretFile: secretFile)
            .replacingOccurrences(of: "[uplink]\n", with: "[uplink]\nheartbeat_interval_s = 60\n")
        agent = try startAgent(dir, config: try dir.write("agent.toml", config), socket: socket)
    }

    func testAHeartbeatReachesTheCloudWithAnEmptyOutbox() throws {
        let cloud = try CloudFixture(dir: dir)
        self.cloud = cloud
        try cloud.start()
        try start(stateDir: cloud.stateDir, secretFile: cloud.secretFile)
        eventually(30, "the cloud answered a heartbeat") { agentStatus(socket)?["uplink"]?["cloud_reached_since_start"]?.boolValue == true }
        let status = agentStatus(socket)
        XCTAssertEqual(status?["outbox"]?["depth"]?.intValue, 0, "nothing to deliver")
        XCTAssertEqual(status?["outbox"]?["last_sequence"]?.intValue, 0, "a heartbeat is not an event: \(String(describing: status))")
        XCTAssertEqual(status?["uplink"]?["delivered"]?.intValue, 0)
        XCTAssertGreaterThanOrEqual(status?["uplink"]?["heartbeats"]?["accepted"]?.intValue ?? 0, 1)
        XCTAssertNotNil(status?["uplink"]?["last_2xx"]?.stringValue, "\(String(describing: status))")
        XCTAssertTrue(cloud.events.isEmpty, "the cloud stored no event")
        XCTAssertTrue((cloud.server?.stdout ?? "").contains("HEARTBEAT gw-test \(AgentVersion.current) "), cloud.server?.stdout ?? "")
        let human = try runCommand(Paths.agentctlBinary, ["status", "--socket", socket])
        XCTAssertTrue(human.stdout.contains("answered since start"), human.stdout)
    }

    func testAHeartbeatWithTheWrongKeyIsRefusedAndStatusSaysNotReached() throws {
        let cloud = try CloudFixture(dir: dir)
        self.cloud = cloud
        try cloud.start()
        // Another secret, and a state directory without the enrolled device key (the agent makes
        // a new one): neither signature verifies.
        let wrong = try dir.write("wrong.whsec", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n")
        try start(stateDir: dir.file("other-state"), secretFile: wrong)
        eventually(30, "a heartbeat was refused") { (agentStatus(socket)?["uplink"]?["heartbeats"]?["failed"]?.intValue ?? 0) >= 1 }
        let status = agentStatus(socket)
        XCTAssertEqual(status?["uplink"]?["cloud_reached_since_start"]?.boolValue, false, "\(String(describing: status))")
        XCTAssertEqual(status?["uplink"]?["heartbeats"]?["accepted"]?.intValue, 0)
        XCTAssertEqual(status?["health"]?.stringValue, "degraded", "a refused heartbeat is reported")
        XCTAssertTrue(status?["uplink"]?["last_error"]?.stringValue?.contains("HTTP 401") ?? false, "\(String(describing: status))")
        XCTAssertTrue((cloud.server?.stdout ?? "").contains("REJECTED bad_signature"), cloud.server?.stdout ?? "")
        let human = try runCommand(Paths.agentctlBinary, ["status", "--socket", socket])
        XCTAssertTrue(human.stdout.contains("NOT answered since start"), human.stdout)
    }
}
