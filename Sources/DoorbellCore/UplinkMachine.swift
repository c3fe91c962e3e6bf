// The uplink's policy as a value: which events go next and how many at once, how long a failed
// one waits, what a receiver's answer means. The shell (DoorbellRuntime's Deliverer) reads the
// outbox, asks `next`, does the HTTPS and the storage, and hands the answers to `settle`; every
// decision is here, driven by the times it is given, so tests run it without a network or a clock.

/// What the machine needs to know of an outbox row (never its body).
public struct UplinkItem: Sendable, Equatable {
    public let id: String
    public let sequence: Int64
    public let type: String
    public let createdAtMs: Int64
    /// Failed attempts so far (the backoff grows with it).
    public let attempts: Int
    public init(id: String, sequence: Int64, type: String, createdAtMs: Int64, attempts: Int) {
        self.id = id
        self.sequence = sequence
        self.type = type
        self.createdAtMs = createdAtMs
        self.attempts = attempts
    }
}

public struct UplinkMachine: Sendable {
    public struct Settings: Sendable, Equatable {
        public var maxInFlight: Int
        public var backoff: FullJitterBackoff
        /// Hold events while the wall clock is not synchronized (no timestamps from 1970).
        public var requireClockSync: Bool
        public init(maxInFlight: Int, backoff: FullJitterBackoff, requireClockSync: Bool) {
            self.maxInFlight = maxInFlight
            self.backoff = backoff
            self.requireClockSync = requireClockSync
        }
    }

    public enum Action: Sendable, Equatable {
        /// Nothing pending: wait until the outbox has something.
        case waitForWork
        /// The next event is backing off: wait until this monotonic time (or new work).
        case sleep(untilMonoMicros: Int64)
        /// Events wait for the wall clock; `started` on the first tick of a hold (log it once).
        case holdForClock(started: Bool)
        /// Send these, in this order. `clockResumed`: a hold for the clock just ended.
        case send([UplinkItem], clockResumed: Bool)
        /// The receiver said the endpoint is gone (410): send nothing until a new uplink.
        case endpointGone
    }

    /// What the receiver (or the transport) said about one event of a window.
    public enum Answer: Sendable, Equatable {
        case delivered
        /// A transport failure, an unsigned request, or an HTTP status.
        case failed(status: Int?, retryAfterMillis: Int?)
    }

    public enum Verdict: Sendable, Equatable {
        case delivered
        /// Tried again no earlier than `nextAttemptAtMs` (wall) / after `delayMs`.
        case retry(delayMs: Int, nextAttemptAtWallMs: Int64)
        /// Refused for good (a 4xx that retrying cannot change): kept as a dead letter.
        case parked
        case gone
    }

    /// 4xx that will not change by retrying park the event; 408/409/425/429 are about timing.
    public static func isPermanent(_ status: Int) -> Bool {
        (400..<500).contains(status) && ![408, 409, 425, 429].contains(status)
    }

    /// A server's wish to be left alone is honoured up to an hour.
    public static let maxRetryAfterMillis = 3_600_000
    /// How long a hold for the clock waits before looking again.
    public static let clockRecheckMicros: Int64 = 2_000_000
    /// A press younger than this goes ahead of a backlog.
    public static let livePressMillis: Int64 = 30_000

    public let settings: Settings
    /// Monotonic time before which an event is not retried. In memory on purpose: after a restart
    /// everything is due at once, which is what an installer expects after fixing the network.
    public private(set) var notBefore: [String: Int64] = [:]
    /// 1 at the start and after any failed attempt (one request probes the receiver),
    /// `maxInFlight` once a window went through.
    public private(set) var windowSize = 1
    public private(set) var heldForClock = false
    public private(set) var gone = false

    public init(settings: Settings) { self.settings = settings }

    /// What to do with what the outbox holds now. `clockSynced` is asked only when an event is
    /// due (the check reads the kernel's clock state).
    public mutating func next(pending: [UplinkItem], nowMonoMicros: Int64, nowWallMs: Int64, clockSynced: () -> Bool) -> Action {
        if gone { return .endpointGone }
        let ids = Set(pending.map(\.id))
        notBefore = notBefore.filter { ids.contains($0.key) }
        guard let first = pending.first else { return .waitForWork }
        let head = Self.next(pending, first: first, notBefore: notBefore, nowMono: nowMonoMicros, nowWallMs: nowWallMs)
        if let due = notBefore[head.id], due > nowMonoMicros { return .sleep(untilMonoMicros: due) }
        if settings.requireClockSync && !clockSynced() {
            defer { heldForClock = true }
            return .holdForClock(started: !heldForClock)
        }
        let resumed = heldForClock
        heldForClock = false
        return .send(Self.window(pending, head: head, size: windowSize, notBefore: notBefore, nowMono: nowMonoMicros), clockResumed: resumed)
    }

    /// The verdict for each event of a window, in the window's order; schedules the retries.
    public mutating func settle(_ answers: [(item: UplinkItem, answer: Answer)], nowMonoMicros: Int64, nowWallMs: Int64,
                                random: inout some RandomNumberGenerator) -> [Verdict] {
        var verdicts: [Verdict] = []
        var allWent = true
        for (item, answer) in answers {
            switch answer {
            case .delivered:
                notBefore[item.id] = nil
                verdicts.append(.delivered)
            case let .failed(status?, _) where status == 410:
                gone = true
                allWent = false
                verdicts.append(.gone)
            case let .failed(status?, _) where Self.isPermanent(status):
                notBefore[item.id] = nil
                verdicts.append(.parked)
            case let .failed(_, retryAfter):
                allWent = false
                verdicts.append(retry(item, retryAfterMillis: retryAfter, nowMonoMicros: nowMonoMicros, nowWallMs: nowWallMs, random: &random))
            }
        }
        windowSize = allWent ? max(1, settings.maxInFlight) : 1
        return verdicts
    }

    /// Parking could not be stored: the event is tried again after a backoff instead.
    public mutating func parkingFailed(_ item: UplinkItem, nowMonoMicros: Int64, nowWallMs: Int64, random: inout some RandomNumberGenerator) -> Verdict {
        retry(item, retryAfterMillis: nil, nowMonoMicros: nowMonoMicros, nowWallMs: nowWallMs, random: &random)
    }

    private mutating func retry(_ item: UplinkItem, retryAfterMillis: Int?, nowMonoMicros: Int64, nowWallMs: Int64,
                                random: inout some RandomNumberGenerator) -> Verdict {
        var delayMs = settings.backoff.delay(attempt: item.attempts, random: &random)
        if let asked = retryAfterMillis { delayMs = max(delayMs, min(asked, Self.maxRetryAfterMillis)) }
        notBefore[item.id] = nowMonoMicros + Int64(delayMs) * 1000
        return .retry(delayMs: delayMs, nextAttemptAtWallMs: nowWallMs + Int64(delayMs))
    }

    /// A live press (the newest doorbell event from the last 30 s) goes ahead of a backlog: a
    /// ring that is minutes old can wait a moment longer, the visitor at the door cannot. The
    /// receiver still sees `sequence`, so it can tell. Otherwise the oldest event goes first.
    public static func next(_ pending: [UplinkItem], first: UplinkItem, notBefore: [String: Int64], nowMono: Int64, nowWallMs: Int64) -> UplinkItem {
        guard pending.count > 1,
              let live = pending.last(where: { $0.type.hasPrefix("doorbell.") && nowWallMs - $0.createdAtMs < livePressMillis }),
              live.id != first.id, (notBefore[live.id] ?? 0) <= nowMono else { return first }
        return live
    }

    /// The events sent together: `head`, then the oldest others in sequence order, up to `size`,
    /// stopping at the first one still waiting out its backoff (so nothing overtakes a retried
    /// event by more than one window).
    public static func window(_ pending: [UplinkItem], head: UplinkItem, size: Int, notBefore: [String: Int64], nowMono: Int64) -> [UplinkItem] {
        var out = [head]
        guard size > 1 else { return out }
        for item in pending where item.id != head.id {
            if out.count >= size { break }
            if let due = notBefore[item.id], due > nowMono { break }
            out.append(item)
        }
        return out
    }
}
