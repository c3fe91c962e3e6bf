import DoorbellCore
import Glibc

// Prometheus text exposition of the agent's counters (written to [metrics] file).

extension Agent {
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
}
