// The agent's long-lived loops (uplink, control socket, radios, MQTT, spill retries, metrics) and
// when each last showed it was alive. systemd's watchdog ping is earned only while every running
// loop has beaten within its own wake-up period, so a loop that ended, or sits stuck (a deadlock,
// a call that never returns), withholds the ping and systemd restarts the agent; `agentctl status`
// lists the same loops as problems. Times are monotonic µs, given in.

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

    /// The whole process was frozen for `frozenMicros` up to `now` (WatchdogSchedule saw it wake
    /// that late): no loop could beat meanwhile, so that time is not silence. A loop that beat
    /// since it resumed keeps its beat; none is moved past `now`, so a loop stuck before the
    /// freeze is still found stuck, only later by the freeze's length.
    public mutating func forgive(frozenMicros: Int64, at now: Int64) {
        guard frozenMicros > 0 else { return }
        for i in loops.indices where loops[i].ended == nil {
            loops[i].lastBeatMicros = min(now, loops[i].lastBeatMicros + frozenMicros)
        }
    }

    /// Stopped on purpose (agent stopping, a reload replacing it, a replay that finished).
    public mutating func stopped(_ name: String) { loops.removeAll { $0.name == name } }

    /// Silent for longer than this is stuck.
    public func deadline(periodMicros: Int64) -> Int64 { 2 * periodMicros + graceMicros }

    /// Each watched loop at `now`, for `agentctl status`.
    public func states(at now: Int64) -> [State] {
        loops.map { loop in
            let silent = max(0, now - loop.lastBeatMicros)
            let health: State.Health = loop.ended != nil ? .ended : silent > deadline(periodMicros: loop.periodMicros) ? .stuck : .running
            return State(name: loop.name, health: health, silentSeconds: silent / 1_000_000,
                         periodSeconds: max(1, loop.periodMicros / 1_000_000), reason: loop.ended)
        }
    }

    /// What is wrong at `now`, one line per dead or stuck loop; empty: ping the watchdog.
    public func problems(at now: Int64) -> [String] { states(at: now).compactMap(\.problem) }

    /// One loop as the status shows it (and as an older or newer agent's answer reads back).
    public struct State: Sendable, Equatable {
        public enum Health: String, Sendable { case running, stuck, ended }
        public var name: String
        public var health: Health
        public var silentSeconds: Int64
        /// The longest it goes between beats when healthy.
        public var periodSeconds: Int64
        /// Why it ended (`ended` only).
        public var reason: String?

        public init(name: String, health: Health, silentSeconds: Int64, periodSeconds: Int64, reason: String? = nil) {
            self.name = name
            self.health = health
            self.silentSeconds = silentSeconds
            self.periodSeconds = periodSeconds
            self.reason = reason
        }

        /// The watchdog's line for a dead or stuck loop; nil while it runs.
        public var problem: String? {
            switch health {
            case .running: nil
            case .ended: "\(name): the loop ended: \(reason ?? "?")"
            case .stuck: "\(name): no heartbeat for \(silentSeconds) s (it wakes at least every \(periodSeconds) s): stuck"
            }
        }
    }
}
