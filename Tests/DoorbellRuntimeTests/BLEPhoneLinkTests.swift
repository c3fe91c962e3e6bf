import DoorbellCore
import DoorbellRuntime
import XCTest

/// The phone link against a virtual iPhone (Bumble, `virtual_radio.py --phone`): it scans for the
/// base station's ANCS solicitation, connects over the virtual air, and serves ANCS; the radio's
/// host discovers it through the real ACL path of the virtual controller.
final class BLEPhoneLinkTests: XCTestCase {
    /// The phone connects, drops the link after two seconds (the owner walks away) and comes back:
    /// advertising resumed after the disconnection, and discovery runs again on the new link.
    func testAPhoneConnectsToTheSolicitationAndTheBaseStationDiscoversANCSAgainAfterADrop() throws {
        let (lines, truth) = try run(radioArguments: [])
        func count(_ s: String) -> Int { lines.snapshot.filter { $0.contains(s) }.count }
        eventually(30, "the phone connects and ANCS is discovered") { count("discoveredANCS") >= 1 }
        eventually(30, "the phone drops the link, reconnects, and ANCS is discovered again") { count("discoveredANCS") >= 2 }
        let said = ((try? String(contentsOfFile: truth, encoding: .utf8)) ?? "")
        XCTAssertEqual(said.components(separatedBy: "phone_connected").count - 1, 2, said)
        XCTAssertEqual(said.components(separatedBy: "phone_disconnected").count - 1, 1, said)
        XCTAssertEqual(count("ble.connected"), 2, lines.snapshot.joined(separator: "\n"))
        XCTAssertEqual(count("ble.disconnected"), 1, lines.snapshot.joined(separator: "\n"))
    }

    /// A controller with extended advertising: the own iBeacon and the solicitation as two sets, the
    /// scan extended too; the phone still finds the base station, and after the drop only the
    /// connectable set is enabled again. The base station's name is in the connectable set's scan response.
    func testWithExtendedAdvertisingTheBeaconAndTheSolicitationAreTwoSets() throws {
        let (lines, truth) = try run(radioArguments: ["--extended-advertising"]) {
            $0.beacon = OwnBeacon(beacon: IBeacon(uuid: [UInt8](repeating: 0xE2, count: 16), major: 1, minor: 2, measuredPower: -59))
            $0.ancsName = "Front door"
        }
        func count(_ s: String) -> Int { lines.snapshot.filter { $0.contains(s) }.count }
        eventually(30, "the phone connects twice and ANCS is discovered each time") { count("discoveredANCS") >= 2 }
        XCTAssertEqual(count("scan=extended"), 1, lines.snapshot.joined(separator: "\n"))
        let said = (try? String(contentsOfFile: truth, encoding: .utf8)) ?? ""
        XCTAssertTrue(said.contains("phone_advertised_name") && said.contains("Front door"), said)
    }

    /// The virtual air with a phone that drops its first link after 2 s, and a BLE radio on it with
    /// the phone link on; the radio's log lines, and the air's truth file.
    func run(radioArguments: [String], _ edit: (inout BLERadioSettings) -> Void = { _ in }) throws -> (Locked<[String]>, String) {
        try requireFile(BLERadioTests.virtualRadio, "the virtual controller")
        guard FileManager.default.isExecutableFile(atPath: BLERadioTests.python) else {
            throw skip("SKIPPED: .venv missing; make test creates it (scripts/venv.sh installs bumble)")
        }
        let dir = try TempDir()
        let scenario = try dir.write("scenario.json", #"{"name": "phone", "advertisers": [], "events": []}"#)
        let ready = dir.file("ready.json"), truth = dir.file("truth.jsonl")
        let child = try Child(BLERadioTests.python, [BLERadioTests.virtualRadio, "--port", "0", "--scenario", scenario, "--phone", "--phone-drop-after", "2",
                                                     "--hold", "--max-seconds", "60", "--truth", truth, "--ready-file", ready] + radioArguments,
                              dir: dir, name: "virtual-radio")
        addTeardownBlock { child.stop(); _ = dir } // the truth file lives as long as the test
        eventually(30, "virtual controller ready") { FileManager.default.fileExists(atPath: ready) }
        let port = try JSONReader.parse(String(contentsOfFile: ready, encoding: .utf8))["port"]?.intValue ?? 0
        var settings = BLERadioSettings(transport: .tcp(host: "127.0.0.1", port: Int(port)))
        settings.ancsLink = true
        settings.stallSeconds = 0
        edit(&settings)
        let lines = Locked<[String]>([])
        let radio = BLERadio(settings: settings, log: Logger(level: .info) { line in lines.withLock { $0.append(line) } }, sink: { _ in })
        try radio.start()
        addTeardownBlock { radio.stop() }
        return (lines, truth)
    }
}
