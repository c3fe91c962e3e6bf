#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import DoorbellCore
import PropertyBased
import Testing

func hexBytes(_ s: some StringProtocol) -> [UInt8] {
    let h = Array(String(s.filter { !$0.isWhitespace }).utf8)
    return stride(from: 0, to: h.count - 1, by: 2).compactMap { UInt8(String(decoding: h[$0..<$0 + 2], as: UTF8.self), radix: 16) }
}

func hexString(_ b: [UInt8]) -> String { b.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined() }

/// HCI framing, AD structures, iBeacon, BTHome (plain and AES-CCM), on real controller bytes.
struct BLEDecoderTests {
    static func fixtureEvents() throws -> [(comment: String, bytes: [UInt8])] {
        var out: [(String, [UInt8])] = []
        var comment = ""
        for line in try Golden.read("hci-events.hex").split(separator: "\n") {
            if line.hasPrefix("#") { comment = String(line.dropFirst(2)); continue }
            out.append((comment, hexBytes(line)))
        }
        return out
    }

    @Test func hciFixturesDecodeToTheGoldenOutput() throws {
        var framer = H4Framer()
        var lines: [String] = []
        var pipeline = BLEPipeline(devices: [], regions: [])
        for (comment, bytes) in try Self.fixtureEvents() {
            lines.append("# " + comment)
            for packet in framer.feed(bytes) {
                guard case let .event(e) = packet else { lines.append("not an event"); continue }
                guard let event = HCIEvent.parse(e) else { lines.append("malformed event"); continue }
                switch event {
                case let .advertisingReports(reports):
                    for r in reports {
                        let (ad, truncated) = ADWalker.walk(r.data)
                        var l = "report \(r.addressString) type=\(r.addressType) evt=\(r.eventType) rssi=\(r.rssi.map(String.init) ?? "-") ext=\(r.extended) ad=\(ad.map { String($0.type, radix: 16) }.joined(separator: ","))\(truncated ? " TRUNCATED" : "")"
                        if let b = IBeaconDecoder.decode(ad) { l += " ibeacon=\(b.uuidString)/\(b.major)/\(b.minor)/\(b.measuredPower)" }
                        if let sd = ADWalker.serviceData(ad, uuid16: BTHomeDecoder.uuid16) {
                            if let p = try? BTHomeDecoder.decode(sd, address: r.address, bindkey: nil) {
                                l += " bthome pid=\(p.packetID.map(String.init) ?? "-") battery=\(p.battery.map(String.init) ?? "-") buttons=\(p.buttons.map(\.name)) trigger=\(p.triggerBased) objects=\(p.objects)"
                            }
                        }
                        lines.append(l)
                        _ = pipeline.handle(report: r, at: ReceiveTime(monoMicros: 0, wallMicros: 0, clockSynced: true))
                    }
                default:
                    lines.append("\(event)")
                }
            }
        }
        try Golden.check(lines.joined(separator: "\n") + "\n", against: "hci-events.golden.txt")
        #expect(pipeline.counters.ibeacons == 1, "the Apple Nearby decoy is not an iBeacon")
        #expect(pipeline.counters.bthome == 3)
    }

    @Test func theHeardListStaysBoundedAndKeepsTheNewest() throws {
        // iBeacons from 1,000 rotating random addresses, as a busy street sends them.
        var pipeline = BLEPipeline(devices: [], regions: [])
        let ibeacon: [UInt8] = [0x02, 0x01, 0x06, 0x1A, 0xFF, 0x4C, 0x00, 0x02, 0x15] + [UInt8](repeating: 0xE2, count: 16) + [0, 1, 0, 2, 0xC5]
        var last: [UInt8] = []
        for i in 0..<1_000 {
            last = [0x40, 0, 0, 0, UInt8(i >> 8), UInt8(i & 0xFF)]
            let params: [UInt8] = [0x02, 0x01, 0x03, 0x01] + last.reversed() + [UInt8(ibeacon.count)] + ibeacon + [0xC4]
            guard case let .advertisingReports(reports)? = HCIEvent.parse([0x3E, UInt8(params.count)] + params) else {
                Issue.record("the test's report does not parse")
                return
            }
            let t = Int64(i) * 1_000
            for r in reports { _ = pipeline.handle(report: r, at: ReceiveTime(monoMicros: t, wallMicros: t, clockSynced: true)) }
            #expect(pipeline.heard.count <= BLEPipeline.maxHeard)
        }
        let newest = try #require(pipeline.heard.values.max { $0.lastSeenWallMicros < $1.lastSeenWallMicros })
        #expect(newest.addressBytes == last && newest.address == "40:00:00:00:03:E7")
        #expect(newest.identity == "E2E2E2E2-E2E2-E2E2-E2E2-E2E2E2E2E2E2/1/2")
        #expect(newest.snippet.contains("major = 1\nminor = 2"))
    }

    @Test func aesCCMMatchesRFC3610PacketVector1() throws {
        let key = Array(UInt8(0xC0)...UInt8(0xCF))
        let nonce = hexBytes("00000003020100A0A1A2A3A4A5")
        let aad = Array(UInt8(0)...UInt8(7))
        let plaintext = Array(UInt8(8)...UInt8(0x1E))
        let sealed = try AESCCM.encrypt(plaintext, key: key, nonce: nonce, aad: aad, tagLength: 8)
        #expect(hexString(sealed) == "588c979a61c663d2f066d0c2c0f989806d5f6b61dac38417e8d12cfdf926e0")
        #expect(try AESCCM.decrypt(sealed, key: key, nonce: nonce, aad: aad, tagLength: 8) == plaintext)
        var forged = sealed
        forged[forged.count - 1] ^= 1
        #expect(throws: AESCCM.Failure.authenticationFailed) { try AESCCM.decrypt(forged, key: key, nonce: nonce, aad: aad, tagLength: 8) }
    }

    @Test func bthomeEncryptionMatchesThePublishedExample() throws {
        // bthome.io/encryption: MAC 54:48:E6:8F:80:A5, key 231d…b932, counter 00112233, data 02CA0903BF13.
        let key = hexBytes("231d39c1d7cc1ab1aee224cd096db932")
        let mac = hexBytes("5448E68F80A5")
        let sealed = try AESCCM.encrypt(hexBytes("02CA0903BF13"), key: key, nonce: mac + [0xD2, 0xFC, 0x41] + hexBytes("00112233"), tagLength: 4)
        #expect(hexString(sealed) == "a47266c95f7378237214")
        let serviceData = [0x41] + sealed.prefix(6) + hexBytes("00112233") + sealed.suffix(4)
        let packet = try BTHomeDecoder.decode(Array(serviceData), address: mac, bindkey: key)
        #expect(packet.encrypted && packet.counter == 0x3322_1100 && packet.objects == 2)
    }

    @Test func decryptsWhatAnIndependentAESCCMEncrypted() throws {
        // Made with Python's `cryptography` AESCCM (key 00…0f, MAC C0:11:22:33:44:03, counter 7):
        // packet id 9, battery 90, press. Also the encrypted seed of the bthome fuzz target.
        let p = try BTHomeDecoder.decode(hexBytes("4546abd77d780f070000006b6de4fa"), address: hexBytes("C01122334403"), bindkey: Array(0..<16))
        #expect(p.packetID == 9 && p.battery == 90 && p.buttons == [.press] && p.counter == 7 && p.triggerBased)
    }

    @Test func encryptedButtonsDecryptAndEveryFailureHasAName() throws {
        let key = hexBytes("00112233445566778899aabbccddeeff")
        let mac = hexBytes("C01122334403")
        let sd = BTHomeDecoder.encode(objects: [0x00, 7, 0x01, 80, 0x3A, 0x01, 0x3A, 0x02], triggerBased: true, address: mac, bindkey: key, counter: 5)
        let p = try BTHomeDecoder.decode(sd, address: mac, bindkey: key)
        #expect(p.packetID == 7 && p.battery == 80 && p.buttons == [.press, .doublePress] && p.counter == 5 && p.triggerBased)
        #expect(throws: BTHomeError.decryptionFailed) { try BTHomeDecoder.decode(sd, address: mac, bindkey: hexBytes("ff112233445566778899aabbccddeeff")) }
        #expect(throws: BTHomeError.decryptionFailed) { try BTHomeDecoder.decode(sd, address: hexBytes("C01122334404"), bindkey: key) }
        #expect(throws: BTHomeError.encryptedWithoutKey) { try BTHomeDecoder.decode(sd, address: mac, bindkey: nil) }
        let plain = BTHomeDecoder.encode(objects: [0x00, 8, 0x3A, 0x01], triggerBased: true, address: mac, bindkey: nil)
        #expect(throws: BTHomeError.plaintextFromKeyedDevice) { try BTHomeDecoder.decode(plain, address: mac, bindkey: key) }
        #expect(throws: BTHomeError.unsupportedVersion(1)) { try BTHomeDecoder.decode([0x20, 0x00, 0x01], address: mac, bindkey: nil) }
    }

    @Test func unknownObjectsEndThePacketKeepingWhatCameBefore() throws {
        let p = try BTHomeDecoder.decode([0x44, 0x00, 9, 0x02, 0x66, 0x08, 0x3A, 0x04, 0xEE, 0x01], address: [0, 0, 0, 0, 0, 0], bindkey: nil)
        #expect(p.packetID == 9 && p.buttons == [.longPress] && p.truncated && p.objects == 3)
        let text = try BTHomeDecoder.decode([0x40, 0x53, 0x03, 0x41, 0x42, 0x43, 0x3A, 0x01], address: [0, 0, 0, 0, 0, 0], bindkey: nil)
        #expect(text.buttons == [.press] && !text.truncated)
    }

    @Test func anEmptyTextObjectIsNotAnIndexOutOfRange() throws {
        // Regression: found by the bthome, hci and ad fuzz targets (Tests/FuzzCorpus/*/crash-empty-text-object).
        let p = try BTHomeDecoder.decode([0x40, 0x00, 0x05, 0x53, 0x00], address: [0, 0, 0, 0, 0, 0], bindkey: nil)
        #expect(p.packetID == 5 && p.objects == 2 && !p.truncated)
        let q = try BTHomeDecoder.decode([0x40, 0x54, 0x00, 0x3A, 0x01], address: [0, 0, 0, 0, 0, 0], bindkey: nil)
        #expect(q.buttons == [.press])
    }

    @Test func onePacketIDIsOnePressAndReplaysAreRefused() {
        var t = BTHomeButtonTracker()
        func pkt(_ id: UInt8, counter: UInt32? = nil) -> BTHomePacket {
            BTHomePacket(encrypted: counter != nil, triggerBased: true, packetID: id, battery: 90, buttons: [.press], counter: counter, objects: 3, truncated: false)
        }
        #expect(t.observe(device: "a", packet: pkt(1)) == .press([(0, .press)]))
        for _ in 0..<20 { #expect(t.observe(device: "a", packet: pkt(1)) == .repeated) }
        #expect(t.observe(device: "a", packet: pkt(2)) == .press([(0, .press)]))
        // An encrypted device: the counter must grow; the same packet re-sent is a repeat.
        #expect(t.observe(device: "e", packet: pkt(1, counter: 10)) == .press([(0, .press)]))
        #expect(t.observe(device: "e", packet: pkt(1, counter: 10)) == .repeated)
        #expect(t.observe(device: "e", packet: pkt(2, counter: 9)) == .replay(lastCounter: 10))
        #expect(t.observe(device: "e", packet: pkt(2, counter: 11)) == .press([(0, .press)]))
        // After a reboot, from the persisted memory: the last press re-broadcast is still not new.
        var after = BTHomeButtonTracker(memory: t.memory)
        #expect(after.observe(device: "a", packet: pkt(2)) == .repeated)
        #expect(after.observe(device: "e", packet: pkt(3, counter: 11)) == .replay(lastCounter: 11))
    }

    @Test func anyRepeatsOfAnyPressesAreOnePressEach() async {
        await propertyCheck(input: Gen.int(in: 1...30).array(of: 1...40)) { repeats in
            var t = BTHomeButtonTracker()
            var presses = 0
            for (i, n) in repeats.enumerated() {
                let p = BTHomePacket(encrypted: false, triggerBased: true, packetID: UInt8(i % 256), battery: nil, buttons: [.press], counter: nil, objects: 2, truncated: false)
                for _ in 0..<n { if case .press = t.observe(device: "b", packet: p) { presses += 1 } }
            }
            #expect(presses == repeats.count)
        }
    }

    @Test func framingSurvivesAnySplitOfTheStream() async throws {
        let packets = try Self.fixtureEvents().map(\.bytes)
        let stream = packets.flatMap { $0 }
        await propertyCheck(input: Gen.int(in: 1...64).array(of: 1...200)) { cuts in
            var framer = H4Framer()
            var got: [[UInt8]] = []
            var i = 0
            var k = 0
            while i < stream.count {
                let n = min(cuts[k % cuts.count], stream.count - i)
                for p in framer.feed(stream[i..<i + n]) { if case let .event(e) = p { got.append([0x04] + e) } }
                i += n
                k += 1
            }
            #expect(got == packets)
        }
    }

    @Test func adWalkerIsTotal() async {
        await propertyCheck(input: Gen.int(in: 0...255).array(of: 0...64)) { bytes in
            let (s, _) = ADWalker.walk(bytes.map { UInt8($0) })
            #expect(s.reduce(0) { $0 + $1.data.count + 2 } <= bytes.count)
        }
    }
}

/// Beacon regions: arrivals and departures as iOS users expect them.
struct PresenceTrackerTests {
    static let uuid = hexBytes("E2C56DB5DFFB48D2B060D0F5A71096E0")
    static let beacon = IBeacon(uuid: uuid, major: 100, minor: 7, measuredPower: -59)

    func region(_ id: String, major: UInt16? = nil, minor: UInt16? = nil) -> BeaconRegion {
        var r = BeaconRegion(id: id, name: id, uuid: Self.uuid, major: major, minor: minor)
        r.enterRSSI = -75
        r.minSamples = 3
        r.exitTimeoutMicros = 30_000_000
        return r
    }

    @Test func entersAfterMinSamplesAndLeavesAfterTheTimeout() {
        var t = PresenceTracker(regions: [region("door", major: 100, minor: 7), region("site"), region("other", major: 101)])
        var out: [PresenceTracker.Output] = []
        for i in 0..<10 { out += t.observe(Self.beacon, rssi: -60, at: Int64(i) * 100_000) }
        #expect(out.count == 2, "the two matching regions, once each: \(out)")
        #expect(t.inside == ["door", "site"])
        // The air is still heard (another advertiser, every second) but not the beacon: it left.
        var exits: [PresenceTracker.Output] = []
        for second in 1...31 {
            t.heardSomething(at: Int64(second) * 1_000_000)
            exits += t.tick(at: Int64(second) * 1_000_000, radioHealthy: true)
            if second < 30 { #expect(exits.isEmpty, "left early, at \(second) s") }
        }
        #expect(exits.count == 2)
        // Entered at the third sighting (0.2 s), last seen at 0.9 s.
        if case let .exited(_, _, _, dwell, reason) = exits.first { #expect(dwell == 700_000 && reason == "timeout") }
    }

    @Test func aStalledRadioIsNotEveryoneLeaving() {
        var t = PresenceTracker(regions: [region("door")])
        for i in 0..<3 { _ = t.observe(Self.beacon, rssi: -60, at: Int64(i)) }
        #expect(t.tick(at: 120_000_000, radioHealthy: false).isEmpty)
        t.radioRecovered(at: 120_000_000)
        #expect(t.tick(at: 121_000_000, radioHealthy: true).isEmpty)
        // Healthy again but the scanner has heard nothing since: still no departure.
        #expect(t.tick(at: 151_000_000, radioHealthy: true).isEmpty)
        // Reports resume without the beacon: it leaves once its timeout has passed on live time.
        var exits: [PresenceTracker.Output] = []
        for second in 152...190 {
            t.heardSomething(at: Int64(second) * 1_000_000)
            exits += t.tick(at: Int64(second) * 1_000_000, radioHealthy: true)
            if second < 152 + 25 { #expect(exits.isEmpty, "left at \(second) s, before its timeout on live time") }
        }
        #expect(exits.count == 1)
    }

    /// The scenario that went wrong: everything heard, then 40 s in which the controller delivers
    /// nothing at all (shorter than stall_s, so the radio is never degraded), then reports again.
    @Test func fortySecondsOfSilenceIsNotADeparture() {
        var t = PresenceTracker(regions: [region("door")])
        var out: [PresenceTracker.Output] = []
        var now: Int64 = 0
        func air(until end: Int64) {
            while now < end {
                now += 250_000
                t.heardSomething(at: now) // noise from other advertisers
                if now % 1_000_000 == 0 { out += t.observe(Self.beacon, rssi: -60, at: now) }
                out += t.tick(at: now, radioHealthy: true)
            }
        }
        air(until: 10_000_000)
        #expect(t.inside == ["door"])
        for _ in 0..<40 { now += 1_000_000; out += t.tick(at: now, radioHealthy: true) }
        #expect(t.exitsOnHold(at: now, radioHealthy: true)?.contains("40 s") == true)
        air(until: now + 20_000_000)
        #expect(out.count == 1, "one arrival and nothing else: \(out)")
        #expect(t.exitsOnHold(at: now, radioHealthy: true) == nil)
    }

    /// Times of one scenario, in µs: the beacon advertises every `interval` (present before and
    /// after a stall that begins at `stallStart` and lasts `stallLength`); other advertisers are
    /// heard every 200 ms outside the stall; ticks once a second throughout.
    static func runStall(interval: Int64, stallStart: Int64, stallLength: Int64, beaconLeavesAt: Int64?, end: Int64,
                         region r: BeaconRegion) -> (outputs: [(Int64, PresenceTracker.Output)], tracker: PresenceTracker) {
        var t = PresenceTracker(regions: [r])
        var out: [(Int64, PresenceTracker.Output)] = []
        var now: Int64 = 0
        while now <= end {
            let silent = now >= stallStart && now < stallStart + stallLength
            if !silent {
                if now % 200_000 == 0 { t.heardSomething(at: now) }
                if now % interval == 0, beaconLeavesAt.map({ now < $0 }) ?? true {
                    out += t.observe(Self.beacon, rssi: -60, at: now).map { (now, $0) }
                }
            }
            if now % 1_000_000 == 0 { out += t.tick(at: now, radioHealthy: true).map { (now, $0) } }
            now += 100_000
        }
        return (out, t)
    }

    @Test func noStallOfAnyLengthAtAnyMomentMakesAPresentBeaconLeave() async {
        // Beacons advertise every 0.1–2 s; stalls of 0–600 s start anywhere in the first minute.
        await propertyCheck(input: Gen.int(in: 1...20), Gen.int(in: 5...600), Gen.int(in: 0...6_000)) { interval, start, length in
            let r = region("door")
            let stallStart = Int64(start) * 100_000
            let stallLength = Int64(length) * 100_000
            let (out, _) = Self.runStall(interval: Int64(interval) * 100_000, stallStart: stallStart, stallLength: stallLength,
                                         beaconLeavesAt: nil, end: stallStart + stallLength + 60_000_000, region: r)
            let kinds = out.map { if case .entered = $0.1 { "entered" } else { "exited" } }
            #expect(kinds == ["entered"], "interval \(interval * 100) ms, stall \(start * 100) ms + \(length * 100) ms: \(out)")
        }
    }

    @Test func aBeaconThatLeftDuringAStallExitsOnceOnLiveTime() async {
        await propertyCheck(input: Gen.int(in: 1...10), Gen.int(in: 100...600), Gen.int(in: 100...3_000), Gen.int(in: 0...100)) { interval, start, length, leaveAt in
            let r = region("door")
            let stallStart = Int64(start) * 100_000
            let stallLength = Int64(length) * 100_000
            // It stops advertising at some moment of the stall.
            let leaves = stallStart + stallLength * Int64(leaveAt) / 100
            let resumed = stallStart + stallLength
            let (out, t) = Self.runStall(interval: Int64(interval) * 100_000, stallStart: stallStart, stallLength: stallLength,
                                         beaconLeavesAt: leaves, end: resumed + 60_000_000, region: r)
            let exits = out.filter { if case .exited = $0.1 { true } else { false } }
            #expect(exits.count == 1, "\(out)")
            guard let (at, _) = exits.first else { return }
            #expect(at >= resumed, "exited during the stall")
            // Its last sighting was before the stall, so at most the silence grace of the stall
            // counts: the timeout runs on live time after reports resume.
            let lastSighting = (stallStart - 1) / (Int64(interval) * 100_000) * (Int64(interval) * 100_000)
            let liveBefore = stallStart - lastSighting + PresenceTracker.silenceGraceMicros
            #expect(at - resumed + liveBefore >= r.exitTimeoutMicros, "exited at \(at), before its timeout on live time")
            #expect(t.inside.isEmpty)
        }
    }
    @Test func weakSignalLeavesWithHysteresis() {
        var t = PresenceTracker(regions: [region("door")])
        var out: [PresenceTracker.Output] = []
        for i in 0..<3 { out += t.observe(Self.beacon, rssi: -70, at: Int64(i)) }
        for i in 3..<6 { out += t.observe(Self.beacon, rssi: -80, at: Int64(i)) } // below enter, within hysteresis
        #expect(out.count == 1)
        for i in 6..<40 { out += t.observe(Self.beacon, rssi: -95, at: Int64(i)) }
        #expect(out.count == 2)
        if case let .exited(_, _, _, _, reason) = out.last { #expect(reason == "weak_signal") }
    }

    @Test func entersAndExitsAlternateWhateverTheSightings() async {
        await propertyCheck(input: Gen.int(in: -100 ... -40).array(of: 0...80), Gen.int(in: 0...60_000_000).array(of: 0...80)) { rssis, gaps in
            var t = PresenceTracker(regions: [region("door")])
            var now: Int64 = 0
            var inside = false
            for (r, g) in zip(rssis, gaps) {
                now += Int64(g)
                if r < -90 { t.heardSomething(at: now); continue } // another advertiser, not the beacon
                for o in t.tick(at: now, radioHealthy: true) + t.observe(Self.beacon, rssi: Int8(r), at: now) {
                    switch o {
                    case .entered: #expect(!inside); inside = true
                    case .exited: #expect(inside); inside = false
                    }
                }
            }
        }
    }

    @Test func proximityFromMeasuredPower() {
        #expect(Proximity.classify(rssi: -45, measuredPower: -59) == .immediate)
        #expect(Proximity.classify(rssi: -62, measuredPower: -59) == .near)
        #expect(Proximity.classify(rssi: -85, measuredPower: -59) == .far)
        #expect(Proximity.classify(rssi: -60, measuredPower: 0) == .unknown)
    }
}
