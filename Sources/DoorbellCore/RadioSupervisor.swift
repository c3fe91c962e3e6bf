// One supervised radio's life as a value: starting → running → (a failure) → restarting or
// missing → a backoff → starting again. The radio shells (rtl_433 child, GPIO line, HCI
// controller) do the opening and reading and tell the supervisor what happened, with the time;
// it decides the state shown in status, how long to wait, and whether a failure is news worth a
// log line. One policy for every radio, tested without a clock.

public enum RadioState: String, Sendable {
    case starting, running, restarting, missing, finished, stopped
}

public struct RadioSupervisor: Sendable {
    public struct Policy: Sendable, Equatable {
        public var backoff: FullJitterBackoff
        /// No retry sooner than this: an absent device is not polled in a tight loop, and a
        /// device that fails at once after opening cannot spin.
        public var floorMillis: Int
        /// A run this long was healthy: its failure starts the backoff again.
        public var healthyRunMicros: Int64
        public init(backoff: FullJitterBackoff, floorMillis: Int, healthyRunMicros: Int64 = 30_000_000) {
            self.backoff = backoff
            self.floorMillis = floorMillis
            self.healthyRunMicros = healthyRunMicros
        }
    }

    /// When to try again, and whether this failure differs from the last one told (the same
    /// failure every minute would drown the journal).
    public struct Retry: Sendable, Equatable {
        public let afterMicros: Int64
        public let isNews: Bool
        /// The failure ended a run (rather than a start that did not succeed).
        public let endedARun: Bool
    }

    public let policy: Policy
    public private(set) var state: RadioState = .starting
    /// Runs that ended in a failure.
    public private(set) var restarts = 0
    public private(set) var lastError: String?
    /// Failures since the last healthy run: the backoff's exponent.
    public private(set) var attempt = 0
    private var runningSince: Int64?
    private var lastTold: String?

    public init(policy: Policy) { self.policy = policy }

    public mutating func starting() { state = .starting }

    /// Opened and working (the child runs, the line is requested, the controller is up).
    public mutating func running(at nowMicros: Int64) {
        state = .running
        lastError = nil
        runningSince = nowMicros
    }

    /// It could not start, or a run ended. `absent`: there is nothing to talk to (no device, no
    /// binary, nobody listening), shown as `missing` rather than `restarting`.
    public mutating func failed(_ message: String, absent: Bool, at nowMicros: Int64, random: inout some RandomNumberGenerator) -> Retry {
        var endedARun = false
        if let since = runningSince {
            endedARun = true
            restarts += 1
            // After a healthy run the backoff starts again, and so does the news.
            if nowMicros - since >= policy.healthyRunMicros { attempt = 0; lastTold = nil }
            runningSince = nil
        }
        state = absent ? .missing : .restarting
        lastError = message
        let delayMillis = max(policy.backoff.delay(attempt: attempt, random: &random), policy.floorMillis)
        attempt += 1
        let isNews = message != lastTold
        lastTold = message
        return Retry(afterMicros: Int64(delayMillis) * 1000, isNews: isNews, endedARun: endedARun)
    }

    /// Reset while running (the controller stalled and was brought up again on the same
    /// transport): a restart, and the reason shows until `recovered`.
    public mutating func resetInPlace(_ message: String, at nowMicros: Int64) {
        restarts += 1
        lastError = message
        state = .running
        runningSince = nowMicros
    }

    /// Working again after a reset in place.
    public mutating func recovered() { lastError = nil }

    /// A replay reached its end.
    public mutating func finished() {
        state = .finished
        runningSince = nil
    }

    public mutating func stopped() {
        state = .stopped
        runningSince = nil
    }
}
