// agent.toml: the own beacon, the beacon regions, and a GPIO line (an OOK receiver's pin, a chime
// relay). The radio sections are read by their `Radio` types (Sources/DoorbellCore/Radios).

extension ConfigLoader {
    static var knownRadios: [String] { RadioRegistry.names }

    static func readUUID(_ t: TableReader) -> [UInt8]? {
        guard let s = t.string("uuid", hint: IBeaconDecoder.descriptor.help(for: "uuid")) else { return nil }
        guard let u = IBeacon.parse(uuid: s) else { t.report("uuid", "\"\(s)\" is not a UUID (32 hex digits, dashes optional)"); return nil }
        return u
    }

    static func readOwnBeacon(_ t: TableReader) -> OwnBeacon? {
        let uuid = readUUID(t)
        let major = t.int("major", in: 0...65_535)
        let minor = t.int("minor", in: 0...65_535)
        if !t.has("major") { t.report("major", "is required: the base station's major, e.g. major = 1") }
        if !t.has("minor") { t.report("minor", "is required: the base station's minor, e.g. minor = 1") }
        let power = t.int("measured_power", in: -127 ... -1) ?? -59
        let interval = t.int("interval_ms", in: 20...10_240) ?? 100
        guard let uuid, let major, let minor else { return nil }
        return OwnBeacon(beacon: IBeacon(uuid: uuid, major: UInt16(major), minor: UInt16(minor), measuredPower: Int8(power)), intervalMs: interval)
    }

    static func readRegion(_ t: TableReader) -> BeaconRegion? {
        let id = t.string("id", hint: "a short stable id used in events, e.g. id = \"alice-phone\"")
        if let id, !isIdentifier(id) { t.report("id", "must be 1-64 characters of letters, digits, '-', '_' or '.', found \"\(id)\"") }
        let name = t.string("name", required: false) ?? id ?? ""
        var r: BeaconRegion
        if t.has("namespace") {
            guard let eddystone = readEddystoneRegion(t), let id else { return nil }
            r = BeaconRegion(id: id, name: name, namespace: eddystone.namespace, instance: eddystone.instance)
        } else {
            if t.has("instance") {
                t.markUsed("instance")
                t.report("instance", "needs namespace: an Eddystone region matches namespace, or namespace+instance (iBeacon regions use uuid)")
            }
            let uuid = readUUID(t)
            let major = t.int("major", in: 0...65_535)
            let minor = t.int("minor", in: 0...65_535)
            if minor != nil && major == nil { t.report("minor", "needs major too (regions match UUID, UUID+major, or UUID+major+minor)") }
            guard let id, let uuid else { return nil }
            r = BeaconRegion(id: id, name: name, uuid: uuid, major: major.map { UInt16($0) }, minor: minor.map { UInt16($0) })
        }
        if let v = t.int("enter_rssi", in: -127 ... -1) { r.enterRSSI = v }
        if let v = t.int("min_samples", in: 1...100) { r.minSamples = v }
        if let v = t.int("exit_timeout_s", in: 1...3_600) { r.exitTimeoutMicros = Int64(v) * 1_000_000 }
        if let v = t.int("hysteresis_db", in: 0...60) { r.hysteresisDB = v }
        return r
    }

    /// `namespace = "…20 hex…"`, optional `instance = "…12 hex…"` (keys declared by EddystoneDecoder).
    static func readEddystoneRegion(_ t: TableReader) -> (namespace: [UInt8], instance: [UInt8]?)? {
        for key in ["uuid", "major", "minor"] where t.has(key) {
            t.markUsed(key)
            t.report(key, "is for iBeacon regions; this region has namespace, so it is an Eddystone region (namespace, instance). Use two [[region]] tables for one of each")
        }
        func hex(_ key: String, bytes: Int, required: Bool) -> [UInt8]? {
            let help = EddystoneDecoder.descriptor.help(for: key)
            guard let s = t.string(key, required: required, hint: help) else { return nil }
            guard let b = Hex.decode(s, count: bytes) else {
                t.report(key, "\"\(s)\" is not \(bytes * 2) hex digits (found \(s.count) characters): \(help)")
                return nil
            }
            return b
        }
        let namespace = hex("namespace", bytes: 10, required: true)
        let instance = hex("instance", bytes: 6, required: false)
        if t.has("instance") && instance == nil { return nil }
        return namespace.map { ($0, instance) }
    }

    /// `chip = "pinctrl-bcm2711"`, `line = 17`, `active_low = false`.
    static func readLine(_ t: TableReader, what: String) -> GPIOLineRef? {
        let chip = t.string("chip", hint: "the GPIO chip's label for \(what), e.g. chip = \"pinctrl-bcm2711\" (Pi 4; Pi 5: \"pinctrl-rp1\"; list them with gpiodetect)")
        let line = t.int("line", in: GPIOLineRef.offsets)
        if t.has("line") == false { t.report("line", "is required: the line offset of \(what) (BCM GPIO number on a Pi), e.g. line = 27") }
        let activeLow = t.bool("active_low") ?? false
        guard let chip, let line else { return nil }
        if chip.isEmpty { t.report("chip", "must not be empty"); return nil }
        return GPIOLineRef(chip: chip, line: line, activeLow: activeLow)
    }
}
