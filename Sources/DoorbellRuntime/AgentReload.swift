import DoorbellCore
import Glibc

// The parts a config makes (radios, uplink, MQTT sink) and SIGHUP: a new config is validated,
// applied part by part, and kept as last-good; a bad one is refused and the old one keeps running.

extension Agent {
    func makeBLERadio(_ config: AgentConfig) -> BLERadio? {
        guard let settings = config.ble else { return nil }
        var phones: PhoneLink?
        if settings.ancsLink {
            do {
                let store = try BondStore(stateDir: config.paths.stateDir, now: Clocks.wallMicros())
                phoneProblem.withLock { $0 = store.problem }
                if let problem = store.problem { log.error("phone.bonds_damaged", [("problem", problem)]) }
                phones = PhoneLink(bondStore: store, settings: settings, log: log) { [unowned self] type, data in
                    ingest(ble: .phoneEvent(type: type, data: data))
                }
            } catch {
                phoneProblem.withLock { $0 = "phones: \(error.description); the phone link is off until it is fixed" }
                log.error("phone.bonds_unreadable", [("error", error.description)])
            }
        }
        let radio = BLERadio(settings: settings, log: log, phones: phones,
                             heartbeat: loops.heartbeat("radio ble", periodMicros: RTL433Radio.wakeMicros)) { [unowned self] input in ingest(ble: input) }
        let raw = rawFeed
        radio.tap.withLock {
            $0 = { packet, received in
                guard raw.hasFollowers else { return }
                raw.publish(CaptureRecord.ble(h4: packet, received: received, wallMicros: Clocks.wallMicros()).json)
            }
        }
        return radio
    }

    static func makeOOKPipeline(_ config: AgentConfig) -> OOKPipeline {
        OOKPipeline(directory: DeviceDirectory(devices: config.devices), button: config.button,
                    decoder: config.ook?.decoder ?? OOKDecoder.Settings(), glitchMicros: Int64(config.ook?.glitchMicros ?? 80))
    }

    func makeOOKRadio(_ config: AgentConfig) -> OOKRadio? {
        guard let settings = config.ook else { return nil }
        return OOKRadio(settings: settings, log: log, pidFile: config.paths.stateDir + "/rtl433-pulses.pid",
                        heartbeat: loops.heartbeat("radio ook", periodMicros: RTL433Radio.wakeMicros)) { [unowned self] input in
            ingest(ook: input)
        }
    }

    func makeMQTTSink(_ config: AgentConfig) -> MQTTSink? {
        guard let settings = config.mqtt else { return nil }
        return MQTTSink(settings: settings, discovery: HomeAssistantDiscovery.messages(config: config, settings: settings, agentVersion: AgentVersion.current),
                        topics: MQTTTopics(prefix: settings.topicPrefix, gatewayID: config.gatewayID), outbox: outbox,
                        stateDir: config.paths.stateDir, log: log,
                        heartbeat: loops.heartbeat("mqtt", periodMicros: MQTTSink.heartbeatPeriodMicros)) { [unowned self] in diagnosticsJSON() }
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
        return Deliverer(settings: uplink, clock: config.clock, gatewayID: config.gatewayID, signer: signer, outbox: outbox, log: log,
                         heartbeat: loops.heartbeat("uplink", periodMicros: Deliverer.heartbeatPeriod(uplink))) {
            [unowned self] parked in reportDeadLetters(parked)
        }
    }

    func makeMetricsWriter(_ config: AgentConfig) -> MetricsWriter? {
        guard let settings = config.metrics else { return nil }
        return MetricsWriter(settings: settings, log: log,
                             heartbeat: loops.heartbeat("metrics", periodMicros: MetricsWriter.heartbeatPeriodMicros)) { [unowned self] in metricsText() }
    }

    func makeRadio(_ config: AgentConfig) -> RTL433Radio? {
        guard let settings = config.rtl433 else { return nil }
        return RTL433Radio(settings: settings, log: log, pidFile: config.paths.stateDir + "/rtl433.pid",
                           heartbeat: loops.heartbeat("radio rtl433", periodMicros: RTL433Radio.wakeMicros)) { [unowned self] line in ingest(line: line) }
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
            if let b { restarted(b.start) }
            bleParts.withLock { $0 = b }
        }
        if new.ook != old.ook {
            ookRadio?.stop()
            let o = makeOOKRadio(new)
            if let o { restarted(o.start) }
            ookParts.withLock { $0 = o }
        }
        if new.rtl433 != old.rtl433 {
            radio?.stop()
            let r = makeRadio(new)
            if let r { restarted(r.start) }
            parts.withLock { $0.radio = r }
        }
        if new.uplink != old.uplink || new.clock != old.clock {
            deliverer?.stop(graceMicros: 5_000_000)
            if let newDeliverer { restarted(newDeliverer.start) }
            parts.withLock { $0.deliverer = newDeliverer }
        }
        if Self.sinks(new) != Self.sinks(old) {
            do { try outbox.setSinks(Self.sinks(new)) } catch { log.error("outbox.sinks_not_changed", [("error", error.description)]) }
        }
        if new.mqtt != old.mqtt {
            mqttSink?.stop()
            let q = makeMQTTSink(new)
            if let q { restarted(q.start) }
            mqttParts.withLock { $0 = q }
        } else if let settings = new.mqtt {
            // Discovery again on every reload: new devices appear, removed ones are cleared.
            mqttSink?.updateDiscovery(HomeAssistantDiscovery.messages(config: new, settings: settings, agentVersion: AgentVersion.current))
        }
        if new.actions != old.actions {
            actions.withLock { $0 = new.actions.isEmpty ? nil : makeActionRunner(new.actions) }
        }
        if new.metrics != old.metrics {
            metrics?.stop()
            metrics = makeMetricsWriter(new)
            if let m = metrics { restarted(m.start) }
        }
        reloadStatus.withLock { $0 = .object([("ok", .bool(true)), ("at", .string(RFC3339.format(micros: Clocks.wallMicros())))]) }
        configProblem.withLock { $0 = nil }
        saveLastGoodConfig(loaded)
        log.notice("config.reloaded", [("file", path), ("devices", String(new.devices.count))])
    }

    /// A loop a reload could not start: its heartbeat says it ended, so the watchdog is withheld
    /// and systemd restarts the agent (which then starts it, or stops with the reason).
    func restarted(_ start: () throws(ThreadStartError) -> Void) {
        do { try start() } catch { log.error("agent.loop_not_started", [("error", error.description)]) }
    }

    /// Keeps the config that just loaded for a start on which the file is damaged.
    public func saveLastGoodConfig(_ bytes: [UInt8]) {
        do throws(SpawnError) { try LastGoodConfig.save(bytes, stateDir: config.paths.stateDir) } catch {
            log.warning("config.last_good_not_saved", [("error", error.description)])
        }
    }
}
