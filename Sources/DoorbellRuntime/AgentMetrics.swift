import DoorbellCore

// Prometheus text exposition of the agent's status (written to [metrics] file): the core's
// rendering of the same report `agentctl status` shows.

extension Agent {
    func metricsText() -> String { statusReport().prometheusText }
}
