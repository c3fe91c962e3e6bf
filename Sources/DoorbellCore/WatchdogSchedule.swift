// When the agent pings systemd's watchdog, and when it looks again. The ping is earned (every loop
// beat within its deadline, LoopHeartbeats); this decides the rhythm around that rule:
// - healthy: look again after one tick (half of WatchdogSec);
// - something looks dead: look again after a second, not a tick. A loop that only seemed stuck
//   because the whole process had been frozen (SIGSTOP, a paused VM, a CPU starved for seconds)
//   beats as soon as it runs again, and the next look pings in time; waiting a whole tick there
//   let systemd's deadline pass and restarted a healthy agent. A loop that is really stuck stays
//   withheld on every look, and systemd restarts the agent as before. It is reported on the
//   second look in a row, so a freeze's first look is not an alarm.
// - woken later than planned: the process was frozen for the excess. No loop could beat then, so
//   that time is not silence (LoopHeartbeats.forgive).
// Times are monotonic µs, given in.

public struct WatchdogSchedule: Sendable, Equatable {
    public static let recheckMicros: Int64 = 1_000_000
    /// A wake-up this late is ordinary scheduling; beyond it the process was frozen.
    public static let frozenSlackMicros: Int64 = 2_000_000

    public let tickMicros: Int64
    public private(set) var nextWakeMicros: Int64
    public private(set) var withheldInARow = 0

    public init(tickMicros: Int64, now: Int64) {
        self.tickMicros = tickMicros
        self.nextWakeMicros = now + tickMicros
    }

    /// How long the process was frozen past its planned wake-up (0: it woke in time).
    public func frozenMicros(wokeAt now: Int64) -> Int64 {
        let late = now - nextWakeMicros
        return late > Self.frozenSlackMicros ? late : 0
    }

    /// How long to wait from `now` before the next look.
    public func waitMicros(at now: Int64) -> Int64 { max(0, nextWakeMicros - now) }

    public enum Decision: Sendable, Equatable {
        case ping
        /// No ping this time; `report`: say why (log, status), once per streak.
        case withhold(report: Bool)
    }

    /// One look at `now` with the loops' problems (empty: all alive).
    public mutating func decide(problems: [String], at now: Int64) -> Decision {
        if problems.isEmpty {
            withheldInARow = 0
            nextWakeMicros = now + tickMicros
            return .ping
        }
        withheldInARow += 1
        nextWakeMicros = now + min(Self.recheckMicros, tickMicros)
        return .withhold(report: withheldInARow == 2)
    }
}
