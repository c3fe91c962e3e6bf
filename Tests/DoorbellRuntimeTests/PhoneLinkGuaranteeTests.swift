import DoorbellCore
import DoorbellRuntime
import Foundation
import XCTest

/// Issue #26 end to end, the real agent against the emulated iPhone (Bumble, `virtual_radio.py
/// --phone`): an intruder with the owner's address and no keys changes nothing; a live
/// notification whose read a link drop cut is reported once when a later link reads it; a push
/// is one `push.displayed` per phone, at the phone's Date, across reconnections and a restart;
/// a call's removal is reported with its UID; the base station advertises its name.
final class PhoneLinkGuaranteeTests: XCTestCase {
    static let owner = "F4:0F:24:00:00:01"

    func config(_ dir: TempDir, phone: EmulatedPhone, socket: String, stateDir: String) throws -> String {
        try dir.write("agent.toml", """
        \(agentHeader(dir, socket: socket, stateDir: stateDir))
        [clock]
        require_sync = false
        \(phone.bleSection)
        ancs_notify = ["incoming_call", "email"]
        """)
    }

    static func events(_ socket: String, _ type: String) -> [JSONValue] {
        ((try? runCommand(Paths.agentctlBinary, ["events", "--json", "--socket", socket]).stdout) ?? "").split(separator: "\n")
            .compactMap { try? JSONReader.parse(String($0)) }.filter { $0["type"]?.stringValue == type }
    }

    /// A central using the owner's identity address without its keys: three connections, each
    /// ending in a MIC failure. The bond on disk is byte for byte as it was (name, last seen), the
    /// owner is never shown connected, no phone event is made, and the status says what happened.
    func testADeviceWithTheOwnersAddressButNotItsKeysChangesNothing() throws {
        try EmulatedPhone.requireHarness()
        let dir = try TempDir()
        let stateDir = dir.file("state")
        try FileManager.default.createDirectory(atPath: stateDir, withIntermediateDirectories: true)
        let bond = PhoneBond(address: [0xF4, 0x0F, 0x24, 0x00, 0x00, 0x01], addressIsRandom: false, irk: Array(repeating: 7, count: 16),
                             ltk: Array(repeating: 8, count: 16), name: "Anna’s iPhone", bondedAtMicros: 1_795_000_000_000_000,
                             lastSeenMicros: 1_795_000_100_000_000)
        try BondStore(stateDir: stateDir, now: 0).update { $0.add(bond) }
        let before = try String(contentsOfFile: stateDir + "/phones.json", encoding: .utf8)

        let phone = try EmulatedPhone.start(dir, extra: ["--phone-intruder", "--phone-name", "Mallory’s iPhone"])
        defer { phone.stop() }
        let socket = dir.file("control.sock")
        let agent = try startAgent(dir, config: try config(dir, phone: phone, socket: socket, stateDir: stateDir), socket: socket)
        defer { agent.stop() }
        var shownConnected: [String] = []
        eventually(90, "three intrusions, each dropped") {
            if let p = try? runCommand(Paths.agentctlBinary, ["phones", "--json", "--socket", socket]).stdout,
               let j = try? JSONReader.parse(p), j["phones"]?.arrayValues?.contains(where: { $0["connected"]?.boolValue == true }) == true {
                shownConnected.append(p)
            }
            return phone.said("disconnected").count >= 3
        }
        let diagnostics = "\nphone:\n\(phone.radio.stdout.suffix(3000))\nagent:\n\(agent.stderr.suffix(3000))"
        XCTAssertGreaterThanOrEqual(phone.said("intruding").count, 3, diagnostics)
        XCTAssertTrue(phone.said("disconnected").allSatisfy { $0["reason"]?.intValue == 0x3D }, "MIC failures" + diagnostics)
        XCTAssertEqual(shownConnected, [], "the owner was never shown connected")
        XCTAssertEqual(try String(contentsOfFile: stateDir + "/phones.json", encoding: .utf8), before, "the bond untouched" + diagnostics)
        let phones = try runCommand(Paths.agentctlBinary, ["phones", "--socket", socket]).stdout
        XCTAssertTrue(phones.contains("\(Self.owner) Anna’s iPhone: not connected"), phones)
        for type in ["phone.notification", "push.displayed", "phone.paired"] { XCTAssertEqual(Self.events(socket, type), [], type) }
        let error = agentStatus(socket)?["phones"]?["last_error"]?.stringValue ?? ""
        XCTAssertTrue(error.contains("could not encrypt with its bond"), error + diagnostics)
    }

    func testTheOwnersPhoneReportsEachThingOnceAcrossDropsAndARestart() throws {
        try EmulatedPhone.requireHarness()
        let dir = try TempDir()
        let stateDir = dir.file("state")
        let phone = try EmulatedPhone.start(dir)
        defer { phone.stop() }
        let socket = dir.file("control.sock")
        let config = try config(dir, phone: phone, socket: socket, stateDir: stateDir)
        var agent = try startAgent(dir, config: config, socket: socket)
        defer { agent.stop() }
        let diagnostics = { "\nphone:\n\(phone.radio.stdout.suffix(5000))\nagent:\n\(agent.stderr.suffix(3000))" }
        XCTAssertEqual(try runCommand(Paths.agentctlBinary, ["pair", "--seconds", "120", "--socket", socket]).status, 0)
        eventually(90, "the phone pairs and its notifications are read") {
            agentStatus(socket)?["phones"]?["reading_notifications"]?.boolValue == true
        }
        // 5. The base station's name (the gateway id) in its advertising.
        XCTAssertEqual(phone.said("advertised_name").map { $0["name"]?.stringValue }, ["gw"], diagnostics())

        // 3. The doorbell app's alert, dated by the phone: one receipt at that date.
        try phone.tell(.object([("op", .string("post")), ("uid", .number(41)), ("category", .string("other")),
                                ("app_id", .string(PhonePushTests.topic)), ("title", .string(PhonePushTests.doorbellName)),
                                ("subtitle", .string("Someone is at the door #K3QF7")), ("message", .string("Ring")),
                                ("date", .string("20261126T162000"))]))
        eventually(30, "push.displayed") { !Self.events(socket, "push.displayed").isEmpty }
        let receipt = try XCTUnwrap(Self.events(socket, "push.displayed").first?["data"], diagnostics())
        var t = tm()
        (t.tm_year, t.tm_mon, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec, t.tm_isdst) = (126, 10, 26, 16, 20, 0, -1)
        XCTAssertEqual(receipt["displayed_at"]?.stringValue, RFC3339.format(micros: Int64(mktime(&t)) * 1_000_000), "the phone's Date in this zone")
        XCTAssertEqual(receipt["displayed_at_source"]?.stringValue, "phone")
        XCTAssertEqual(receipt["uid"]?.intValue, 41)
        XCTAssertEqual(receipt["phone"]?["id"]?.stringValue, Self.owner)

        // 1. A mail whose Data Source response the link drop cuts: reported once the phone is back.
        try phone.tell(.object([("op", .string("drop_mid_response"))]))
        try phone.tell(.object([("op", .string("post")), ("uid", .number(50)), ("category", .string("email")),
                                ("app_id", .string("com.apple.mobilemail")), ("title", .string("Invoice")),
                                ("message", .string(String(repeating: "Amount due. ", count: 20)))]))
        eventually(30, "the phone dropped mid response") { !phone.said("dropped_mid_response").isEmpty }
        eventually(60, "the mail is reported after the phone came back") {
            Self.events(socket, "phone.notification").contains { $0["data"]?["uid"]?.intValue == 50 }
        }
        // After that link's listing (41 read again as pre-existing): still one receipt.
        eventually(30, "41 read again") { Self.reads(phone, uid: 41) >= 2 }

        // 4. A call, then it stops ringing on the phone.
        try phone.tell(.object([("op", .string("post")), ("uid", .number(60)), ("category", .string("incoming_call")),
                                ("app_id", .string("com.apple.mobilephone")), ("title", .string("Mum"))]))
        eventually(30, "the call") { Self.events(socket, "phone.notification").contains { $0["data"]?["uid"]?.intValue == 60 } }
        try phone.tell(.object([("op", .string("remove")), ("uid", .number(60))]))
        eventually(30, "the call's removal") { !Self.events(socket, "phone.notification_removed").isEmpty }
        let removed = Self.events(socket, "phone.notification_removed")
        XCTAssertEqual(removed.map { $0["data"]?["uid"]?.intValue }, [60])
        XCTAssertEqual(removed.first?["data"]?["phone"]?["id"]?.stringValue, Self.owner)

        XCTAssertEqual(Self.events(socket, "push.displayed").count, 1, "one receipt per push and phone" + diagnostics())
        XCTAssertEqual(Self.events(socket, "phone.notification").filter { $0["data"]?["uid"]?.intValue == 50 }.count, 1, diagnostics())

        // The agent restarts (agentctl events then lists this run's events); the phone comes back
        // and lists everything again: nothing new.
        agent.stop()
        agent = try startAgent(dir, config: config, socket: socket)
        eventually(60, "41 read again after the restart") { Self.reads(phone, uid: 41) >= 3 }
        eventually(30, "50 read again after the restart") { Self.reads(phone, uid: 50) >= 3 }
        XCTAssertEqual(Self.events(socket, "push.displayed").count, 0, "one receipt per push and phone, ever" + diagnostics())
        XCTAssertEqual(Self.events(socket, "phone.notification").count, 0, diagnostics())
        let bonds = try PhoneBonds(json: JSONReader.parse(String(contentsOfFile: stateDir + "/phones.json", encoding: .utf8)))
        XCTAssertEqual(bonds.bonds.first?.receipts, ["K3QF7"])
        XCTAssertEqual(bonds.bonds.first?.unfinished, [])
    }

    /// How often the phone answered Get Notification Attributes for this UID.
    static func reads(_ phone: EmulatedPhone, uid: Int) -> Int {
        phone.said("responded").count > 0 ? phone.said("command").filter {
            $0["command"]?.stringValue == "get_notification_attributes" && $0["uid"]?.intValue == Int64(uid)
        }.count : 0
    }
}
