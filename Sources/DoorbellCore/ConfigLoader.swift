// Reads agent.toml strictly: unknown keys, wrong types, missing values and bad values are all
// reported at once, each with file:line:column where we can find it and what to write instead.
// Pure: file checks are injected, so tests drive every message without touching the disk.

public struct ConfigIssue: Sendable, Equatable, CustomStringConvertible {
    public var file: String
    public var line: Int?
    public var column: Int?
    public var key: String
    public var message: String

    public init(file: String, line: Int? = nil, column: Int? = nil, key: String, message: String) {
        self.file = file
        self.line = line
        self.column = column
        self.key = key
        self.message = message
    }

    public var description: String {
        var location = file
        if let line { location += ":\(line)" }
        if let column { location += ":\(column)" }
        return key.isEmpty ? "\(location): \(message)" : "\(location): \(key): \(message)"
    }
}

public struct ConfigError: Error, Sendable, CustomStringConvertible {
    public var issues: [ConfigIssue]
    public init(issues: [ConfigIssue]) { self.issues = issues }
    public var description: String { issues.map(\.description).joined(separator: "\n") }
}

/// What the loader may ask about the file system. Paths are already resolved.
public struct ConfigFileChecks: Sendable {
    public var isReadableFile: @Sendable (String) -> Bool
    public init(isReadableFile: @escaping @Sendable (String) -> Bool) { self.isReadableFile = isReadableFile }
    public static let none = ConfigFileChecks(isReadableFile: { _ in true })
}

public enum ConfigLoader {
    public static func parse(text: String, file: String, checks: ConfigFileChecks = .none) throws(ConfigError) -> AgentConfig {
        try parse(bytes: Array(text.utf8), file: file, checks: checks)
    }

    /// The file as read: bytes that are not UTF-8 are reported with their position instead of
    /// being replaced by U+FFFD.
    public static func parse(bytes: [UInt8], file: String, checks: ConfigFileChecks = .none) throws(ConfigError) -> AgentConfig {
        let root: TOMLNode
        do {
            root = try TOMLReader.parse(bytes: bytes)
        } catch {
            throw ConfigError(issues: [ConfigIssue(file: file, line: error.line, column: error.column, key: "",
                                                   message: "not valid TOML: \(error.message)")])
        }
        let sink = IssueSink(file: file, locator: SourceLocator(text: String(decoding: bytes, as: UTF8.self)))
        let baseDir = directory(of: file)
        let config = readAgent(root, sink: sink, baseDir: baseDir, checks: checks)
        if let config, sink.issues.isEmpty { return config }
        throw ConfigError(issues: sink.issues)
    }

    /// The keys the loader looks for in this document (sections it does not have are not
    /// entered): what `ConfigReferenceTests` checks against the reference.
    static func keysRead(text: String) -> Set<String> {
        guard let root = try? TOMLReader.parse(bytes: Array(text.utf8)) else { return [] }
        let sink = IssueSink(file: "agent.toml", locator: SourceLocator(text: text))
        _ = readAgent(root, sink: sink, baseDir: ".", checks: .none)
        return sink.asked
    }

    static func directory(of file: String) -> String {
        guard let slash = file.lastIndex(of: "/") else { return "." }
        let dir = String(file[..<slash])
        return dir.isEmpty ? "/" : dir
    }

    /// Relative paths in the config are relative to the config file's own folder, so a board
    /// profile works from wherever it is installed or checked out.
    static func resolve(_ path: String, baseDir: String) -> String {
        if path.hasPrefix("/") { return normalize(path) }
        return normalize(baseDir == "." ? path : baseDir + "/" + path)
    }

    /// Folds "." and "a/.." so logs and status show the path an installer would type.
    static func normalize(_ path: String) -> String {
        let absolute = path.hasPrefix("/")
        var parts: [Substring] = []
        for part in path.split(separator: "/", omittingEmptySubsequences: true) {
            if part == "." { continue }
            if part == "..", let last = parts.last, last != ".." { parts.removeLast(); continue }
            if part == "..", absolute { continue }
            parts.append(part)
        }
        let joined = parts.joined(separator: "/")
        return absolute ? "/" + joined : (joined.isEmpty ? "." : joined)
    }

    static func readAgent(_ root: TOMLNode, sink: IssueSink, baseDir: String, checks: ConfigFileChecks) -> AgentConfig? {
        guard case let .table(members) = root else { return nil }
        let top = TableReader(members, path: [], sink: sink)
        let gatewayID = top.string("gateway_id", hint: "the name this gateway has in the cloud, e.g. gateway_id = \"gw-0001\"")
        if let gatewayID, !isIdentifier(gatewayID) {
            top.report("gateway_id", "must be 1-64 characters of letters, digits, '-', '_' or '.', found \"\(gatewayID)\"")
        }

        var paths = PathSettings()
        if let t = top.table("paths") {
            if let s = t.string("state_dir", required: false) { paths.stateDir = resolve(s, baseDir: baseDir) }
            if let s = t.string("control_socket", required: false) { paths.controlSocket = resolve(s, baseDir: baseDir) }
            t.finish()
        }

        var log = LogSettings()
        if let t = top.table("log") {
            if let s = t.string("level", required: false) {
                if let level = LogLevel(rawValue: s) { log.level = level } else {
                    t.report("level", "unknown level \"\(s)\"; use one of \(LogLevel.allCases.map(\.rawValue).joined(separator: ", "))")
                }
            }
            t.finish()
        }

        var button = ButtonTracker.Settings()
        if let tracker = top.table("tracker") {
            if let t = tracker.table("button") {
                if let v = t.int("repeat_gap_ms", in: 20...10_000) { button.repeatGapMicros = Int64(v) * 1000 }
                if let v = t.int("hold_after_ms", in: 100...60_000) { button.holdAfterMicros = Int64(v) * 1000 }
                if let v = t.int("cooldown_ms", in: 0...600_000) { button.cooldownMicros = Int64(v) * 1000 }
                t.finish()
            }
            tracker.finish()
        }

        var rtl433: RTL433Settings?
        var ook: OOKRadioSettings?
        var ble: BLERadioSettings?
        var radios: [String] = []
        if let radio = top.table("radio") {
            if let t = radio.table("rtl433") {
                var r = RTL433Settings()
                let enabled = t.bool("enabled") ?? true
                if let s = t.string("binary", required: false) { r.binary = s.contains("/") ? resolve(s, baseDir: baseDir) : s }
                if let s = t.string("conf_file", required: false) {
                    let p = resolve(s, baseDir: baseDir)
                    r.confFile = p
                    if !checks.isReadableFile(p) {
                        t.report("conf_file", "cannot read \(p). Point it at the board's rtl_433 decoder file, e.g. conf_file = \"/usr/share/doorbell-agent/board/common/rtl_433-doorbells.conf\"")
                    }
                }
                if let a = t.stringArray("args") {
                    r.args = a
                    for bad in ["-F", "-M", "-r", "-w", "-W"] where a.contains(bad) {
                        t.report("args", "must not contain \(bad): the agent sets output and input options itself (use `replay` for recordings)")
                    }
                }
                if let files = t.stringArray("replay") {
                    r.replay = files.map { resolve($0, baseDir: baseDir) }
                    for p in r.replay where !checks.isReadableFile(p) {
                        t.report("replay", "cannot read recording \(p). Check the path (relative paths start at the config file's folder).")
                    }
                }
                if let v = t.int("restart_initial_ms", in: 100...600_000) { r.restartInitialMs = v }
                if let v = t.int("restart_max_ms", in: 1_000...3_600_000) { r.restartMaxMs = v }
                if r.restartMaxMs < r.restartInitialMs {
                    t.report("restart_max_ms", "must be at least restart_initial_ms (\(r.restartInitialMs))")
                }
                t.finish()
                if enabled { rtl433 = r; radios.append("rtl433") }
            }
            if let t = radio.table("ook") {
                let enabled = t.bool("enabled") ?? true
                if let o = readOOK(t, baseDir: baseDir, checks: checks), enabled {
                    ook = o
                    radios.append("ook")
                }
                t.finish()
            }
            if let t = radio.table("ble") {
                let enabled = t.bool("enabled") ?? true
                if let b = readBLE(t, baseDir: baseDir, checks: checks), enabled {
                    ble = b
                    radios.append("ble")
                }
                t.finish()
            }
            if let r = rtl433, let o = ook, o.source == .rtl433, r.replay.isEmpty, o.rtl433.replay.isEmpty,
               !r.args.contains("-d") && !o.rtl433.args.contains("-d") {
                radio.report("ook", "[radio.rtl433] and [radio.ook] source = \"rtl433\" would open the same SDR; give each its dongle with \"-d\" in args / rtl433_args")
            }
            radio.finish()
        }

        if let t = top.table("beacon") {
            if ble == nil {
                t.report("", "the base station's own iBeacon needs [radio.ble] (it advertises through the same controller)")
            }
            if let b = readOwnBeacon(t) { ble?.beacon = b }
            t.finish()
        }

        var regions: [BeaconRegion] = []
        for t in top.tableArray("region") {
            if let r = readRegion(t) {
                if regions.contains(where: { $0.id == r.id }) { t.report("id", "duplicate region id \"\(r.id)\"") }
                regions.append(r)
            }
            if !radios.contains("ble") { t.report("", "iBeacon regions need [radio.ble]") }
            t.finish()
        }

        var devices: [DeviceConfig] = []
        for (index, t) in top.tableArray("device").enumerated() {
            if let device = readDevice(t, index: index, radios: radios) {
                if devices.contains(where: { $0.id == device.id }) {
                    t.report("id", "duplicate device id \"\(device.id)\"; every [[device]] needs its own id")
                }
                devices.append(device)
            }
            t.finish()
        }

        var uplink: UplinkSettings?
        if let t = top.table("uplink") {
            uplink = readUplink(t, baseDir: baseDir, checks: checks)
            t.finish()
        }

        var mqtt: MQTTSettings?
        if let t = top.table("mqtt") {
            mqtt = readMQTT(t, gatewayID: gatewayID ?? "gateway", baseDir: baseDir, checks: checks)
            t.finish()
        }

        var metrics: MetricsSettings?
        if let t = top.table("metrics") {
            if let f = t.string("file", hint: "where to write, e.g. file = \"/var/lib/prometheus/node-exporter/doorbell_agent.prom\"") {
                var m = MetricsSettings(file: resolve(f, baseDir: baseDir))
                if !f.hasSuffix(".prom") { t.report("file", "must end in .prom: node_exporter's textfile collector reads only those") }
                if let v = t.int("interval_s", in: 1...3_600) { m.intervalSeconds = v }
                metrics = m
            }
            t.finish()
        }

        var limits = OutboxLimits()
        if let t = top.table("outbox") {
            if let v = t.int("max_events", in: 10...10_000_000) { limits.maxEvents = v }
            if let v = t.int("max_bytes", in: 65_536...4_294_967_296) { limits.maxBytes = v }
            t.finish()
        }

        var actions: [ActionConfig] = []
        for (index, t) in top.tableArray("action").enumerated() {
            let name = t.string("name", required: false) ?? "action-\(index)"
            var on: [EventType] = [.doorbellPressed]
            if let types = t.stringArray("on") {
                on = []
                for type in types {
                    if let e = EventType(rawValue: type) { on.append(e) } else {
                        t.report("on", "unknown event type \"\(type)\"; use \(EventType.allCases.map(\.rawValue).joined(separator: ", "))")
                    }
                }
            }
            let devicesFilter = t.stringArray("devices") ?? []
            for d in devicesFilter where !devices.contains(where: { $0.id == d }) {
                t.report("devices", "no [[device]] with id \"\(d)\"")
            }
            var action = ActionConfig(name: name, on: on, devices: devicesFilter, exec: [])
            if let g = t.table("gpio_pulse") {
                if let line = readLine(g, what: "the chime relay or buzzer") {
                    var pulse = GPIOPulseSettings(line: line)
                    if let v = g.int("duration_ms", in: 10...60_000) { pulse.durationMs = v }
                    action.gpioPulse = pulse
                }
                g.finish()
            }
            if let argv = t.stringArray("exec") {
                if argv.isEmpty || argv[0].isEmpty {
                    t.report("exec", "needs a program, e.g. exec = [\"/usr/bin/aplay\", \"/usr/share/sounds/ding.wav\"]")
                } else if argv[0].hasPrefix("./") || argv[0].hasPrefix("../") {
                    // Beside the config (board profiles ship their chime scripts that way).
                    action.exec = [resolve(argv[0], baseDir: baseDir)] + argv.dropFirst()
                } else if !argv[0].hasPrefix("/") {
                    t.report("exec", "give the program's absolute path, or ./name beside this config (no PATH lookup, no shell): \"\(argv[0])\"")
                } else {
                    action.exec = argv
                }
            } else if action.gpioPulse == nil && !t.has("gpio_pulse") {
                t.report("exec", "or gpio_pulse is required: the program to run, e.g. exec = [\"/usr/local/bin/chime\"], or gpio_pulse = { chip = \"pinctrl-bcm2711\", line = 17, duration_ms = 300 }")
            }
            if let v = t.int("timeout_ms", in: 100...600_000) { action.timeoutMs = v }
            if let v = t.int("max_running", in: 1...32) { action.maxRunning = v }
            t.finish()
            if !action.exec.isEmpty || action.gpioPulse != nil { actions.append(action) }
        }

        var clock = ClockSettings()
        if let t = top.table("clock") {
            if let b = t.bool("require_sync") { clock.requireSync = b }
            if let f = t.string("sync_file", required: false) { clock.syncFile = resolve(f, baseDir: baseDir) }
            if let b = t.bool("kernel_check") { clock.kernelCheck = b }
            t.finish()
        }

        top.finish()
        guard let gatewayID else { return nil }
        return AgentConfig(gatewayID: gatewayID, paths: paths, log: log, rtl433: rtl433, button: button,
                           devices: devices, uplink: uplink, metrics: metrics)
            .with { $0.clock = clock; $0.outbox = limits; $0.actions = actions; $0.ook = ook; $0.ble = ble; $0.regions = regions; $0.mqtt = mqtt }
    }

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
        if let v = t.int("stall_s", in: 0...86_400) { b.stallSeconds = v }
        if let v = t.int("command_timeout_ms", in: 100...60_000) { b.commandTimeoutMs = v }
        return b
    }

    static let serialBauds = [9_600, 19_200, 38_400, 57_600, 115_200, 230_400, 460_800, 500_000, 921_600, 1_000_000, 2_000_000, 3_000_000]

    static func readUUID(_ t: TableReader) -> [UInt8]? {
        guard let s = t.string("uuid", hint: "the proximity UUID, e.g. uuid = \"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0\"") else { return nil }
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
        let uuid = readUUID(t)
        let major = t.int("major", in: 0...65_535)
        let minor = t.int("minor", in: 0...65_535)
        if minor != nil && major == nil { t.report("minor", "needs major too (regions match UUID, UUID+major, or UUID+major+minor)") }
        guard let id, let uuid else { return nil }
        var r = BeaconRegion(id: id, name: name, uuid: uuid, major: major.map { UInt16($0) }, minor: minor.map { UInt16($0) })
        if let v = t.int("enter_rssi", in: -127 ... -1) { r.enterRSSI = v }
        if let v = t.int("min_samples", in: 1...100) { r.minSamples = v }
        if let v = t.int("exit_timeout_s", in: 1...3_600) { r.exitTimeoutMicros = Int64(v) * 1_000_000 }
        if let v = t.int("hysteresis_db", in: 0...60) { r.hysteresisDB = v }
        return r
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

    static func readDevice(_ t: TableReader, index: Int, radios: [String]) -> DeviceConfig? {
        let id = t.string("id", hint: "a short stable id used in events, e.g. id = \"front-door\"")
        if let id, !isIdentifier(id) {
            t.report("id", "must be 1-64 characters of letters, digits, '-', '_' or '.', found \"\(id)\"")
        }
        let name = t.string("name", required: false) ?? id ?? ""
        var kind = DeviceKind.doorbell
        if let s = t.string("kind", required: false) {
            if let k = DeviceKind(rawValue: s) { kind = k } else {
                t.report("kind", "unknown kind \"\(s)\"; use one of \(DeviceKind.allCases.map(\.rawValue).joined(separator: ", "))")
            }
        }
        // Default: the one radio configured (rtl433 first when both are).
        let radio = t.string("radio", required: false) ?? radios.first ?? "rtl433"
        if !knownRadios.contains(radio) {
            t.report("radio", "unknown radio \"\(radio)\"; this agent knows: \(knownRadios.joined(separator: ", "))")
        } else if !radios.contains(radio) {
            t.report("radio", "device uses radio \"\(radio)\" but [radio.\(radio)] is not configured or is disabled")
        }
        var match: RTL433Match?
        if let m = t.table("match", required: true,
                           hint: "how to recognise it in rtl_433's output, e.g. match = { code = \"0x91568F\" }") {
            var fields: [(String, MatchValue)] = []
            var badValues = false
            for (key, node) in m.members {
                guard RTL433Match.allowedKeys.contains(key) else { continue }
                m.markUsed(key)
                switch node {
                case let .int(v): fields.append((key, .integer(v)))
                case let .string(s):
                    if key == "code" {
                        guard let v = parseCode(s) else {
                            badValues = true
                            m.report(key, "\"\(s)\" is not a hex code; write the raw button code like code = \"0x91568F\"")
                            continue
                        }
                        fields.append((key, .integer(v)))
                    } else {
                        fields.append((key, .text(s)))
                    }
                default:
                    badValues = true
                    m.report(key, "must be a string or an integer, found \(node.typeName)")
                }
            }
            m.finish()
            if badValues {
                // Already reported; a second message about the same line would only distract.
            } else if fields.isEmpty {
                t.report("match", "needs at least one of \(RTL433Match.allowedKeys.filter { $0 != "model" }.joined(separator: ", "))")
            } else if fields.allSatisfy({ $0.0 == "model" }) {
                t.report("match", "model alone is not enough: rtl_433 mislabels EV1527 doorbells. Add the raw code, e.g. code = \"0x91568F\"")
            } else {
                match = RTL433Match(fields: fields)
            }
        }
        var bindkey: [UInt8]?
        if let k = t.string("bindkey", required: false) {
            let out = Hex.decode(k) ?? []
            if out.count == 16 && radio == "ble" { bindkey = out } else if radio != "ble" {
                t.report("bindkey", "only BTHome devices (radio = \"ble\") have a bindkey")
            } else {
                t.report("bindkey", "must be the device's 16-byte key as 32 hex digits (from its app or firmware)")
            }
        }
        if radio == "ble", let match, match.fields.contains(where: { $0.0 != "address" }) || !match.fields.contains(where: { $0.0 == "address" }) {
            t.report("match", "a BLE button is matched by its address only: match = { address = \"C0:11:22:33:44:02\" }")
        }
        if let match, let a = match.fields.first(where: { $0.0 == "address" }) {
            if case let .text(s) = a.1, BLEAdvertisingReport.parse(address: s) != nil {} else {
                t.report("match", "address must look like \"C0:11:22:33:44:02\"")
            }
        }
        guard let id, var match else { return nil }
        // Addresses compare as printed: upper case.
        match.fields = match.fields.map { $0.0 == "address" ? ($0.0, { if case let .text(s) = $0.1 { return .text(s.uppercased()) }; return $0.1 }($0)) : $0 }
        var d = DeviceConfig(id: id, name: name, kind: kind, radio: radio, match: match)
        d.bindkey = bindkey
        return d
    }

    /// MQTT topic levels we build from config text: no wildcards, separators or control bytes.
    static func isTopicSafe(_ s: String) -> Bool {
        !s.isEmpty && s.utf8.allSatisfy { $0 > 0x20 && $0 != UInt8(ascii: "+") && $0 != UInt8(ascii: "#") && $0 != 0x7F }
    }

    static func readMQTT(_ t: TableReader, gatewayID: String, baseDir: String, checks: ConfigFileChecks) -> MQTTSettings? {
        let host = t.string("host", hint: "the broker, e.g. host = \"homeassistant.local\" (the Mosquitto add-on) or \"127.0.0.1\"")
        if let host, host.isEmpty || host.contains(" ") || host.contains("/") {
            t.report("host", "give a host name or address without scheme or port, e.g. \"192.168.1.10\"; found \"\(host)\"")
        }
        var m = MQTTSettings(host: host ?? "", clientID: "doorbell-agent-" + gatewayID)
        if let v = t.string("protocol", required: false) {
            if let p = MQTTProtocolVersion(rawValue: v) { m.protocolVersion = p } else {
                t.report("protocol", "must be \"3.1.1\" or \"5\"; found \"\(v)\"")
            }
        }
        if let v = t.string("client_id", required: false) {
            if v.isEmpty || v.utf8.count > 65_535 { t.report("client_id", "must not be empty") } else { m.clientID = v }
        }
        if let v = t.string("username", required: false) { m.username = v }
        for (key, keyPath, what) in [("password_file", \MQTTSettings.passwordFile, "the broker password (one line; keep it 0600)"),
                                     ("ca_file", \MQTTSettings.caFile, "the PEM file of the CA that signed the broker's certificate"),
                                     ("cert_file", \MQTTSettings.certFile, "the gateway's PEM client certificate"),
                                     ("key_file", \MQTTSettings.keyFile, "the gateway's PEM client key")] {
            if let s = t.string(key, required: false) {
                let p = resolve(s, baseDir: baseDir)
                m[keyPath: keyPath] = p
                if !checks.isReadableFile(p) { t.report(key, "cannot read \(p): give \(what)") }
            }
        }
        if t.has("password") {
            t.markUsed("password")
            t.report("password", "is not read from the config: put the password in a file of its own (0600) and set password_file")
        }
        if m.passwordFile != nil && m.username == nil { t.report("password_file", "needs username too") }
        if (m.certFile == nil) != (m.keyFile == nil) {
            t.report(m.certFile == nil ? "cert_file" : "key_file", "cert_file and key_file go together (TLS client authentication)")
        }
        if m.certFile != nil && m.caFile == nil { t.report("ca_file", "is required with a client certificate: TLS to the broker needs the CA that signed it") }
        m.port = m.caFile == nil ? 1883 : 8883
        if let v = t.int("port", in: 1...65_535) { m.port = v }
        for (key, keyPath) in [("topic_prefix", \MQTTSettings.topicPrefix), ("discovery_prefix", \MQTTSettings.discoveryPrefix)] {
            if let v = t.string(key, required: false) {
                let levels = v.split(separator: "/", omittingEmptySubsequences: false)
                if levels.isEmpty || !levels.allSatisfy({ isTopicSafe(String($0)) }) {
                    t.report(key, "must be topic levels without spaces, + or #, and no empty level, e.g. \"doorbell\" or \"house/doorbell\"; found \"\(v)\"")
                } else {
                    m[keyPath: keyPath] = v
                }
            }
        }
        if let b = t.bool("discovery") { m.discovery = b }
        if let v = t.int("keepalive_s", in: 5...3_600) { m.keepaliveSeconds = v }
        if let v = t.int("max_in_flight", in: 1...100) { m.maxInFlight = v }
        if let v = t.int("retry_initial_ms", in: 100...600_000) { m.retryInitialMs = v }
        if let v = t.int("retry_max_ms", in: 1_000...3_600_000) { m.retryMaxMs = v }
        if m.retryMaxMs < m.retryInitialMs { t.report("retry_max_ms", "must be at least retry_initial_ms (\(m.retryInitialMs))") }
        return host == nil ? nil : m
    }

    static func readUplink(_ t: TableReader, baseDir: String, checks: ConfigFileChecks) -> UplinkSettings? {
        let url = t.string("url", hint: "the cloud endpoint, e.g. url = \"https://cloud.example.com/events\"")
        if let url {
            if !url.hasPrefix("https://") {
                t.report("url", "must start with https:// (events are signed, but must also travel encrypted); found \"\(url)\"")
            } else if url.count <= "https://".count || url.contains(" ") {
                t.report("url", "is not a valid URL: \"\(url)\"")
            }
        }
        var u = UplinkSettings(url: url ?? "")
        if let s = t.string("ca_file", required: false) {
            let p = resolve(s, baseDir: baseDir)
            u.caFile = p
            if !checks.isReadableFile(p) {
                t.report("ca_file", "cannot read CA file \(p). Give the PEM file of the CA that signed the cloud's certificate, or remove ca_file to use the system CAs.")
            }
        }
        if let s = t.string("hmac_secret_file", required: false) {
            let p = resolve(s, baseDir: baseDir)
            u.hmacSecretFile = p
            if !checks.isReadableFile(p) {
                t.report("hmac_secret_file", "cannot read \(p). It must hold the gateway's whsec_... secret from enrollment.")
            }
        }
        if let b = t.bool("sign_ed25519") { u.signEd25519 = b }
        if u.hmacSecretFile == nil && !u.signEd25519 {
            t.report("", "no signing key: set hmac_secret_file or sign_ed25519 = true; the cloud rejects unsigned events")
        }
        if let v = t.int("connect_timeout_ms", in: 100...120_000) { u.connectTimeoutMs = v }
        if let v = t.int("request_timeout_ms", in: 500...600_000) { u.requestTimeoutMs = v }
        if let v = t.int("retry_initial_ms", in: 10...600_000) { u.retryInitialMs = v }
        if let v = t.int("retry_max_ms", in: 100...86_400_000) { u.retryMaxMs = v }
        if let v = t.int("max_in_flight", in: 1...64) { u.maxInFlight = v }
        if u.retryMaxMs < u.retryInitialMs { t.report("retry_max_ms", "must be at least retry_initial_ms (\(u.retryInitialMs))") }
        if let pin = t.string("pinned_public_key", required: false) {
            let pins = pin.split(separator: ";")
            if pins.isEmpty || !pins.allSatisfy({ $0.hasPrefix("sha256//") && $0.count > 8 }) {
                t.report("pinned_public_key", "must be sha256//<base64 of the SPKI hash>, several separated by ';' (openssl x509 -pubkey -noout -in cert.pem | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64)")
            }
            u.pinnedPublicKey = pin
        }
        for (key, keyPath) in [("client_cert_file", \UplinkSettings.clientCertFile), ("client_key_file", \UplinkSettings.clientKeyFile)] {
            if let s = t.string(key, required: false) {
                let p = resolve(s, baseDir: baseDir)
                u[keyPath: keyPath] = p
                if !checks.isReadableFile(p) { t.report(key, "cannot read \(p); mTLS needs the gateway's PEM certificate and key") }
            }
        }
        if (u.clientCertFile == nil) != (u.clientKeyFile == nil) {
            t.report(u.clientCertFile == nil ? "client_cert_file" : "client_key_file", "client_cert_file and client_key_file go together (mTLS)")
        }
        if let proxy = t.string("proxy", required: false) {
            if !["http://", "https://", "socks5://", "socks5h://"].contains(where: { proxy.hasPrefix($0) }) {
                t.report("proxy", "must start with http://, https://, socks5:// or socks5h://; found \"\(proxy)\"")
            }
            u.proxy = proxy
        }
        return url == nil ? nil : u
    }

    /// "0x91568F", "91568f" and "9524879"-as-hex all name a code; hex is how codes are printed.
    public static func parseCode(_ text: String) -> Int64? {
        var s = Substring(text.trimmingCharacters(in: " "))
        if s.hasPrefix("0x") || s.hasPrefix("0X") { s = s.dropFirst(2) }
        guard !s.isEmpty, s.count <= 15 else { return nil }
        return Int64(s, radix: 16)
    }

    static func isIdentifier(_ s: String) -> Bool {
        !s.isEmpty && s.utf8.count <= 64 && s.unicodeScalars.allSatisfy {
            ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || "-_.".unicodeScalars.contains($0)
        }
    }
}

extension StringProtocol {
    func trimmingCharacters(in set: String) -> String {
        let chars = Set(set)
        var sub = Substring(self)
        while let f = sub.first, chars.contains(f) { sub = sub.dropFirst() }
        while let l = sub.last, chars.contains(l) { sub = sub.dropLast() }
        return String(sub)
    }
}

// MARK: - Reading tables with key tracking

enum PathComponent: Equatable { case key(String), index(Int) }

final class IssueSink {
    let file: String
    let locator: SourceLocator
    var issues: [ConfigIssue] = []
    /// Every key the loader looked for, as a dotted path without indexes ("device.bindkey").
    var asked: Set<String> = []
    init(file: String, locator: SourceLocator) { self.file = file; self.locator = locator }

    func report(path: [PathComponent], _ message: String) {
        let pos = locator.locate(path)
        issues.append(ConfigIssue(file: file, line: pos?.line, column: pos?.column, key: render(path), message: message))
    }

    func render(_ path: [PathComponent]) -> String {
        var out = ""
        for c in path {
            switch c {
            case let .key(k): out += out.isEmpty ? k : "." + k
            case let .index(i): out += "[\(i)]"
            }
        }
        return out
    }
}

final class TableReader {
    let members: [(String, TOMLNode)]
    let path: [PathComponent]
    let sink: IssueSink
    private var used: Set<String> = []

    init(_ members: [(String, TOMLNode)], path: [PathComponent], sink: IssueSink) {
        self.members = members
        self.path = path
        self.sink = sink
    }

    func markUsed(_ key: String) { used.insert(key); noteAsked(key) }

    private func noteAsked(_ key: String) {
        let section = path.compactMap { if case let .key(k) = $0 { k } else { nil } }
        sink.asked.insert((section + [key]).joined(separator: "."))
    }

    func has(_ key: String) -> Bool { members.contains { $0.0 == key } }

    func report(_ key: String, _ message: String) {
        sink.report(path: key.isEmpty ? path : path + [.key(key)], message)
    }

    private func value(_ key: String) -> TOMLNode? {
        used.insert(key)
        noteAsked(key)
        return members.first(where: { $0.0 == key })?.1
    }

    private func wrongType(_ key: String, _ node: TOMLNode, expected: String, example: String) {
        report(key, "must be \(expected), found \(node.typeName); e.g. \(key) = \(example)")
    }

    func string(_ key: String, required: Bool = true, hint: String = "") -> String? {
        guard let node = value(key) else {
            if required { report(key, "is required" + (hint.isEmpty ? "" : ": " + hint)) }
            return nil
        }
        guard case let .string(s) = node else { wrongType(key, node, expected: "a string", example: "\"...\""); return nil }
        if s.isEmpty { report(key, "must not be empty"); return nil }
        return s
    }

    func int(_ key: String, in range: ClosedRange<Int>) -> Int? {
        guard let node = value(key) else { return nil }
        guard case let .int(v) = node else {
            wrongType(key, node, expected: "an integer", example: "\(range.lowerBound)")
            return nil
        }
        guard v >= Int64(range.lowerBound), v <= Int64(range.upperBound) else {
            report(key, "\(v) is out of range; use a value from \(range.lowerBound) to \(range.upperBound)")
            return nil
        }
        return Int(v)
    }

    func bool(_ key: String) -> Bool? {
        guard let node = value(key) else { return nil }
        guard case let .bool(b) = node else { wrongType(key, node, expected: "true or false", example: "true"); return nil }
        return b
    }

    func stringArray(_ key: String) -> [String]? {
        guard let node = value(key) else { return nil }
        guard case let .array(items) = node else { wrongType(key, node, expected: "an array of strings", example: "[\"...\"]"); return nil }
        var out: [String] = []
        for item in items {
            guard case let .string(s) = item else {
                report(key, "every element must be a string, found \(item.typeName)")
                return nil
            }
            out.append(s)
        }
        return out
    }

    func intArray(_ key: String) -> [Int]? {
        guard let node = value(key) else { return nil }
        guard case let .array(items) = node else { wrongType(key, node, expected: "an array of integers", example: "[1, 2]"); return nil }
        var out: [Int] = []
        for item in items {
            guard case let .int(v) = item, let i = Int(exactly: v) else {
                report(key, "every element must be an integer, found \(item.typeName)")
                return nil
            }
            out.append(i)
        }
        return out
    }

    func table(_ key: String, required: Bool = false, hint: String = "") -> TableReader? {
        guard let node = value(key) else {
            if required { report(key, "is required" + (hint.isEmpty ? "" : ": " + hint)) }
            return nil
        }
        guard case let .table(members) = node else {
            report(key, "must be a table ([\(key)] section or { ... }), found \(node.typeName)")
            return nil
        }
        return TableReader(members, path: path + [.key(key)], sink: sink)
    }

    func tableArray(_ key: String) -> [TableReader] {
        guard let node = value(key) else { return [] }
        guard case let .array(items) = node else {
            report(key, "must be written as [[\(key)]] sections, found \(node.typeName)")
            return []
        }
        var out: [TableReader] = []
        for (i, item) in items.enumerated() {
            guard case let .table(members) = item else {
                sink.report(path: path + [.key(key), .index(i)], "must be a table, found \(item.typeName)")
                continue
            }
            out.append(TableReader(members, path: path + [.key(key), .index(i)], sink: sink))
        }
        return out
    }

    /// Reports every key nobody asked for, with the closest known key as a suggestion.
    func finish() {
        let known = Array(used)
        for (key, _) in members where !used.contains(key) {
            var message = "unknown key"
            if let guess = closest(to: key, in: known) { message += "; did you mean \"\(guess)\"?" }
            report(key, message)
        }
    }
}

func closest(to word: String, in candidates: [String]) -> String? {
    var best: (String, Int)?
    for c in candidates {
        let d = editDistance(word, c)
        if d <= max(2, word.count / 3), d < (best?.1 ?? Int.max) { best = (c, d) }
    }
    return best?.0
}

func editDistance(_ a: String, _ b: String) -> Int {
    let a = Array(a), b = Array(b)
    if a.isEmpty { return b.count }
    if b.isEmpty { return a.count }
    var prev = Array(0...b.count)
    var cur = [Int](repeating: 0, count: b.count + 1)
    for i in 1...a.count {
        cur[0] = i
        for j in 1...b.count {
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
        }
        swap(&prev, &cur)
    }
    return prev[b.count]
}

// MARK: - Finding a key's line in the source text

/// The value tree carries no positions (TOMLReader has them only for syntax errors), so semantic
/// errors are located by scanning the text for the table header and the key. Good enough for
/// hand-written configs.
struct SourceLocator {
    let lines: [Substring]

    init(text: String) { lines = text.split(separator: "\n", omittingEmptySubsequences: false) }

    func locate(_ path: [PathComponent]) -> (line: Int, column: Int)? {
        guard !path.isEmpty else { return nil }
        // Try the full path as "table + key", then shorter prefixes (inline tables, missing keys).
        var candidate = path
        while !candidate.isEmpty {
            if case let .key(key) = candidate.last, let hit = find(table: Array(candidate.dropLast()), key: key) { return hit }
            if let header = findHeader(candidate) { return header }
            candidate.removeLast()
        }
        return nil
    }

    private func headerPath(_ line: Substring, counters: inout [String: Int]) -> [PathComponent]? {
        let t = line.trimmingCharacters(in: " \t")
        guard t.hasPrefix("[") else { return nil }
        let isArray = t.hasPrefix("[[")
        guard let close = t.firstIndex(of: "]") else { return nil }
        let inner = t[t.index(t.startIndex, offsetBy: isArray ? 2 : 1)..<close]
        let parts = inner.split(separator: ".").map { String($0).trimmingCharacters(in: " \t\"") }
        var out: [PathComponent] = []
        var prefix = ""
        for (i, part) in parts.enumerated() {
            prefix += (prefix.isEmpty ? "" : ".") + part
            out.append(.key(part))
            if isArray && i == parts.count - 1 {
                let n = (counters[prefix] ?? -1) + 1
                counters[prefix] = n
                out.append(.index(n))
            } else if let n = counters[prefix] {
                out.append(.index(n))
            }
        }
        return out
    }

    private func findHeader(_ target: [PathComponent]) -> (line: Int, column: Int)? {
        var counters: [String: Int] = [:]
        for (i, line) in lines.enumerated() {
            if let h = headerPath(line, counters: &counters), h == target { return (i + 1, 1) }
        }
        return nil
    }

    private func find(table: [PathComponent], key: String) -> (line: Int, column: Int)? {
        var counters: [String: Int] = [:]
        var current: [PathComponent] = []
        for (i, line) in lines.enumerated() {
            if let h = headerPath(line, counters: &counters) { current = h; continue }
            guard current == table else { continue }
            let stripped = line.drop(while: { $0 == " " || $0 == "\t" })
            let column = line.count - stripped.count + 1
            guard stripped.hasPrefix(key) else { continue }
            let rest = stripped.dropFirst(key.count).drop(while: { $0 == " " || $0 == "\t" })
            if rest.hasPrefix("=") || rest.hasPrefix(".") { return (i + 1, column) }
        }
        return nil
    }
}

extension AgentConfig {
    func with(_ change: (inout AgentConfig) -> Void) -> AgentConfig {
        var copy = self
        change(&copy)
        return copy
    }
}
