// The status report as the control socket's JSON, and back: agentctl reads the agent's answer
// into the same value it renders as a table. Reading is lenient (an older or newer agent's
// answer renders what both know); writing then reading gives the same JSON.

extension AgentStatusReport {
    public var json: JSONValue {
        .object([
            ("version", .string(version)), ("gateway_id", .string(gatewayID)), ("pid", num(pid)), ("uptime_s", num(uptimeSeconds)),
            ("health", .string(health)), ("problems", .array(problems.map(JSONValue.string))),
            ("clock", .object([("synchronized", .bool(clock.synchronized)), ("reason", .string(clock.reason)),
                               ("require_sync", .bool(clock.requireSync)), ("delivery_held", .bool(clock.deliveryHeld)),
                               ("boot_id", .string(clock.bootID)), ("now", .string(RFC3339.format(micros: clock.nowWallMicros)))])),
            ("radios", .array(radios.map(\.json))),
            ("events", counts(eventsByType)),
            ("presses", .object([("forwarded", num(pressesForwarded)), ("suppressed", num(pressesSuppressed))])),
            ("unknown_transmitters", .array(unknownTransmitters.map { u in
                .object([("identity", .string(u.identity)), ("model", .string(u.model)), ("frames", num(u.frames)),
                         ("last_seen", time(u.lastSeenWallMicros))])
            })),
            ("outbox", outbox.json),
            ("uplink", uplink.map { u in
                .object([("url", .string(u.url)), ("delivered", num(u.delivered)), ("failed_attempts", num(u.failedAttempts)),
                         ("last_success", time(u.lastSuccessWallMicros)), ("last_error", text(u.lastError)),
                         ("last_error_at", time(u.lastErrorWallMicros)), ("endpoint_gone", .bool(u.endpointGone)),
                         ("failures_by_reason", counts(u.failuresByReason)),
                         ("last_2xx", time(u.last2xxWallMicros)), ("cloud_reached_since_start", .bool(u.cloudReachedSinceStart)),
                         ("heartbeats", .object([("accepted", num(u.heartbeatsAccepted)), ("failed", num(u.heartbeatsFailed))])),
                         ("press_to_delivered", .object([("count", num(Int64(u.deliveredLatency.count))), ("sum_s", .number(u.deliveredLatency.sum)),
                                                         ("buckets", .array(u.deliveredLatency.counts.map { num(Int64($0)) }))]))])
            } ?? .null),
            ("mqtt", mqtt.map { q in
                .object([("broker", .string(q.broker)), ("connected", .bool(q.connected)), ("pending", outbox.stats.map { num($0.mqttPending) } ?? .null),
                         ("acknowledged", num(q.acknowledged)), ("last_ack", time(q.lastAckWallMicros)), ("connects", num(q.connects)),
                         ("last_error", text(q.lastError)), ("last_error_at", time(q.lastErrorWallMicros)),
                         ("discovery_messages", num(q.discoveryMessages)), ("discovery_published", time(q.discoveryPublishedWallMicros)),
                         ("home_assistant", text(q.homeAssistant)), ("ignored", counts(q.ignored))])
            } ?? .null),
            ("phones", phones.map { p in
                .object([("bonded", num(p.bonded)), ("connected", num(p.connected)), ("connected_phone", text(p.connectedPhone)),
                         ("reading_notifications", .bool(p.readingNotifications)), ("pairing_until", time(p.pairingOpenUntilWallMicros)),
                         ("notifications_read", num(p.notificationsRead)), ("last_error", text(p.lastError))])
            } ?? .null),
            ("phone_problem", text(phoneProblem)),
            ("config_reload", configReload),
            ("config_problem", text(configProblem)),
            ("threads", .object([("start_failures", num(threadStartFailures)), ("last_error", text(lastThreadStartError))])),
            ("loops", .array(loops.map { l in
                .object([("name", .string(l.name)), ("state", .string(l.health.rawValue)), ("silent_s", num(l.silentSeconds)),
                         ("period_s", num(l.periodSeconds)), ("reason", text(l.reason))])
            })),
            ("actions", .array(actions.map { a in
                .object([("name", .string(a.name)), ("does", .string(a.does)), ("runs", num(a.runs)), ("failures", num(a.failures)), ("timeouts", num(a.timeouts)),
                         ("skipped_busy", num(a.skippedBusy)), ("running", num(a.running)), ("last_error", text(a.lastError))])
            })),
        ])
    }

    /// The report an agent answered; nil when it is not a status object at all.
    public init?(json s: JSONValue) {
        guard case .object = s, let version = s["version"]?.stringValue, let gateway = s["gateway_id"]?.stringValue else { return nil }
        let c = s["clock"]
        self.init(version: version, gatewayID: gateway, pid: s["pid"]?.intValue ?? 0, uptimeSeconds: s["uptime_s"]?.intValue ?? 0,
                  clock: Clock(synchronized: c?["synchronized"]?.boolValue ?? false, reason: c?["reason"]?.stringValue ?? "",
                               requireSync: c?["require_sync"]?.boolValue ?? false, deliveryHeld: c?["delivery_held"]?.boolValue ?? false,
                               bootID: c?["boot_id"]?.stringValue ?? "", nowWallMicros: micros(c?["now"]) ?? 0),
                  outbox: Outbox(json: s["outbox"]))
        radios = (s["radios"]?.arrayValues ?? []).compactMap(Radio.init(json:))
        eventsByType = readCounts(s["events"])
        pressesForwarded = s["presses"]?["forwarded"]?.intValue ?? 0
        pressesSuppressed = s["presses"]?["suppressed"]?.intValue ?? 0
        unknownTransmitters = (s["unknown_transmitters"]?.arrayValues ?? []).map { u in
            UnknownTransmitter(identity: u["identity"]?.stringValue ?? "?", model: u["model"]?.stringValue ?? "?",
                               frames: u["frames"]?.intValue ?? 0, lastSeenWallMicros: micros(u["last_seen"]) ?? 0)
        }
        if let u = s["uplink"], case .object = u {
            var up = Uplink(url: u["url"]?.stringValue ?? "?")
            up.delivered = u["delivered"]?.intValue ?? 0
            up.failedAttempts = u["failed_attempts"]?.intValue ?? 0
            up.lastSuccessWallMicros = micros(u["last_success"])
            up.lastError = u["last_error"]?.stringValue
            up.lastErrorWallMicros = micros(u["last_error_at"])
            up.endpointGone = u["endpoint_gone"]?.boolValue ?? false
            up.failuresByReason = readCounts(u["failures_by_reason"])
            up.last2xxWallMicros = micros(u["last_2xx"])
            up.cloudReachedSinceStart = u["cloud_reached_since_start"]?.boolValue ?? false
            up.heartbeatsAccepted = u["heartbeats"]?["accepted"]?.intValue ?? 0
            up.heartbeatsFailed = u["heartbeats"]?["failed"]?.intValue ?? 0
            let h = u["press_to_delivered"]
            if let buckets = h?["buckets"]?.arrayValues, buckets.count == LatencyHistogram.bounds.count + 1 {
                up.deliveredLatency.counts = buckets.map { Int($0.intValue ?? 0) }
                up.deliveredLatency.count = Int(h?["count"]?.intValue ?? 0)
                up.deliveredLatency.sum = h?["sum_s"]?.doubleValue ?? 0
            }
            uplink = up
        }
        if let q = s["mqtt"], case .object = q {
            var m = MQTT(broker: q["broker"]?.stringValue ?? "?")
            m.connected = q["connected"]?.boolValue ?? false
            m.acknowledged = q["acknowledged"]?.intValue ?? 0
            m.lastAckWallMicros = micros(q["last_ack"])
            m.connects = q["connects"]?.intValue ?? 0
            m.lastError = q["last_error"]?.stringValue
            m.lastErrorWallMicros = micros(q["last_error_at"])
            m.discoveryMessages = q["discovery_messages"]?.intValue ?? 0
            m.discoveryPublishedWallMicros = micros(q["discovery_published"])
            m.homeAssistant = q["home_assistant"]?.stringValue
            m.ignored = readCounts(q["ignored"])
            mqtt = m
        }
        if let p = s["phones"], case .object = p {
            var x = Phones()
            x.bonded = p["bonded"]?.intValue ?? 0
            x.connected = p["connected"]?.intValue ?? 0
            x.connectedPhone = p["connected_phone"]?.stringValue
            x.readingNotifications = p["reading_notifications"]?.boolValue ?? false
            x.pairingOpenUntilWallMicros = micros(p["pairing_until"])
            x.notificationsRead = p["notifications_read"]?.intValue ?? 0
            x.lastError = p["last_error"]?.stringValue
            phones = x
        }
        phoneProblem = s["phone_problem"]?.stringValue
        configReload = s["config_reload"] ?? .null
        configProblem = s["config_problem"]?.stringValue
        threadStartFailures = s["threads"]?["start_failures"]?.intValue ?? 0
        lastThreadStartError = s["threads"]?["last_error"]?.stringValue
        // A state this agentctl does not know (a newer agent's) reads as stuck: shown, not hidden.
        loops = (s["loops"]?.arrayValues ?? []).map { l in
            LoopHeartbeats.State(name: l["name"]?.stringValue ?? "?", health: l["state"]?.stringValue.flatMap(LoopHeartbeats.State.Health.init(rawValue:)) ?? .stuck,
                                 silentSeconds: l["silent_s"]?.intValue ?? 0, periodSeconds: l["period_s"]?.intValue ?? 0,
                                 reason: l["reason"]?.stringValue)
        }
        actions = (s["actions"]?.arrayValues ?? []).map { a in
            var x = Action(name: a["name"]?.stringValue ?? "?")
            x.does = a["does"]?.stringValue ?? ""
            x.runs = a["runs"]?.intValue ?? 0
            x.failures = a["failures"]?.intValue ?? 0
            x.timeouts = a["timeouts"]?.intValue ?? 0
            x.skippedBusy = a["skipped_busy"]?.intValue ?? 0
            x.running = a["running"]?.intValue ?? 0
            x.lastError = a["last_error"]?.stringValue
            return x
        }
    }
}

extension AgentStatusReport.Radio {
    var json: JSONValue {
        var m: [(String, JSONValue)] = [("name", .string(name)), ("state", .string(state))]
        if let source { m.append(("source", .string(source))) }
        m += counters.map { ($0.key, num($0.value)) }
        m += [("restarts", num(restarts)), ("last_error", text(lastError))]
        if let gpio { m.append(("gpio", .string(gpio))) }
        if let b = ble {
            m += [("inside", .array(b.inside.map(JSONValue.string))),
                  ("decoders", .object(b.decoders.map { d in
                      (d.decoder, .object([("seen", num(d.seen)), ("corrupt", num(d.corrupt)), ("implausible", num(d.implausible))]))
                  } + [("observations", counts(b.observations))])),
                  ("last_refused", text(b.lastRefused)),
                  ("presence", .object([("clock", .string(b.presenceClockRunning ? "running" : "paused")), ("silent_s", num(b.silentSeconds)),
                                        ("exits_on_hold", text(b.exitsOnHold))]))]
            if let info = b.controller {
                m.append(("controller", .object([("hci_version", num(Int64(info.hciVersion))), ("manufacturer", num(Int64(info.manufacturer))),
                                                 ("extended_scan", .bool(info.extendedScan))])))
            }
        }
        return .object(m)
    }

    init?(json r: JSONValue) {
        guard let name = r["name"]?.stringValue else { return nil }
        self.init(name: name, state: r["state"]?.stringValue ?? "?")
        let declared = RadioCounterCatalog.counters(for: name)
        if declared.isEmpty, case let .object(members) = r {
            // A radio this agentctl does not know: every number but the restarts is a counter.
            counters = members.compactMap { k, v in k == "restarts" ? nil : v.intValue.map { AgentStatusReport.Count(k, $0) } }
        } else {
            counters = declared.compactMap { spec in r[spec.key]?.intValue.map { AgentStatusReport.Count(spec.key, $0) } }
        }
        restarts = r["restarts"]?.intValue ?? 0
        lastError = r["last_error"]?.stringValue
        source = r["source"]?.stringValue
        gpio = r["gpio"]?.stringValue
        if r["decoders"] != nil || r["presence"] != nil || r["inside"] != nil {
            var b = AgentStatusReport.BLEDetails()
            b.inside = (r["inside"]?.arrayValues ?? []).compactMap(\.stringValue)
            if case let .object(decoders)? = r["decoders"] {
                b.decoders = decoders.filter { $0.0 != "observations" }.map { name, c in
                    AgentStatusReport.DecoderCounts(decoder: name, seen: c["seen"]?.intValue ?? 0, corrupt: c["corrupt"]?.intValue ?? 0,
                                                    implausible: c["implausible"]?.intValue ?? 0)
                }
                b.observations = readCounts(r["decoders"]?["observations"])
            }
            b.lastRefused = r["last_refused"]?.stringValue
            b.presenceClockRunning = r["presence"]?["clock"]?.stringValue != "paused"
            b.silentSeconds = r["presence"]?["silent_s"]?.intValue ?? 0
            b.exitsOnHold = r["presence"]?["exits_on_hold"]?.stringValue
            if let c = r["controller"], case .object = c {
                b.controller = BLEControllerInfo(hciVersion: Int(c["hci_version"]?.intValue ?? 0), manufacturer: Int(c["manufacturer"]?.intValue ?? 0),
                                                 extendedScan: c["extended_scan"]?.boolValue ?? false)
            }
            ble = b
        }
    }
}

extension AgentStatusReport.Outbox {
    var json: JSONValue {
        var m: [(String, JSONValue)] = []
        if let s = stats {
            m = [("depth", num(s.depth)), ("dead", num(s.dead)), ("last_sequence", num(s.lastSequence)), ("evicted", num(s.evicted)),
                 ("bytes", num(s.bytes)), ("oldest_age_s", s.oldestAgeSeconds.map(num) ?? .null), ("mqtt_pending", num(s.mqttPending))]
        }
        if let e = readError { m.append(("error", .string(e))) }
        if let e = lastError { m.append(("last_error", .string(e))) }
        m += [("storage", .string(storageFull || heldInMemory > 0 ? "full" : "ok")), ("storage_full", .bool(storageFull)),
              ("held_in_memory", num(heldInMemory)), ("state_dir", .string(stateDir))]
        if let aside = movedAside { m.append(("moved_aside", .string(aside))) }
        return .object(m)
    }

    init(json o: JSONValue?) {
        self.init(stateDir: o?["state_dir"]?.stringValue ?? "the state directory")
        if let o, let depth = o["depth"]?.intValue {
            stats = Stats(depth: depth, dead: o["dead"]?.intValue ?? 0, lastSequence: o["last_sequence"]?.intValue ?? 0,
                          evicted: o["evicted"]?.intValue ?? 0, bytes: o["bytes"]?.intValue ?? 0, oldestAgeSeconds: o["oldest_age_s"]?.intValue,
                          mqttPending: o["mqtt_pending"]?.intValue ?? 0)
        }
        readError = o?["error"]?.stringValue
        lastError = o?["last_error"]?.stringValue
        storageFull = o?["storage_full"]?.boolValue ?? false
        heldInMemory = o?["held_in_memory"]?.intValue ?? 0
        movedAside = o?["moved_aside"]?.stringValue
    }
}

private func num(_ v: Int64) -> JSONValue { .number(Double(v)) }
private func text(_ s: String?) -> JSONValue { s.map(JSONValue.string) ?? .null }
private func time(_ t: Int64?) -> JSONValue { t.map { .string(RFC3339.format(micros: $0)) } ?? .null }
private func micros(_ v: JSONValue?) -> Int64? { v?.stringValue.flatMap(RFC3339.parse) }
private func counts(_ c: [AgentStatusReport.Count]) -> JSONValue { .object(c.map { ($0.key, num($0.value)) }) }
private func readCounts(_ v: JSONValue?) -> [AgentStatusReport.Count] {
    guard case let .object(members)? = v else { return [] }
    return members.compactMap { k, n in n.intValue.map { AgentStatusReport.Count(k, $0) } }
}
