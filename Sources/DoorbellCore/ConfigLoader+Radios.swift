// agent.toml: the radio sections ([radio.rtl433], [radio.ook], [radio.ble]), the own beacon and
// the beacon regions.

extension ConfigLoader {
    static let knownRadios = ["rtl433", "ook", "ble"]

    static func readBLE(_ t: TableReader, baseDir: String, checks: ConfigFileChecks) -> BLERadioSettings? {
        let kind = t.string("transport", hint: "how the controller is reached: transport = \"hci\" (kernel, device = \"hci0\"), \"serial\" (H4 UART, path = \"/dev/ttyACM0\") or \"tcp\" (H4, address = \"127.0.0.1:9100\")")
        let keys = ["device", "channel", "path", "baud", "flow_control", "address", "replay"]
        var transport: HCITransportKind?
        switch kind {
        case "hci"?:
            let name = t.string("device", required: false) ?? "hci0"
            var exclusive = true
            switch t.string("channel", required: false) {
            case nil, "user"?: break
            case "raw"?: exclusive = false
            case let other?: t.report("channel", "must be \"user\" (the controller is the agent's alone, the default) or \"raw\" (shared with bluetoothd, which can stop the scan), found \"\(other)\"")
            }
            if name.hasPrefix("hci"), let n = Int(name.dropFirst(3)), n >= 0, n < 64 { transport = .kernel(device: n, exclusive: exclusive) } else {
                t.report("device", "must name a controller like \"hci0\" (hciconfig / btmgmt info list them), found \"\(name)\"")
            }
        case "serial"?:
            let path = t.string("path", hint: "the UART of the HCI dongle, e.g. path = \"/dev/ttyACM0\"")
            let baud = t.int("baud", in: 1_200...4_000_000) ?? 1_000_000
            if !serialBauds.contains(baud) { t.report("baud", "\(baud) is not a standard rate; use one of \(serialBauds.map(String.init).joined(separator: ", "))") }
            let flow = t.bool("flow_control") ?? true
            if let path { transport = .serial(path: path, baud: baud, flowControl: flow) }
        case "tcp"?:
            if let a = t.string("address", hint: "host:port of the H4 stream, e.g. address = \"127.0.0.1:9100\""),
               let colon = a.lastIndex(of: ":"), let port = Int(a[a.index(after: colon)...]), (1...65535).contains(port) {
                var host = String(a[..<colon])
                if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
                transport = .tcp(host: host, port: port)
            } else if t.has("address") {
                t.report("address", "must be host:port, e.g. \"127.0.0.1:9100\" or \"[::1]:9100\"")
            }
        case "replay"?:
            if let files = t.stringArray("replay"), !files.isEmpty {
                let paths = files.map { resolve($0, baseDir: baseDir) }
                for p in paths where !checks.isReadableFile(p) {
                    t.report("replay", "cannot read capture \(p). Check the path (relative paths start at the config file's folder).")
                }
                transport = .replay(files: paths)
            } else {
                t.report("replay", "is required with transport = \"replay\": the btsnoop captures to play (agentctl capture makes them)")
            }
        case let other?:
            keys.forEach(t.markUsed)
            t.report("transport", "unknown transport \"\(other)\"; use \"hci\", \"serial\", \"tcp\" or \"replay\"")
        case nil:
            keys.forEach(t.markUsed)
        }
        guard let transport else { return nil }
        var b = BLERadioSettings(transport: transport)
        if let s = t.string("scan", required: false) {
            if s == "active" { b.activeScan = true } else if s != "passive" { t.report("scan", "must be \"passive\" or \"active\"") }
        }
        if let v = t.int("interval_ms", in: 3...10_240) { b.intervalMs = v }
        if let v = t.int("window_ms", in: 3...10_240) { b.windowMs = v }
        if b.windowMs > b.intervalMs { t.report("window_ms", "must not exceed interval_ms (\(b.intervalMs))") }
        if let v = t.bool("extended_scan") { b.extendedScan = v }
        if let v = t.bool("ancs") { b.ancsLink = v }
        if let v = t.int("stall_s", in: 0...86_400) { b.stallSeconds = v }
        if let v = t.int("command_timeout_ms", in: 100...60_000) { b.commandTimeoutMs = v }
        return b
    }

    static let serialBauds = [9_600, 19_200, 38_400, 57_600, 115_200, 230_400, 460_800, 500_000, 921_600, 1_000_000, 2_000_000, 3_000_000]

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

    static func readOOK(_ t: TableReader, baseDir: String, checks: ConfigFileChecks) -> OOKRadioSettings? {
        let sourceName = t.string("source", hint: "where the pulses come from: source = \"gpio\" (receiver module on a pin), \"rtl433\" (SDR in pulse mode) or \"replay\" (recordings)")
        // Without a source the other keys cannot be checked; do not also call them unknown.
        let keys = ["chip", "line", "active_low", "glitch_us", "bits", "protocols", "replay", "rtl433_binary", "rtl433_args"]
        guard let sourceName else { keys.forEach(t.markUsed); return nil }
        guard let source = OOKSource(rawValue: sourceName) else {
            keys.forEach(t.markUsed)
            t.report("source", "unknown source \"\(sourceName)\"; use \(OOKSource.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", "))")
            return nil
        }
        var o = OOKRadioSettings(source: source)
        if source == .gpio {
            o.gpio = readLine(t, what: "the receiver's data pin")
        }
        if let v = t.int("glitch_us", in: 0...2_000) { o.glitchMicros = v }
        if let v = t.int("bits", in: OOKDecoder.Settings.bitRange) { o.decoder.bits = v }
        if let list = t.intArray("protocols") {
            let known = OOKProtocol.table.map(\.number)
            if list.isEmpty { t.report("protocols", "needs at least one rc-switch protocol number (1-6)") }
            for n in list where !known.contains(n) { t.report("protocols", "unknown protocol \(n); rc-switch protocols are 1-6 (1 = EV1527/PT2262)") }
            o.decoder.protocols = list.filter { known.contains($0) }
        }
        if let files = t.stringArray("replay") {
            let paths = files.map { resolve($0, baseDir: baseDir) }
            for p in paths where !checks.isReadableFile(p) {
                t.report("replay", "cannot read recording \(p). Check the path (relative paths start at the config file's folder).")
            }
            if source == .replay {
                for p in paths where !(p.hasSuffix(".ook") || p.hasSuffix(".vcd")) {
                    t.report("replay", "\(p): source = \"replay\" plays .ook or .vcd timelines; .cu8 recordings need source = \"rtl433\"")
                }
                o.replay = paths
            } else if source == .rtl433 {
                o.rtl433.replay = paths
            } else {
                t.report("replay", "is for source = \"replay\" or \"rtl433\"; a GPIO pin cannot replay")
            }
        }
        if source == .replay && o.replay.isEmpty && t.has("replay") == false {
            t.report("replay", "is required with source = \"replay\": the .ook / .vcd recordings to play")
        }
        if let s = t.string("rtl433_binary", required: false) { o.rtl433.binary = s.contains("/") ? resolve(s, baseDir: baseDir) : s }
        if let a = t.stringArray("rtl433_args") {
            for bad in ["-F", "-M", "-r", "-w", "-W", "-R", "-X", "-c"] where a.contains(bad) {
                t.report("rtl433_args", "must not contain \(bad): in pulse mode the agent decodes itself (device, frequency and gain options only)")
            }
            o.rtl433.args = a
        }
        return o
    }

    /// `chip = "pinctrl-bcm2711"`, `line = 17`, `active_low = false`.
    static func readLine(_ t: TableReader, what: String) -> GPIOLineRef? {
        let chip = t.string("chip", hint: "the GPIO chip's label for \(what), e.g. chip = \"pinctrl-bcm2711\" (Pi 4; Pi 5: \"pinctrl-rp1\"; list them with gpiodetect)")
        let line = t.int("line", in: 0...1023)
        if t.has("line") == false { t.report("line", "is required: the line offset of \(what) (BCM GPIO number on a Pi), e.g. line = 27") }
        let activeLow = t.bool("active_low") ?? false
        guard let chip, let line else { return nil }
        if chip.isEmpty { t.report("chip", "must not be empty"); return nil }
        return GPIOLineRef(chip: chip, line: line, activeLow: activeLow)
    }
}
