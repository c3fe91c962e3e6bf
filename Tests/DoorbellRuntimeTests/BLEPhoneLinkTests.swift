import DoorbellCore
import DoorbellRuntime
import XCTest

/// The phone link against a virtual iPhone (Bumble, `virtual_radio.py --phone`): it scans for the
/// base station's ANCS solicitation, connects over the virtual air, and serves ANCS; the radio's
/// host discovers it through the real ACL path of the virtual controller.
final class BLEPhoneLinkTests: XCTestCase {
    func testAPhoneConnectsToTheSolicitationAndTheBaseStationDiscoversANCS() throws {
        try requireFile(BLERadioTests.virtualRadio, "the virtual controller")
        guard FileManager.default.isExecutableFile(atPath: BLERadioTests.python) else {
            throw skip("SKIPPED: .venv missing; make test creates it (scripts/venv.sh installs bumble)")
        }
        let dir = try TempDir()
        let scenario = try dir.write("scenario.json", #"{"name": "phone", "advertisers": [], "events": []}"#)
        let ready = dir.file("ready.json"), truth = dir.file("truth.jsonl")
        let child = try Child(BLERadioTests.python, [BLERadioTests.virtualRadio, "--port", "0", "--scenario", scenario, "--phone", "--hold",
                                                     "--max-seconds", "60", "--truth", truth, "--ready-file", ready], dir: dir, name: "virtual-radio")
        defer { child.stop() }
        eventually(30, "virtual controller ready") { FileManager.default.fileExists(atPath: ready) }
        let port = try JSONReader.parse(String(contentsOfFile: ready, encoding: .utf8))["port"]?.intValue ?? 0
        var settings = BLERadioSettings(transport: .tcp(host: "127.0.0.1", port: Int(port)))
        settings.ancsLink = true
        settings.stallSeconds = 0
        let lines = Locked<[String]>([])
        let radio = BLERadio(settings: settings, log: Logger(level: .info) { line in lines.withLock { $0.append(line) } }, sink: { _ in })
        radio.start()
        defer { radio.stop() }
        eventually(30, "the phone connects and ANCS is discovered") { lines.snapshot.contains { $0.contains("discoveredANCS") } }
        let said = ((try? String(contentsOfFile: truth, encoding: .utf8)) ?? "")
        XCTAssert(said.contains("phone_connected"), said)
        XCTAssert(lines.snapshot.contains { $0.contains("ble.connected") }, lines.snapshot.joined(separator: "\n"))
    }
}
