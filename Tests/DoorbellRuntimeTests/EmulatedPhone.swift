import DoorbellCore
import Foundation
import XCTest

/// The owner's iPhone on the virtual air: `virtual_radio.py --phone` (Bumble) as the tests'
/// controller, with a control file for what the phone is to show, and what it says it did.
struct EmulatedPhone {
    let radio: Child
    /// The virtual controller's H4 TCP port, for `[radio.ble] address`.
    let port: Int
    let control: String

    /// The virtual controller, Bumble in the .venv and the agent: skips the test without them.
    static func requireHarness() throws {
        try requireFile(BLERadioTests.virtualRadio, "the virtual controller")
        guard FileManager.default.isExecutableFile(atPath: BLERadioTests.python) else {
            throw skip("SKIPPED: .venv missing; make test creates it (scripts/venv.sh installs bumble)")
        }
        try requireFile(Paths.agentBinary, "doorbell-agent")
    }

    /// `extra`: more `virtual_radio.py` arguments (`--phone-intruder`, `--phone-name`, …).
    static func start(_ dir: TempDir, maxSeconds: Int = 300, extra: [String] = []) throws -> EmulatedPhone {
        let scenario = try dir.write("scenario.json", #"{"name": "phone", "advertisers": [], "events": []}"#)
        let ready = dir.file("radio-ready.json"), control = dir.file("phone-control.jsonl")
        let radio = try Child(BLERadioTests.python, [BLERadioTests.virtualRadio, "--port", "0", "--scenario", scenario, "--phone",
                                                     "--phone-control", control, "--hold", "--max-seconds", String(maxSeconds),
                                                     "--ready-file", ready] + extra,
                              dir: dir, name: "virtual-radio")
        eventually(30, "virtual controller ready") { FileManager.default.fileExists(atPath: ready) }
        let port = try JSONReader.parse(String(contentsOfFile: ready, encoding: .utf8))["port"]?.intValue ?? 0
        return EmulatedPhone(radio: radio, port: Int(port), control: control)
    }

    func stop() { radio.stop() }

    /// The agent's `[radio.ble]` on this phone's controller, with the phone link and the doorbell app.
    var bleSection: String {
        """
        [radio.ble]
        transport = "tcp"
        address = "127.0.0.1:\(port)"
        stall_s = 0
        ancs = true
        ancs_app = "\(PhonePushTests.topic)"
        """
    }

    /// What the phone reported doing (`paired`, `performed`, …), in order.
    func said(_ event: String) -> [JSONValue] {
        radio.stdout.split(separator: "\n").compactMap { try? JSONReader.parse(String($0)) }.filter { $0["phone"]?.stringValue == event }
    }

    /// One line of the control file (`{"op": "post", …}`): the phone acts on it.
    func tell(_ line: JSONValue) throws {
        let handle = try XCTUnwrap(FileHandle(forWritingAtPath: control) ?? {
            FileManager.default.createFile(atPath: control, contents: nil)
            return FileHandle(forWritingAtPath: control)
        }())
        handle.seekToEndOfFile()
        handle.write(Data((JSONWriter.string(line) + "\n").utf8))
        try handle.close()
    }

    /// The doorbell app's alert for a press, as iOS shows it from the cloud's push.
    func postDoorbellAlert(uid: Int, subtitle: String) throws {
        try tell(.object([("op", .string("post")), ("uid", .number(Double(uid))), ("category", .string("other")),
                          ("app_id", .string(PhonePushTests.topic)), ("title", .string(PhonePushTests.doorbellName)),
                          ("subtitle", .string(subtitle)), ("message", .string("Someone is at the door"))]))
    }
}
