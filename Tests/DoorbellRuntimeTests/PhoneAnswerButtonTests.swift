import DoorbellCore
import DoorbellRuntime
import Foundation
import XCTest

/// Issue #18, dismiss from the door: an answer button in the hall (`kind = "answer_button"`, a BLE
/// button) and an `[[action]] answer_phones` answer the door — the emulated iPhone performs the
/// negative action on the doorbell app's alert — and the doorbell's own button does not. The hall
/// button's presses are `door.answered`, never a doorbell press the cloud would push.
final class PhoneAnswerButtonTests: XCTestCase {
    func testTheHallButtonDismissesTheDoorbellAlertOnThePhone() throws {
        try EmulatedPhone.requireHarness()
        let dir = try TempDir()
        let phone = try EmulatedPhone.start(dir, maxSeconds: 180)
        defer { phone.stop() }
        let socket = dir.file("control.sock")
        let config = try dir.write("agent.toml", """
        \(agentHeader(dir, socket: socket, stateDir: dir.path))
        [clock]
        require_sync = false
        [tracker.button]
        cooldown_ms = 0
        [radio.ble]
        transport = "tcp"
        address = "127.0.0.1:\(phone.port)"
        stall_s = 0
        ancs = true
        ancs_app = "\(PhonePushTests.topic)"
        [[device]]
        id = "front-door"
        name = "\(PhonePushTests.doorbellName)"
        radio = "ble"
        match = { address = "C0:11:22:33:44:01" }
        [[device]]
        id = "hall-button"
        kind = "answer_button"
        radio = "ble"
        match = { address = "C0:11:22:33:44:02" }
        [[action]]
        name = "answer"
        answer_phones = true
        """)
        let agent = try startAgent(dir, config: config, socket: socket)
        defer { agent.stop() }
        let diagnostics = { "\nphone:\n\(phone.radio.stdout.suffix(3000))\nagent:\n\(agent.stderr.suffix(3000))" }
        func events(_ type: String) -> [JSONValue] {
            ((try? runCommand(Paths.agentctlBinary, ["events", "--json", "--socket", socket]).stdout) ?? "").split(separator: "\n")
                .compactMap { try? JSONReader.parse(String($0)) }.filter { $0["type"]?.stringValue == type }
        }
        func answerAction() -> JSONValue? { agentStatus(socket)?["actions"]?.arrayValues?.first }

        XCTAssertEqual(try runCommand(Paths.agentctlBinary, ["pair", "--seconds", "120", "--socket", socket]).status, 0)
        eventually(90, "the phone pairs, bonds and its notifications are read") {
            agentStatus(socket)?["phones"]?["reading_notifications"]?.boolValue == true
        }
        try phone.postDoorbellAlert(uid: 41, subtitle: "Someone is at the door #K3QF7")
        eventually(30, "the agent read the alert off the phone") { !events("push.displayed").isEmpty }
        XCTAssertEqual(answerAction()?["does"]?.stringValue, "answer_phones")
        // A call meanwhile: a phone.notification with the ANCS EventFlags by name.
        try phone.tell(.object([("op", .string("post")), ("uid", .number(42)), ("category", .string("incoming_call")),
                                ("app_id", .string("com.apple.mobilephone")), ("title", .string("Mum")),
                                ("flags", .array([.string("important"), .string("negative_action")]))]))
        eventually(30, "the call is an event") { !events("phone.notification").isEmpty }
        XCTAssertEqual(events("phone.notification").first?["data"]?["flags"], .array([.string("important"), .string("negative_action")]))

        // The doorbell's own button: a press like any other, the phone keeps its alert.
        XCTAssertEqual(try injectPress(socket, device: "front-door"), 0)
        eventually(10, "the front door's press is an event") { events("doorbell.pressed").contains { $0["device"]?["id"]?.stringValue == "front-door" } }
        // Actions run before an event is stored: had this press answered, it would show by now.
        XCTAssertEqual(answerAction()?["runs"]?.intValue, 0, diagnostics())
        XCTAssertFalse(agent.stderr.contains("phone.answered"), diagnostics())

        // The hall button answers the door.
        XCTAssertEqual(try injectPress(socket, device: "hall-button"), 0)
        eventually(30, "the phone performed the negative action on the alert") {
            phone.said("performed").contains { $0["uid"]?.intValue == 41 && $0["action"]?.stringValue == "negative" }
        }
        XCTAssertEqual(answerAction()?["runs"]?.intValue, 1, diagnostics())
        XCTAssertTrue(agent.stderr.contains(#"phone.answered dismissed="Front door" phones=1 uids=41"#), diagnostics())
        let answered = events("door.answered")
        XCTAssertEqual(answered.map { $0["device"]?["id"]?.stringValue }, ["hall-button"])
        XCTAssertEqual(answered.first?["data"]?["gesture"]?.stringValue, "pressed")
        XCTAssertFalse(events("doorbell.pressed").contains { $0["device"]?["id"]?.stringValue == "hall-button" },
                       "the hall button's press would be pushed to every phone as someone at the door")

        // Again: nothing rings any more, and the log says so.
        XCTAssertEqual(try injectPress(socket, device: "hall-button"), 0)
        eventually(10, "the log says nothing was ringing") { agent.stderr.contains("no doorbell notification was ringing") }
        XCTAssertEqual(phone.said("performed").count, 1, diagnostics())
        let table = try runCommand(Paths.agentctlBinary, ["status", "--socket", socket]).stdout
        XCTAssertTrue(table.contains("answers the door on the phones: 2 times, 0 failures"), table)
        XCTAssertEqual(phone.said("performed").count, 1, "the front door's press never answered" + diagnostics())
    }
}
