// Two short renderings of the status report: systemd's one-line STATUS= (and the log), and the
// diagnostic entities the gateway publishes to Home Assistant over MQTT.

extension AgentStatusReport {
    /// "rtl433 running, presses 3, outbox 0, delivered 3, ok"
    public var summaryLine: String {
        var parts = radios.map { "\($0.name) \($0.state)" }
        parts.append("presses \(pressesForwarded)")
        parts.append("outbox \(outbox.stats.map { String($0.depth) } ?? "-")")
        if let u = uplink { parts.append("delivered \(u.delivered)") }
        parts.append(health)
        return parts.joined(separator: ", ")
    }

    public var homeAssistantDiagnostics: JSONValue {
        let lastDelivery: JSONValue
        if let u = uplink {
            // Text, not a timestamp entity: "never" and "no cloud" are answers too.
            lastDelivery = .string(u.lastSuccessWallMicros.map { RFC3339.format(micros: $0) } ?? "never")
        } else {
            lastDelivery = .string("no cloud uplink")
        }
        return .object([
            ("outbox_depth", outbox.stats.map { .number(Double($0.depth)) } ?? .null),
            ("outbox_oldest_age_s", outbox.stats?.oldestAgeSeconds.map { .number(Double($0)) } ?? .null),
            ("radios", .string(radios.isEmpty ? "none" : radios.map { "\($0.name) \($0.state)" }.joined(separator: ", "))),
            ("last_delivery", lastDelivery),
            ("clock_synchronized", .bool(clock.synchronized)),
            ("problem", .bool(health != "ok")), ("problems", .array(problems.map(JSONValue.string))),
        ])
    }
}
