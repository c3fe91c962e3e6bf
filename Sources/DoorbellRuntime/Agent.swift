import DoorbellCore
import Glibc

// The daemon: wires radios → pipeline → outbox → uplink, serves the control socket, and runs
// until SIGTERM/SIGINT. Everything that can fail at start fails here with a sysexits code.

public struct AgentStartError: Error, Sendable, CustomStringConvertible {
    public let description: String
    /// sysexits.h: 73 EX_CANTCREAT, 74 EX_IOERR, 78 EX_CONFIG.
    public let exitCode: Int32
}

struct AgentCounters: Sendable {
    var eventsByType: [String: Int] = [:]
    /// Where a damaged outbox was moved at start, for the status.
    var outboxMovedAside: String?
    var evicted = 0
    /// Events that could not be stored (disk full), kept here and retried until they are.
    var spilled: [AgentEvent] = []
    var storageFull = false
    /// BTHome packet ids and counters not yet in the outbox: they go with the next transaction.
    var unsavedButtonMemory: [String: BTHomeButtonTracker.DeviceMemory] = [:]
    var outboxError: String?
    var lastEvent: String?
}

public final class Agent: @unchecked Sendable {
    /// Swapped as a whole by a reload (SIGHUP); readers take a snapshot.
    private let current: Locked<AgentConfig>
    public var config: AgentConfig { current.snapshot }
    let log: Logger
    let outbox: Outbox
    let deviceKey: Ed25519SigningKey
    let pipeline: Locked<RFPipeline>
    /// The OOK receiver's own pipeline: its tracker runs on the edges' clock.
    let ookPipeline: Locked<OOKPipeline>
    let counters = Locked(AgentCounters())
    let startedMono = Clocks.monotonicMicros()
    private let parts = Locked<(radio: RTL433Radio?, deliverer: Deliverer?)>((nil, nil))
    var radio: RTL433Radio? { parts.snapshot.radio }
    private let ookParts = Locked<OOKRadio?>(nil)
    var ookRadio: OOKRadio? { ookParts.snapshot }
    let blePipeline: Locked<BLEPipeline>
    private let bleParts = Locked<BLERadio?>(nil)
    var bleRadio: BLERadio? { bleParts.snapshot }
    var deliverer: Deliverer? { parts.snapshot.deliverer }
    private let mqttParts = Locked<MQTTSink?>(nil)
    var mqttSink: MQTTSink? { mqttParts.snapshot }
    private let reloadStatus = Locked<JSONValue>(.null)
    /// Set when the agent runs on the last good copy of its config (the file was invalid).
    public let configProblem = Locked<String?>(nil)
    private var metrics: MetricsWriter?
    var control: ControlServer?
    private var rng = Locked(SystemRandomNumberGenerator())
    public let feed = EventFeed()
    let actions = Locked<ActionRunner?>(nil)
    let spillWake = WakeSignal()
    let spillStopping = Locked(false)
    /// Raw radio lines for `agentctl capture`; only filled while someone captures.
    let rawFeed = EventFeed()

    public init(config: AgentConfig, log: Logger) throws(AgentStartError) {
        self.current = Locked(config)
        self.log = log
        try Self.prepareStateDir(config.paths.stateDir)
        let (opened, movedAside) = try Self.openOutbox(path: config.paths.outboxPath, sinks: Self.sinks(config), log: log)
        outbox = opened
        if let movedAside { counters.withLock { $0.outboxMovedAside = movedAside } }
        do {
            deviceKey = try DeviceKeyStore.loadOrCreate(path: config.paths.deviceKeyPath, log: log)
        } catch {
            throw AgentStartError(description: error.description, exitCode: 73)
        }
        pipeline = Locked(RFPipeline(radio: "rtl433", directory: DeviceDirectory(devices: config.devices), settings: config.button))
        ookPipeline = Locked(Self.makeOOKPipeline(config))
        blePipeline = Locked(BLEPipeline(devices: config.devices, regions: config.regions,
                                         memory: Self.loadButtonMemory(outbox, legacyFile: config.paths.stateDir + "/ble-buttons.json", log: log),
                                         button: config.button))
    }

    func makeBLERadio(_ config: AgentConfig) -> BLERadio? {
        guard let settings = config.ble else { return nil }
        let radio = BLERadio(settings: settings, log: log) { [unowned self] input in ingest(ble: input) }
        let raw = rawFeed
        radio.tap.withLock {
            $0 = { packet, received in
                guard raw.hasFollowers else { return }
                raw.publish(.object([("radio", .string("ble")), ("h4", .string(Hex.encode(packet))),
                                     ("rx", .bool(received)), ("t", .number(Double(Clocks.wallMicros())))]))
            }
        }
        return radio
    }

    /// The last packet id and counter per BTHome button, so a re-broadcast or a replay after a
    /// reboot is still not a press. They live in the outbox; an agent before schema v4 kept them in
    /// `ble-buttons.json`, which is taken over once (into the outbox, then removed).
    static func loadButtonMemory(_ outbox: Outbox, legacyFile: String, log: Logger) -> [String: BTHomeButtonTracker.DeviceMemory] {
        var memory: [String: BTHomeButtonTracker.DeviceMemory] = [:]
        do throws(OutboxError) {
            memory = try outbox.buttonMemory()
        } catch {
            log.error("ble.memory_unreadable", [("error", error.description), ("hint", "starting without the last packet ids")])
        }
        guard let bytes = readFile(legacyFile, maxBytes: 1 << 20) else { return memory }
        guard case let .object(members)? = try? JSONReader.parse(bytes: bytes) else {
            log.warning("ble.memory_unreadable", [("file", legacyFile), ("hint", "a damaged file from an older agent; removed")])
            unlink(legacyFile)
            return memory
        }
        var legacy: [String: BTHomeButtonTracker.DeviceMemory] = [:]
        for (address, v) in members where memory[address] == nil {
            legacy[address] = BTHomeButtonTracker.DeviceMemory(packetID: v["packet_id"]?.intValue.flatMap { UInt8(exactly: $0) },
                                                               counter: v["counter"]?.intValue.flatMap { UInt32(exactly: $0) })
        }
        do throws(OutboxError) {
            _ = try outbox.append([], memory: legacy, bounds: nil, report: nil)
            unlink(legacyFile)
            log.notice("ble.memory_migrated", [("file", legacyFile), ("buttons", String(legacy.count))])
        } catch {
            log.error("ble.memory_not_migrated", [("file", legacyFile), ("error", error.description), ("hint", "kept; tried again at the next start")])
        }
        return memory.merging(legacy) { kept, _ in kept }
    }

    /// Reports and ticks from the BLE radio's thread.
    func ingest(ble input: BLERadioInput) {
        let time = ReceiveTime(monoMicros: Clocks.monotonicMicros(), wallMicros: Clocks.wallMicros(),
                               clockSynced: Clocks.isWallClockSynchronized(config.clock))
        let healthy = !(bleRadio?.degraded.snapshot ?? false)
        var memory: [String: BTHomeButtonTracker.DeviceMemory] = [:]
        let (events, problem) = blePipeline.withLock { p -> ([AgentEvent], String?) in
            let before = p.lastProblem
            var events: [AgentEvent] = []
            switch input {
            case let .reports(reports):
                for r in reports { events += p.handle(report: r, at: time, radioHealthy: healthy) }
            case let .replayed(r, mono):
                var t = time
                t.monoMicros = mono
                events = p.handle(report: r, at: t, radioHealthy: true)
                for i in events.indices { events[i].monotonicMicros = time.monoMicros }
            case .tick: events = p.tick(at: time, radioHealthy: healthy)
            case let .health(ok): if ok { p.radioRecovered(at: time) }
            }
            memory = p.takeButtonMemoryChanges()
            return (events, p.lastProblem != before ? p.lastProblem : nil)
        }
        if let problem { log.warning("ble.refused", [("problem", problem)]) }
        // The packet ids go into the transaction that stores the events they produced, so a
        // press is forwarded only once its packet id is durable (and a stored id has its press).
        if !memory.isEmpty { counters.withLock { $0.unsavedButtonMemory.merge(memory) { _, new in new } } }
        if events.isEmpty {
            if !memory.isEmpty { storeButtonMemory() }
        } else {
            acceptAll(events)
        }
    }

    /// Packet ids without an event (a re-sent press with a newer counter): stored alone, unless
    /// events wait for storage, which then take them along.
    func storeButtonMemory() {
        let memory = counters.withLock { c in c.spilled.isEmpty ? c.unsavedButtonMemory : [:] }
        guard !memory.isEmpty else { return }
        do throws(OutboxError) {
            _ = try outbox.append([], memory: memory, bounds: nil, report: nil)
            counters.withLock { c in Self.forget(saved: memory, in: &c) }
        } catch {
            log.error("ble.memory_not_saved", [("error", error.description), ("hint", "kept and stored with the next event")])
        }
    }

    static func forget(saved: [String: BTHomeButtonTracker.DeviceMemory], in c: inout AgentCounters) {
        for (address, m) in saved where c.unsavedButtonMemory[address] == m { c.unsavedButtonMemory[address] = nil }
    }

    static func makeOOKPipeline(_ config: AgentConfig) -> OOKPipeline {
        OOKPipeline(directory: DeviceDirectory(devices: config.devices), button: config.button,
                    decoder: config.ook?.decoder ?? OOKDecoder.Settings(), glitchMicros: Int64(config.ook?.glitchMicros ?? 80),
                    idleMicros: OOKRadio.idleMicros)
    }

    func makeOOKRadio(_ config: AgentConfig) -> OOKRadio? {
        guard let settings = config.ook else { return nil }
        return OOKRadio(settings: settings, log: log, pidFile: config.paths.stateDir + "/rtl433-pulses.pid") { [unowned self] input in
            ingest(ook: input)
        }
    }

    /// Opens the outbox; a damaged one (garbage, truncated, a schema from the future) is moved
    /// aside with its WAL so the gateway keeps working, and the status says where it went.
    static func openOutbox(path: String, sinks: OutboxSinks, log: Logger) throws(AgentStartError) -> (Outbox, String?) {
        do {
            return (try Outbox(path: path, sinks: sinks), nil)
        } catch where error.code == .corrupt || error.code == .schema {
            let aside = path + ".broken-" + RFC3339.format(micros: Clocks.wallMicros()).replacingOccurrences(of: ":", with: "")
            for suffix in ["", "-wal", "-shm"] { rename(path + suffix, aside + suffix) }
            log.error("outbox.moved_aside", [("path", path), ("moved_to", aside), ("reason", error.description)])
            do {
                return (try Outbox(path: path, sinks: sinks), aside)
            } catch {
                throw AgentStartError(description: error.description, exitCode: 74)
            }
        } catch {
            throw AgentStartError(description: error.description, exitCode: error.code == .readOnly || error.code == .cannotOpen ? 73 : 74)
        }
    }

    /// Where events go. With no sink configured they wait for one (the cloud's bit).
    static func sinks(_ config: AgentConfig) -> OutboxSinks {
        var s: OutboxSinks = []
        if config.uplink != nil { s.insert(.cloud) }
        if config.mqtt != nil { s.insert(.mqtt) }
        return s.isEmpty ? .cloud : s
    }

    func makeMQTTSink(_ config: AgentConfig) -> MQTTSink? {
        guard let settings = config.mqtt else { return nil }
        return MQTTSink(settings: settings, discovery: HomeAssistantDiscovery.messages(config: config, settings: settings, agentVersion: AgentVersion.current),
                        topics: MQTTTopics(prefix: settings.topicPrefix, gatewayID: config.gatewayID), outbox: outbox,
                        stateDir: config.paths.stateDir, log: log) { [unowned self] in diagnosticsJSON() }
    }

    /// The gateway's health as Home Assistant's diagnostic entities read it.
    func diagnosticsJSON() -> JSONValue {
        let s = statusJSON()
        var radios: [String] = []
        if case let .array(list)? = s["radios"] {
            radios = list.map { "\($0["name"]?.stringValue ?? "?") \($0["state"]?.stringValue ?? "?")" }
        }
        return .object([
            ("outbox_depth", s["outbox"]?["depth"] ?? .null), ("outbox_oldest_age_s", s["outbox"]?["oldest_age_s"] ?? .null),
            ("radios", .string(radios.isEmpty ? "none" : radios.joined(separator: ", "))),
            // Text, not a timestamp entity: "never" and "no cloud" are answers too.
            ("last_delivery", s["uplink"] == .null ? .string("no cloud uplink") : (s["uplink"]?["last_success"]).flatMap { $0 == .null ? nil : $0 } ?? .string("never")),
            ("clock_synchronized", s["clock"]?["synchronized"] ?? .null),
            ("problem", .bool(s["health"]?.stringValue != "ok")), ("problems", s["problems"] ?? .array([])),
        ])
    }

    /// Keeps the config that just loaded for a start on which the file is damaged.
    public func saveLastGoodConfig(_ bytes: [UInt8]) {
        do throws(SpawnError) { try LastGoodConfig.save(bytes, stateDir: config.paths.stateDir) } catch {
            log.warning("config.last_good_not_saved", [("error", error.description)])
        }
    }

    public static func prepareStateDir(_ dir: String) throws(AgentStartError) {
        var st = stat()
        if stat(dir, &st) != 0 {
            guard mkdir(dir, 0o700) == 0 || errno == EEXIST else {
                throw AgentStartError(description: "cannot create state directory \(dir): \(errnoText()). Create it for the doorbell-agent user (StateDirectory= in the unit does this).", exitCode: 73)
            }
        } else if (st.st_mode & S_IFMT) != S_IFDIR {
            throw AgentStartError(description: "state directory \(dir) is not a directory", exitCode: 73)
        }
        guard access(dir, W_OK) == 0 else {
            throw AgentStartError(description: "state directory \(dir) is not writable: \(errnoText()). It must belong to the doorbell-agent user.", exitCode: 73)
        }
    }

    /// Starts every part. The control socket first, so an installer can ask what is wrong.
    public func start() throws(AgentStartError) {
        let control = ControlServer(path: config.paths.controlSocket, log: log) { [unowned self] request in
            handleControl(request)
        }
        do { try control.start() } catch { throw AgentStartError(description: error.description, exitCode: 73) }
        self.control = control

        let config = self.config
        runSpillRetries()
        if !config.actions.isEmpty { actions.withLock { $0 = ActionRunner(actions: config.actions, log: log) } }
        let d = try makeDeliverer(config)
        d?.start()
        if d == nil { log.warning("uplink.not_configured", [("hint", "events stay in the outbox until [uplink] is set")]) }
        let r = makeRadio(config)
        r?.start()
        parts.withLock { $0 = (r, d) }
        let q = makeMQTTSink(config)
        q?.start()
        mqttParts.withLock { $0 = q }
        let o = makeOOKRadio(config)
        o?.start()
        ookParts.withLock { $0 = o }
        let b = makeBLERadio(config)
        b?.start()
        bleParts.withLock { $0 = b }
        if let m = config.metrics {
            let writer = MetricsWriter(settings: m, log: log) { [unowned self] in metricsText() }
            writer.start()
            metrics = writer
        }
        log.notice("agent.started", [("gateway", config.gatewayID), ("version", AgentVersion.current),
                                     ("devices", String(config.devices.count)), ("control", config.paths.controlSocket)])
    }

    func makeDeliverer(_ config: AgentConfig) throws(AgentStartError) -> Deliverer? {
        guard let uplink = config.uplink else { return nil }
        var secret: WebhookSecret?
        if let file = uplink.hmacSecretFile {
            guard let bytes = readFile(file, maxBytes: 4096) else {
                throw AgentStartError(description: "cannot read uplink.hmac_secret_file \(file): \(errnoText())", exitCode: 78)
            }
            do { secret = try WebhookSecret(parsing: String(decoding: bytes, as: UTF8.self)) } catch {
                throw AgentStartError(description: "uplink.hmac_secret_file \(file): \(error.description)", exitCode: 78)
            }
        }
        let signer = WebhookSigner(hmacSecret: secret, deviceKey: uplink.signEd25519 ? deviceKey : nil)
        return Deliverer(settings: uplink, clock: config.clock, gatewayID: config.gatewayID, signer: signer, outbox: outbox, log: log)
    }

    func makeRadio(_ config: AgentConfig) -> RTL433Radio? {
        guard let settings = config.rtl433 else { return nil }
        return RTL433Radio(settings: settings, log: log, pidFile: config.paths.stateDir + "/rtl433.pid") { [unowned self] line in ingest(line: line) }
    }

    /// SIGHUP: read the config again and switch to it as a whole, or keep the running one and say
    /// exactly why. Only what changed is restarted; paths need a service restart.
    public func reload(from path: String) {
        let old = config
        let new: AgentConfig
        var loaded: [UInt8] = []
        do throws(ConfigError) {
            guard let bytes = readFile(path) else {
                throw ConfigError(issues: [ConfigIssue(file: path, key: "", message: "cannot read the config file: \(errnoText())")])
            }
            new = try ConfigLoader.parse(bytes: bytes, file: path,
                                         checks: ConfigFileChecks(isReadableFile: { isReadableFile($0) }))
            loaded = bytes
            if new.paths != old.paths || new.gatewayID != old.gatewayID {
                throw ConfigError(issues: [ConfigIssue(file: path, key: "paths", message: "gateway_id and [paths] changes need a restart (systemctl restart doorbell-agent); nothing was changed")])
            }
        } catch {
            reloadStatus.withLock { $0 = .object([("ok", .bool(false)), ("at", .string(RFC3339.format(micros: Clocks.wallMicros()))), ("error", .string(error.description))]) }
            log.error("config.reload_rejected", [("file", path), ("error", error.description.replacingNewlines())])
            return
        }
        var newDeliverer: Deliverer?
        if new.uplink != old.uplink || new.clock != old.clock {
            do { newDeliverer = try makeDeliverer(new) } catch {
                reloadStatus.withLock { $0 = .object([("ok", .bool(false)), ("at", .string(RFC3339.format(micros: Clocks.wallMicros()))), ("error", .string(error.description))]) }
                log.error("config.reload_rejected", [("file", path), ("error", error.description)])
                return
            }
        }
        current.withLock { $0 = new }
        log.level = new.log.level
        if new.devices != old.devices || new.button != old.button {
            pipeline.withLock { $0 = RFPipeline(radio: "rtl433", directory: DeviceDirectory(devices: new.devices), settings: new.button) }
        }
        if new.devices != old.devices || new.button != old.button || new.ook != old.ook {
            ookPipeline.withLock { $0 = Self.makeOOKPipeline(new) }
        }
        if new.devices != old.devices || new.regions != old.regions || new.button != old.button {
            let memory = blePipeline.snapshot.buttons.memory
            blePipeline.withLock { $0 = BLEPipeline(devices: new.devices, regions: new.regions, memory: memory, button: new.button) }
        }
        if new.ble != old.ble {
            bleRadio?.stop()
            let b = makeBLERadio(new)
            b?.start()
            bleParts.withLock { $0 = b }
        }
        if new.ook != old.ook {
            ookRadio?.stop()
            let o = makeOOKRadio(new)
            o?.start()
            ookParts.withLock { $0 = o }
        }
        if new.rtl433 != old.rtl433 {
            radio?.stop()
            let r = makeRadio(new)
            r?.start()
            parts.withLock { $0.radio = r }
        }
        if new.uplink != old.uplink || new.clock != old.clock {
            deliverer?.stop(graceMicros: 5_000_000)
            newDeliverer?.start()
            parts.withLock { $0.deliverer = newDeliverer }
        }
        if Self.sinks(new) != Self.sinks(old) {
            do { try outbox.setSinks(Self.sinks(new)) } catch { log.error("outbox.sinks_not_changed", [("error", error.description)]) }
        }
        if new.mqtt != old.mqtt {
            mqttSink?.stop()
            let q = makeMQTTSink(new)
            q?.start()
            mqttParts.withLock { $0 = q }
        } else if let settings = new.mqtt {
            // Discovery again on every reload: new devices appear, removed ones are cleared.
            mqttSink?.updateDiscovery(HomeAssistantDiscovery.messages(config: new, settings: settings, agentVersion: AgentVersion.current))
        }
        if new.actions != old.actions {
            actions.withLock { $0 = new.actions.isEmpty ? nil : ActionRunner(actions: new.actions, log: log) }
        }
        if new.metrics != old.metrics {
            metrics?.stop()
            metrics = new.metrics.map { settings in MetricsWriter(settings: settings, log: log) { [unowned self] in metricsText() } }
            metrics?.start()
        }
        reloadStatus.withLock { $0 = .object([("ok", .bool(true)), ("at", .string(RFC3339.format(micros: Clocks.wallMicros())))]) }
        configProblem.withLock { $0 = nil }
        saveLastGoodConfig(loaded)
        log.notice("config.reloaded", [("file", path), ("devices", String(new.devices.count))])
    }

    /// One rtl_433 line from the radio thread.
    func ingest(line: String) {
        if rawFeed.hasFollowers { rawFeed.publish(.object([("radio", .string("rtl433")), ("line", .string(line))])) }
        let time = ReceiveTime(monoMicros: Clocks.monotonicMicros(), wallMicros: Clocks.wallMicros(),
                               clockSynced: Clocks.isWallClockSynchronized(config.clock))
        let (events, malformed) = pipeline.withLock { p -> ([AgentEvent], String?) in
            let before = p.counters.malformed
            let events = p.handle(line: line, at: time)
            return (events, p.counters.malformed > before ? p.lastMalformed : nil)
        }
        if let malformed {
            log.warning("rtl433.bad_line", [("error", malformed), ("line", String(line.prefix(200)))])
        }
        for event in events { accept(event) }
    }

    /// Edges or pulses from the OOK radio's thread.
    func ingest(ook input: OOKRadioInput) {
        let now = Clocks.monotonicMicros()
        let wall = Clocks.wallMicros()
        let synced = Clocks.isWallClockSynchronized(config.clock)
        let capturing = rawFeed.hasFollowers
        var captured: [Pulse] = []
        let events = ookPipeline.withLock { p -> [AgentEvent] in
            p.recordPulses = capturing
            defer { if capturing { captured = p.recorded; p.recorded.removeAll(keepingCapacity: true) } }
            switch input {
            case let .edge(high, micros):
                return p.edge(high: high, atMicros: micros, time: ReceiveTime(monoMicros: micros, wallMicros: wall, clockSynced: synced))
            case let .idle(micros):
                return p.idle(atMicros: micros, time: ReceiveTime(monoMicros: micros, wallMicros: wall, clockSynced: synced))
            case let .pulse(pulse, rssi):
                return p.handle(pulse: pulse, time: ReceiveTime(monoMicros: now, wallMicros: wall, clockSynced: synced), rssi: rssi)
            }
        }
        for p in captured {
            rawFeed.publish(.object([("radio", .string("ook")), ("pulse", .array([.number(Double(p.highMicros)), .number(Double(p.lowMicros))]))]))
        }
        for var event in events {
            // The tracker ran on the edges' clock (a replay's is virtual); latency counts from now.
            event.monotonicMicros = now
            accept(event)
        }
    }

    /// Makes an event durable (one transaction, one fsync) and wakes the uplink.
    @discardableResult
    func accept(_ incoming: AgentEvent) -> OutboxEntry? { acceptAll([incoming]).first }

    /// Group commit: the events of one radio read become durable together, in one transaction
    /// (one fsync and one set of page writes for the burst, not one per event).
    @discardableResult
    func acceptAll(_ incoming: [AgentEvent]) -> [OutboxEntry] {
        guard !incoming.isEmpty else { return [] }
        let events = incoming.map { e -> AgentEvent in
            var event = e
            event.bootID = Clocks.bootID
            return event
        }
        // Ring first: local actions never wait for storage or the network.
        if let runner = actions.snapshot {
            for event in events { runner.trigger(event, json: event.json(id: "", sequence: 0, gatewayID: config.gatewayID, agentVersion: AgentVersion.current)) }
        }
        // Keep creation order: while anything waits in memory, new events queue behind it.
        let queued = counters.withLock { c -> Bool in
            guard !c.spilled.isEmpty else { return false }
            c.spilled.append(contentsOf: events)
            return true
        }
        if queued {
            spillInMemory([])
            return []
        }
        switch store(events) {
        case let .stored(entries): return entries
        case .full:
            counters.withLock { $0.storageFull = true }
            spillInMemory(events)
            return []
        case .failed: return []
        }
    }

    /// Holds events in memory (storage is full) and wakes the retry thread.
    private func spillInMemory(_ events: [AgentEvent]) {
        let dropped = counters.withLock { c -> [AgentEvent] in
            c.spilled.append(contentsOf: events)
            var dropped: [AgentEvent] = []
            while let d = Self.trimSpill(&c) { dropped.append(d) }
            return dropped
        }
        for d in dropped { log.error("memory.evicted", [("type", d.type.rawValue), ("device", d.device.id), ("hint", "storage has been full too long")]) }
        spillWake.signal()
    }

    enum StoreOutcome { case stored([OutboxEntry]), full, failed }

    /// Memory is bounded too: past this many held events, the oldest of the lowest priority goes
    /// (counted and logged), as in the outbox.
    static let maxHeldInMemory = 5_000

    static func trimSpill(_ c: inout AgentCounters) -> AgentEvent? {
        guard c.spilled.count > maxHeldInMemory else { return nil }
        let victim = c.spilled.firstIndex { !$0.type.rawValue.hasPrefix("doorbell.") } ?? 0
        c.evicted += 1
        return c.spilled.remove(at: victim)
    }

    /// One transaction, one fsync: the events, any evictions their arrival forces, and the report.
    func store(_ events: [AgentEvent]) -> StoreOutcome {
        let wallMillis = Clocks.wallMicros() / 1000
        let ids = rng.withLock { r in events.map { _ in UUIDv7.make(unixMillis: wallMillis, random: &r) } }
        let config = self.config
        let gateway = config.gatewayID
        let reportID = rng.withLock { UUIDv7.make(unixMillis: wallMillis, random: &$0) }
        let clockSynced = events[events.count - 1].clockSynced
        let newEvents = zip(ids, events).map { id, event in
            OutboxNewEvent(id: id, type: event.type.rawValue, createdAtMs: wallMillis) { sequence in
                event.body(id: id, sequence: sequence, gatewayID: gateway, agentVersion: AgentVersion.current)
            }
        }
        let memory = counters.snapshot.unsavedButtonMemory
        do {
            let result = try outbox.append(
                newEvents, memory: memory, bounds: OutboxBounds(maxEvents: config.outbox.maxEvents, maxBytes: config.outbox.maxBytes),
                report: { sequence, evicted in
                    var types: [String: Int] = [:]
                    for e in evicted { types[e.type, default: 0] += 1 }
                    let report = AgentEvent(
                        type: .gatewayEvicted, device: DeviceRef(id: gateway, name: "gateway", radio: "none"),
                        occurredAtMicros: Clocks.wallMicros(), clockSynced: clockSynced,
                        data: .object([("count", .number(Double(evicted.count))),
                                       ("sequences", .array(evicted.prefix(1_000).map { .number(Double($0.sequence)) })),
                                       ("types", .object(types.sorted { $0.key < $1.key }.map { ($0.key, .number(Double($0.value))) })),
                                       ("reason", .string("outbox bounds: max_events \(config.outbox.maxEvents), max_bytes \(config.outbox.maxBytes)"))]))
                    return (reportID, report.type.rawValue, report.body(id: reportID, sequence: sequence, gatewayID: gateway, agentVersion: AgentVersion.current))
                })
            counters.withLock {
                Self.forget(saved: memory, in: &$0)
                for event in events { $0.eventsByType[event.type.rawValue, default: 0] += 1 }
                $0.outboxError = nil
                $0.storageFull = false
                if let last = events.last { $0.lastEvent = "\(last.type.rawValue) \(last.device.id)" }
                $0.evicted += result.evicted.count
                if let r = result.report { $0.eventsByType[r.type, default: 0] += 1 }
            }
            for (entry, event) in zip(result.entries, events) {
                log.notice("event.created", [("event.id", entry.id), ("sequence", String(entry.sequence)), ("type", event.type.rawValue),
                                             ("device", event.device.id)] + (event.test ? [("test", "true")] : []))
            }
            if !result.evicted.isEmpty {
                log.warning("outbox.evicted", [("count", String(result.evicted.count)),
                                               ("sequences", result.evicted.prefix(20).map { String($0.sequence) }.joined(separator: ",")),
                                               ("hint", "the outbox is at its bounds ([outbox] max_events/max_bytes): is the uplink down?")])
            }
            deliverer?.notify()
            mqttSink?.notify()
            for (entry, event) in zip(result.entries, events) {
                feed.publish(event.json(id: entry.id, sequence: entry.sequence, gatewayID: gateway, agentVersion: AgentVersion.current))
            }
            return .stored(result.entries)
        } catch where error.code == .full {
            counters.withLock { $0.outboxError = error.description }
            for event in events {
                log.error("outbox.full", [("type", event.type.rawValue), ("device", event.device.id), ("error", error.description),
                                          ("hint", "kept in memory and retried; free space on the state directory's filesystem")])
            }
            return .full
        } catch {
            counters.withLock { $0.outboxError = error.description }
            for event in events {
                log.error("outbox.append_failed", [("type", event.type.rawValue), ("device", event.device.id), ("error", error.description)])
            }
            return .failed
        }
    }

    /// Retries events held in memory while storage was full, oldest first, until they are stored.
    func runSpillRetries() {
        startThread(name: "spill") { [self] in
            while !spillStopping.snapshot {
                let first = counters.withLock { $0.spilled.first }
                guard let event = first else {
                    spillWake.wait(timeoutMicros: nil)
                    continue
                }
                if case .stored = store([event]) {
                    let left = counters.withLock { c -> Int in c.spilled.removeFirst(); return c.spilled.count }
                    if left == 0 { log.notice("outbox.recovered", [("hint", "storage has space again; every held event is stored")]) }
                    continue
                }
                spillWake.wait(timeoutMicros: 2_000_000)
            }
        }
    }

    /// `agentctl inject press`: a synthetic press of a configured device through the tracker,
    /// the outbox and signed delivery, marked test so the cloud does not ring phones for it.
    func inject(deviceID: String) -> JSONValue {
        guard let device = config.devices.first(where: { $0.id == deviceID }) else {
            let known = config.devices.map(\.id).joined(separator: ", ")
            return .object([("ok", .bool(false)), ("error", .string("no device \"\(deviceID)\" in the config; configured: \(known.isEmpty ? "none" : known)"))])
        }
        let time = ReceiveTime(monoMicros: Clocks.monotonicMicros(), wallMicros: Clocks.wallMicros(),
                               clockSynced: Clocks.isWallClockSynchronized(config.clock))
        let events: [AgentEvent]
        if device.radio == "ble" {
            events = blePipeline.withLock { $0.inject(device: device, at: time) }
        } else if device.radio == "ook" {
            events = ookPipeline.withLock { $0.inject(device: device, at: time) }
        } else {
            events = pipeline.withLock { $0.inject(device: device, at: time) }
        }
        guard !events.isEmpty else {
            return .object([("ok", .bool(false)), ("error", .string("the press was counted but not forwarded: it fell within the cooldown (\(config.button.cooldownMicros / 1000) ms) of the last press of \(deviceID); try again in a few seconds"))])
        }
        var ids: [JSONValue] = []
        for event in events { if let entry = accept(event) { ids.append(.string(entry.id)) } }
        guard !ids.isEmpty else {
            return .object([("ok", .bool(false)), ("error", .string("the outbox refused the event: \(counters.snapshot.outboxError ?? "unknown error")"))])
        }
        return .object([("ok", .bool(true)), ("event_ids", .array(ids))])
    }

    func queueJSON(_ request: JSONValue) -> JSONValue {
        do {
            switch request["action"]?.stringValue ?? "list" {
            case "list":
                let now = Clocks.wallMicros() / 1000
                let limit = Int(request["limit"]?.intValue ?? 100)
                let dead = request["dead"]?.boolValue == true
                let entries = try (dead ? outbox.deadLetters(limit: limit) : outbox.pending(limit: limit)).map { e -> JSONValue in
                    .object([("id", .string(e.id)), ("sequence", .number(Double(e.sequence))), ("type", .string(e.type)),
                             ("age_s", .number(Double(max(0, now - e.createdAtMs) / 1000))), ("attempts", .number(Double(e.attempts))),
                             ("dead", .bool(e.dead)), ("last_error", e.lastError.map(JSONValue.string) ?? .null)])
                }
                let stats = try outbox.stats()
                return .object([("ok", .bool(true)), ("depth", .number(Double(stats.depth))), ("dead", .number(Double(stats.dead))),
                                ("events", .array(entries))])
            case "retry":
                let n = try outbox.retryDead()
                log.notice("queue.retry", [("events", String(n))])
                deliverer?.notify()
                return .object([("ok", .bool(true)), ("requeued", .number(Double(n)))])
            case "purge-dead":
                let n = try outbox.purgeDead()
                log.warning("queue.purged_dead_letters", [("events", String(n))])
                return .object([("ok", .bool(true)), ("purged", .number(Double(n)))])
            case let other:
                return .object([("ok", .bool(false)), ("error", .string("unknown queue action \"\(other)\"; use list, retry or purge-dead"))])
            }
        } catch {
            return .object([("ok", .bool(false)), ("error", .string(error.description))])
        }
    }

    /// Stops radios first (no new events), then lets the uplink finish its request, then closes
    /// the database.
    public func stop(uplinkGraceMicros: Int64 = 5_000_000) {
        log.notice("agent.stopping", [])
        radio?.stop()
        ookRadio?.stop()
        bleRadio?.stop()
        metrics?.stop()
        spillStopping.withLock { $0 = true }
        spillWake.signal()
        let unsaved = counters.snapshot.spilled.count
        if unsaved > 0 { log.error("agent.stopping_with_unsaved_events", [("count", String(unsaved)), ("hint", "storage was full; these events are lost")]) }
        feed.close()
        rawFeed.close()
        deliverer?.stop(graceMicros: uplinkGraceMicros)
        mqttSink?.stop()
        control?.stop()
        outbox.close()
        log.notice("agent.stopped", [])
    }

    // MARK: - Liveness and service manager

    /// The watchdog ping is earned, not timed: the pipeline lock and the outbox must answer and the
    /// uplink must not be wedged in one request for longer than its own timeout allows.
    public func isAlive() -> Bool {
        _ = pipeline.withLock { $0.counters.lines }
        _ = ookPipeline.withLock { $0.decoder.counters.pulses }
        guard outbox.ping() else { return false }
        if let deliverer, let uplink = config.uplink, let since = deliverer.busySinceMicros {
            let limit = Int64(uplink.connectTimeoutMs + uplink.requestTimeoutMs) * 1000 + 30_000_000
            if Clocks.monotonicMicros() - since > limit { return false }
        }
        return true
    }

    /// One line for systemd's STATUS= and the log.
    public func summary() -> String {
        let s = statusJSON()
        func n(_ v: JSONValue?) -> String { v?.intValue.map(String.init) ?? "-" }
        var parts: [String] = []
        if case let .array(radios)? = s["radios"] {
            for r in radios { parts.append("\(r["name"]?.stringValue ?? "radio") \(r["state"]?.stringValue ?? "?")") }
        }
        parts.append("presses \(n(s["presses"]?["forwarded"]))")
        parts.append("outbox \(n(s["outbox"]?["depth"]))")
        if s["uplink"] != .null { parts.append("delivered \(n(s["uplink"]?["delivered"]))") }
        parts.append(s["health"]?.stringValue ?? "?")
        return parts.joined(separator: ", ")
    }

    /// Runs until SIGTERM/SIGINT, keeping systemd informed (READY, STATUS, WATCHDOG, STOPPING).
    public func runUntilStopped(notifier: SystemdNotifier?, configPath: String) {
        notifier?.notify("READY=1\nSTATUS=\(summary())")
        let watchdog = SystemdNotifier.watchdogMicros()
        // Ping at half the interval; without a watchdog, refresh STATUS now and then.
        let tick = watchdog.map { $0 / 2 } ?? 30_000_000
        var lastStatus = ""
        while true {
            if let sig = StopSignals.wait(timeoutMicros: notifier == nil ? nil : tick) {
                if sig == SIGHUP {
                    notifier?.notify("RELOADING=1")
                    reload(from: configPath)
                    notifier?.notify("READY=1\nSTATUS=\(summary())")
                    continue
                }
                break
            }
            guard let notifier else { continue }
            let status = summary()
            var message = status == lastStatus ? "" : "STATUS=\(status)"
            lastStatus = status
            if watchdog != nil {
                if isAlive() {
                    message += (message.isEmpty ? "" : "\n") + "WATCHDOG=1"
                } else {
                    log.error("agent.watchdog_withheld", [("hint", "the pipeline is stuck; systemd will restart the agent")])
                }
            }
            if !message.isEmpty { notifier.notify(message) }
        }
        notifier?.notify("STOPPING=1")
        stop()
    }

    func actionStatusJSON(_ problems: inout [String]) -> [JSONValue] {
        guard let runner = actions.snapshot else { return [] }
        return runner.status.snapshot.map { a in
            if let e = a.lastError { problems.append("action \(a.name): \(e)") }
            return .object([("name", .string(a.name)), ("runs", .number(Double(a.runs))), ("failures", .number(Double(a.failures))),
                            ("timeouts", .number(Double(a.timeouts))), ("skipped_busy", .number(Double(a.skippedBusy))),
                            ("running", .number(Double(a.running))), ("last_error", a.lastError.map(JSONValue.string) ?? .null)])
        }
    }

    // MARK: - Metrics

    func metricsText() -> String {
        var m = PrometheusText()
        let p = pipeline.snapshot
        let c = counters.snapshot
        if let r = radio?.status.snapshot {
            m.add("doorbell_radio_lines_total", "counter", "Lines read from the radio.", Double(r.lines), labels: [("radio", r.name)])
            m.add("doorbell_radio_frames_total", "counter", "Frames decoded.", Double(p.counters.frames), labels: [("radio", r.name)])
            m.add("doorbell_radio_malformed_total", "counter", "Lines that could not be decoded.", Double(p.counters.malformed), labels: [("radio", r.name)])
            m.add("doorbell_radio_restarts_total", "counter", "Radio process restarts.", Double(r.restarts), labels: [("radio", r.name)])
            m.add("doorbell_radio_up", "gauge", "1 when the radio is running or finished its replay.",
                  r.state == .running || r.state == .finished ? 1 : 0, labels: [("radio", r.name)])
        }
        let o = ookPipeline.snapshot
        if let r = ookRadio?.currentStatus {
            m.add("doorbell_radio_lines_total", "counter", "Lines read from the radio.", Double(r.lines), labels: [("radio", "ook")])
            m.add("doorbell_radio_frames_total", "counter", "Frames decoded.", Double(o.rf.counters.frames), labels: [("radio", "ook")])
            m.add("doorbell_radio_restarts_total", "counter", "Radio process restarts.", Double(r.restarts), labels: [("radio", "ook")])
            m.add("doorbell_radio_up", "gauge", "1 when the radio is running or finished its replay.",
                  r.state == .running || r.state == .finished ? 1 : 0, labels: [("radio", "ook")])
            m.add("doorbell_ook_pulses_total", "counter", "Pulses the OOK decoder saw.", Double(o.decoder.counters.pulses))
            m.add("doorbell_ook_glitches_total", "counter", "Receiver spikes folded by the glitch filter.", Double(o.edges.counters.glitches))
            m.add("doorbell_ook_words_total", "counter", "Fixed-code words decoded.", Double(o.decoder.counters.words))
        }
        if bleRadio != nil {
            for row in blePipeline.snapshot.counters.decoderRows {
                m.add("doorbell_ble_decoder_adverts_total", "counter", "BLE adverts each decoder claimed: seen (decoded), corrupt or implausible.",
                      Double(row.count), labels: [("radio", "ble"), ("decoder", row.decoder), ("verdict", row.verdict)])
            }
        }
        m.add("doorbell_observations_total", "counter", "Frames from configured devices.",
              Double(p.counters.frames - p.counters.unmatchedFrames + o.rf.counters.frames - o.rf.counters.unmatchedFrames))
        m.add("doorbell_unmatched_frames_total", "counter", "Frames from transmitters not in the config.", Double(p.counters.unmatchedFrames + o.rf.counters.unmatchedFrames))
        for type in EventType.allCases {
            m.add("doorbell_events_total", "counter", "Events created, by type.", Double(c.eventsByType[type.rawValue] ?? 0), labels: [("type", type.rawValue)])
        }
        m.add("doorbell_presses_suppressed_total", "counter", "Presses within the cooldown, counted but not forwarded.",
              Double(p.tracker.counters.suppressed + o.rf.tracker.counters.suppressed + blePipeline.snapshot.tracker.counters.suppressed))
        let stats = try? outbox.stats()
        if let s = stats {
            m.add("doorbell_outbox_depth", "gauge", "Events waiting for delivery.", Double(s.depth))
            let age = s.oldestCreatedAtMs.map { max(0, Double(Clocks.wallMicros() / 1000 - $0) / 1000) } ?? 0
            m.add("doorbell_outbox_oldest_age_seconds", "gauge", "Age of the oldest undelivered event.", age)
        }
        if let u = deliverer?.status.snapshot {
            m.add("doorbell_deliveries_total", "counter", "Events acknowledged by the receiver.", Double(u.delivered))
            for (reason, n) in u.failuresByReason.sorted(by: { $0.key < $1.key }) {
                m.add("doorbell_delivery_failures_total", "counter", "Failed delivery attempts, by reason.", Double(n), labels: [("reason", reason)])
            }
            m.histogram("doorbell_press_to_delivered_seconds", "From event creation to the receiver's 2xx.", u.deliveredLatency)
        }
        if let q = mqttSink?.status.snapshot {
            m.add("doorbell_mqtt_connected", "gauge", "1 while connected to the MQTT broker.", q.connected ? 1 : 0)
            m.add("doorbell_mqtt_acknowledged_total", "counter", "Events the MQTT broker acknowledged (PUBACK).", Double(q.acknowledged))
            if let s = stats { m.add("doorbell_mqtt_pending", "gauge", "Events waiting for the MQTT broker.", Double(s.mqttPending)) }
            for (reason, n) in q.ignored.sorted(by: { $0.key < $1.key }) {
                m.add("doorbell_mqtt_ignored_messages_total", "counter", "Messages on subscribed topics that were ignored, by reason.", Double(n), labels: [("reason", reason)])
            }
        }
        if let rss = ProcessMemory.residentBytes() {
            m.add("doorbell_resident_memory_bytes", "gauge", "Resident set size of the agent.", Double(rss))
        }
        m.add("doorbell_clock_synchronized", "gauge", "1 when the wall clock is NTP-synchronized.", Clocks.isWallClockSynchronized(config.clock) ? 1 : 0)
        return m.text
    }

    // MARK: - Control

    static let controlCommands = ["status", "pubkey", "version", "events", "inject", "queue", "scan", "capture"]

    func handleControl(_ request: JSONValue) -> ControlReply {
        switch request["command"]?.stringValue {
        case "status": return .single(.object([("ok", .bool(true)), ("status", statusJSON())]))
        case "pubkey":
            return .single(.object([("ok", .bool(true)), ("public_key", .string(DeviceKeyStore.publicKeyBase64(deviceKey.publicKey))),
                                    ("key_id", .string(DeviceKey.keyID(deviceKey.publicKey))), ("algorithm", .string("ed25519"))]))
        case "version": return .single(.object([("ok", .bool(true)), ("version", .string(AgentVersion.current))]))
        case "inject": return .single(inject(deviceID: request["device"]?.stringValue ?? ""))
        case "queue": return .single(queueJSON(request))
        case "scan":
            let ble = blePipeline.snapshot.heard.values.map { h -> (String, HeardTransmitter) in
                ("ble", HeardTransmitter(identity: h.identity, model: h.kind, frames: h.adverts,
                                         lastSeenWallMicros: h.lastSeenWallMicros, rssi: h.rssi.map(Double.init), deviceID: h.deviceID, match: h.snippet))
            }
            var all: [(String, HeardTransmitter)] = pipeline.snapshot.heard.values.map { ("rtl433", $0) }
            all += ookPipeline.snapshot.rf.heard.values.map { ("ook", $0) }
            all += ble
            let heard = all.sorted { $0.1.lastSeenWallMicros > $1.1.lastSeenWallMicros }.map { radio, h -> JSONValue in
                .object([("radio", .string(radio)), ("identity", .string(h.identity)), ("model", .string(h.model)),
                         ("frames", .number(Double(h.frames))), ("rssi_db", h.rssi.map(JSONValue.number) ?? .null),
                         ("last_seen", .string(RFC3339.format(micros: h.lastSeenWallMicros))),
                         ("device", h.deviceID.map(JSONValue.string) ?? .null), ("match", .string(h.match))])
            }
            return .single(.object([("ok", .bool(true)), ("transmitters", .array(heard))]))
        case "capture":
            let raw = rawFeed
            return .stream { write in
                guard write(.object([("ok", .bool(true)), ("capturing", .bool(true))])) else { return }
                raw.follow(includeRecent: false, write)
            }
        case "events":
            if request["follow"]?.boolValue == true {
                let feed = self.feed
                return .stream { write in
                    guard write(.object([("ok", .bool(true)), ("following", .bool(true))])) else { return }
                    feed.follow(write)
                }
            }
            return .single(.object([("ok", .bool(true)), ("events", .array(feed.recent))]))
        case let other:
            return .single(.object([("ok", .bool(false)), ("error", .string(
                "unknown command \(other.map { "\"\($0)\"" } ?? "(none)"); known: \(Self.controlCommands.joined(separator: ", "))"))]))
        }
    }

    public func statusJSON() -> JSONValue {
        let now = Clocks.wallMicros()
        var problems: [String] = []
        let p = pipeline.snapshot
        let c = counters.snapshot

        var radios: [JSONValue] = []
        if let radio {
            let r = radio.status.snapshot
            if r.state == .missing || r.state == .restarting { problems.append("radio rtl433 \(r.state.rawValue): \(r.lastError ?? "")") }
            radios.append(.object([
                ("name", .string(r.name)), ("state", .string(r.state.rawValue)), ("lines", .number(Double(r.lines))),
                ("frames", .number(Double(p.counters.frames))), ("malformed", .number(Double(p.counters.malformed))),
                ("unmatched_frames", .number(Double(p.counters.unmatchedFrames))),
                ("restarts", .number(Double(r.restarts))), ("last_error", r.lastError.map(JSONValue.string) ?? .null),
            ]))
        }
        let o = ookPipeline.snapshot
        if let ook = ookRadio, let settings = config.ook {
            let r = ook.currentStatus
            if r.state == .missing || r.state == .restarting { problems.append("radio ook \(r.state.rawValue): \(r.lastError ?? "")") }
            var members: [(String, JSONValue)] = [
                ("name", .string("ook")), ("source", .string(settings.source.rawValue)), ("state", .string(r.state.rawValue)),
                ("lines", .number(Double(r.lines))), ("frames", .number(Double(o.rf.counters.frames))),
                ("unmatched_frames", .number(Double(o.rf.counters.unmatchedFrames))),
                ("pulses", .number(Double(o.decoder.counters.pulses))), ("glitches", .number(Double(o.edges.counters.glitches))),
                ("words", .number(Double(o.decoder.counters.words))), ("rejected", .number(Double(o.decoder.counters.rejected))),
                ("restarts", .number(Double(r.restarts))), ("last_error", r.lastError.map(JSONValue.string) ?? .null),
            ]
            if let g = settings.gpio { members.append(("gpio", .string(g.description))) }
            radios.append(.object(members))
        }

        let bp = blePipeline.snapshot
        if let ble = bleRadio {
            let r = ble.status.snapshot
            let degraded = ble.degraded.snapshot
            if r.state == .missing || r.state == .restarting || degraded {
                problems.append("radio ble \(degraded ? "degraded" : r.state.rawValue): \(r.lastError ?? "")")
            }
            let c = bp.counters
            var members: [(String, JSONValue)] = [
                ("name", .string("ble")), ("state", .string(degraded ? "degraded" : r.state.rawValue)), ("lines", .number(Double(r.lines))),
                ("reports", .number(Double(c.reports))), ("ibeacons", .number(Double(c.ibeacons))), ("bthome", .number(Double(c.bthome))),
                ("decrypt_failures", .number(Double(c.decryptFailures))), ("replays_refused", .number(Double(c.replaysRefused))),
                ("downgrades_refused", .number(Double(c.downgradesRefused))), ("inside", .array(bp.presence.inside.map(JSONValue.string))),
                ("decoders", c.decodersJSON), ("last_refused", bp.lastRefused.map(JSONValue.string) ?? .null),
                ("restarts", .number(Double(r.restarts))), ("last_error", r.lastError.map(JSONValue.string) ?? .null),
            ]
            let mono = Clocks.monotonicMicros()
            let hold = bp.presence.exitsOnHold(at: mono, radioHealthy: !degraded)
            members.append(("presence", .object([("clock", .string(hold == nil ? "running" : "paused")),
                                                 ("silent_s", .number(Double(bp.presence.silenceMicros(at: mono) / 1_000_000))),
                                                 ("exits_on_hold", hold.map(JSONValue.string) ?? .null)])))
            if let hold, !bp.presence.inside.isEmpty, !degraded, r.state == .running { problems.append("presence: \(hold)") }
            if let info = ble.controller.snapshot {
                members.append(("controller", .object([("hci_version", .number(Double(info.hciVersion))), ("manufacturer", .number(Double(info.manufacturer))),
                                                       ("extended_scan", .bool(info.extendedScan))])))
            }
            radios.append(.object(members))
        }

        var outboxJSON: [(String, JSONValue)] = []
        var stats: OutboxStats?
        do {
            let s = try outbox.stats()
            stats = s
            if s.dead > 0 { problems.append("outbox: \(s.dead) event(s) refused by the receiver are parked; see agentctl queue --dead") }
            outboxJSON = [("depth", .number(Double(s.depth))), ("dead", .number(Double(s.dead))), ("last_sequence", .number(Double(s.lastSequence))),
                          ("evicted", .number(Double(s.evicted))), ("bytes", .number(Double(s.bytes))),
                          ("oldest_age_s", s.oldestCreatedAtMs.map { .number(Double(max(0, now / 1000 - $0) / 1000)) } ?? .null)]
        } catch {
            problems.append("outbox: \(error.description)")
            outboxJSON = [("error", .string(error.description))]
        }
        if let e = c.outboxError { problems.append("outbox: \(e)"); outboxJSON.append(("last_error", .string(e))) }
        if c.storageFull || !c.spilled.isEmpty {
            problems.append("storage: full — \(c.spilled.count) event(s) held in memory until space returns; free space in \(config.paths.stateDir)")
        }
        outboxJSON.append(("storage", .string(c.storageFull || !c.spilled.isEmpty ? "full" : "ok")))
        outboxJSON.append(("held_in_memory", .number(Double(c.spilled.count))))
        if let aside = c.outboxMovedAside {
            problems.append("outbox: the database was damaged at start and moved to \(aside); a new one is in use (send the old one to support)")
            outboxJSON.append(("moved_aside", .string(aside)))
        }

        var uplinkJSON: JSONValue = .null
        if let deliverer {
            let u = deliverer.status.snapshot
            func time(_ t: Int64?) -> JSONValue { t.map { .string(RFC3339.format(micros: $0)) } ?? .null }
            if u.endpointGone {
                problems.append("uplink: the receiver answered 410 Gone for \(u.url): delivery is stopped, events are kept; fix uplink.url and reload")
            } else if let err = u.lastErrorWallMicros, err > (u.lastSuccessWallMicros ?? 0) {
                problems.append("uplink: \(u.lastError ?? "")")
            }
            uplinkJSON = .object([
                ("url", .string(u.url)), ("delivered", .number(Double(u.delivered))), ("failed_attempts", .number(Double(u.failedAttempts))),
                ("last_success", time(u.lastSuccessWallMicros)), ("last_error", u.lastError.map(JSONValue.string) ?? .null),
                ("last_error_at", time(u.lastErrorWallMicros)), ("endpoint_gone", .bool(u.endpointGone)),
            ])
        }

        var mqttJSON: JSONValue = .null
        if let sink = mqttSink {
            let q = sink.status.snapshot
            func time(_ t: Int64?) -> JSONValue { t.map { .string(RFC3339.format(micros: $0)) } ?? .null }
            if !q.connected, let e = q.lastError { problems.append("mqtt: \(e)") }
            let pending = stats?.mqttPending
            mqttJSON = .object([
                ("broker", .string(q.broker)), ("connected", .bool(q.connected)), ("pending", pending.map { .number(Double($0)) } ?? .null),
                ("acknowledged", .number(Double(q.acknowledged))), ("last_ack", time(q.lastAckWallMicros)), ("connects", .number(Double(q.connects))),
                ("last_error", q.lastError.map(JSONValue.string) ?? .null), ("last_error_at", time(q.lastErrorWallMicros)),
                ("discovery_messages", .number(Double(q.discoveryMessages))), ("discovery_published", time(q.discoveryPublishedWallMicros)),
                ("ignored", .object(q.ignored.sorted { $0.key < $1.key }.map { ($0.key, .number(Double($0.value))) })),
            ])
        }

        let unknown = (Array(p.unknown.values) + Array(o.rf.unknown.values)).sorted { $0.frames > $1.frames }.prefix(10).map { u -> JSONValue in
            .object([("identity", .string(u.identity)), ("model", .string(u.model)), ("frames", .number(Double(u.frames))),
                     ("last_seen", .string(RFC3339.format(micros: u.lastSeenWallMicros)))])
        }
        let actionsJSON = actionStatusJSON(&problems)
        if let problem = configProblem.snapshot { problems.append("config: \(problem)") }
        if threadStartFailures.snapshot > 0 {
            problems.append("threads: \(threadStartFailures.snapshot) could not be started (last: \(lastThreadStartError.snapshot ?? "?")); the system is out of memory or at its task limit")
        }
        let events = EventType.allCases.map { ($0.rawValue, JSONValue.number(Double(c.eventsByType[$0.rawValue] ?? 0))) }
        let clockState = Clocks.wallClockState(config.clock)
        let synced = clockState.synchronized
        let holding = deliverer?.status.snapshot.heldForClock ?? false
        if holding { problems.append("clock: not synchronized yet (\(clockState.reason)); delivery is held so the cloud gets no timestamps from 1970 (check NTP: timedatectl)") }
        return .object([
            ("version", .string(AgentVersion.current)),
            ("gateway_id", .string(config.gatewayID)),
            ("pid", .number(Double(getpid()))),
            ("uptime_s", .number(Double((Clocks.monotonicMicros() - startedMono) / 1_000_000))),
            ("health", .string(problems.isEmpty ? "ok" : "degraded")),
            ("problems", .array(problems.map(JSONValue.string))),
            ("clock", .object([("synchronized", .bool(synced)), ("reason", .string(clockState.reason)), ("require_sync", .bool(config.clock.requireSync)),
                               ("delivery_held", .bool(holding)), ("boot_id", .string(Clocks.bootID)),
                               ("now", .string(RFC3339.format(micros: now)))])),
            ("radios", .array(radios)),
            ("events", .object(events)),
            ("presses", .object([("forwarded", .number(Double(p.tracker.counters.forwarded + o.rf.tracker.counters.forwarded + bp.tracker.counters.forwarded))),
                                 ("suppressed", .number(Double(p.tracker.counters.suppressed + o.rf.tracker.counters.suppressed + bp.tracker.counters.suppressed)))])),
            ("unknown_transmitters", .array(Array(unknown))),
            ("outbox", .object(outboxJSON)),
            ("uplink", uplinkJSON),
            ("mqtt", mqttJSON),
            ("config_reload", reloadStatus.snapshot),
            ("actions", .array(actionsJSON)),
        ])
    }
}

/// Blocks the stop signals in every thread (call first thing in main) and waits for one.
public enum StopSignals {
    public static func block() {
        var set = sigset_t()
        sigemptyset(&set)
        for s in [SIGTERM, SIGINT, SIGHUP] { sigaddset(&set, s) }
        pthread_sigmask(SIG_BLOCK, &set, nil)
        signal(SIGPIPE, SIG_IGN)
    }

    /// Returns the signal that arrived, or nil when `timeoutMicros` passed first.
    public static func wait(timeoutMicros: Int64?) -> Int32? {
        var set = sigset_t()
        sigemptyset(&set)
        for s in [SIGTERM, SIGINT, SIGHUP] { sigaddset(&set, s) }
        guard let timeoutMicros else {
            var sig: Int32 = 0
            while sigwait(&set, &sig) != 0 {}
            return sig
        }
        var ts = timespec(tv_sec: Int(timeoutMicros / 1_000_000), tv_nsec: Int(timeoutMicros % 1_000_000) * 1_000)
        while true {
            let sig = sigtimedwait(&set, nil, &ts)
            if sig > 0 { return sig }
            if errno == EINTR { continue }
            return nil
        }
    }
}
