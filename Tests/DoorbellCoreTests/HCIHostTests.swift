import DoorbellCore
import Testing

/// The HCI host without a controller or a clock: the test plays the controller, byte for byte
/// (Core spec Vol 4 Part E: Command Complete 0x0E, Command Status 0x0F, Hardware Error 0x10,
/// LE Meta 0x3E), and moves time by hand.
@Suite struct HCIHostTests {
    static func settings(_ edit: (inout BLERadioSettings) -> Void = { _ in }) -> BLERadioSettings {
        var s = BLERadioSettings(transport: .tcp(host: "127.0.0.1", port: 1))
        s.commandTimeoutMs = 2_000
        s.stallSeconds = 60
        edit(&s)
        return s
    }

    static func complete(_ opcode: UInt16, status: UInt8 = 0, credits: UInt8 = 1, _ rest: [UInt8] = []) -> [UInt8] {
        let body = [credits, UInt8(opcode & 0xFF), UInt8(opcode >> 8), status] + rest
        return [0x04, 0x0E, UInt8(body.count)] + body
    }

    /// Read Local Version's answer after the status: HCI version 0x0C (5.3), HCI subversion,
    /// LMP version, company 0x005D, LMP subversion.
    static let version: [UInt8] = [0x0C, 0x34, 0x12, 0x0C, 0x5D, 0x00, 0x78, 0x56]

    /// Read Local Supported Commands' 64 octets; octet 37 bits 5–6 are the extended scan commands.
    static func supported(extended: Bool) -> [UInt8] {
        var octets = [UInt8](repeating: 0xFF, count: 64)
        octets[37] = extended ? 0x60 : 0x00
        return octets
    }

    static func report(_ address: [UInt8], data: [UInt8], rssi: Int8 = -60) -> [UInt8] {
        let body: [UInt8] = [0x02, 0x01, 0x03, 0x00] + address.reversed() + [UInt8(data.count)] + data + [UInt8(bitPattern: rssi)]
        return [0x04, 0x3E, UInt8(body.count)] + body
    }

    static func opcode(_ packet: [UInt8]) -> UInt16? {
        guard packet.count >= 4, packet[0] == 0x01 else { return nil }
        return UInt16(packet[1]) | UInt16(packet[2]) << 8
    }

    /// Read BD_ADDR's answer: B8:27:EB:12:34:56, least significant octet first.
    static let bdAddr: [UInt8] = [0x56, 0x34, 0x12, 0xEB, 0x27, 0xB8]

    static func sent(_ actions: [HCIHost.Action]) -> [UInt16] {
        actions.compactMap { if case let .send(p) = $0 { opcode(p) } else { nil } }
    }

    /// Answers every command with success (and the given version/supported commands) until the
    /// host scans; returns the opcodes in the order they were sent.
    static func bringUp(_ host: inout HCIHost, extended: Bool, at now: Int64 = 0) -> (opcodes: [UInt16], actions: [HCIHost.Action]) {
        var all: [HCIHost.Action] = []
        var opcodes: [UInt16] = []
        var actions = host.start(at: now)
        for _ in 0..<20 {
            all += actions
            guard let op = sent(actions).first else { break }
            opcodes.append(op)
            let rest: [UInt8] = op == 0x1001 ? version : op == 0x1002 ? supported(extended: extended) : op == 0x1009 ? bdAddr : []
            actions = host.received(complete(op, rest), at: now)
        }
        return (opcodes, all)
    }

    @Test func aLegacyControllerIsBroughtUpOneCommandAtATimeAndScans() {
        var host = HCIHost(settings: Self.settings(), transportName: "hci0")
        let (opcodes, actions) = Self.bringUp(&host, extended: false)
        #expect(opcodes == [0x0C03, 0x1001, 0x1002, 0x0C01, 0x2001, 0x200B, 0x200C])
        #expect(actions.contains(.scanning(BLEControllerInfo(hciVersion: 0x0C, manufacturer: 0x5D, extendedScan: false), extended: false)))
        #expect(host.isScanning)
        // Duplicate filtering off: every advertisement of a press reaches the pipeline.
        let enable = actions.compactMap { if case let .send(p) = $0, Self.opcode(p) == 0x200C { p } else { nil } }.first
        #expect(enable == [0x01, 0x0C, 0x20, 0x02, 0x01, 0x00])
    }

    @Test func anExtendedControllerScansExtendedUnlessItAdvertisesTheOwnBeacon() {
        var host = HCIHost(settings: Self.settings(), transportName: "hci0")
        #expect(Self.bringUp(&host, extended: true).opcodes.suffix(2) == [0x2041, 0x2042])
        let own = OwnBeacon(beacon: IBeacon(uuid: [UInt8](repeating: 0xE2, count: 16), major: 1, minor: 2, measuredPower: -59))
        var beaconHost = HCIHost(settings: Self.settings { $0.beacon = own }, transportName: "hci0")
        #expect(Self.bringUp(&beaconHost, extended: true).opcodes.suffix(5) == [0x2006, 0x2008, 0x200A, 0x200B, 0x200C])
    }

    @Test func noCommandGoesOutWithoutACredit() {
        var host = HCIHost(settings: Self.settings(), transportName: "hci0")
        #expect(Self.sent(host.start(at: 0)) == [0x0C03])
        // Reset done, but the controller takes no command now (Num_HCI_Command_Packets = 0).
        #expect(Self.sent(host.received(Self.complete(0x0C03, credits: 0), at: 10)).isEmpty)
        // A NOP Command Complete (opcode 0) gives the credit back: the next command goes.
        #expect(Self.sent(host.received(Self.complete(0x0000, credits: 1), at: 20)) == [0x1001])
    }

    @Test func aControllerThatGivesNoCreditOrNoAnswerFailsAtTheDeadline() {
        var starved = HCIHost(settings: Self.settings(), transportName: "hci0")
        _ = starved.start(at: 0)
        _ = starved.received(Self.complete(0x0C03, credits: 0), at: 10)
        #expect(starved.nextDeadline == Int64(2_000_010))
        #expect(starved.tick(at: 2_000_009).isEmpty)
        guard case let .failed(f)? = starved.tick(at: 2_000_010).first else { Issue.record("no failure"); return }
        #expect(f.code == .noCredit)
        #expect(f.description == "hci0: controller gave no command credit for 2000 ms")

        var silent = HCIHost(settings: Self.settings(), transportName: "hci0")
        _ = silent.start(at: 0)
        guard case let .failed(g)? = silent.tick(at: 2_000_000).first else { Issue.record("no failure"); return }
        #expect(g.code == .timeout)
        #expect(g.description == "hci0: Reset timed out after 2000 ms")
        #expect(silent.tick(at: 9_000_000).isEmpty, "a failed host says it once")
    }

    @Test func aRefusedCommandNamesItselfAndItsStatus() {
        var host = HCIHost(settings: Self.settings(), transportName: "/dev/ttyACM0")
        _ = host.start(at: 0)
        guard case let .failed(f)? = host.received(Self.complete(0x0C03, status: 0x0C), at: 1).last else { Issue.record("no failure"); return }
        #expect(f.code == .refused)
        #expect(f.description == "/dev/ttyACM0: the controller refused Reset: status 0xc (Command Disallowed)")
    }

    @Test func reportsOfOneReadGoTogetherEvenDuringBringUpAndAHardwareErrorEndsIt() {
        var host = HCIHost(settings: Self.settings(), transportName: "hci0")
        _ = host.start(at: 0)
        let a: [UInt8] = [0xC0, 0x11, 0x22, 0x33, 0x44, 0x02]
        let bytes = Self.report(a, data: [0x02, 0x01, 0x06]) + Self.report(a, data: [0x02, 0x01, 0x06], rssi: -70) + Self.complete(0x0C03)
        let actions = host.received(bytes, at: 5, tapping: true)
        let reports = actions.compactMap { if case let .reports(r) = $0 { r } else { nil } }
        #expect(reports.count == 1)
        #expect(reports.first?.map(\.rssi) == [-60, -70])
        #expect(reports.first?.first?.address == a)
        #expect(actions.filter { if case .received = $0 { true } else { false } }.count == 3, "each event tapped for capture")
        #expect(Self.sent(actions) == [0x1001])
        let broken = host.received([0x04, 0x10, 0x01, 0x42], at: 6)
        #expect(broken.last == .failed(HCIHost.HCIFailure(code: .hardwareError, description: "hci0: controller hardware error 0x42")))
    }

    @Test func aScanWithoutReportsIsResetAfterTheStallTimeAndNotBefore() {
        var host = HCIHost(settings: Self.settings(), transportName: "hci0")
        _ = Self.bringUp(&host, extended: false, at: 1_000)
        _ = host.received(Self.report([1, 2, 3, 4, 5, 6], data: []), at: 10_000_000)
        #expect(host.tick(at: 70_000_000).isEmpty)
        let reset = host.tick(at: 70_000_001)
        #expect(reset.first == .stalled)
        #expect(Self.sent(reset) == [0x0C03], "the bring-up starts again on the same transport")
        #expect(!host.isScanning)

        var never = HCIHost(settings: Self.settings { $0.stallSeconds = 0 }, transportName: "hci0")
        _ = Self.bringUp(&never, extended: false)
        #expect(never.tick(at: 10_000_000_000).isEmpty)
        #expect(never.nextDeadline == nil, "with nothing to wait for, the shell can block")
    }

    @Test func lineNoiseBeforeAnEventIsSkippedNotFatal() {
        var host = HCIHost(settings: Self.settings(), transportName: "/dev/ttyS1")
        _ = host.start(at: 0)
        #expect(Self.sent(host.received([0xFF, 0x00, 0x77] + Self.complete(0x0C03), at: 1)) == [0x1001])
        #expect(host.skippedBytes == 3)
    }
}
