import DoorbellCore

// The shell of LoopHeartbeats: the monotonic clock, shared by the loops (which beat) and the
// watchdog ping (which asks). A component made without an agent (tests, tools) beats into nothing.

public final class LoopMonitor: Sendable {
    let state: Locked<LoopHeartbeats>
    let now: @Sendable () -> Int64

    public init(graceMicros: Int64 = LoopHeartbeats.defaultGraceMicros, now: @escaping @Sendable () -> Int64 = { Clocks.monotonicMicros() }) {
        state = Locked(LoopHeartbeats(graceMicros: graceMicros))
        self.now = now
    }

    /// The handle a loop beats with; `periodMicros` is the longest it goes between beats.
    public func heartbeat(_ name: String, periodMicros: Int64) -> Heartbeat {
        Heartbeat(name: name, periodMicros: periodMicros, monitor: self)
    }

    /// Every watched loop, for the status.
    public func states() -> [LoopHeartbeats.State] {
        let t = now()
        return state.withLock { $0.states(at: t) }
    }

    /// The whole process was frozen this long (WatchdogSchedule): not silence of any loop.
    public func forgive(frozenMicros: Int64) {
        let t = now()
        state.withLock { $0.forgive(frozenMicros: frozenMicros, at: t) }
    }

    /// Dead or stuck loops, one line each; empty when all is well.
    public func problems() -> [String] {
        let t = now()
        return state.withLock { $0.problems(at: t) }
    }
}

public final class Heartbeat: Sendable {
    public let name: String
    public let periodMicros: Int64
    let monitor: LoopMonitor?

    init(name: String, periodMicros: Int64, monitor: LoopMonitor?) {
        self.name = name
        self.periodMicros = periodMicros
        self.monitor = monitor
    }

    /// For a component run on its own: beats go nowhere.
    public static func unmonitored(_ name: String, periodMicros: Int64) -> Heartbeat {
        Heartbeat(name: name, periodMicros: periodMicros, monitor: nil)
    }

    public func started() {
        guard let monitor else { return }
        let t = monitor.now()
        monitor.state.withLock { $0.started(name, periodMicros: periodMicros, at: t) }
    }

    public func beat() {
        guard let monitor else { return }
        let t = monitor.now()
        monitor.state.withLock { $0.beat(name, at: t) }
    }

    public func ended(_ reason: String) {
        guard let monitor else { return }
        let t = monitor.now()
        monitor.state.withLock { $0.ended(name, reason: reason, at: t) }
    }

    public func stopped() { monitor?.state.withLock { $0.stopped(name) } }

    /// `signal.wait`, beating at least once a period: a long backoff or an idle queue is not a
    /// stuck loop. True when signalled.
    @discardableResult
    public func wait(_ signal: WakeSignal, timeoutMicros: Int64?) -> Bool {
        let deadline = timeoutMicros.map { Clocks.monotonicMicros() + $0 }
        while true {
            beat()
            let left = deadline.map { $0 - Clocks.monotonicMicros() }
            if let left, left <= 0 { return false }
            if signal.wait(timeoutMicros: min(left ?? periodMicros, periodMicros)) { return true }
        }
    }

    /// `stop.pause`, beating at least once a period. True when stopped.
    public func pause(_ stop: PollableStop, micros: Int64) -> Bool {
        let deadline = Clocks.monotonicMicros() + micros
        while true {
            beat()
            let left = deadline - Clocks.monotonicMicros()
            if left <= 0 { return stop.isSet }
            if stop.pause(micros: min(left, periodMicros)) { return true }
        }
    }
}

/// A long-lived loop's thread could not be started: the agent cannot do its job and says why.
public struct ThreadStartError: Error, Sendable, CustomStringConvertible {
    public let loop: String
    public let reason: String
    public var description: String {
        "cannot start the \(loop) loop: \(reason). The system is out of memory or at its task limit (TasksMax= in the unit, ulimit -u); the agent stops so that systemd starts it again"
    }
}

/// Starts a long-lived loop on its own thread, registered with its heartbeat. A loop that
/// cannot start is recorded as ended (the watchdog is withheld) and thrown to the caller.
func startLoop(_ heartbeat: Heartbeat, thread: String, _ body: @escaping @Sendable () -> Void) throws(ThreadStartError) {
    heartbeat.started()
    guard startThread(name: thread, body) else {
        let reason = lastThreadStartError.snapshot ?? "pthread_create failed"
        heartbeat.ended("its thread could not start (\(reason))")
        throw ThreadStartError(loop: heartbeat.name, reason: reason)
    }
}
