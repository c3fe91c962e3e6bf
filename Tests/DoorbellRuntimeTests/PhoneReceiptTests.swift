import DoorbellCore
import DoorbellRuntime
import Foundation
import XCTest

/// Issue #18 end to end: a press → the agent → doorbell-cloud → the APNs test server; the emulated
/// iPhone (Bumble, `virtual_radio.py --phone`) pairs with the base station in the pairing window,
/// bonds, and shows the doorbell app's notification with the subtitle the cloud put into its push;
/// the agent reads it over ANCS and reports `push.displayed`; the cloud records it on that push
/// and shows press → APNs → displayed. Then a call becomes a local event, and answering the door
/// dismisses the notification on the phone.
final class PhoneReceiptTests: XCTestCase {
    func testAPushShownOnThePairedPhoneIsAReceiptInTheCloud() throws {
        try requireFile(Paths.agentBinary, "doorbell-agent")
        try requireFile(BLERadioTests.virtualRadio, "the virtual controller")
        guard FileManager.default.isExecutableFile(atPath: PhonePushTests.python) else {
            throw skip("SKIPPED: .venv missing (scripts/venv.sh, run by make test, installs bumble, h2 and cryptography)")
        }
        let dir = try TempDir()
        let fixture = try CloudFixture(dir: dir)
        let token = PhonePushTests.randomToken()
        let stack = try PushStack.start(dir, fixture: fixture, script: #"{"default": {"status": 200}}"#)
        defer { stack.apns.stop(); stack.cloud.stop() }
        let api = stack.api

        // The phone on the virtual air, following a control file for what it is to show.
        let phone = try EmulatedPhone.start(dir)
        defer { phone.stop() }
        let radio = phone.radio

        // Accounts, the gateway by its key, the owner's phone.
        let owner = try api.expect(201, "POST", "/accounts", token: stack.adminToken, .object([("name", .string("Owner"))]))
        let ownerToken = try XCTUnwrap(owner["token"]?.stringValue)
        let socket = dir.file("control.sock")
        let radios = """
        [radio.rtl433]
        conf_file = "\(Paths.boardConf)"
        replay = ["\(Paths.repoRoot)/board/sim/recordings/front-door.ook"]
        \(phone.bleSection)
        """
        let config = try dir.write("agent.toml", agentConfig(
            gateway: "gw-test", stateDir: fixture.stateDir, socket: socket, radio: radios,
            devices: [("front-door", #"{ code = "0x5A3C91" }"#)], url: "https://127.0.0.1:\(stack.cloudPort)/events",
            caFile: fixture.caFile, secretFile: fixture.secretFile))
        let publicKey = try runCommand(Paths.agentBinary, ["pubkey", "--config", config]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        try api.expect(201, "POST", "/gateways", token: ownerToken, .object([("id", .string("gw-test")), ("public_key", .string(publicKey))]))
        try api.expect(200, "PUT", "/doorbells/gw-test:front-door", token: ownerToken, .object([("name", .string(PhonePushTests.doorbellName))]))
        let phoneID = try api.expect(200, "PUT", "/phones/\(token)", token: ownerToken,
                                     PhonePushTests.phoneRegistration(token))["id"]?.stringValue

        // The agent starts (the recorded press goes out at once); the owner opens pairing.
        let agent = try Child(Paths.agentBinary, ["run", "--config", config], dir: dir, name: "agent")
        defer { agent.stop() }
        eventually(30, "the agent answers") { agentStatus(socket) != nil }
        XCTAssertEqual(try runCommand(Paths.agentctlBinary, ["pair", "--seconds", "120", "--socket", socket]).status, 0)
        let diagnostics = { "\nphone:\n\(radio.stdout.suffix(4000))\nagent:\n\(agent.stderr.suffix(4000))\ncloud:\n\(stack.cloud.stdout.suffix(2000))" }
        eventually(90, "the phone pairs, bonds and its notifications are read") {
            agentStatus(socket)?["phones"]?["reading_notifications"]?.boolValue == true
        }
        XCTAssertEqual(phone.said("paired").count, 1, diagnostics())
        let phones = try runCommand(Paths.agentctlBinary, ["phones", "--socket", socket]).stdout
        XCTAssertTrue(phones.contains("F4:0F:24:00:00:01") && phones.contains("connected, reading notifications"), phones + diagnostics())
        var st = stat()
        XCTAssertEqual(stat(fixture.stateDir + "/phones.json", &st), 0)
        XCTAssertEqual(st.st_mode & 0o777, 0o600)

        // The push APNs got for this phone, and its reference.
        let pressID = try XCTUnwrap(
            (try runCommand(Paths.agentctlBinary, ["events", "--json", "--socket", socket]).stdout.split(separator: "\n")
                .compactMap { try? JSONReader.parse(String($0)) }.first { $0["type"]?.stringValue == "doorbell.pressed" })?["id"]?.stringValue,
            diagnostics())
        var subtitle: String?
        eventually(60, "APNs got the push") {
            subtitle = apnsRecords(stack.apnsLog).first { $0["event"]?.stringValue == "request" && $0["status"]?.intValue == 200 }?["payload"]?["aps"]?["alert"]?["subtitle"]?.stringValue
            return subtitle != nil
        }
        let reference = try XCTUnwrap(subtitle, diagnostics())
        XCTAssertTrue(reference.hasPrefix("#") && reference.count == 6, reference)

        // The phone shows it (as iOS would, from that push); the base station reads it off the phone.
        try phone.postDoorbellAlert(uid: 41, subtitle: reference)
        eventually(60, "the cloud records the receipt on the push") {
            stack.cloud.stdout.contains("RECEIPT ") && stack.cloud.stdout.contains(" push.displayed \(pressID) \(token.prefix(8))")
        }
        let rows = try api.expect(200, "GET", "/events/\(pressID)/deliveries", token: ownerToken)["deliveries"]?.arrayValues ?? []
        let row = rows.first { $0["phone_id"]?.stringValue == phoneID }
        XCTAssertEqual(row?["receipt"]?.stringValue, "displayed", "\(rows)" + diagnostics())
        XCTAssertNotNil(row?["press_to_displayed_ms"]?.intValue, "\(rows)")
        XCTAssertNotNil(row?["accepted_to_displayed_ms"]?.intValue, "\(rows)")

        // An incoming call becomes a local event, without its text.
        try phone.tell(.object([("op", .string("post")), ("uid", .number(42)), ("category", .string("incoming_call")),
                          ("app_id", .string("com.apple.mobilephone")), ("title", .string("Mum")), ("message", .string("Incoming call"))]))
        var call: JSONValue?
        eventually(30, "the call is an agent event") {
            call = (try? runCommand(Paths.agentctlBinary, ["events", "--json", "--socket", socket]).stdout)?.split(separator: "\n")
                .compactMap { try? JSONReader.parse(String($0)) }.first { $0["type"]?.stringValue == "phone.notification" }
            return call != nil
        }
        XCTAssertEqual(call?["data"]?["category"]?.stringValue, "incoming_call")
        XCTAssertNil(call?["data"]?["title"], "titles stay on the base station by default")
        XCTAssertEqual(call?["data"]?["flags"], .array([.string("positive_action"), .string("negative_action")]), "the call's EventFlags, by name")

        // The door is answered: the doorbell notification is dismissed on the phone.
        XCTAssertEqual(try runCommand(Paths.agentctlBinary, ["answer", "--socket", socket]).status, 0)
        eventually(30, "the phone performed the negative action") {
            phone.said("performed").contains { $0["uid"]?.intValue == 41 && $0["action"]?.stringValue == "negative" }
        }
    }
}
