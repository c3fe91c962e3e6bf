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
    let current: Locked<AgentConfig>
    public var config: AgentConfig { current.snapshot }
    let log: Logger
    let outbox: Outbox
    let deviceKey: Ed25519SigningKey
    let pipeline: Locked<RFPipeline>
    /// The OOK receiver's own pipeline: its tracker runs on the edges' clock.
    let ookPipeline: Locked<OOKPipeline>
    let counters = Locked(AgentCounters())
    let startedMono = Clocks.monotonicMicros()
    let parts = Locked<(radio: RTL433Radio?, deliverer: Deliverer?)>((nil, nil))
    var radio: RTL433Radio? { parts.snapshot.radio }
    let ookParts = Locked<OOKRadio?>(nil)
    var ookRadio: OOKRadio? { ookParts.snapshot }
    let blePipeline: Locked<BLEPipeline>
    let bleParts = Locked<BLERadio?>(nil)
    var bleRadio: BLERadio? { bleParts.snapshot }
    var deliverer: Deliverer? { parts.snapshot.deliverer }
    let mqttParts = Locked<MQTTSink?>(nil)
    var mqttSink: MQTTSink? { mqttParts.snapshot }
    let reloadStatus = Locked<JSONValue>(.null)
    /// Set when the agent runs on the last good copy of its config (the file was invalid).
    public let configProblem = Locked<String?>(nil)
    /// The phone link could not start (its bonds file unreadable) or set a damaged one aside.
    let phoneProblem = Locked<String?>(nil)
    var metrics: MetricsWriter?
    var control: ControlServer?
    var rng = Locked(SystemRandomNumberGenerator())
    public let feed = EventFeed()
    let actions = Locked<ActionRunner?>(nil)
    let spillWake = WakeSignal()
    let spillStopping = Locked(false)
    /// Raw radio lines for `agentctl capture`; only filled while someone captures.
    let rawFeed = EventFeed()
    /// The long-lived loops' heartbeats, which the watchdog ping checks.
    public let loops = LoopMonitor()

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

    /// The actions, with the way an `answer_phones` action reaches the phone link of the moment
    /// (a reload may replace the BLE radio).
    func makeActionRunner(_ actions: [ActionConfig]) -> ActionRunner {
        ActionRunner(actions: actions, log: log) { [weak self] in
            guard let phones = self?.bleRadio?.phones else { return false }
            phones.send(.answered)
            return true
        }
    }

    /// Starts every part. The control socket first, so an installer can ask what is wrong.
    public func start() throws(AgentStartError) {
        let control = ControlServer(path: config.paths.controlSocket, log: log,
                                    heartbeat: loops.heartbeat("control", periodMicros: ControlServer.wakeMicros)) { [unowned self] request in
            handleControl(request)
        }
        do { try control.start() } catch { throw AgentStartError(description: error.description, exitCode: 73) }
        self.control = control

        let config = self.config
        // A loop that cannot start stops the agent (EX_OSERR) instead of running without it:
        // systemd starts it again, and the message says why.
        func started(_ start: () throws(ThreadStartError) -> Void) throws(AgentStartError) {
            do { try start() } catch { throw AgentStartError(description: error.description, exitCode: 71) }
        }
        // The outbox's fsyncs, before anything appends: radios commit and go on reading.
        try started { () throws(ThreadStartError) in
            try outbox.startSyncer(loops.heartbeat("outbox-sync", periodMicros: Self.syncerHeartbeatMicros))
        }
        try started(runSpillRetries)
        if !config.actions.isEmpty { actions.withLock { $0 = makeActionRunner(config.actions) } }
        let d = try makeDeliverer(config)
        if let d { try started(d.start) }
        if d == nil { log.warning("uplink.not_configured", [("hint", "events stay in the outbox until [uplink] is set")]) }
        let r = makeRadio(config)
        parts.withLock { $0 = (r, d) }
        if let r { try started(r.start) }
        let q = makeMQTTSink(config)
        mqttParts.withLock { $0 = q }
        if let q { try started(q.start) }
        let o = makeOOKRadio(config)
        ookParts.withLock { $0 = o }
        if let o { try started(o.start) }
        let b = makeBLERadio(config)
        bleParts.withLock { $0 = b }
        if let b { try started(b.start) }
        if let m = makeMetricsWriter(config) {
            try started(m.start)
            metrics = m
        }
        log.notice("agent.started", [("gateway", config.gatewayID), ("version", AgentVersion.current),
                                     ("devices", String(config.devices.count)), ("control", config.paths.controlSocket)])
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
        // Every fsync still owed is made (what it covers is then stored), then the file closes.
        outbox.stopSyncer()
        outbox.close()
        log.notice("agent.stopped", [])
    }

    /// The syncer beats at least this often while idle; one fsync stuck longer than two of
    /// these and the grace is a stuck loop (a storage device that no longer answers).
    static let syncerHeartbeatMicros: Int64 = 30_000_000

    // MARK: - Liveness and service manager

    /// The watchdog ping is earned, not timed: the pipeline lock and the outbox must answer, every
    /// long-lived loop must have beaten within its own period (LoopHeartbeats), and the uplink
    /// must not be wedged in one request for longer than its own timeout allows. Empty: alive.
    public func deadParts() -> [String] {
        _ = pipeline.withLock { $0.counters.lines }
        _ = ookPipeline.withLock { $0.decoder.counters.pulses }
        var dead = loops.problems()
        if !outbox.ping() { dead.append("outbox: the database does not answer") }
        if let deliverer, let uplink = config.uplink, let since = deliverer.busySinceMicros {
            let limit = Int64(uplink.connectTimeoutMs + uplink.requestTimeoutMs) * 1000 + 30_000_000
            if Clocks.monotonicMicros() - since > limit { dead.append("uplink: one request has taken \((Clocks.monotonicMicros() - since) / 1_000_000) s") }
        }
        return dead
    }

    public func isAlive() -> Bool { deadParts().isEmpty }

    /// One line for systemd's STATUS= and the log.
    public func summary() -> String { statusReport().summaryLine }

    /// Runs until SIGTERM/SIGINT, keeping systemd informed (READY, STATUS, WATCHDOG, STOPPING).
    public func runUntilStopped(notifier: SystemdNotifier?, configPath: String) {
        let watchdog = SystemdNotifier.watchdogMicros()
        // Ping at half the interval; without a watchdog, refresh STATUS now and then. The
        // schedule starts before READY: systemd's watchdog clock does.
        let tick = watchdog.map { $0 / 2 } ?? 30_000_000
        var schedule = WatchdogSchedule(tickMicros: tick, now: Clocks.monotonicMicros())
        var pages = PageReleaseSchedule(startedAtMicros: Clocks.monotonicMicros())
        notifier?.notify("READY=1\nSTATUS=\(summary())")
        var lastStatus = ""
        while true {
            let now = Clocks.monotonicMicros()
            var timeout = notifier == nil ? nil : schedule.waitMicros(at: now)
            if config.memory.releaseCleanPages {
                let untilLook = max(0, pages.nextLookMicros(nowMicros: now) - now)
                timeout = min(timeout ?? untilLook, untilLook)
            }
            if let sig = StopSignals.wait(timeoutMicros: timeout) {
                if sig == SIGHUP {
                    notifier?.notify("RELOADING=1")
                    reload(from: configPath)
                    notifier?.notify("READY=1\nSTATUS=\(summary())")
                    continue
                }
                break
            }
            if config.memory.releaseCleanPages { releaseCleanPagesIfDue(&pages) }
            guard let notifier else { continue }
            // A wake-up for the page release alone is not the watchdog's tick.
            guard Clocks.monotonicMicros() >= schedule.nextWakeMicros else { continue }
            let woke = Clocks.monotonicMicros()
            let frozen = schedule.frozenMicros(wokeAt: woke)
            if frozen > 0 {
                loops.forgive(frozenMicros: frozen)
                log.warning("agent.resumed", [("frozen_s", String(frozen / 1_000_000)),
                                              ("why", "the process was not running (stopped, paused or starved of CPU); its loops are not blamed for it")])
            }
            let status = summary()
            var message = status == lastStatus ? "" : "STATUS=\(status)"
            lastStatus = status
            let dead = watchdog == nil ? [] : deadParts()
            switch schedule.decide(problems: dead, at: Clocks.monotonicMicros()) {
            case .ping:
                if watchdog != nil { message += (message.isEmpty ? "" : "\n") + "WATCHDOG=1" }
            case .withhold(let report):
                if report {
                    log.error("agent.watchdog_withheld", [("dead", dead.joined(separator: "; ")), ("hint", "systemd will restart the agent")])
                }
            }
            if !message.isEmpty { notifier.notify(message) }
        }
        notifier?.notify("STOPPING=1")
        stop()
    }

    /// Gives back the clean file pages when the schedule says so (`[memory] release_clean_pages`).
    func releaseCleanPagesIfDue(_ pages: inout PageReleaseSchedule) {
        let work = counters.withLock { $0.eventsByType.values.reduce(0, +) } + (deliverer?.status.snapshot.delivered ?? 0)
        guard pages.look(nowMicros: Clocks.monotonicMicros(), work: work) else { return }
        pages.released(nowMicros: Clocks.monotonicMicros(), work: work)
        guard let outcome = CleanPageRelease.run() else {
            log.warning("memory.not_released", [("why", "/proc/self/smaps is unreadable"), ("hint", "is /proc mounted in the agent's namespace?")])
            return
        }
        log.info("memory.released", [("rss_before_kib", String(outcome.residentBeforeKiB)), ("rss_after_kib", String(outcome.residentAfterKiB)),
                                     ("unmapped_kib", String(outcome.unmappedKiB)), ("failed", String(outcome.failures))])
    }
}
