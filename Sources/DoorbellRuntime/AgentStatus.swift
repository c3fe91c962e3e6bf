import DoorbellCore
import Glibc

// What `agentctl status` shows: one JSON object built from every part's status, with the
// problems an installer should act on.

extension Agent {
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

    func actionStatusJSON(_ problems: inout [String]) -> [JSONValue] {
        guard let runner = actions.snapshot else { return [] }
        return runner.status.snapshot.map { a in
            if let e = a.lastError { problems.append("action \(a.name): \(e)") }
            return .object([("name", .string(a.name)), ("runs", .number(Double(a.runs))), ("failures", .number(Double(a.failures))),
                            ("timeouts", .number(Double(a.timeouts))), ("skipped_busy", .number(Double(a.skippedBusy))),
                            ("running", .number(Double(a.running))), ("last_error", a.lastError.map(JSONValue.string) ?? .null)])
        }
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
}
