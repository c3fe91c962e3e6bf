import DoorbellCore
import PropertyBased
import Testing

/// The replay hot path (#28) without copies, string keys or dictionaries of structs: each piece
/// against the code it replaced, kept here as the oracle, for random inputs.
struct BLEHotPathTests {
    // MARK: BTHome objects read in place

    /// The array decoder as it was before it read views (the oracle).
    static func oldDecode(_ serviceData: [UInt8], address: [UInt8], bindkey: [UInt8]?) throws(BTHomeError) -> BTHomePacket {
        guard let info = serviceData.first else { throw .empty }
        let version = Int(info >> 5)
        guard version == 2 else { throw .unsupportedVersion(version) }
        let encrypted = info & 0x01 != 0
        var payload = Array(serviceData.dropFirst())
        var counter: UInt32?
        if encrypted {
            guard let bindkey else { throw .encryptedWithoutKey }
            guard payload.count >= 8 else { throw .tooShortForEncryption }
            let counterBytes = Array(payload[payload.count - 8..<payload.count - 4])
            let ciphertext = Array(payload.prefix(payload.count - 8)) + Array(payload.suffix(4))
            do {
                payload = try AESCCM.decrypt(ciphertext, key: bindkey, nonce: address + [0xD2, 0xFC, info] + counterBytes, tagLength: 4)
            } catch {
                throw .decryptionFailed
            }
            counter = counterBytes.enumerated().reduce(UInt32(0)) { $0 | UInt32($1.element) << (8 * UInt32($1.offset)) }
        } else if bindkey != nil {
            throw .plaintextFromKeyedDevice
        }
        var lengths: [UInt8: Int] = [:]
        for id in 0...255 where oldLengths[id] >= 0 { lengths[UInt8(id)] = Int(oldLengths[id]) }
        var packet = BTHomePacket(encrypted: encrypted, triggerBased: info & 0x04 != 0, packetID: nil, battery: nil,
                                  buttons: [], counter: counter, objects: 0, truncated: false)
        var i = 0
        while i < payload.count {
            let id = payload[i]
            guard var length = lengths[id] else { packet.truncated = true; break }
            var valueStart = i + 1
            if length == 0 {
                guard valueStart < payload.count else { packet.truncated = true; break }
                length = Int(payload[valueStart])
                valueStart += 1
            }
            guard valueStart + length <= payload.count else { packet.truncated = true; break }
            if length >= 1 {
                let value = payload[valueStart]
                switch id {
                case 0x00: packet.packetID = packet.packetID ?? value
                case 0x01: packet.battery = packet.battery ?? value
                case 0x3A: packet.buttons.append(BTHomeButtonEvent(rawValue: value) ?? .none)
                default: break
                }
            }
            packet.objects += 1
            i = valueStart + length
        }
        return packet
    }

    /// The object table as the dictionary held it before (-1: unknown id).
    static let oldLengths: [Int] = {
        var t = [Int](repeating: -1, count: 256)
        for id in [0x00, 0x01, 0x09, 0x0F, 0x10, 0x11, 0x2E, 0x2F, 0x3A, 0x46, 0x57, 0x58, 0x59, 0x60, 0x64, 0x65] { t[id] = 1 }
        for id in 0x15...0x2D { t[id] = 1 }
        for id in [0x02, 0x03, 0x06, 0x07, 0x08, 0x0C, 0x0D, 0x0E, 0x12, 0x13, 0x14, 0x3C, 0x3D, 0x3F, 0x40, 0x41, 0x43, 0x44,
                   0x45, 0x47, 0x48, 0x49, 0x4A, 0x51, 0x52, 0x56, 0x5A, 0x5D, 0x5E, 0x5F, 0x61, 0xF0] { t[id] = 2 }
        for id in [0x04, 0x05, 0x0A, 0x0B, 0x42, 0x4B, 0xF2] { t[id] = 3 }
        for id in [0x3E, 0x4C, 0x4D, 0x4E, 0x4F, 0x50, 0x55, 0x5B, 0x5C, 0x62, 0x63, 0xF1] { t[id] = 4 }
        t[0x53] = 0
        t[0x54] = 0
        return t
    }()

    static func result(_ f: () throws(BTHomeError) -> BTHomePacket) -> Result<BTHomePacket, BTHomeError> {
        do throws(BTHomeError) { return .success(try f()) } catch { return .failure(error) }
    }

    @Test func bthomeObjectsReadInPlaceAreWhatTheArrayDecoderRead() async {
        let key: [UInt8] = Array(0..<16), mac: [UInt8] = [0xC0, 0x11, 0x22, 0x33, 0x44, 0x03]
        // Objects of known and unknown ids, plain or sealed with the key, behind a few bytes of
        // another AD structure so that the view does not start at index 0.
        await propertyCheck(count: 500, input: Gen.uint8(in: 0...255).array(of: 0...24), Gen.int(in: 0...4), Gen.int(in: 0...4)) { objects, mode, offset in
            let serviceData: [UInt8]
            switch mode {
            case 0: serviceData = BTHomeDecoder.encode(objects: objects, triggerBased: true, address: mac, bindkey: nil)
            case 1: serviceData = BTHomeDecoder.encode(objects: objects, triggerBased: false, address: mac, bindkey: key, counter: UInt32(objects.count))
            case 2: serviceData = objects                                   // any first byte
            case 3: serviceData = [0x41] + objects                          // encrypted, maybe too short
            default: serviceData = [0x40, 0x53] + objects                   // a text object first (variable length)
            }
            let advert = [UInt8](repeating: 0xAA, count: offset) + serviceData
            for bindkey in [nil, key] {
                let new = Self.result { () throws(BTHomeError) in try BTHomeDecoder.decode(view: advert[offset...], address: mac, bindkey: bindkey) }
                let old = Self.result { () throws(BTHomeError) in try Self.oldDecode(serviceData, address: mac, bindkey: bindkey) }
                #expect(new == old, "\(serviceData) key \(bindkey != nil)")
            }
        }
    }

    // MARK: the heard table in slots

    /// A busy street's iBeacon from `address`.
    static func ibeaconReport(_ address: UInt64) -> BLEAdvertisingReport {
        let ad: [UInt8] = [0x02, 0x01, 0x06, 0x1A, 0xFF, 0x4C, 0x00, 0x02, 0x15] + [UInt8](repeating: 0xE2, count: 16) + [0, 1, 0, 2, 0xC5]
        return BLEAdvertisingReport(addressKey: address, addressType: 1, eventType: 3, rssi: -60, data: ad, extended: false)
    }

    @Test func theHeardTableKeepsWhatTheDictionaryKept() async {
        // Addresses from a pool larger than the table, so advertisers leave and come back; distinct
        // times (the dictionary broke ties in its own hash order).
        await propertyCheck(count: 100, input: Gen.int(in: 0...299).array(of: 0...900), Gen.int(in: 1...5_000).array(of: 900...900)) { picks, gaps in
            var pipeline = BLEPipeline(devices: [], regions: [])
            var model: [UInt64: (adverts: Int, seen: Int64)] = [:]   // the dictionary and its eviction, as before
            var t: Int64 = 0
            for (pick, gap) in zip(picks, gaps) {
                t += Int64(gap)
                let address = 0x4000_0000_0000 | UInt64(pick)
                _ = pipeline.handle(report: Self.ibeaconReport(address), at: ReceiveTime(monoMicros: t, wallMicros: t, clockSynced: true))
                if let m = model[address] {
                    model[address] = (m.adverts + 1, t)
                } else {
                    if model.count >= BLEPipeline.maxHeard {
                        for (k, _) in model.map({ ($0.key, $0.value.seen) }).sorted(by: { $0.1 < $1.1 }).prefix(BLEPipeline.maxHeard / 4) { model[k] = nil }
                    }
                    model[address] = (1, t)
                }
            }
            let heard = pipeline.heard
            #expect(Set(heard.keys) == Set(model.keys))
            for (k, m) in model { #expect(heard[k]?.adverts == m.adverts && heard[k]?.lastSeenWallMicros == m.seen && heard[k]?.addressKey == k) }
        }
    }

    // MARK: the cooldown's table in slots

    /// ButtonTracker.observeDiscrete and its eviction as they were, on a dictionary (the oracle).
    struct OldTracker {
        var devices: [String: (at: Int64, lastForwardedAt: Int64?, suppressed: Int)] = [:]
        let settings = ButtonTracker.Settings()

        mutating func observe(_ device: String, at rawTime: Int64) -> ButtonTracker.Output? {
            guard var s = devices[device] else {
                if devices.count >= ButtonTracker.maxTrackedDevices {
                    let horizon = max(settings.cooldownMicros, settings.repeatGapMicros, settings.holdAfterMicros)
                    if devices.contains(where: { rawTime - $0.value.at > horizon }) { devices = devices.filter { rawTime - $0.value.at <= horizon } }
                    if devices.count >= ButtonTracker.maxTrackedDevices, let oldest = devices.min(by: { $0.value.at < $1.value.at })?.key {
                        devices[oldest] = nil
                    }
                }
                devices[device] = (rawTime, rawTime, 0)
                return .pressed(device: device, at: rawTime, suppressed: 0)
            }
            let at = max(rawTime, s.at)
            defer { devices[device] = s }
            s.at = at
            if let last = s.lastForwardedAt, at - last < settings.cooldownMicros { s.suppressed += 1; return nil }
            defer { s.lastForwardedAt = at; s.suppressed = 0 }
            return .pressed(device: device, at: at, suppressed: s.suppressed)
        }
    }

    @Test func theCooldownTableForgetsWhatTheDictionaryForgot() async {
        // More buttons than the table holds, most within the cooldown of each other (the table is
        // full of recent ones), and now and then a pause longer than the horizon.
        await propertyCheck(count: 60, input: Gen.int(in: 0...299).array(of: 0...1_500), Gen.int(in: 0...3_000_000).array(of: 1_500...1_500)) { picks, gaps in
            var tracker = ButtonTracker()
            var model = OldTracker()
            var t: Int64 = 0
            for (pick, gap) in zip(picks, gaps) {
                t += Int64(gap % 1_499 == 0 ? gap * 2 : gap % 5_000) + 1   // distinct times: ties went in hash order
                let device = "b\(pick)"
                #expect(tracker.observeDiscrete(device: device, at: t) == model.observe(device, at: t))
            }
            #expect(tracker.trackedDevices == model.devices.count)
        }
    }

    // MARK: BTHome memory found by address

    @Test func findingADeviceByAddressIsFindingItByName() async {
        await propertyCheck(count: 200, input: Gen.int(in: 0...5).array(of: 0...200), Gen.int(in: 0...3).array(of: 200...200)) { picks, ids in
            var byName = BTHomeButtonTracker(memory: ["C0:11:22:33:44:00": .init(packetID: 1)])
            var byAddress = BTHomeButtonTracker(memory: ["C0:11:22:33:44:00": .init(packetID: 1)])
            for (pick, id) in zip(picks, ids) {
                let address = 0xC011_2233_4400 | UInt64(pick)
                let packet = BTHomePacket(encrypted: false, triggerBased: true, packetID: UInt8(id), battery: nil, buttons: [.press],
                                          counter: nil, objects: 2, truncated: false)
                let name = Hex.address(address)
                #expect(byName.observe(device: name, packet: packet) == byAddress.observe(address: address, name: name, packet: packet))
                if id == 0 { #expect(byName.takeChanges() == byAddress.takeChanges()) }
            }
            #expect(byName.memory == byAddress.memory)
        }
    }
}
