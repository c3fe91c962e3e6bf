import DoorbellCore
import DoorbellRuntime
import Foundation
import XCTest

/// The OOK receiver path end to end: recorded edge timelines (what a GPIO receiver pin shows)
/// and real rtl_433 in pulse mode, through the agent's own decoder, tracker, local action,
/// outbox and signed HTTPS delivery.
final class OOKRadioTests: XCTestCase {
    /// code → device, from the shared set's MANIFEST (its independent analysis of each timeline).
    static let bells: [(id: String, code: String)] = [
        ("door-bell", "0x91568F"), ("pir", "0x755555"), ("remote-arm", "0x13CDC0"), ("remote-disarm", "0x13CD0C"),
        ("doorbell2", "0x11C408"), ("surfou", "0x04CDF8"), ("ge-chime", "0x9FC378"),
    ]

    static let timelines = [
        "rtl433tests__door_bell_01__gfile002_433.92M_250k", "rtl433tests__door_bell_01__gfile003_433.92M_250k",
        "rtl433tests__PT2262_01__gfile002_433.92M_250k", "rtl433tests__generic_remote_01__gfile001_433.92M_250k",
        "rtl433tests__generic_remote_01__gfile002_433.92M_250k", "flipper__Doorbell2", "flipper__Surfou_wireless_doorbell",
        "flipper__GE_Doorbell_19297", "flipper__Byron_DB421E",
    ]

    func requireRecordings() throws {
        try requireFile(Paths.agentBinary, "doorbell-agent")
    }

    func devicesTOML(radio: String = "ook") -> String {
        Self.bells.map { "[[device]]\nid = \"\($0.id)\"\nradio = \"\(radio)\"\nmatch = { code = \"\($0.code)\" }\n" }.joined(separator: "\n")
    }

    /// The `ook` entry of the agent's status radios.
    func ookStatus(_ socket: String) -> JSONValue? {
        agentStatus(socket)?["radios"]?.arrayValues?.first { $0["name"]?.stringValue == "ook" }
    }

    /// Waits until the OOK radio has played everything and the outbox is empty.
    func waitReplayedAndDelivered(_ socket: String, file: StaticString = #filePath, line: UInt = #line) {
        eventually(60, "OOK radio finished and outbox drained", file: file, line: line) {
            ookStatus(socket)?["state"]?.stringValue == "finished" && agentStatus(socket)?["outbox"]?["depth"]?.intValue == 0
        }
    }

    func bodies(_ receiver: ScriptedReceiver) -> [JSONValue] {
        receiver.requests.compactMap { try? JSONReader.parse($0["body"]?.stringValue ?? "") }
    }

    func testEdgeTimelinesRingOncePerPressAndAreDelivered() throws {
        try requireRecordings()
        let dir = try TempDir()
        let socket = dir.file("control.sock")
        let receiver = try ScriptedReceiver(dir: dir, ["--script", "200"])
        defer { receiver.stop() }
        let secret = try webhookSecret(dir)
        let chime = try ChimeRecorder(dir)
        // The .vcd files are the receiver pin's levels with exact gaps; each is one press.
        let files = Self.timelines.map { "\"\(Paths.recordings)/\($0).vcd\"" }.joined(separator: ", ")
        let radio = "[radio.ook]\nsource = \"replay\"\nreplay = [\(files)]\n\n" + devicesTOML()
            + chime.toml
        let config = try dir.write("agent.toml", agentConfig(stateDir: dir.file("state"), socket: socket, radio: radio, devices: [],
                                                             url: receiver.url, caFile: receiver.caFile, secretFile: secret))
        let agent = try startAgent(dir, config: config, socket: socket)
        defer { agent.stop() }

        waitReplayedAndDelivered(socket)
        let presses = bodies(receiver).filter { $0["type"]?.stringValue == "doorbell.pressed" }
        var perDevice: [String: Int] = [:]
        for p in presses { perDevice[p["device"]?["id"]?.stringValue ?? "?", default: 0] += 1 }
        // Two recordings of the same bell (a minute apart on the timeline): two presses; every
        // other bell once; the Byron bell's 33-bit frames are not a fixed-code word: nothing.
        XCTAssertEqual(perDevice, ["door-bell": 2, "pir": 1, "remote-arm": 1, "remote-disarm": 1, "doorbell2": 1, "surfou": 1, "ge-chime": 1],
                       agent.stderr.suffix(3000).description)
        let ge = presses.first { $0["device"]?["id"]?.stringValue == "ge-chime" }
        XCTAssertEqual(ge?["data"]?["code"]?.stringValue, "9fc378")
        XCTAssertEqual(ge?["data"]?["protocol"]?.stringValue, "ev1527")
        XCTAssertTrue((180...200).contains(Int(ge?["data"]?["time_unit_us"]?.intValue ?? 0)), "\(String(describing: ge))")
        let pir = presses.first { $0["device"]?["id"]?.stringValue == "pir" }
        XCTAssertEqual(pir?["data"]?["protocol"]?.stringValue, "pt2262")
        XCTAssertEqual(pir?["data"]?["tristate"]?.stringValue, "F1FFFFFFFFFF")

        // The chime ran once per press, before and whatever the delivery.
        eventually(20, "eight chimes") { chime.rings.count == 8 }
        XCTAssertEqual(chime.rings.sorted(), ["door-bell", "door-bell", "doorbell2", "ge-chime", "pir", "remote-arm", "remote-disarm", "surfou"])

        let status = agentStatus(socket)
        let ook = ookStatus(socket)
        XCTAssertEqual(ook?["source"]?.stringValue, "replay")
        XCTAssertGreaterThan(ook?["pulses"]?.intValue ?? 0, 5_000)
        XCTAssertGreaterThan(ook?["rejected"]?.intValue ?? 0, 0, "the Byron frames and receiver noise are rejected stretches")
        XCTAssertEqual(status?["health"]?.stringValue, "ok", "\(String(describing: status?["problems"]))")
    }

    func testRTL433PulseModeFeedsTheSameDecoder() throws {
        try requireRecordings()
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/rtl_433") else { throw skip("SKIPPED: rtl_433 not installed (make test installs it)") }
        let dir = try TempDir()
        let socket = dir.file("control.sock")
        let receiver = try ScriptedReceiver(dir: dir, ["--script", "200"])
        defer { receiver.stop() }
        let secret = try dir.write("g.whsec", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n")
        // rtl_433 demodulates the raw I/Q recordings; the agent decodes the pulses it prints.
        let cu8 = ["rtl433tests__door_bell_01__gfile002_433.92M_250k", "rtl433tests__PT2262_01__gfile002_433.92M_250k",
                   "rtl433tests__generic_remote_01__gfile001_433.92M_250k"]
        let files = cu8.map { "\"\(Paths.recordings)/\($0).cu8\"" }.joined(separator: ", ")
        let radio = "[radio.ook]\nsource = \"rtl433\"\nreplay = [\(files)]\n\n" + devicesTOML()
        let config = try dir.write("agent.toml", agentConfig(stateDir: dir.file("state"), socket: socket, radio: radio, devices: [],
                                                             url: receiver.url, caFile: receiver.caFile, secretFile: secret))
        let agent = try startAgent(dir, config: config, socket: socket)
        defer { agent.stop() }
        waitReplayedAndDelivered(socket)
        let presses = bodies(receiver).filter { $0["type"]?.stringValue == "doorbell.pressed" }
        XCTAssertEqual(presses.compactMap { $0["device"]?["id"]?.stringValue }.sorted(), ["door-bell", "pir", "remote-arm"], agent.stderr.suffix(3000).description)
    }

    func testCapturedPulsesReplayToTheSamePress() throws {
        try requireRecordings()
        let dir = try TempDir()
        let socket = dir.file("control.sock")
        // A stand-in for rtl_433 in pulse mode: the same press every 4 s (past the cooldown), so
        // any capture window of 6 s holds at least one whole press whatever the machine's speed.
        let ook = Paths.recordings + "/flipper__Surfou_wireless_doorbell.ook"
        let fake = try dir.write("fake-rtl433.sh", "#!/bin/sh\nfor i in $(seq 1 150); do cat \(ook); sleep 4; done\n")
        chmod(fake, 0o755)
        let config = try dir.write("agent.toml", """
        \(agentHeader(dir, socket: socket))
        [clock]
        require_sync = false
        [radio.ook]
        source = "rtl433"
        rtl433_binary = "\(fake)"
        [[device]]
        id = "surfou"
        match = { code = "0x04CDF8" }
        """)
        let agent = try startAgent(dir, config: config, socket: socket)
        defer { agent.stop() }
        let out = dir.file("capture.ook")
        let r = try runCommand(Paths.agentctlBinary, ["capture", "--seconds", "6", "--out", out, "--socket", socket])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stdout.contains("OOK pulse(s)"), r.stdout)
        XCTAssertGreaterThanOrEqual(agentStatus(socket)?["events"]?["doorbell.pressed"]?.intValue ?? 0, 1, agent.stderr.suffix(2000).description)

        // The capture replays to the same bell, with the same decode (the presses in it sit
        // back to back: pulse data keeps no silences longer than rtl_433's package timeout).
        let replay = try runCommand(Paths.agentBinary, ["replay", out])
        XCTAssertEqual(replay.status, 0, replay.stderr)
        let events = replay.stdout.split(separator: "\n").compactMap { try? JSONReader.parse(String($0)) }
        let codes = events.filter { $0["type"]?.stringValue == "doorbell.pressed" }.compactMap { $0["data"]?["code"]?.stringValue }
        XCTAssertFalse(codes.isEmpty, replay.stderr)
        XCTAssertEqual(Set(codes), ["04cdf8"])
    }

    func testAMissingGPIOChipIsAClearStatusAndTheChimeFailureShows() throws {
        try requireFile(Paths.agentBinary, "doorbell-agent")
        if !GPIO.chips().isEmpty { throw skip("SKIPPED: this machine has GPIO chips; the test needs a chip label that does not exist", needsHardware: true) }
        let dir = try TempDir()
        let socket = dir.file("control.sock")
        let config = try dir.write("agent.toml", """
        \(agentHeader(dir, socket: socket))
        [clock]
        require_sync = false
        [radio.ook]
        source = "gpio"
        chip = "pinctrl-bcm2711"
        line = 27
        [tracker.button]
        cooldown_ms = 0
        [[device]]
        id = "front-door"
        match = { code = "0x91568F" }
        [[action]]
        name = "relay"
        gpio_pulse = { chip = "pinctrl-bcm2711", line = 17, duration_ms = 100 }
        """)
        let agent = try startAgent(dir, config: config, socket: socket)
        defer { agent.stop() }
        eventually(20, "the radio reports the missing chip") { ookStatus(socket)?["state"]?.stringValue == "missing" }
        let status = agentStatus(socket)
        let ook = ookStatus(socket)
        XCTAssertTrue(ook?["last_error"]?.stringValue?.contains("no GPIO chip labelled \"pinctrl-bcm2711\"") ?? false, "\(String(describing: ook))")
        XCTAssertEqual(ook?["gpio"]?.stringValue, "pinctrl-bcm2711 line 27")
        XCTAssertEqual(status?["health"]?.stringValue, "degraded")

        // The press still goes into the outbox; the relay's failure is in the status, not a crash.
        XCTAssertEqual(try injectPress(socket), 0)
        eventually(20, "relay failure recorded") {
            let a = agentStatus(socket)?["actions"]?.arrayValues?.first
            return a?["failures"]?.intValue == 1
        }
        let relay = agentStatus(socket)?["actions"]?.arrayValues?.first
        XCTAssertTrue(relay?["last_error"]?.stringValue?.hasPrefix("gpio_pulse: no GPIO chip labelled") ?? false, "\(String(describing: relay))")
        XCTAssertEqual(agentStatus(socket)?["events"]?["doorbell.pressed"]?.intValue, 1)
        // One failure message in the log, not one per retry.
        XCTAssertEqual(agent.stderr.components(separatedBy: "radio.gpio_unavailable").count - 1, 1)
    }

    // The libgpiod calls on a real kernel chip (by label, edges, an output, a missing line, a chip
    // that vanishes) are scripts/field-rig/test_gpio.py's, on gpio-sim in the field rig.
}
