import DoorbellCore
import Foundation
import XCTest

/// End to end: real rtl_433 replays a recording → doorbell-agent → HTTPS → doorbell-cloud,
/// which verifies both signatures. Each recording holds exactly one press.
final class PipelineIntegrationTests: XCTestCase {
    struct Recording {
        let file: String
        let match: String
    }

    /// The RF test set (Tests/Fixtures/rf-recordings, see its MANIFEST.md): the 24-bit
    /// words come from its independent analysis of each time line.
    static let recordings: [Recording] = [
        Recording(file: "rtl433tests__door_bell_01__gfile002_433.92M_250k.cu8", match: #"{ code = "0x91568F" }"#),
        Recording(file: "rtl433tests__door_bell_01__gfile003_433.92M_250k.cu8", match: #"{ code = "0x91568F" }"#),
        Recording(file: "rtl433tests__PT2262_01__gfile002_433.92M_250k.cu8", match: #"{ code = "0x755555" }"#),
        Recording(file: "rtl433tests__generic_remote_01__gfile001_433.92M_250k.cu8", match: #"{ code = "0x13CDC0" }"#),
        Recording(file: "rtl433tests__generic_remote_01__gfile002_433.92M_250k.cu8", match: #"{ code = "0x13CD0C" }"#),
        Recording(file: "flipper__Doorbell2.ook", match: #"{ code = "0x11C408" }"#),
        Recording(file: "flipper__Surfou_wireless_doorbell.ook", match: #"{ code = "0x04CDF8" }"#),
        Recording(file: "flipper__GE_Doorbell_19297.ook", match: #"{ code = "0x9FC378" }"#),
        Recording(file: "flipper__Byron_DB421E.ook", match: #"{ model = "Byron-DB421E", data = "a7b67a2c8" }"#),
    ]

    func testEveryRecordingIsExactlyOnePressDeliveredAndVerified() throws {
        try requireFile(Paths.agentBinary, "doorbell-agent")
        let dir = try TempDir()
        let cloud = try CloudFixture(dir: dir)
        try cloud.start()
        defer { cloud.stop() }

        for (index, recording) in Self.recordings.enumerated() {
            let device = "bell-\(index)"
            let socket = dir.file("control-\(index).sock")
            let radio = """
            [radio.rtl433]
            conf_file = "\(Paths.boardConf)"
            replay = ["\(Paths.recordings)/\(recording.file)"]
            """
            let config = try dir.write("agent-\(index).toml", agentConfig(
                gateway: "gw-test", stateDir: cloud.stateDir, socket: socket, radio: radio,
                devices: [(device, recording.match)], url: cloud.url, caFile: cloud.caFile, secretFile: cloud.secretFile))
            let agent = try Child(Paths.agentBinary, ["run", "--config", config], dir: dir, name: "agent-\(index)")

            // Done when rtl_433 has finished the file and the outbox is empty.
            eventually(60, "\(recording.file): replay finished and outbox drained") {
                guard let s = agentStatus(socket) else { return false }
                return s["radios"]?.arrayFirst?["state"]?.stringValue == "finished" && s["outbox"]?["depth"]?.intValue == 0
            }
            let status = agentStatus(socket)
            agent.stop()
            XCTAssertEqual(agent.process.terminationStatus, 0, "agent exit for \(recording.file): \(agent.stderr)")

            let mine = cloud.events.filter { ($0["device"]?.stringValue ?? $0["device"]?["id"]?.stringValue) == device }
            XCTAssertEqual(mine.count, 1, "\(recording.file): expected exactly one event, got \(mine.count); agent log:\n\(agent.stderr.suffix(3000))")
            XCTAssertEqual(mine.first?["type"]?.stringValue, "doorbell.pressed", recording.file)
            let verified = mine.first?["verified"]?.arrayValues?.compactMap(\.stringValue) ?? []
            XCTAssertEqual(Set(verified), ["v1", "v1a"], "\(recording.file): both signatures must verify")
            XCTAssertEqual(status?["events"]?["doorbell.pressed"]?.intValue, 1, recording.file)
            XCTAssertEqual(status?["events"]?["doorbell.held"]?.intValue, 0, recording.file)
        }
        XCTAssertEqual(cloud.events.count, Self.recordings.count, "nothing else may be emitted")
    }

    /// Receiver down: the event waits in the outbox; the agent is killed with SIGKILL; after a
    /// restart with the receiver up, the event arrives exactly once.
    func testEventSurvivesOutageAndKillDashNine() throws {
        try requireFile(Paths.agentBinary, "doorbell-agent")
        let simRecording = Paths.repoRoot + "/board/sim/recordings/front-door.ook"
        let dir = try TempDir()
        let cloud = try CloudFixture(dir: dir)
        let port = try freeLoopbackPort()
        let url = "https://127.0.0.1:\(port)/events"
        let socket = dir.file("control.sock")
        let radio = """
        [radio.rtl433]
        conf_file = "\(Paths.boardConf)"
        replay = ["\(simRecording)"]
        """
        let first = try dir.write("first.toml", agentConfig(stateDir: cloud.stateDir, socket: socket, radio: radio,
                                                            devices: [("front-door", #"{ code = "0x5A3C91" }"#)],
                                                            url: url, caFile: cloud.caFile, secretFile: cloud.secretFile))
        let agent = try Child(Paths.agentBinary, ["run", "--config", first], dir: dir, name: "agent-1")
        eventually(60, "event buffered and a delivery attempt failed") {
            guard let s = agentStatus(socket) else { return false }
            return s["outbox"]?["depth"]?.intValue == 1 && (s["uplink"]?["failed_attempts"]?.intValue ?? 0) >= 2
        }
        let status = agentStatus(socket)
        XCTAssertEqual(status?["health"]?.stringValue, "degraded")
        XCTAssertTrue(status?["uplink"]?["last_error"]?.stringValue?.contains("refused") ?? false, "\(String(describing: status))")
        agent.signal(SIGKILL)
        agent.wait(seconds: 10)

        try cloud.start(port: port)
        defer { cloud.stop() }
        // The second run replays nothing: only the stored event can reach the receiver.
        let second = try dir.write("second.toml", agentConfig(stateDir: cloud.stateDir, socket: socket, radio: nil, devices: [],
                                                             url: url, caFile: cloud.caFile, secretFile: cloud.secretFile))
        let again = try Child(Paths.agentBinary, ["run", "--config", second], dir: dir, name: "agent-2")
        defer { again.stop() }
        eventually(60, "the buffered event delivered") { agentStatus(socket)?["outbox"]?["depth"]?.intValue == 0 && cloud.events.count >= 1 }
        XCTAssertEqual(cloud.events.count, 1, cloud.server?.stdout ?? "")
        XCTAssertEqual(cloud.events.first?["device"]?.stringValue, "front-door")
        XCTAssertEqual(cloud.events.first?["sequence"]?.intValue, 1)
    }
}

func freeLoopbackPort() throws -> Int {
    let s = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(s) }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    addr.sin_port = 0
    var len = socklen_t(MemoryLayout<sockaddr_in>.size)
    let ok = withUnsafeMutablePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(s, $0, len) == 0 && getsockname(s, $0, &len) == 0 }
    }
    guard ok else { throw skip("cannot bind a loopback port") }
    return Int(UInt16(bigEndian: addr.sin_port))
}

extension JSONValue {
    var arrayFirst: JSONValue? { arrayValues?.first }
}
