// The status report as Prometheus text exposition (the [metrics] file node_exporter's textfile
// collector reads). Series names are stable: dashboards and alerts are written against them.

/// Builds the exposition text: one HELP/TYPE per series name, then all its samples together
/// (the format wants a family's samples in one group, whatever order they were added in).
public struct PrometheusText {
    private var families: [(header: [String], samples: [String])] = []
    private var index: [String: Int] = [:]

    public init() {}

    public var text: String { families.flatMap { $0.header + $0.samples }.joined(separator: "\n") + "\n" }

    private mutating func family(_ name: String, _ type: String, _ help: String) -> Int {
        if let i = index[name] { return i }
        families.append((["# HELP \(name) \(help)", "# TYPE \(name) \(type)"], []))
        index[name] = families.count - 1
        return families.count - 1
    }

    public mutating func add(_ name: String, _ type: String, _ help: String, _ value: Double, labels: [(String, String)] = []) {
        let labelText = labels.isEmpty ? "" : "{" + labels.map { "\($0.0)=\"\(Self.escape($0.1))\"" }.joined(separator: ",") + "}"
        families[family(name, type, help)].samples.append("\(name)\(labelText) \(Self.format(value))")
    }

    public mutating func histogram(_ name: String, _ help: String, _ h: LatencyHistogram) {
        let i = family(name, "histogram", help)
        var cumulative = 0
        for (b, bound) in LatencyHistogram.bounds.enumerated() {
            cumulative += h.counts[b]
            families[i].samples.append("\(name)_bucket{le=\"\(Self.format(bound))\"} \(cumulative)")
        }
        families[i].samples += ["\(name)_bucket{le=\"+Inf\"} \(h.count)", "\(name)_sum \(Self.format(h.sum))", "\(name)_count \(h.count)"]
    }

    static func escape(_ s: String) -> String {
        var out = ""
        for c in s {
            switch c {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.append(c)
            }
        }
        return out
    }

    static func format(_ v: Double) -> String { v.rounded() == v && abs(v) < 1e15 ? String(Int64(v)) : String(v) }
}

extension AgentStatusReport {
    public var prometheusText: String {
        var m = PrometheusText()
        for r in radios {
            for spec in RadioCounterCatalog.counters(for: r.name) {
                guard let metric = spec.metric, let v = r.counter(spec.key) else { continue }
                m.add(metric, "counter", spec.help, Double(v), labels: spec.labelledByRadio ? [("radio", r.name)] : [])
            }
            m.add("doorbell_radio_restarts_total", "counter", "Radio process restarts.", Double(r.restarts), labels: [("radio", r.name)])
            m.add("doorbell_radio_up", "gauge", "1 when the radio is running or finished its replay.", r.isUp ? 1 : 0, labels: [("radio", r.name)])
            for d in r.ble?.decoders ?? [] {
                for (verdict, n) in [("seen", d.seen), ("corrupt", d.corrupt), ("implausible", d.implausible)] {
                    m.add("doorbell_ble_decoder_adverts_total", "counter", "BLE adverts each decoder claimed: seen (decoded), corrupt or implausible.",
                          Double(n), labels: [("radio", r.name), ("decoder", d.decoder), ("verdict", verdict)])
                }
            }
        }
        // Frames from RF remotes (rtl_433 and OOK): BLE adverts are counted by their decoders.
        let rf = radios.filter { $0.ble == nil }
        let frames = rf.reduce(Int64(0)) { $0 + ($1.counter("frames") ?? 0) }
        let unmatched = rf.reduce(Int64(0)) { $0 + ($1.counter("unmatched_frames") ?? 0) }
        m.add("doorbell_observations_total", "counter", "Frames from configured devices.", Double(frames - unmatched))
        m.add("doorbell_unmatched_frames_total", "counter", "Frames from transmitters not in the config.", Double(unmatched))
        for e in eventsByType {
            m.add("doorbell_events_total", "counter", "Events created, by type.", Double(e.value), labels: [("type", e.key)])
        }
        m.add("doorbell_presses_suppressed_total", "counter", "Presses within the cooldown, counted but not forwarded.", Double(pressesSuppressed))
        if let s = outbox.stats {
            m.add("doorbell_outbox_depth", "gauge", "Events waiting for delivery.", Double(s.depth))
            m.add("doorbell_outbox_oldest_age_seconds", "gauge", "Age of the oldest undelivered event.", Double(s.oldestAgeSeconds ?? 0))
            m.add("doorbell_outbox_dead", "gauge", "Events the receiver refused, parked.", Double(s.dead))
        }
        if let u = uplink {
            m.add("doorbell_deliveries_total", "counter", "Events acknowledged by the receiver.", Double(u.delivered))
            for f in u.failuresByReason {
                m.add("doorbell_delivery_failures_total", "counter", "Failed delivery attempts, by reason.", Double(f.value), labels: [("reason", f.key)])
            }
            m.histogram("doorbell_press_to_delivered_seconds", "From event creation to the receiver's 2xx.", u.deliveredLatency)
        }
        if let q = mqtt {
            m.add("doorbell_mqtt_connected", "gauge", "1 while connected to the MQTT broker.", q.connected ? 1 : 0)
            m.add("doorbell_mqtt_acknowledged_total", "counter", "Events the MQTT broker acknowledged (PUBACK).", Double(q.acknowledged))
            if let s = outbox.stats { m.add("doorbell_mqtt_pending", "gauge", "Events waiting for the MQTT broker.", Double(s.mqttPending)) }
            for i in q.ignored {
                m.add("doorbell_mqtt_ignored_messages_total", "counter", "Messages on subscribed topics that were ignored, by reason.",
                      Double(i.value), labels: [("reason", i.key)])
            }
        }
        if let p = phones {
            m.add("doorbell_phones_bonded", "gauge", "Phones bonded to the base station.", Double(p.bonded))
            m.add("doorbell_phones_connected", "gauge", "Bonded phones connected now.", Double(p.connected))
            m.add("doorbell_phone_notifications_read_total", "counter", "Notifications read from the phones (ANCS).", Double(p.notificationsRead))
        }
        if let rss = residentBytes { m.add("doorbell_resident_memory_bytes", "gauge", "Resident set size of the agent.", Double(rss)) }
        m.add("doorbell_clock_synchronized", "gauge", "1 when the wall clock is NTP-synchronized.", clock.synchronized ? 1 : 0)
        m.add("doorbell_problems", "gauge", "Problems `agentctl status` lists; 0 when healthy.", Double(problems.count))
        return m.text
    }
}
