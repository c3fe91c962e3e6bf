// The human view of the status report (`agentctl status`): short, aligned, the problems first.

public enum StatusTable {
    public static func render(_ s: AgentStatusReport) -> String {
        var rows: [(String, String)] = []
        func time(_ t: Int64?) -> String { t.map { RFC3339.format(micros: $0) } ?? "-" }
        rows.append(("health", s.health))
        for p in s.problems { rows.append(("  problem", p)) }
        rows.append(("gateway", s.gatewayID))
        rows.append(("version", "\(s.version) (pid \(s.pid), up \(s.uptimeSeconds) s)"))
        rows.append(("clock", s.clock.synchronized ? "synchronized" : "NOT synchronized (events are marked clock_synced=false)"))
        rows.append(("  because", s.clock.reason))
        for r in s.radios {
            let declared = RadioCounterCatalog.counters(for: r.name)
            let shown = declared.isEmpty ? r.counters.map { ($0.key, $0.value) }
                : declared.compactMap { spec in spec.tableLabel.flatMap { label in r.counter(spec.key).map { (label, $0) } } }
            let origin = r.source.map { " (\($0)\(r.gpio.map { " on \($0)" } ?? ""))" } ?? ""
            let counts = (shown.map { "\($0.1) \($0.0)" } + ["\(r.restarts) restarts"]).joined(separator: ", ")
            rows.append(("radio \(r.name)", "\(r.state)\(origin): \(counts)"))
            if let b = r.ble {
                if !b.inside.isEmpty { rows.append(("  inside", b.inside.joined(separator: ", "))) }
                if !b.decoders.isEmpty {
                    rows.append(("  decoders", b.decoders.map { "\($0.decoder) \($0.seen) seen, \($0.corrupt) corrupt, \($0.implausible) implausible" }
                        .joined(separator: "; ")))
                }
                if let refused = b.lastRefused { rows.append(("  last refused", refused)) }
                if let hold = b.exitsOnHold { rows.append(("  exits on hold", hold)) }
            }
            if let e = r.lastError { rows.append(("  last error", e)) }
        }
        if let p = s.phones {
            let link = p.connectedPhone.map { "\($0) connected\(p.readingNotifications ? ", reading notifications" : "")" } ?? "none connected"
            let window = p.pairingOpenUntilWallMicros.map { ", pairing open until \(time($0))" } ?? ""
            rows.append(("phones", "\(p.bonded) bonded, \(link), \(p.notificationsRead) notifications read\(window)"))
            if let e = p.lastError { rows.append(("  last error", e)) }
        }
        rows.append(("events", s.eventsByType.map { "\($0.key) \($0.value)" }.joined(separator: ", ")))
        rows.append(("presses", "\(s.pressesForwarded) forwarded, \(s.pressesSuppressed) within cooldown"))
        if let o = s.outbox.stats {
            rows.append(("outbox", "\(o.depth) waiting, oldest \(o.oldestAgeSeconds.map(String.init) ?? "-") s, last sequence \(o.lastSequence)"
                         + (o.dead > 0 ? ", \(o.dead) parked" : "")))
        } else {
            rows.append(("outbox", "unreadable"))
        }
        if let u = s.uplink {
            rows.append(("uplink", "\(u.url): \(u.delivered) delivered, \(u.failedAttempts) failed attempts"))
            rows.append(("  last success", time(u.lastSuccessWallMicros)))
            rows.append(("  cloud", (u.cloudReachedSinceStart ? "answered since start" : "NOT answered since start")
                         + ", last 2xx \(time(u.last2xxWallMicros)), heartbeats \(u.heartbeatsAccepted) accepted, \(u.heartbeatsFailed) failed"))
            if let e = u.lastError { rows.append(("  last error", "\(time(u.lastErrorWallMicros)) \(e)")) }
        } else {
            rows.append(("uplink", "not configured"))
        }
        if let q = s.mqtt {
            let pending = s.outbox.stats.map { String($0.mqttPending) } ?? "-"
            rows.append(("mqtt", "\(q.broker): \(q.connected ? "connected" : "NOT connected"), \(pending) pending, \(q.acknowledged) acknowledged, last ack \(time(q.lastAckWallMicros))"))
            if let h = q.homeAssistant { rows.append(("  home assistant", h)) }
            if let e = q.lastError { rows.append(("  last error", "\(time(q.lastErrorWallMicros)) \(e)")) }
        }
        for a in s.actions {
            if a.does == "answer_phones" {
                rows.append(("action \(a.name)", "answers the door on the phones: \(a.runs) times, \(a.failures) failures"))
            } else {
                rows.append(("action \(a.name)", "\(a.runs) runs, \(a.failures) failures, \(a.timeouts) timeouts, \(a.skippedBusy) skipped while busy"))
            }
        }
        if !s.loops.isEmpty {
            let running = s.loops.filter { $0.health == .running }.count
            let others = s.loops.filter { $0.health != .running }.map { "\($0.name) \($0.health.rawValue)" }
            rows.append(("loops", (["\(running) running"] + others).joined(separator: ", ")))
        }
        if !s.unknownTransmitters.isEmpty {
            rows.append(("not configured", "\(s.unknownTransmitters.count) transmitter(s) heard:"))
            for u in s.unknownTransmitters { rows.append(("  \(u.identity)", "\(u.model), \(u.frames) frames, last \(time(u.lastSeenWallMicros))")) }
        }
        let width = rows.map(\.0.count).max() ?? 0
        return rows.map { $0.0 + String(repeating: " ", count: width - $0.0.count) + "  " + $0.1 }.joined(separator: "\n")
    }
}
