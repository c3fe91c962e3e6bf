import DoorbellCore
import DoorbellRuntime
import Foundation
import XCTest

/// The BLE radio against a virtual controller (Bumble, Tests/helpers/ble/virtual_radio.py) over
/// H4/TCP: the agent brings the controller up itself, scans, and its events are compared with the
/// scenario's ground truth.
final class BLERadioTests: XCTestCase {
    static let virtualRadio = Paths.repoRoot + "/Tests/helpers/ble/virtual_radio.py"
    static let python = Paths.repoRoot + "/.venv/bin/python"
    static let bindkey: [UInt8] = [0x23, 0x1D, 0x39, 0xC1, 0xD7, 0xCC, 0x1A, 0xB1, 0xAE, 0xE2, 0x24, 0xCD, 0x09, 0x6D, 0xB9, 0x32]
    static let gate: [UInt8] = [0xC0, 0x11, 0x22, 0x33, 0x44, 0x03]

    func requireHarness() throws {
        try requireFile(Self.virtualRadio, "the virtual controller")
        guard FileManager.default.isExecutableFile(atPath: Self.python) else {
            throw skip("SKIPPED: .venv missing; make test creates it (scripts/venv.sh installs bumble)")
        }
        try requireFile(Paths.agentBinary, "doorbell-agent")
    }

    /// Advertising data of an encrypted BTHome button press.
    static func encryptedPress(packetID: UInt8, counter: UInt32, event: UInt8) -> String {
        let sd = BTHomeDecoder.encode(objects: [0x00, packetID, 0x01, 77, 0x3A, event], triggerBased: true, address: gate, bindkey: bindkey, counter: counter)
        let ad: [UInt8] = [0x02, 0x01, 0x06, UInt8(sd.count + 3), 0x16, 0xD2, 0xFC] + sd
        return ad.map { String(format: "%02x", $0) }.joined()
    }

    struct VirtualRadio {
        let child: Child
        let port: Int
        let truth: String
    }

    func startRadio(_ dir: TempDir, scenario: String, tag: String = "") throws -> VirtualRadio {
        let file = try dir.write("scenario\(tag).json", scenario)
        let ready = dir.file("radio-ready\(tag).json")
        let truth = dir.file("truth\(tag).jsonl")
        let child = try Child(Self.python, [Self.virtualRadio, "--port", "0", "--scenario", file, "--seed", "1", "--max-seconds", "60",
                                            "--truth", truth, "--ready-file", ready], dir: dir, name: "virtual-radio\(tag)")
        eventually(30, "virtual controller ready") { FileManager.default.fileExists(atPath: ready) }
        let json = try JSONReader.parse(String(contentsOfFile: ready, encoding: .utf8))
        return VirtualRadio(child: child, port: Int(json["port"]?.intValue ?? 0), truth: truth)
    }

    /// An HTTPS receiver that answers 200, and the secret file the agent signs for it with.
    func acceptingReceiver(_ dir: TempDir) throws -> (receiver: ScriptedReceiver, secret: String) {
        (try ScriptedReceiver(dir: dir, ["--script", "200"]), try dir.write("g.whsec", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n"))
    }

    /// Until the scenario is over, a beacon has left and every event is delivered.
    func waitForVisitDelivered(_ radio: VirtualRadio, socket: String, seconds: Double) {
        eventually(seconds, "scenario over, beacon left, outbox drained") {
            let s = agentStatus(socket)
            return truth(radio.truth).contains { $0["action"]?.stringValue == "scenario_end" } && (s?["events"]?["beacon.exited"]?.intValue ?? 0) >= 1
                && s?["outbox"]?["depth"]?.intValue == 0
        }
    }

    func truth(_ path: String) -> [JSONValue] {
        ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(separator: "\n").compactMap { try? JSONReader.parse(String($0)) }
    }

    func testPressesBeaconVisitsAndEncryptedButtonsMatchTheGroundTruth() throws {
        try requireHarness()
        let dir = try TempDir()
        // A plain button pressed three times (each press advertised ~10 times with one packet id),
        // an iBeacon visit, an encrypted button whose third advert replays its first, and noise
        // (random manufacturer data, Apple Nearby, a BTHome thermometer) that must give nothing.
        let scenario = """
        {"name": "doorbell-agent",
         "advertisers": [
           {"id": "beacon", "kind": "ibeacon", "address": "C0:11:22:33:44:01", "uuid": "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0",
            "major": 100, "minor": 7, "measured_power": -59, "rssi": -60, "interval_ms": 100},
           {"id": "button", "kind": "bthome_button", "address": "C0:11:22:33:44:02", "battery": 95, "initial_packet_id": 254},
           {"id": "gate", "kind": "raw", "address": "C0:11:22:33:44:03", "adv_type": "nonconn", "interval_ms": 100,
            "data_hex": "\(Self.encryptedPress(packetID: 1, counter: 10, event: 1))"},
           {"id": "noise1", "kind": "noise_mfr", "address": "CA:58:B7:91:F1:D8"},
           {"id": "noise2", "kind": "apple_nearby", "address": "D1:C4:27:10:4C:41"},
           {"id": "noise3", "kind": "bthome_temp", "address": "C9:EB:2F:1E:D4:7E"}],
         "events": [
           {"t": 0.0, "id": "noise1", "action": "on", "duration": 9.0},
           {"t": 0.0, "id": "noise2", "action": "on", "duration": 9.0},
           {"t": 0.0, "id": "noise3", "action": "on", "duration": 9.0},
           {"t": 1.0, "id": "beacon", "action": "on", "duration": 3.0},
           {"t": 1.5, "id": "button", "action": "press", "duration": 1.0, "event": "press"},
           {"t": 3.0, "id": "button", "action": "press", "duration": 1.0, "event": "double_press"},
           {"t": 4.5, "id": "button", "action": "press", "duration": 1.0, "event": "press"},
           {"t": 1.0, "id": "gate", "action": "on"},
           {"t": 2.5, "id": "gate", "action": "data", "data_hex": "\(Self.encryptedPress(packetID: 2, counter: 11, event: 2))"},
           {"t": 4.0, "id": "gate", "action": "data", "data_hex": "\(Self.encryptedPress(packetID: 1, counter: 10, event: 1))"},
           {"t": 5.5, "id": "gate", "action": "off"}]}
        """
        let radio = try startRadio(dir, scenario: scenario)
        defer { radio.child.stop() }
        let socket = dir.file("control.sock")
        let (receiver, secret) = try acceptingReceiver(dir)
        defer { receiver.stop() }
        func ble(port: Int) -> String { """
        [radio.ble]
        transport = "tcp"
        address = "127.0.0.1:\(port)"

        [[device]]
        id = "side-door"
        radio = "ble"
        match = { address = "C0:11:22:33:44:02" }

        [[device]]
        id = "gate"
        radio = "ble"
        match = { address = "c0:11:22:33:44:03" }
        bindkey = "\(Self.bindkey.map { String(format: "%02x", $0) }.joined())"

        [[region]]
        id = "front-path"
        name = "Front path"
        uuid = "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0"
        major = 100
        enter_rssi = -80
        min_samples = 2
        exit_timeout_s = 2

        # Every press of the ground truth (they are 1.5 s apart); the cooldown has its own test.
        [tracker.button]
        cooldown_ms = 0
        """ }
        let config = try dir.write("agent.toml", agentConfig(stateDir: dir.file("state"), socket: socket, radio: ble(port: radio.port), devices: [],
                                                             url: receiver.url, caFile: receiver.caFile, secretFile: secret))
        var agent = try startAgent(dir, config: config, socket: socket)
        defer { agent.stop() }

        waitForVisitDelivered(radio, socket: socket, seconds: 45)
        let bodies = receiver.requests.compactMap { try? JSONReader.parse($0["body"]?.stringValue ?? "") }
        let t = truth(radio.truth)

        // Every press exactly once, with the packet id the air carried.
        let truthPresses = t.filter { $0["action"]?.stringValue == "press" && $0["id"]?.stringValue == "button" }
        XCTAssertEqual(truthPresses.count, 3)
        let side = bodies.filter { $0["device"]?["id"]?.stringValue == "side-door" }
        XCTAssertEqual(side.compactMap { $0["data"]?["packet_id"]?.intValue }, truthPresses.compactMap { $0["packet_id"]?.intValue },
                       agent.stderr.suffix(3000).description)
        XCTAssertEqual(side.compactMap { $0["type"]?.stringValue }, ["doorbell.pressed", "doorbell.double_pressed", "doorbell.pressed"])
        XCTAssertEqual(side.first?["data"]?["battery_pct"]?.intValue, 95)

        // The encrypted button: two presses; the replayed first packet is refused.
        let gate = bodies.filter { $0["device"]?["id"]?.stringValue == "gate" }
        XCTAssertEqual(gate.compactMap { $0["type"]?.stringValue }, ["doorbell.pressed", "doorbell.double_pressed"])
        XCTAssertEqual(gate.first?["data"]?["encrypted"]?.boolValue, true)
        let bleStatus = agentStatus(socket)?["radios"]?.arrayValues?.first { $0["name"]?.stringValue == "ble" }
        XCTAssertGreaterThanOrEqual(bleStatus?["replays_refused"]?.intValue ?? 0, 1)

        // One visit: entered once, exited once, with the beacon's identity; nothing from noise.
        let visits = bodies.filter { $0["device"]?["id"]?.stringValue == "front-path" }.compactMap { $0["type"]?.stringValue }
        XCTAssertEqual(visits, ["beacon.entered", "beacon.exited"])
        let entered = bodies.first { $0["type"]?.stringValue == "beacon.entered" }
        XCTAssertEqual(entered?["data"]?["minor"]?.intValue, 7)
        XCTAssertEqual(bodies.count, side.count + gate.count + visits.count, "noise made events: \(bodies.map { $0["device"]?["id"]?.stringValue ?? "?" })")

        // The last packet ids are in the outbox (stored with their presses, no second file)...
        agent.stop()
        radio.child.stop()
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir.file("state/ble-buttons.json")))
        let outbox = try Outbox(path: dir.file("state/outbox.sqlite"))
        let memory = try outbox.buttonMemory()
        outbox.close()
        XCTAssertEqual(memory["C0:11:22:33:44:02"]?.packetID, truthPresses.last?["packet_id"]?.intValue.flatMap { UInt8(exactly: $0) })
        XCTAssertEqual(memory.first { $0.key.uppercased() == "C0:11:22:33:44:03" }?.value.counter, 11, "\(memory)")

        // ...so after a restart the gate's last packet, sent again, is not a press; its next one is.
        let again = try startRadio(dir, scenario: """
        {"name": "after-restart",
         "advertisers": [{"id": "gate", "kind": "raw", "address": "C0:11:22:33:44:03", "adv_type": "nonconn", "interval_ms": 100,
                          "data_hex": "\(Self.encryptedPress(packetID: 2, counter: 11, event: 2))"}],
         "events": [
           {"t": 0.5, "id": "gate", "action": "on"},
           {"t": 2.5, "id": "gate", "action": "data", "data_hex": "\(Self.encryptedPress(packetID: 3, counter: 12, event: 1))"},
           {"t": 4.0, "id": "gate", "action": "off"}]}
        """, tag: "-2")
        defer { again.child.stop() }
        let config2 = try dir.write("agent-2.toml", agentConfig(stateDir: dir.file("state"), socket: socket, radio: ble(port: again.port), devices: [],
                                                                url: receiver.url, caFile: receiver.caFile, secretFile: secret))
        agent = try startAgent(dir, config: config2, socket: socket, name: "agent-2")
        eventually(30, "second scenario over, outbox drained") {
            truth(again.truth).contains { $0["action"]?.stringValue == "scenario_end" } && agentStatus(socket)?["outbox"]?["depth"]?.intValue == 0
        }
        let gateAfter = receiver.requests.compactMap { try? JSONReader.parse($0["body"]?.stringValue ?? "") }
            .filter { $0["device"]?["id"]?.stringValue == "gate" }
        XCTAssertEqual(gateAfter.compactMap { $0["data"]?["packet_id"]?.intValue }, [1, 2, 3], agent.stderr.suffix(3000).description)
    }

    func testCapturesAreBtsnoopThatBtmonReadsAndThatReplayToTheSamePresses() throws {
        try requireHarness()
        let dir = try TempDir()
        let scenario = """
        {"name": "capture",
         "advertisers": [{"id": "button", "kind": "bthome_button", "address": "C0:11:22:33:44:02", "battery": 60, "initial_packet_id": 10}],
         "events": [
           {"t": 1.5, "id": "button", "action": "press", "duration": 0.6, "event": "press"},
           {"t": 5.0, "id": "button", "action": "press", "duration": 0.6, "event": "triple_press"}]}
        """
        // The presses are further apart than the cooldown (3 s), live and in the replay.
        let radio = try startRadio(dir, scenario: scenario)
        defer { radio.child.stop() }
        let socket = dir.file("control.sock")
        let config = try dir.write("agent.toml", """
        \(agentHeader(dir, socket: socket))
        [clock]
        require_sync = false
        [radio.ble]
        transport = "tcp"
        address = "127.0.0.1:\(radio.port)"
        [[device]]
        id = "side-door"
        match = { address = "C0:11:22:33:44:02" }
        """)
        let agent = try startAgent(dir, config: config, socket: socket)
        defer { agent.stop() }
        let out = dir.file("capture.btsnoop")
        let r = try runCommand(Paths.agentctlBinary, ["capture", "--seconds", "8", "--out", out, "--socket", socket])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stdout.contains("HCI packet(s)"), r.stdout)
        let live = agentStatus(socket)?["events"]
        XCTAssertEqual(live?["doorbell.pressed"]?.intValue, 1)
        XCTAssertEqual(live?["doorbell.triple_pressed"]?.intValue, 1)

        // The installer's view: what is around, with a ready snippet for it.
        let scan = try runCommand(Paths.agentctlBinary, ["scan", "--seconds", "0", "--json", "--socket", socket])
        XCTAssertEqual(scan.status, 0, scan.stderr)
        let heard = try JSONReader.parse(scan.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        let button = heard.arrayValues?.first { $0["radio"]?.stringValue == "ble" && $0["identity"]?.stringValue == "C0:11:22:33:44:02" }
        XCTAssertEqual(button?["model"]?.stringValue, "bthome")
        XCTAssertEqual(button?["device"]?.stringValue, "side-door")

        // BlueZ's btmon reads what we wrote.
        if FileManager.default.isExecutableFile(atPath: "/usr/bin/btmon") {
            let b = try runCommand("/usr/bin/btmon", ["-r", out])
            XCTAssertEqual(b.status, 0, b.stderr)
            XCTAssertTrue(b.stdout.contains("LE Advertising Report") || b.stdout.contains("LE Extended Advertising Report"), String(b.stdout.prefix(2000)))
            XCTAssertTrue(b.stdout.contains("C0:11:22:33:44:02"), String(b.stdout.prefix(2000)))
        } else {
            XCTFail("btmon missing: make test installs bluez")
        }

        // And the capture replays to the same presses.
        let replay = try runCommand(Paths.agentBinary, ["replay", "--config", config, out])
        XCTAssertEqual(replay.status, 0, replay.stderr)
        let types = replay.stdout.split(separator: "\n").compactMap { try? JSONReader.parse(String($0)) }.compactMap { $0["type"]?.stringValue }
        XCTAssertEqual(types, ["doorbell.pressed", "doorbell.triple_pressed"], replay.stderr)
    }

    func testAnH4UARTCarriesTheSameScan() throws {
        try requireHarness()
        let dir = try TempDir()
        // The virtual controller on a pty: the agent opens it as a serial HCI dongle (termios raw,
        // 1 Mbit/s, RTS/CTS) and scans it exactly like the TCP one.
        let scenario = """
        {"name": "uart",
         "advertisers": [{"id": "button", "kind": "bthome_button", "address": "C0:11:22:33:44:02", "battery": 70, "initial_packet_id": 3}],
         "events": [{"t": 1.0, "id": "button", "action": "press", "duration": 0.5, "event": "long_press"}]}
        """
        let file = try dir.write("scenario.json", scenario)
        let pty = dir.file("hci-pty")
        let ready = dir.file("radio-ready.json")
        let radio = try Child(Self.python, [Self.virtualRadio, "--pty", pty, "--scenario", file, "--max-seconds", "40",
                                            "--truth", dir.file("truth.jsonl"), "--ready-file", ready], dir: dir, name: "virtual-radio")
        defer { radio.stop() }
        eventually(30, "virtual controller on its pty") { FileManager.default.fileExists(atPath: ready) }
        let socket = dir.file("control.sock")
        let config = try dir.write("agent.toml", """
        \(agentHeader(dir, socket: socket))
        [clock]
        require_sync = false
        [radio.ble]
        transport = "serial"
        path = "\(pty)"
        baud = 1000000
        [[device]]
        id = "side-door"
        match = { address = "C0:11:22:33:44:02" }
        """)
        let agent = try startAgent(dir, config: config, socket: socket)
        defer { agent.stop() }
        eventually(20, "the long press came over the UART") { agentStatus(socket)?["events"]?["doorbell.long_pressed"]?.intValue == 1 }
        XCTAssertEqual(agentStatus(socket)?["radios"]?.arrayValues?.first?["state"]?.stringValue, "running")
    }

    func testAStalledControllerIsDegradedAndHoldsDepartures() throws {
        try requireHarness()
        let dir = try TempDir()
        // A beacon that is there, then the controller goes silent (no advertisers at all).
        let scenario = """
        {"name": "stall",
         "advertisers": [
           {"id": "beacon", "kind": "ibeacon", "address": "C0:11:22:33:44:01", "uuid": "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0",
            "major": 1, "minor": 2, "measured_power": -59, "rssi": -55, "interval_ms": 100}],
         "events": [
           {"t": 0.5, "id": "beacon", "action": "on", "duration": 1.5},
           {"t": 20.0, "id": "beacon", "action": "off"}]}
        """
        let radio = try startRadio(dir, scenario: scenario)
        defer { radio.child.stop() }
        let socket = dir.file("control.sock")
        let config = try dir.write("agent.toml", """
        \(agentHeader(dir, socket: socket))
        [clock]
        require_sync = false
        [radio.ble]
        transport = "tcp"
        address = "127.0.0.1:\(radio.port)"
        stall_s = 3
        [[region]]
        id = "porch"
        uuid = "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0"
        min_samples = 2
        exit_timeout_s = 2
        """)
        let agent = try startAgent(dir, config: config, socket: socket)
        defer { agent.stop() }
        eventually(20, "beacon entered") { (agentStatus(socket)?["events"]?["beacon.entered"]?.intValue ?? 0) == 1 }
        eventually(20, "the stalled scanner shows degraded") {
            agentStatus(socket)?["radios"]?.arrayValues?.first?["state"]?.stringValue == "degraded"
        }
        let s = agentStatus(socket)
        XCTAssertEqual(s?["health"]?.stringValue, "degraded")
        XCTAssertTrue((s?["problems"]?.arrayValues ?? []).contains { $0.stringValue?.contains("no advertising reports for 3 s") ?? false }, "\(String(describing: s?["problems"]))")
        // The beacon went quiet with the controller: no departure while the radio is degraded.
        XCTAssertEqual(s?["events"]?["beacon.exited"]?.intValue, 0)
        XCTAssertTrue(agent.stderr.contains("radio.ble_stalled"))
    }

    func testBLEPressesWithinTheCooldownAreCountedNotForwardedAndDoNotRing() throws {
        try requireHarness()
        let dir = try TempDir()
        // A visitor pressing again 0.7 s and 1.1 s later, then once more after the cooldown
        // (default cooldown_ms = 3000, as for RF buttons).
        let scenario = """
        {"name": "cooldown",
         "advertisers": [
           {"id": "button", "kind": "bthome_button", "address": "C0:11:22:33:44:02", "battery": 80, "initial_packet_id": 10},
           {"id": "noise", "kind": "noise_mfr", "address": "CA:58:B7:91:F1:D8"}],
         "events": [
           {"t": 0.0, "id": "noise", "action": "on", "duration": 8.0},
           {"t": 1.0, "id": "button", "action": "press", "duration": 0.3, "event": "press"},
           {"t": 1.7, "id": "button", "action": "press", "duration": 0.3, "event": "press"},
           {"t": 2.8, "id": "button", "action": "press", "duration": 0.3, "event": "press"},
           {"t": 5.5, "id": "button", "action": "press", "duration": 0.3, "event": "press"}]}
        """
        let radio = try startRadio(dir, scenario: scenario)
        defer { radio.child.stop() }
        let socket = dir.file("control.sock")
        let receiver = try ScriptedReceiver(dir: dir, ["--script", "200"])
        defer { receiver.stop() }
        let secret = try webhookSecret(dir)
        let chime = try ChimeRecorder(dir)
        let ble = """
        [radio.ble]
        transport = "tcp"
        address = "127.0.0.1:\(radio.port)"

        [[device]]
        id = "side-door"
        radio = "ble"
        match = { address = "C0:11:22:33:44:02" }
        \(chime.toml)
        """
        let config = try dir.write("agent.toml", agentConfig(stateDir: dir.file("state"), socket: socket, radio: ble, devices: [],
                                                             url: receiver.url, caFile: receiver.caFile, secretFile: secret))
        let agent = try startAgent(dir, config: config, socket: socket)
        defer { agent.stop() }
        eventually(40, "scenario over and delivered") {
            truth(radio.truth).contains { $0["action"]?.stringValue == "scenario_end" } && agentStatus(socket)?["outbox"]?["depth"]?.intValue == 0
        }
        XCTAssertEqual(truth(radio.truth).filter { $0["action"]?.stringValue == "press" }.count, 4)
        let bodies = receiver.requests.compactMap { try? JSONReader.parse($0["body"]?.stringValue ?? "") }
        let presses = bodies.filter { $0["device"]?["id"]?.stringValue == "side-door" }
        XCTAssertEqual(presses.compactMap { $0["type"]?.stringValue }, ["doorbell.pressed", "doorbell.pressed"], agent.stderr.suffix(2000).description)
        XCTAssertEqual(presses.compactMap { $0["data"]?["suppressed"]?.intValue }, [0, 2])
        let status = agentStatus(socket)
        XCTAssertEqual(status?["presses"]?["suppressed"]?.intValue, 2)
        XCTAssertEqual(status?["presses"]?["forwarded"]?.intValue, 2)
        // The chime rings for what is forwarded, the same rule as RF: two rings, not four.
        eventually(10, "two chimes") { chime.rings.count == 2 }
        usleep(500_000)
        XCTAssertEqual(chime.rings.count, 2)
    }

    func testAScannerSilenceShorterThanStallIsNotADeparture() throws {
        try requireHarness()
        let dir = try TempDir()
        // A beacon that stays; the controller delivers nothing at all for 10 s (stall_s is 60, so
        // the radio never turns degraded); noise was heard after the beacon's last sighting.
        let scenario = """
        {"name": "silence",
         "advertisers": [
           {"id": "beacon", "kind": "ibeacon", "address": "C0:11:22:33:44:01", "uuid": "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0",
            "major": 1, "minor": 2, "measured_power": -59, "rssi": -55, "interval_ms": 100},
           {"id": "noise", "kind": "noise_mfr", "address": "CA:58:B7:91:F1:D8"}],
         "events": [
           {"t": 0.0, "id": "noise", "action": "on", "duration": 4.0},
           {"t": 0.5, "id": "beacon", "action": "on", "duration": 3.0},
           {"t": 14.0, "id": "beacon", "action": "on", "duration": 4.0},
           {"t": 14.0, "id": "noise", "action": "on", "duration": 18.0}]}
        """
        let radio = try startRadio(dir, scenario: scenario)
        defer { radio.child.stop() }
        let socket = dir.file("control.sock")
        let config = try dir.write("agent.toml", """
        \(agentHeader(dir, socket: socket))
        [clock]
        require_sync = false
        [radio.ble]
        transport = "tcp"
        address = "127.0.0.1:\(radio.port)"
        stall_s = 60
        [[region]]
        id = "porch"
        uuid = "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0"
        min_samples = 2
        exit_timeout_s = 8
        """)
        let agent = try startAgent(dir, config: config, socket: socket)
        defer { agent.stop() }
        func ble() -> JSONValue? { agentStatus(socket)?["radios"]?.arrayValues?.first { $0["name"]?.stringValue == "ble" } }
        eventually(20, "beacon entered") { (agentStatus(socket)?["events"]?["beacon.entered"]?.intValue ?? 0) == 1 }
        eventually(20, "status says exits are on hold while nothing is heard") {
            ble()?["presence"]?["exits_on_hold"]?.stringValue?.contains("heard no advert") ?? false
        }
        XCTAssertEqual(ble()?["presence"]?["clock"]?.stringValue, "paused")
        XCTAssertEqual(ble()?["state"]?.stringValue, "running", "a silence shorter than stall_s is not degraded")
        XCTAssertTrue((agentStatus(socket)?["problems"]?.arrayValues ?? []).contains { $0.stringValue?.contains("exit timeouts are paused") ?? false })
        // Reports resume with the beacon still there; it then leaves for good while noise goes on.
        eventually(40, "the beacon left, after its timeout on live time") {
            (agentStatus(socket)?["events"]?["beacon.exited"]?.intValue ?? 0) >= 1
        }
        // It left while the air was heard (not during the silence, which the noise outlasts).
        XCTAssertNil(ble()?["presence"]?["exits_on_hold"]?.stringValue)
        eventually(40, "scenario over") { truth(radio.truth).contains { $0["action"]?.stringValue == "scenario_end" } }
        let s = agentStatus(socket)
        XCTAssertEqual(s?["events"]?["beacon.entered"]?.intValue, 1, "the silence made it leave and come back")
        XCTAssertEqual(s?["events"]?["beacon.exited"]?.intValue, 1)
    }

    func testTheBaseStationAdvertisesExactlyItsConfiguredIBeacon() throws {
        try requireHarness()
        let dir = try TempDir()
        // The agent's controller and a second, scan-only controller share one virtual air.
        let ready = dir.file("observer-ready.json")
        let seen = dir.file("observed.jsonl")
        let observer = try Child(Self.python, [Paths.repoRoot + "/Tests/helpers/ble_beacon_observer.py", "--ready-file", ready,
                                               "--out", seen, "--max-seconds", "60"], dir: dir, name: "observer")
        defer { observer.stop() }
        eventually(30, "observer ready") { FileManager.default.fileExists(atPath: ready) }
        let port = try JSONReader.parse(String(contentsOfFile: ready, encoding: .utf8))["port"]?.intValue ?? 0
        let socket = dir.file("control.sock")
        let config = try dir.write("agent.toml", """
        \(agentHeader(dir, socket: socket))
        [clock]
        require_sync = false
        [radio.ble]
        transport = "tcp"
        address = "127.0.0.1:\(port)"
        [beacon]
        uuid = "a1b2c3d4-0000-4000-8000-00000000d00b"
        major = 4660
        minor = 22136
        measured_power = -61
        interval_ms = 100
        """)
        let agent = try startAgent(dir, config: config, socket: socket)
        defer { agent.stop() }
        func adverts() -> [JSONValue] {
            ((try? String(contentsOfFile: seen, encoding: .utf8)) ?? "").split(separator: "\n").compactMap { try? JSONReader.parse(String($0)) }
                .filter { $0["address"]?.stringValue == "F0:F0:F0:00:00:01" }
        }
        eventually(20, "the observer hears the base station") { adverts().count >= 10 }
        // Written out by hand from the iBeacon format: flags, Apple company id, type 0x02, length
        // 0x15, the UUID, major 0x1234, minor 0x5678, measured power −61 (0xC3).
        let expected = "020104" + "1aff4c000215" + "a1b2c3d400004000800000000000d00b" + "1234" + "5678" + "c3"
        XCTAssertEqual(Set(adverts().compactMap { $0["data_hex"]?.stringValue }), [expected])
        // And it still scans while it advertises.
        XCTAssertEqual(agentStatus(socket)?["radios"]?.arrayValues?.first?["state"]?.stringValue, "running")
    }

    /// An agent with only a BLE radio (`transport` lines for [radio.ble]) and no uplink.
    func startBLEOnlyAgent(_ dir: TempDir, transport: String) throws -> (agent: Child, socket: String) {
        let socket = dir.file("control.sock")
        let config = try dir.write("agent.toml", """
        \(agentHeader(dir, socket: socket))
        [clock]
        require_sync = false
        [radio.ble]
        \(transport)
        """)
        return (try startAgent(dir, config: config, socket: socket), socket)
    }

    func testReportsThatArriveInTheSameReadAsACommandAnswerAreKept() throws {
        try requireFile(Paths.agentBinary, "doorbell-agent")
        let dir = try TempDir()
        let ready = dir.file("hci-ready.json")
        // The answer to LE Set Scan Enable and 5 advertising reports in one write.
        let controller = try Child("/usr/bin/python3", [Paths.repoRoot + "/Tests/helpers/scripted_hci_controller.py", "--ready-file", ready,
                                                        "--reports", "5", "--max-seconds", "120"], dir: dir, name: "scripted-hci")
        defer { controller.stop() }
        eventually(20, "scripted controller ready") { FileManager.default.fileExists(atPath: ready) }
        let port = Int((try? JSONReader.parse(String(contentsOfFile: ready, encoding: .utf8)))?["port"]?.intValue ?? 0)
        let (agent, socket) = try startBLEOnlyAgent(dir, transport: "transport = \"tcp\"\naddress = \"127.0.0.1:\(port)\"")
        defer { agent.stop() }
        func ble() -> JSONValue? { agentStatus(socket)?["radios"]?.arrayValues?.first { $0["name"]?.stringValue == "ble" } }
        eventually(30, "scanning") { ble()?["state"]?.stringValue == "running" }
        eventually(10, "all 5 reports counted") { ble()?["reports"]?.intValue == 5 }
        XCTAssertEqual(ble()?["reports"]?.intValue, 5)
    }

    func testKernelHCIWithoutBluetoothSaysSo() throws {
        try requireFile(Paths.agentBinary, "doorbell-agent")
        let dir = try TempDir()
        let (agent, socket) = try startBLEOnlyAgent(dir, transport: "transport = \"hci\"\ndevice = \"hci0\"")
        defer { agent.stop() }
        eventually(20, "radio reports why it cannot run") {
            let r = agentStatus(socket)?["radios"]?.arrayValues?.first
            return r?["last_error"]?.stringValue != nil
        }
        let error = agentStatus(socket)?["radios"]?.arrayValues?.first?["last_error"]?.stringValue ?? ""
        // This kernel has no AF_BLUETOOTH; a Pi without the capabilities gets the CAP_ message.
        XCTAssertTrue(error.contains("no Bluetooth support") || error.contains("CAP_NET_RAW") || error.contains("no such controller"), error)
        XCTAssertEqual(agentStatus(socket)?["health"]?.stringValue, "degraded")
    }
}
