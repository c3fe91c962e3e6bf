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
        let root = try tree(bytes: bytes, file: file)
        let sink = IssueSink(file: file, locator: SourceLocator(text: String(decoding: bytes, as: UTF8.self)))
        let baseDir = directory(of: file)
        let config = readAgent(root, sink: sink, baseDir: baseDir, checks: checks)
        if let config, sink.issues.isEmpty { return config }
        throw ConfigError(issues: sink.issues)
    }

    /// The TOML tree, or its syntax error as a config issue at its line and column.
    static func tree(bytes: [UInt8], file: String) throws(ConfigError) -> TOMLNode {
        do {
            return try TOMLReader.parse(bytes: bytes)
        } catch {
            throw ConfigError(issues: [ConfigIssue(file: file, line: error.line, column: error.column, key: "",
                                                   message: "not valid TOML: \(error.message)")])
        }
    }

    /// The keys the loader looks for in this document (sections it does not have are not
    /// entered): what `ConfigReferenceTests` checks against the reference.
    static func keysRead(text: String) -> Set<String> {
        guard let root = try? TOMLReader.parse(bytes: Array(text.utf8)) else { return [] }
        let sink = IssueSink(file: "agent.toml", locator: SourceLocator(text: text))
        _ = readAgent(root, sink: sink, baseDir: ".", checks: .none)
        return sink.asked
    }

    public static func directory(of file: String) -> String {
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

        // The radios land in their slots of this; without a gateway_id nothing is returned.
        var config = AgentConfig(gatewayID: gatewayID ?? "", paths: paths, log: log, button: button)
        var radios: [String] = []
        if let radio = top.table("radio") {
            for kind in RadioRegistry.all { readRadio(kind, in: radio, into: &config, enabled: &radios, baseDir: baseDir, checks: checks) }
            for (name, _) in radio.members where !RadioRegistry.names.contains(name) {
                radio.excuse(name)
                let guess = closest(to: name, in: RadioRegistry.names).map { "; did you mean \"\($0)\"?" } ?? ""
                let known = RadioRegistry.descriptors.map { "\($0.name) (\($0.summary))" }.joined(separator: ", ")
                radio.report(name, "unknown radio\(guess) This agent knows: \(known)")
            }
            if let r = config.rtl433, let o = config.ook, o.source == .rtl433, r.replay.isEmpty, o.rtl433.replay.isEmpty,
               !r.args.contains("-d") && !o.rtl433.args.contains("-d") {
                radio.report("ook", "[radio.rtl433] and [radio.ook] source = \"rtl433\" would open the same SDR; give each its dongle with \"-d\" in args / rtl433_args")
            }
            radio.finish()
        }

        // What the owner sees when pairing, unless ancs_name says otherwise.
        if config.ble?.ancsName == nil, let gatewayID, !gatewayID.isEmpty { config.ble?.ancsName = String(decoding: Array(gatewayID.utf8.prefix(29)), as: UTF8.self) }

        if let t = top.table("beacon") {
            if config.ble == nil {
                t.report("", "the base station's own iBeacon needs [radio.ble] (it advertises through the same controller)")
            }
            if let b = readOwnBeacon(t) { config.ble?.beacon = b }
            t.finish()
        }

        var regions: [BeaconRegion] = []
        for t in top.tableArray("region") {
            if let r = readRegion(t) {
                if regions.contains(where: { $0.id == r.id }) { t.report("id", "duplicate region id \"\(r.id)\"") }
                regions.append(r)
            }
            if !radios.contains("ble") { t.report("", "\(t.has("namespace") ? "Eddystone" : "iBeacon") regions need [radio.ble]") }
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

        var update: UpdateSettings?
        if let t = top.table("update") {
            update = readUpdate(t)
            t.finish()
        }

        var limits = OutboxLimits()
        if let t = top.table("outbox") {
            if let v = t.int("max_events", in: 10...10_000_000) { limits.maxEvents = v }
            if let v = t.int("max_bytes", in: 65_536...4_294_967_296) { limits.maxBytes = v }
            t.finish()
        }

        let actions = top.tableArray("action").enumerated().compactMap { index, t in
            readAction(t, index: index, devices: devices, phoneLink: config.ble?.ancsLink == true, baseDir: baseDir)
        }

        var clock = ClockSettings()
        if let t = top.table("clock") {
            if let b = t.bool("require_sync") { clock.requireSync = b }
            if let f = t.string("sync_file", required: false) { clock.syncFile = resolve(f, baseDir: baseDir) }
            if let b = t.bool("kernel_check") { clock.kernelCheck = b }
            t.finish()
        }

        var memory = MemorySettings()
        if let t = top.table("memory") {
            if let b = t.bool("release_clean_pages") { memory.releaseCleanPages = b }
            t.finish()
        }

        top.finish()
        guard gatewayID != nil else { return nil }
        return config.with {
            $0.devices = devices; $0.uplink = uplink; $0.metrics = metrics
            $0.clock = clock; $0.outbox = limits; $0.memory = memory; $0.actions = actions; $0.regions = regions; $0.mqtt = mqtt
            $0.update = update
        }
    }

    /// `[update] url`: handed to `rauc info`/`rauc install` by a shell script, so no character a
    /// shell or URL would read twice. http:// is allowed because the bundle's signature, checked
    /// against the image's keyring, is what makes it trusted (a local mirror rarely has TLS).
    static func readUpdate(_ t: TableReader) -> UpdateSettings? {
        guard let url = t.string("url", hint: "the bundle's address, e.g. url = \"https://updates.example.com/doorbell-raspberrypi-4.raucb\"") else { return nil }
        let scheme = url.hasPrefix("https://") ? "https://" : url.hasPrefix("http://") ? "http://" : nil
        guard let scheme else {
            t.report("url", "must be the bundle's http:// or https:// address (RAUC streams it from there); found \"\(url)\"")
            return nil
        }
        let forbidden: Set<Character> = [" ", "\"", "'", "\\", "`", "$", ";", "<", ">", "|"]
        if url.count <= scheme.count || url.contains(where: { forbidden.contains($0) || $0.asciiValue.map { $0 < 0x20 || $0 == 0x7F } ?? true }) {
            t.report("url", "is not a valid URL (ASCII only, no spaces, quotes or shell characters; percent-encode them): \"\(url)\"")
            return nil
        }
        return UpdateSettings(url: url)
    }

    /// One `[radio.<name>]` section through its radio's descriptor; an enabled, usable radio
    /// lands in its slot of `config` and in `enabled`, in registry order.
    static func readRadio<R: Radio>(_: R.Type, in radios: TableReader, into config: inout AgentConfig, enabled: inout [String],
                                    baseDir: String, checks: ConfigFileChecks) {
        guard let t = radios.table(R.descriptor.name) else { return }
        let section = RadioSection(t, R.descriptor)
        let on = section.bool("enabled") ?? true
        if let settings = R.read(section, baseDir: baseDir, checks: checks), on {
            config[keyPath: R.slot] = settings
            enabled.append(R.descriptor.name)
        }
        section.finish()
    }
}
