import DoorbellCore
import PropertyBased
import Testing

/// The decoder registry and Eddystone: every fixture through every decoder against its golden
/// output, presence regions by namespace/instance with telemetry, and no byte string that makes
/// a decoder trap or passes a broken frame off as "not mine".
struct EddystoneDecoderTests {
    static let namespace = hexBytes("edd1ebeac04e5defa017")
    static let instance = hexBytes("0123456789ab")
    static let time0 = ReceiveTime(monoMicros: 0, wallMicros: 0, clockSynced: true)

    static func fixtures() throws -> [(comment: String, data: [UInt8])] {
        var out: [(String, [UInt8])] = []
        var comment = ""
        for line in try Golden.read("eddystone-adverts.hex").split(separator: "\n") {
            if line.hasPrefix("#") { comment = String(line.dropFirst(2)); continue }
            out.append((comment, hexBytes(line.filter { $0 != "|" })))
        }
        return out
    }

    static func describe(_ verdict: BLEVerdict) -> String {
        switch verdict {
        case .notMine: "not mine"
        case let .corrupt(r): "corrupt: \(r)"
        case let .implausible(r): "implausible: \(r)"
        case let .observation(.eddystone(.uid(u))): "uid namespace=\(u.namespaceHex) instance=\(u.instanceHex) tx=\(u.txPower)"
        case let .observation(.eddystone(.telemetry(t))):
            "tlm battery_mv=\(t.battery.map(String.init) ?? "-") temperature_c=\(t.temperature.map { "\($0)" } ?? "-") adverts=\(t.advertCount) uptime_s=\(Double(t.uptimeTenths) / 10)"
        case .observation(.eddystone(.encryptedTelemetry)): "encrypted tlm (counted, not decoded)"
        case let .observation(.eddystone(.eid(id, tx))): "eid \(hexString(id)) tx=\(tx)"
        case let .observation(.eddystone(frame)): "url \(frame.urlText ?? "?")"
        case let .observation(.iBeacon(b)): "ibeacon \(b.uuidString)/\(b.major)/\(b.minor)"
        case let .observation(.bthome(sd)): "bthome service data \(hexString(Array(sd)))"
        }
    }

    @Test func everyFixtureThroughEveryDecoderMatchesTheGoldenOutput() throws {
        var lines: [String] = []
        var pipeline = BLEPipeline(devices: [], regions: [])
        for (comment, data) in try Self.fixtures() {
            lines.append("# " + comment)
            let (structures, truncated) = ADWalker.walk(data)
            #expect(!truncated, "fixture \(comment) is not well framed")
            for decoder in BLEDecoderRegistry.all {
                let v = decoder.verdict(structures)
                if v != .notMine { lines.append("\(decoder.descriptor.name): \(Self.describe(v))") }
            }
            _ = pipeline.handle(report: BLEAdvertisingReport(address: [0xC0, 0, 0, 0, 0, 1], rssi: -60, data: data), at: Self.time0)
        }
        for (name, c) in zip(BLEDecoderRegistry.names, pipeline.counters.decoders) {
            lines.append("counted \(name): seen \(c.seen), corrupt \(c.corrupt), implausible \(c.implausible)")
        }
        try Golden.check(lines.joined(separator: "\n") + "\n", against: "eddystone-adverts.golden.txt")
        #expect(pipeline.counters.decoder("eddystone").seen == 8 && pipeline.counters.decoder("eddystone").corrupt == 3
                && pipeline.counters.decoder("eddystone").implausible == 3)
        #expect(pipeline.counters.ibeacons == 1 && pipeline.counters.bthome == 1, "the other formats are still theirs")
    }

    @Test func framesEncodeToWhatTheyDecodeFrom() {
        let frames: [EddystoneFrame] = [
            .uid(EddystoneUID(namespace: Self.namespace, instance: Self.instance, txPower: -18)),
            .telemetry(EddystoneTelemetry(batteryMillivolts: 2_950, temperatureRaw: -1_344, advertCount: 7, uptimeTenths: 42)),
            .eid(ephemeralID: Array(1...8), txPower: -30),
            .url(scheme: 3, compressed: Array("example".utf8) + [0x07], txPower: -20),
        ]
        for f in frames {
            #expect(EddystoneDecoder.verdict(ADWalker.walk(f.advertisingData).structures) == .observation(.eddystone(f)))
        }
        #expect(EddystoneFrame.url(scheme: 3, compressed: Array("example".utf8) + [0x07], txPower: -20).urlText == "https://example.com")
    }

    func report(_ frame: EddystoneFrame, from address: [UInt8] = [0xC0, 0x11, 0x22, 0x33, 0x44, 0x05], rssi: Int8 = -55) -> BLEAdvertisingReport {
        BLEAdvertisingReport(address: address, rssi: rssi, data: frame.advertisingData)
    }

    @Test func anEddystoneRegionEntersAndLeavesWithItsTelemetry() throws {
        var region = BeaconRegion(id: "keys", name: "Keys", namespace: Self.namespace, instance: Self.instance)
        region.minSamples = 2
        region.exitTimeoutMicros = 3_000_000
        let other = BeaconRegion(id: "other", name: "Other", namespace: Self.namespace, instance: hexBytes("000000000001"))
        var p = BLEPipeline(devices: [], regions: [region, other])
        let uid = EddystoneFrame.uid(EddystoneUID(namespace: Self.namespace, instance: Self.instance, txPower: -18))
        let tlm = EddystoneFrame.telemetry(EddystoneTelemetry(batteryMillivolts: 2_980, temperatureRaw: 0x1480, advertCount: 10, uptimeTenths: 100))
        var events: [AgentEvent] = []
        // UID and TLM interleaved from one address, as the spec has beacons send them.
        for i in 0..<6 {
            let t = Int64(i) * 200_000
            events += p.handle(report: report(i % 3 == 1 ? tlm : uid), at: ReceiveTime(monoMicros: t, wallMicros: t, clockSynced: true))
        }
        // The beacon is gone; another advertiser keeps the air heard.
        for s in 2...8 {
            let t = Int64(s) * 1_000_000
            events += p.handle(report: report(.eid(ephemeralID: Array(1...8), txPower: -20), from: [0xC0, 0, 0, 0, 0, 9]),
                               at: ReceiveTime(monoMicros: t, wallMicros: t, clockSynced: true))
        }
        #expect(events.map(\.type) == [.beaconEntered, .beaconExited], "\(events.map(\.type))")
        #expect(events.allSatisfy { $0.device.id == "keys" })
        let entered = try #require(events.first)
        #expect(entered.data["namespace"]?.stringValue == "edd1ebeac04e5defa017" && entered.data["instance"]?.stringValue == "0123456789ab")
        #expect(entered.data["battery_mv"]?.intValue == 2_980 && entered.data["temperature_c"]?.doubleValue == 20.5)
        #expect(entered.data["uuid"] == nil, "an Eddystone event has no iBeacon fields")
        #expect(p.counters.observations[BLEObservationKind.eddystoneTLM.rawValue] == 2)
        let heard = try #require(p.heard.values.first { $0.eddystone != nil })
        #expect(heard.identity == "edd1ebeac04e5defa017/0123456789ab" && heard.deviceID == "keys")
        #expect(heard.snippet == "[[region]]\nid = \"...\"\nnamespace = \"edd1ebeac04e5defa017\"\ninstance = \"0123456789ab\"")
        #expect(heard.telemetry?.batteryMillivolts == 2_980)
        let eid = try #require(p.heard.values.first { $0.kind == "eddystone" && $0.eddystone == nil })
        #expect(eid.snippet.hasPrefix("# Eddystone without a UID frame"))
    }

    @Test func aNamespaceRegionMatchesEveryInstanceAndNoIBeacon() {
        let region = BeaconRegion(id: "fleet", name: "Fleet", namespace: Self.namespace)
        #expect(region.matches(.eddystone(EddystoneUID(namespace: Self.namespace, instance: [1, 2, 3, 4, 5, 6], txPower: 0))))
        #expect(!region.matches(.eddystone(EddystoneUID(namespace: Array(repeating: 0, count: 10), instance: Self.instance, txPower: 0))))
        #expect(!region.matches(IBeacon(uuid: Self.namespace + Self.instance, major: 1, minor: 1, measuredPower: -59)))
        #expect(region.uuid.isEmpty && region.major == nil && region.format == "Eddystone")
        // Proximity from the 0 m power: −18 dBm at 0 m is −59 dBm at 1 m.
        #expect(Beacon.eddystone(EddystoneUID(namespace: Self.namespace, instance: Self.instance, txPower: -18)).measuredPowerAt1m == -59)
    }

    @Test func aRefusedAdvertFromAConfiguredDeviceIsItsLastProblem() {
        let button = DeviceConfig(id: "side-door", name: "Side door", radio: "ble", match: RTL433Match(fields: [("address", .text("C0:11:22:33:44:02"))]))
        var p = BLEPipeline(devices: [button], regions: [])
        // BTHome v1 service data: BTHome's, but a version this agent does not read.
        _ = p.handle(report: BLEAdvertisingReport(address: hexBytes("C01122334402"), rssi: -50, data: hexBytes("020106 0516d2fc2000")), at: Self.time0)
        #expect(p.counters.decoder("bthome") == { var c = BLEDecoderCounts(); c.implausible = 1; return c }())
        #expect(p.lastProblem == "side-door: BTHome version 1 (only v2 is supported)")
        #expect(p.lastRefused?.hasSuffix("(C0:11:22:33:44:02)") == true)
    }

    @Test func eddystoneRegionsAreReadAndTheirMistakesExplained() throws {
        let ble = "gateway_id = \"gw\"\n[radio.ble]\ntransport = \"hci\"\n"
        let region = "[[region]]\nid = \"keys\"\n"
        let c = try ConfigLoader.parse(text: ble + region + "namespace = \"EDD1EBEAC04E5DEFA017\"\ninstance = \"0123456789ab\"\nmin_samples = 2\n", file: "agent.toml")
        #expect(c.regions.first?.selector == .eddystone(namespace: Self.namespace, instance: Self.instance) && c.regions.first?.minSamples == 2)
        let uuid = "uuid = \"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0\"\n"
        let bad: [(String, String)] = [
            (ble + region + "namespace = \"edd1ebeac04e5defa0\"\n", "region[0].namespace: \"edd1ebeac04e5defa0\" is not 20 hex digits (found 18 characters)"),
            (ble + region + "namespace = \"edd1ebeac04e5defa01g\"\n", "region[0].namespace: \"edd1ebeac04e5defa01g\" is not 20 hex digits"),
            (ble + region + "namespace = \"edd1ebeac04e5defa017\"\ninstance = \"01234567\"\n", "region[0].instance: \"01234567\" is not 12 hex digits"),
            (ble + region + "namespace = \"edd1ebeac04e5defa017\"\n" + uuid, "region[0].uuid: is for iBeacon regions; this region has namespace"),
            (ble + region + "namespace = \"edd1ebeac04e5defa017\"\nmajor = 1\n", "region[0].major: is for iBeacon regions"),
            (ble + region + uuid + "instance = \"0123456789ab\"\n", "region[0].instance: needs namespace"),
            ("gateway_id = \"gw\"\n" + region + "namespace = \"edd1ebeac04e5defa017\"\n", "region[0]: Eddystone regions need [radio.ble]"),
        ]
        for (toml, expected) in bad {
            do {
                _ = try ConfigLoader.parse(text: toml, file: "agent.toml")
                Issue.record("expected \(expected)")
            } catch {
                #expect(error.issues.count == 1 && error.description.contains(expected), "\(error.description)")
            }
        }
    }

    // MARK: - Properties

    @Test func noByteStringMakesADecoderTrap() async {
        // Raw adverts, and the same bytes as Eddystone service data in a well-formed advert.
        await propertyCheck(count: 500, input: Gen.uint8(in: 0...255).array(of: 0...40)) { bytes in
            let wrapped: [UInt8] = [0x03, 0x03, 0xAA, 0xFE, UInt8(bytes.count + 3), 0x16, 0xAA, 0xFE] + bytes
            var p = BLEPipeline(devices: [], regions: [BeaconRegion(id: "e", name: "e", namespace: Self.namespace)])
            for data in [bytes, wrapped] {
                for decoder in BLEDecoderRegistry.all { _ = decoder.verdict(ADWalker.walk(data).structures) }
                _ = p.handle(report: BLEAdvertisingReport(address: [0xC0, 0, 0, 0, 0, 1], rssi: -50, data: data), at: Self.time0)
            }
            #expect(p.counters.reports == 2)
        }
    }

    static let validLengths: [UInt8: Set<Int>] = [0x00: [18, 20], 0x30: [10], 0x20: [14]]

    @Test func anIBeaconOfTheWrongLengthIsCountedAsCorruptNotAsNotMine() async {
        await propertyCheck(count: 200, input: Gen.uint8(in: 0...255).array(of: 0...26)) { tail in
            let data = [0x4C, 0x00, 0x02, 0x15] + tail
            guard data.count != 25 else { return }
            var p = BLEPipeline(devices: [], regions: [])
            _ = p.handle(report: BLEAdvertisingReport(address: [0xC0, 0, 0, 0, 0, 1], rssi: -50, data: [UInt8(data.count + 1), 0xFF] + data), at: Self.time0)
            #expect(p.counters.decoder("ibeacon").corrupt == 1 && p.counters.ibeacons == 0, "\(data.count) bytes")
        }
    }

    @Test func aFrameOfTheWrongLengthIsCountedAsCorruptNotAsNotMine() async {
        // A valid UID, EID or TLM frame, cut short or padded to any length its type does not have.
        await propertyCheck(count: 300, input: Gen.int(in: 0...2), Gen.int(in: 1...27), Gen.uint8(in: 0...255).array(of: 20...20)) { which, length, fill in
            let frame: EddystoneFrame = switch which {
            case 0: .uid(EddystoneUID(namespace: Array(fill[0..<10]), instance: Array(fill[10..<16]), txPower: -20))
            case 1: .eid(ephemeralID: Array(fill[0..<8]), txPower: -20)
            default: .telemetry(EddystoneTelemetry(batteryMillivolts: 3_000, temperatureRaw: 0x1400, advertCount: 1, uptimeTenths: 1))
            }
            var sd = frame.serviceData
            let type = sd[0]
            guard !(Self.validLengths[type] ?? []).contains(length) else { return }
            sd = length < sd.count ? Array(sd.prefix(length)) : sd + fill.prefix(length - sd.count)
            let data: [UInt8] = [0x02, 0x01, 0x06, 0x03, 0x03, 0xAA, 0xFE, UInt8(sd.count + 3), 0x16, 0xAA, 0xFE] + sd
            var p = BLEPipeline(devices: [], regions: [])
            _ = p.handle(report: BLEAdvertisingReport(address: [0xC0, 0, 0, 0, 0, 1], rssi: -50, data: data), at: Self.time0)
            let c = p.counters.decoder("eddystone")
            #expect(c.corrupt == 1 && c.seen == 0 && c.implausible == 0, "type \(type), \(sd.count) bytes: \(c)")
        }
    }
}
