import DoorbellCore
import Glibc

// What `agentctl status` shows: one JSON object built from every part's status, with the
// problems an installer should act on.

extension Agent {
    public func statusJSON() -> JSONValue { statusReport().json }

    /// The agent's parts' snapshots as one report (see `AgentStatusReport`: the problems and the
    /// three renderings are the core's).
    func statusReport() -> AgentStatusReport {
        let now = Clocks.wallMicros()
        let p = pipeline.snapshot
        let c = counters.snapshot
        let o = ookPipeline.snapshot
        let bp = blePipeline.snapshot
        let clockState = Clocks.wallClockState(config.clock)
        let uplink = deliverer?.status.snapshot
        var report = AgentStatusReport(
            version: AgentVersion.current, gatewayID: config.gatewayID, pid: Int64(getpid()),
            uptimeSeconds: (Clocks.monotonicMicros() - startedMono) / 1_000_000,
            clock: .init(synchronized: clockState.synchronized, reason: clockState.reason, requireSync: config.clock.requireSync,
                         deliveryHeld: uplink?.heldForClock ?? false, bootID: Clocks.bootID, nowWallMicros: now),
            outbox: .init(stateDir: config.paths.stateDir))

        if let radio {
            let r = radio.status.snapshot
            var x = AgentStatusReport.Radio(name: r.name, state: r.state.rawValue)
            x.counters = counts([("lines", r.lines), ("frames", p.counters.frames), ("malformed", p.counters.malformed),
                                 ("unmatched_frames", p.counters.unmatchedFrames)])
            x.restarts = Int64(r.restarts)
            x.lastError = r.lastError
            report.radios.append(x)
        }
        if let ook = ookRadio, let settings = config.ook {
            let r = ook.currentStatus
            var x = AgentStatusReport.Radio(name: "ook", state: r.state.rawValue)
            x.counters = counts([("pulses", o.decoder.counters.pulses), ("glitches", o.edges.counters.glitches), ("words", o.decoder.counters.words),
                                 ("frames", o.rf.counters.frames), ("unmatched_frames", o.rf.counters.unmatchedFrames), ("lines", r.lines),
                                 ("rejected", o.decoder.counters.rejected)])
            x.restarts = Int64(r.restarts)
            x.lastError = r.lastError
            x.source = settings.source.rawValue
            x.gpio = settings.gpio?.description
            report.radios.append(x)
        }
        if let ble = bleRadio {
            let r = ble.status.snapshot
            let degraded = ble.degraded.snapshot
            let k = bp.counters
            var x = AgentStatusReport.Radio(name: "ble", state: degraded ? "degraded" : r.state.rawValue)
            x.counters = counts([("reports", k.reports), ("bthome", k.bthome), ("ibeacons", k.ibeacons), ("replays_refused", k.replaysRefused),
                                 ("decrypt_failures", k.decryptFailures), ("downgrades_refused", k.downgradesRefused), ("lines", r.lines)])
            x.restarts = Int64(r.restarts)
            x.lastError = r.lastError
            var b = AgentStatusReport.BLEDetails()
            b.inside = bp.presence.inside
            b.decoders = zip(BLEDecoderRegistry.names, k.decoders).map { name, d in
                .init(decoder: name, seen: Int64(d.seen), corrupt: Int64(d.corrupt), implausible: Int64(d.implausible))
            }
            b.observations = BLEObservationKind.allCases.map { .init($0.name, Int64(k.observations[$0.rawValue])) }
            b.lastRefused = bp.lastRefused
            let mono = Clocks.monotonicMicros()
            b.exitsOnHold = bp.presence.exitsOnHold(at: mono, radioHealthy: !degraded)
            b.presenceClockRunning = b.exitsOnHold == nil
            b.silentSeconds = bp.presence.silenceMicros(at: mono) / 1_000_000
            b.controller = ble.controller.snapshot
            x.ble = b
            report.radios.append(x)
        }

        report.eventsByType = EventType.allCases.map { .init($0.rawValue, Int64(c.eventsByType[$0.rawValue] ?? 0)) }
        report.pressesForwarded = Int64(p.tracker.counters.forwarded + o.rf.tracker.counters.forwarded + bp.tracker.counters.forwarded)
        report.pressesSuppressed = Int64(p.tracker.counters.suppressed + o.rf.tracker.counters.suppressed + bp.tracker.counters.suppressed)
        report.unknownTransmitters = (Array(p.unknown.values) + Array(o.rf.unknown.values)).sorted { $0.frames > $1.frames }.prefix(10).map {
            .init(identity: $0.identity, model: $0.model, frames: Int64($0.frames), lastSeenWallMicros: $0.lastSeenWallMicros)
        }

        do {
            let s = try outbox.stats()
            report.outbox.stats = .init(depth: Int64(s.depth), dead: Int64(s.dead), lastSequence: s.lastSequence, evicted: Int64(s.evicted),
                                        bytes: Int64(s.bytes), oldestAgeSeconds: s.oldestCreatedAtMs.map { max(0, now / 1000 - $0) / 1000 },
                                        mqttPending: Int64(s.mqttPending))
        } catch {
            report.outbox.readError = error.description
        }
        report.outbox.lastError = c.outboxError
        report.outbox.storageFull = c.storageFull
        report.outbox.heldInMemory = Int64(c.spilled.count)
        report.outbox.movedAside = c.outboxMovedAside

        if let u = uplink {
            var x = AgentStatusReport.Uplink(url: u.url)
            x.delivered = Int64(u.delivered)
            x.failedAttempts = Int64(u.failedAttempts)
            x.lastSuccessWallMicros = u.lastSuccessWallMicros
            x.lastError = u.lastError
            x.lastErrorWallMicros = u.lastErrorWallMicros
            x.endpointGone = u.endpointGone
            x.failuresByReason = u.failuresByReason.sorted { $0.key < $1.key }.map { .init($0.key, Int64($0.value)) }
            x.deliveredLatency = u.deliveredLatency
            x.last2xxWallMicros = u.lastCloud2xxWallMicros
            x.cloudReachedSinceStart = u.cloudReachedSinceStart
            x.heartbeatsAccepted = Int64(u.heartbeatsAccepted)
            x.heartbeatsFailed = Int64(u.heartbeatsFailed)
            report.uplink = x
        }
        if let sink = mqttSink {
            let q = sink.status.snapshot
            var x = AgentStatusReport.MQTT(broker: q.broker)
            x.connected = q.connected
            x.acknowledged = Int64(q.acknowledged)
            x.lastAckWallMicros = q.lastAckWallMicros
            x.connects = Int64(q.connects)
            x.lastError = q.lastError
            x.lastErrorWallMicros = q.lastErrorWallMicros
            x.discoveryMessages = Int64(q.discoveryMessages)
            x.discoveryPublishedWallMicros = q.discoveryPublishedWallMicros
            x.homeAssistant = q.homeAssistant
            x.ignored = q.ignored.sorted { $0.key < $1.key }.map { .init($0.key, Int64($0.value)) }
            report.mqtt = x
        }
        report.configReload = reloadStatus.snapshot
        report.actions = (actions.snapshot?.status.snapshot ?? []).map { a in
            var x = AgentStatusReport.Action(name: a.name)
            x.does = a.does
            x.runs = Int64(a.runs)
            x.failures = Int64(a.failures)
            x.timeouts = Int64(a.timeouts)
            x.skippedBusy = Int64(a.skippedBusy)
            x.running = Int64(a.running)
            x.lastError = a.lastError
            return x
        }
        if let phones = bleRadio?.phones {
            let ps = phones.status.snapshot
            var x = AgentStatusReport.Phones()
            x.bonded = Int64(phones.bonds.snapshot.count)
            x.connected = Int64(ps.phonesConnected)
            x.connectedPhone = ps.connectedPhone
            x.readingNotifications = ps.readingNotifications
            x.pairingOpenUntilWallMicros = ps.pairingOpenUntil.flatMap { $0 > Clocks.wallMicros() ? $0 : nil }
            x.notificationsRead = Int64(ps.notificationsRead)
            x.lastError = ps.lastError
            report.phones = x
        }
        report.phoneProblem = phoneProblem.snapshot
        report.configProblem = configProblem.snapshot
        report.threadStartFailures = Int64(threadStartFailures.snapshot)
        report.lastThreadStartError = lastThreadStartError.snapshot
        report.loops = loops.states()
        report.residentBytes = ProcessMemory.residentBytes().map(Int64.init)
        return report
    }

    private func counts(_ pairs: [(String, Int)]) -> [AgentStatusReport.Count] { pairs.map { .init($0.0, Int64($0.1)) } }

    /// The gateway's health as Home Assistant's diagnostic entities read it.
    func diagnosticsJSON() -> JSONValue { statusReport().homeAssistantDiagnostics }
}
