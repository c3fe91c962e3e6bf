// The agent's long-lived loops (uplink, control socket, radios, MQTT) and when each last showed
// it was alive. systemd's watchdog ping is earned only while every running loop has beaten within
// its own wake-up period, so a loop that ended, or sits stuck (a deadlock, a call that never
// returns), withholds the ping and systemd restarts the agent. Times are monotonic µs, given in.

public struct LoopHeartbeats: Sendable, Equatable {
    public struct Loop: Sendable, Equatable {
        public var name: String
        /// The longest a healthy loop goes between beats: its longest wait, or its longest piece
        /// of work (the uplink's request timeouts).
        public var periodMicros: Int64
        public var lastBeatMicros: Int64
        /// Why it ended while the agent still needed it; nil while it runs.
        public var ended: String?
    }

    /// Scheduling on a loaded Pi (and a slow SD card under a loop's transaction) is forgiven
    /// this much beyond two periods.
    public static let defaultGraceMicros: Int64 = 10_000_000
    public let graceMicros: Int64

    public private(set) var loops: [Loop] = []

    public init(graceMicros: Int64 = defaultGraceMicros) { self.graceMicros = graceMicros }

    /// The loop runs (again, after a reload): a fresh beat now.
    public mutating func started(_ name: String, periodMicros: Int64, at now: Int64) {
        let loop = Loop(name: name, periodMicros: periodMicros, lastBeatMicros: now)
        if let i = loops.firstIndex(where: { $0.name == name }) { loops[i] = loop } else { loops.append(loop) }
    }

    public mutating func beat(_ name: String, at now: Int64) {
        guard let i = loops.firstIndex(where: { $0.name == name }), loops[i].ended == nil else { return }
        loops[i].lastBeatMicros = max(loops[i].lastBeatMicros, now)
    }

    /// The loop gave up (or never started) although nobody stopped it.
    public mutating func ended(_ name: String, reason: String, at now: Int64) {
        if let i = loops.firstIndex(where: { $0.name == name }) {
            loops[i].ended = reason
        } else {
            loops.append(Loop(name: name, periodMicros: 0, lastBeatMicros: now, ended: reason))
        }
    }

    /// Stopped on purpose (agent stopping, a reload replacing it, a replay that finished).
    public mutating func stopped(_ name: String) { loops.removeAll { $0.name == name } }

    /// Silent for longer than this is stuck.
    public func deadline(periodMicros: Int64) -> Int64 { 2 * periodMicros + graceMicros }

    /// What is wrong at `now`, one line per dead or stuck loop; empty: ping the watchdog.
    public func problems(at now: Int64) -> [String] {
        loops.compactMap { loop in
            if let reason = loop.ended { return "\(loop.name): the loop ended: \(reason)" }
            let silent = now - loop.lastBeatMicros
            guard silent > deadline(periodMicros: loop.periodMicros) else { return nil }
            return "\(loop.name): no heartbeat for \(silent / 1_000_000) s (it wakes at least every \(max(1, loop.periodMicros / 1_000_000)) s): stuck"
        }
    }
}
