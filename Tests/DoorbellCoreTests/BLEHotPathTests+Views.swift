import DoorbellCore
import PropertyBased
import Testing

/// The replay hot path, third pass (#28): advertising reports read in place, learned buttons'
/// cooldown found by address, refusals made text when asked — each against what it replaced.
extension BLEHotPathTests {
    // MARK: advertising reports read in place

    /// HCIEvent.advertisingReports as it was, copying each report's data into an array (the oracle).
    static func oldReports(_ p: [UInt8]) -> [BLEAdvertisingReport]? {
        guard p.count >= 3, p[0] == 0x3E, Int(p[1]) == p.count - 2, p[2] == 0x02 || p[2] == 0x0D else { return nil }
        let extended = p[2] == 0x0D
        guard p.count > 3, case let n = p[3], n >= 1 else { return nil }
        func key(_ i: Int) -> UInt64 { (i..<i + 6).reversed().reduce(0) { $0 << 8 | UInt64(p[$1]) } }
        var out: [BLEAdvertisingReport] = []
        var i = 4
        for _ in 0..<n {
            if extended {
                guard i + 24 <= p.count else { return nil }
                let length = Int(p[i + 23])
                guard i + 24 + length <= p.count else { return nil }
                let rssi = Int8(bitPattern: p[i + 13])
                out.append(BLEAdvertisingReport(addressKey: key(i + 3), addressType: p[i + 2], eventType: UInt16(p[i]) | UInt16(p[i + 1]) << 8,
                                                rssi: rssi == 127 ? nil : rssi, data: Array(p[i + 24..<i + 24 + length])[...], extended: true))
                i += 24 + length
            } else {
                guard i + 9 <= p.count else { return nil }
                let length = Int(p[i + 8])
                guard i + 9 + length + 1 <= p.count, length <= 31 else { return nil }
                let rssi = Int8(bitPattern: p[i + 9 + length])
                out.append(BLEAdvertisingReport(addressKey: key(i + 2), addressType: p[i + 1], eventType: UInt16(p[i]),
                                                rssi: rssi == 127 ? nil : rssi, data: Array(p[i + 9..<i + 9 + length])[...], extended: false))
                i += 10 + length
            }
        }
        return i == p.count ? out : nil
    }

    /// An LE advertising report event of `reports` reports made from `bytes`, broken by `damage`
    /// (0 none; 1 a byte short; 2 a byte long; 3 one report more announced; 4 the first report's
    /// data one byte longer; 5 any bytes after the subevent).
    static func reportEvent(_ bytes: [UInt8], extended: Bool, reports: Int, damage: Int) -> [UInt8] {
        var k = 0
        func next() -> UInt8 { defer { k += 1 }; return bytes.isEmpty ? UInt8(k & 0xFF) : bytes[k % bytes.count] }
        var params: [UInt8] = [extended ? 0x0D : 0x02, UInt8(reports)]
        var firstLength: Int?
        for _ in 0..<reports {
            let header = (0..<(extended ? 23 : 8)).map { _ in next() }
            let length = Int(next()) % (extended ? 48 : 33)   // legacy: up to 32, one more than allowed
            firstLength = firstLength ?? params.count + header.count
            params += header
            params.append(UInt8(length))
            params += (0..<length).map { _ in next() }
            if !extended { params.append(next()) }   // RSSI (127: none)
        }
        switch damage {
        case 1: params.removeLast()
        case 2: params.append(next())
        case 3: params[1] &+= 1
        case 4: if let i = firstLength { params[i] &+= 1 }
        case 5: params = [params[0]] + bytes
        default: break
        }
        params = Array(params.prefix(255))
        return [0x3E, UInt8(params.count)] + params
    }

    @Test func reportsReadInPlaceAreTheReportsTheCopiesWere() async {
        await propertyCheck(count: 1_000, input: Gen.uint8(in: 0...255).array(of: 0...90), Gen.int(in: 0...3), Gen.int(in: 0...5), Gen.bool) { bytes, reports, damage, extended in
            let event = Self.reportEvent(bytes, extended: extended, reports: reports, damage: damage)
            let old = Self.oldReports(event)
            // The event where the reader finds it: inside a larger buffer (a capture's chunk).
            let chunk = [0x04, 0xAA] + event + [0x55]
            let view = chunk[2..<chunk.count - 1]
            #expect(HCIEvent.advertisingReports(view) == old, "\(event)")
            var cursor = AdvertisingReportCursor(view)
            var taken: [BLEAdvertisingReport] = []
            while let r = cursor?.next() { taken.append(r) }   // bounded: `remaining` counts down
            #expect((cursor == nil ? nil : taken) == old)
            if let old { #expect(HCIEvent.parse(event) == .advertisingReports(old)) }
        }
    }

    // MARK: learned buttons' cooldown found by address

    /// A BTHome button advert from `address` with `buttons` button events and packet id `id`.
    static func buttonReport(_ address: UInt64, id: UInt8, buttons: [UInt8]) -> BLEAdvertisingReport {
        let objects: [UInt8] = [0x00, id] + buttons.flatMap { [0x3A, $0] }
        let sd = BTHomeDecoder.encode(objects: objects, triggerBased: true, address: [], bindkey: nil)
        let ad: [UInt8] = [0x02, 0x01, 0x06, UInt8(sd.count + 3), 0x16, 0xD2, 0xFC] + sd
        return BLEAdvertisingReport(addressKey: address, addressType: 1, eventType: 3, rssi: -60, data: ad, extended: false)
    }

    @Test func learnedButtonsCoolDownByAddressAsTheyDidByName() async {
        // A few buttons, two button objects each (their own cooldowns), presses and holds close
        // together. The oracle: the same buttons configured under their address text, which the
        // tracker finds by name ("address", "address#1") as learned ones were before.
        await propertyCheck(count: 200, input: Gen.int(in: 0...2).array(of: 1...60), Gen.int(in: 0...1_500_000).array(of: 60...60),
                            Gen.uint8(in: 0...2).array(of: 120...120)) { picks, gaps, events in
            let addresses: [UInt64] = [0xC011_2233_4400, 0xC011_2233_4401, 0xD0FF_0000_0001]
            var learned = BLEPipeline(devices: [], regions: [])
            learned.learnAll = true
            var named = BLEPipeline(devices: addresses.map {
                DeviceConfig(id: Hex.address($0), name: "BTHome " + Hex.address($0), radio: "ble",
                             match: RTL433Match(fields: [("address", .text(Hex.address($0)))]))
            }, regions: [])
            var t: Int64 = 0
            for (n, pick) in picks.enumerated() {
                t += Int64(gaps[n])
                let buttons = [events[2 * n], events[2 * n + 1]].map { $0 == 2 ? UInt8(0x80) : $0 }   // none, press, hold_press
                let report = Self.buttonReport(addresses[pick], id: UInt8(n + 1), buttons: buttons)
                let time = ReceiveTime(monoMicros: t, wallMicros: t, clockSynced: true)
                let a = learned.handle(report: report, at: time), b = named.handle(report: report, at: time)
                #expect(a.map(\.type) == b.map(\.type) && a.map(\.device) == b.map(\.device) && a.map(\.data) == b.map(\.data))
            }
            #expect(learned.tracker.counters == named.tracker.counters)
        }
    }

    // MARK: a refusal made text when asked

    @Test func aLearnedButtonsRefusalNamesItsAddress() {
        var p = BLEPipeline(devices: [], regions: [])
        p.learnAll = true
        let sd: [UInt8] = [0x41] + [UInt8](repeating: 0x11, count: 12)   // encrypted, no key without a config
        let ad: [UInt8] = [0x02, 0x01, 0x06, UInt8(sd.count + 3), 0x16, 0xD2, 0xFC] + sd
        _ = p.handle(report: BLEAdvertisingReport(addressKey: 0xC011_2233_4403, addressType: 1, eventType: 3, rssi: nil, data: ad, extended: false),
                     at: ReceiveTime(monoMicros: 0, wallMicros: 0, clockSynced: true))
        #expect(p.lastProblem == "C0:11:22:33:44:03: encrypted BTHome packet and no bindkey configured for this device")
        #expect(p.counters.encryptedWithoutKey == 1)
    }
}
