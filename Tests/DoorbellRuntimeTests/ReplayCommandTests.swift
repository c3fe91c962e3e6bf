import DoorbellCore
import Foundation
import XCTest

/// `doorbell-agent replay` on rtl_433's own decodes of the shared recordings (the `.flex.json`
/// files: one line per code word): every file is one press of its code.
final class ReplayCommandTests: XCTestCase {
    static let expected: [(file: String, code: String)] = [
        ("rtl433tests__door_bell_01__gfile002_433.92M_250k.flex.json", "91568f"),
        ("rtl433tests__door_bell_01__gfile003_433.92M_250k.flex.json", "91568f"),
        ("rtl433tests__PT2262_01__gfile002_433.92M_250k.flex.json", "755555"),
        ("rtl433tests__generic_remote_01__gfile001_433.92M_250k.flex.json", "13cdc0"),
        ("rtl433tests__generic_remote_01__gfile002_433.92M_250k.flex.json", "13cd0c"),
        ("flipper__Surfou_wireless_doorbell.flex.json", "04cdf8"),
        ("flipper__GE_Doorbell_19297.flex.json", "9fc378"),
    ]

    func testEachRecordingReplaysAsOnePressWithItsCode() throws {
        try requireFile(Paths.agentBinary, "doorbell-agent")
        for (file, code) in Self.expected {
            let r = try runCommand(Paths.agentBinary, ["replay", Paths.recordings + "/" + file])
            XCTAssertEqual(r.status, 0, r.stderr)
            let events = r.stdout.split(separator: "\n").compactMap { try? JSONReader.parse(String($0)) }
            XCTAssertEqual(events.count, 1, "\(file): \(r.stdout)")
            XCTAssertEqual(events.first?["type"]?.stringValue, "doorbell.pressed", file)
            XCTAssertEqual(events.first?["data"]?["code"]?.stringValue, code, file)
        }
    }

    func testFilesReplayAsSeparateRecordingsAndAConfigFiltersDevices() throws {
        let dir = try TempDir()
        let config = try dir.write("agent.toml", """
        gateway_id = "gw-replay"
        [radio.rtl433]
        [[device]]
        id = "front-door"
        match = { code = "0x91568F" }
        """)
        let files = ["rtl433tests__door_bell_01__gfile002_433.92M_250k.flex.json", "rtl433tests__door_bell_01__gfile003_433.92M_250k.flex.json",
                     "flipper__GE_Doorbell_19297.flex.json"].map { Paths.recordings + "/" + $0 }
        let r = try runCommand(Paths.agentBinary, ["replay", "--config", config] + files)
        let events = r.stdout.split(separator: "\n").compactMap { try? JSONReader.parse(String($0)) }
        XCTAssertEqual(events.map { $0["device"]?["id"]?.stringValue }, ["front-door", "front-door"], r.stdout + r.stderr)
        XCTAssertEqual(events.map { $0["sequence"]?.intValue }, [1, 2])
        XCTAssertTrue(r.stderr.contains("from unconfigured transmitters"), r.stderr)
    }
}
