import DoorbellCore
import PropertyBased
import Testing

/// `[tracker.button] cooldown_ms` means the same for a BTHome button as for an RF button: a press
/// this soon after the last forwarded one is counted, not forwarded, and reported with the next.
struct BLECooldownTests {
    static let address: [UInt8] = [0xC0, 0x11, 0x22, 0x33, 0x44, 0x02]
    static let button = DeviceConfig(id: "side-door", name: "Side door", radio: "ble",
                                     match: RTL433Match(fields: [("address", .text("C0:11:22:33:44:02"))]))

    /// An LE Advertising Report event (as the controller sends it) of a plain BTHome button packet.
    static func report(packetID: UInt8, events: [UInt8]) -> BLEAdvertisingReport? {
        let objects: [UInt8] = [0x00, packetID, 0x01, 90] + events.flatMap { [0x3A, $0] }
        let sd = BTHomeDecoder.encode(objects: objects, triggerBased: true, address: address, bindkey: nil)
        let ad: [UInt8] = [0x02, 0x01, 0x06, UInt8(sd.count + 3), 0x16, 0xD2, 0xFC] + sd
        let params: [UInt8] = [0x02, 0x01, 0x03, 0x00] + address.reversed() + [UInt8(ad.count)] + ad + [0xC4]
        guard case let .advertisingReports(r)? = HCIEvent.parse([0x3E, UInt8(params.count)] + params) else { return nil }
        return r.first
    }

    static func time(_ micros: Int64) -> ReceiveTime { ReceiveTime(monoMicros: micros, wallMicros: 1_700_000_000_000_000 + micros, clockSynced: true) }

    /// Each press is advertised 6 times over 300 ms with one packet id, as buttons do.
    static func press(_ p: inout BLEPipeline, packetID: UInt8, at start: Int64, events: [UInt8] = [0x01]) -> [AgentEvent] {
        guard let r = report(packetID: packetID, events: events) else { return [] }
        return (0..<6).flatMap { p.handle(report: r, at: time(start + Int64($0) * 60_000)) }
    }

    @Test func pressesWithinTheCooldownAreCountedAndReportedWithTheNextForwardedOne() throws {
        var p = BLEPipeline(devices: [Self.button], regions: [])
        // The reported case: presses 0.7 s and 1.1 s apart, then one after the cooldown.
        var out = Self.press(&p, packetID: 1, at: 0)
        out += Self.press(&p, packetID: 2, at: 700_000)
        out += Self.press(&p, packetID: 3, at: 1_800_000)
        #expect(out.map(\.type) == [.doorbellPressed])
        #expect(p.tracker.counters.suppressed == 2)
        out += Self.press(&p, packetID: 4, at: 3_500_000)
        #expect(out.map(\.type) == [.doorbellPressed, .doorbellPressed])
        #expect(out.last?.data["suppressed"]?.intValue == 2)
        #expect(out.last?.data["packet_id"]?.intValue == 4)
        #expect(p.tracker.counters.forwarded == 2)
    }

    @Test func anyPressTypeStartsACooldownAndAHoldFollowsItsPress() {
        var p = BLEPipeline(devices: [Self.button], regions: [])
        var out = Self.press(&p, packetID: 1, at: 0, events: [0x02]) // double_press
        out += Self.press(&p, packetID: 2, at: 1_000_000, events: [0x80]) // hold of that press
        out += Self.press(&p, packetID: 3, at: 1_500_000, events: [0x80]) // still held: nothing new
        out += Self.press(&p, packetID: 4, at: 2_000_000, events: [0x01]) // within the cooldown
        out += Self.press(&p, packetID: 5, at: 2_400_000, events: [0x80]) // hold of a suppressed press
        #expect(out.map(\.type) == [.doorbellDoublePressed, .doorbellHeld])
        out += Self.press(&p, packetID: 6, at: 9_000_000, events: [0x04])
        #expect(out.map(\.type) == [.doorbellDoublePressed, .doorbellHeld, .doorbellLongPressed])
        #expect(out.last?.data["suppressed"]?.intValue == 1)
    }

    @Test func theButtonsOfOneRemoteHaveACooldownEach() {
        var p = BLEPipeline(devices: [Self.button], regions: [])
        var out = Self.press(&p, packetID: 1, at: 0, events: [0x01, 0x00])
        out += Self.press(&p, packetID: 2, at: 500_000, events: [0x00, 0x01])
        #expect(out.compactMap { $0.data["button"]?.intValue } == [0, 1])
    }

    @Test func aZeroCooldownForwardsEveryPress() {
        var p = BLEPipeline(devices: [Self.button], regions: [], button: ButtonTracker.Settings(cooldownMicros: 0))
        var out: [AgentEvent] = []
        for i in 0..<5 { out += Self.press(&p, packetID: UInt8(i + 1), at: Int64(i) * 400_000) }
        #expect(out.count == 5)
    }

    @Test func anInjectedBLEPressGoesThroughTheSameCooldown() {
        var p = BLEPipeline(devices: [Self.button], regions: [])
        #expect(p.inject(device: Self.button, at: Self.time(0)).count == 1)
        #expect(p.inject(device: Self.button, at: Self.time(1_000_000)).isEmpty)
        #expect(p.inject(device: Self.button, at: Self.time(3_100_000)).first?.data["suppressed"]?.intValue == 1)
    }

    /// The rule is one: the same press times give the same forwarded/suppressed answers whether
    /// they come as RF bursts (one frame each, further apart than the repeat gap) or BTHome packets.
    @Test func bothRadiosApplyTheSameCooldown() async {
        await propertyCheck(input: Gen.int(in: 301_000...8_000_000).array(of: 1...30), Gen.int(in: 0...6_000)) { gaps, cooldownMs in
            let settings = ButtonTracker.Settings(cooldownMicros: Int64(cooldownMs) * 1000)
            var rf = RFPipeline(radio: "rtl433", directory: nil, settings: settings)
            var ble = BLEPipeline(devices: [Self.button], regions: [], button: settings)
            var t: Int64 = 0
            var rfOut: [Int64] = [], bleOut: [Int64] = []
            for (i, g) in gaps.enumerated() {
                t += Int64(g)
                let frame = RFFrame(model: "EV1527", identity: "code=5a3c91", code: "5a3c91", rssi: nil, timeMicros: nil, fields: [:])
                rfOut += rf.handle(frame: frame, at: Self.time(t)).compactMap { $0.data["suppressed"]?.intValue }
                bleOut += Self.press(&ble, packetID: UInt8(i % 250 + 1), at: t).compactMap { $0.data["suppressed"]?.intValue }
            }
            #expect(rfOut == bleOut)
            #expect(rf.tracker.counters.suppressed == ble.tracker.counters.suppressed)
        }
    }
}
