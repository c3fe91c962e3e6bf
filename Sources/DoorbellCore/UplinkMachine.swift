// The uplink's policy as a value: which events go next and how many at once, how long a failed
// one waits, what a receiver's answer means. The shell (DoorbellRuntime's Deliverer) reads the
// outbox, asks `next`, does the HTTPS and the storage, and hands the answers to `settle`; every
// decision is here, driven by the times it is given, so tests run it without a network or a clock.
//
// Two backoffs, kept apart. The *receiver's*: after a window in which nothing went, no request
// before a full-jitter delay (growing with such windows) or the Retry-After it asked for; the
// next window is one request (a probe), and the events that just failed wait past it, so the
// probe is another event. The *event's*: a failed event waits out its own full-jitter delay
// (growing with its attempts), stored as `next_attempt_at_ms`, while every other due event may
// pass it — the head of the queue never holds the rest. A press the machine
// saw while it was live (made less than 30 s before, or during the window in flight) keeps
// going first, newest first, until it is delivered — whatever it failed meanwhile — and does not
// wait out the receiver's own backoff, only a Retry-After.
// An event that keeps failing while the receiver takes others (a poison event) is parked as a
// dead letter after `parkAfterFailures` failures, counted from the first one while others went
// (later 5xx for it count too); failures while nothing goes (an outage, a Retry-After) never
// start that count.

/// What the machine needs to know of an outbox row (never its body).
public struct UplinkItem: Sendable, Equatable {
    public let id: String
    public let sequence: Int64
    public let type: String
    public let createdAtMs: Int64
    /// Failed attempts so far (its own backoff grows with it).
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
        /// Failures while the receiver took other events, after which an event is parked. At 15,
        /// a healthy event behind a receiver that fails 30 % of requests at random is parked with
        /// odds of 0.3^15 ≈ 1.4e-8.
        public var parkAfterFailures: Int
        public init(maxInFlight: Int, backoff: FullJitterBackoff, requireClockSync: Bool, parkAfterFailures: Int = 15) {
            self.maxInFlight = maxInFlight
            self.backoff = backoff
            self.requireClockSync = requireClockSync
            self.parkAfterFailures = parkAfterFailures
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
        /// Failed this many times while the receiver took other events: kept as a dead letter.
        case poisoned(failures: Int)
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
    /// Monotonic time before which an event is not retried (its own backoff). The shell stores
    /// the same time as `next_attempt_at_ms` and reads only due rows; both start afresh at a
    /// restart (an installer who fixed the network expects delivery at once).
    public private(set) var notBefore: [String: Int64] = [:]
    /// Failures of an event while the receiver took others, and when the last one was.
    public private(set) var strikes: [String: (count: Int, atMono: Int64)] = [:]
    /// No request before this monotonic time (the receiver's backoff or its Retry-After).
    public private(set) var receiverNotBefore: Int64 = 0
    /// The receiver asked for the wait itself (Retry-After): even a live press waits.
    public private(set) var receiverAskedToWait = false
    /// Windows in a row in which nothing went.
    public private(set) var receiverFailures = 0
    /// Presses seen while live, by id (their sequence): they go first until delivered or parked.
    public private(set) var presses: [String: Int64] = [:]
    /// Wall time the last window started: a press made while it was in flight is live too.
    public private(set) var lastSendWallMs: Int64?
    /// 1 at the start and after a window in which nothing went (one request probes the
    /// receiver), `maxInFlight` once something went.
    public private(set) var windowSize = 1
    public private(set) var heldForClock = false
    public private(set) var gone = false

    public init(settings: Settings) { self.settings = settings }

    /// What to do with what the outbox holds now: `pending` are the due events the shell read
    /// (oldest first, plus the newest presses, in sequence order). `clockSynced` is asked only
    /// when an event is due (the check reads the kernel's clock state).
    public mutating func next(pending: [UplinkItem], nowMonoMicros: Int64, nowWallMs: Int64, clockSynced: () -> Bool) -> Action {
        if gone { return .endpointGone }
        let now = nowMonoMicros
        notBefore = notBefore.filter { $0.value > now }
        if strikes.count > 1_024 { strikes = strikes.filter { now - $0.value.atMono < 7_200_000_000 } } // forgotten rows (evicted, purged)
        let due = pending.filter { (notBefore[$0.id] ?? 0) <= now }
        guard let oldest = due.first else {
            if let wake = notBefore.values.min() { return .sleep(untilMonoMicros: wake) }
            return .waitForWork
        }
        for p in Self.livePresses(pending, nowWallMs: nowWallMs, lastSendWallMs: lastSendWallMs) { presses[p.id] = p.sequence }
        if presses.count > 1_024 { // rows gone without a verdict (evicted, purged): keep the newest
            presses = Dictionary(uniqueKeysWithValues: presses.sorted { $0.value > $1.value }.prefix(512).map { ($0.key, $0.value) })
        }
        let first = due.filter { presses[$0.id] != nil }.reversed()
        var size = windowSize
        if receiverNotBefore > now {
            guard !first.isEmpty, !receiverAskedToWait else { return .sleep(untilMonoMicros: receiverNotBefore) }
            size = 1 // the newest press alone, past the receiver's own backoff
        }
        if settings.requireClockSync && !clockSynced() {
            defer { heldForClock = true }
            return .holdForClock(started: !heldForClock)
        }
        let resumed = heldForClock
        heldForClock = false
        lastSendWallMs = nowWallMs
        return .send(Self.window(Array(first) + due.filter { presses[$0.id] == nil }, head: first.first ?? oldest, size: size),
                     clockResumed: resumed)
    }

    /// The verdict for each event of a window, in the window's order; schedules the retries.
    public mutating func settle(_ answers: [(item: UplinkItem, answer: Answer)], nowMonoMicros: Int64, nowWallMs: Int64,
                                random: inout some RandomNumberGenerator) -> [Verdict] {
        let now = nowMonoMicros
        let wentAny = answers.contains { $0.answer == .delivered }
        // The receiver takes requests: a failure now is this event's own (a poison event's).
        let taking = wentAny || receiverFailures == 0 && windowSize > 1
        var askedMs: Int?
        var verdicts: [Verdict] = []
        for (item, answer) in answers {
            switch answer {
            case .delivered:
                forget(item.id)
                verdicts.append(.delivered)
            case let .failed(status?, _) where status == 410:
                gone = true
                verdicts.append(.gone)
            case let .failed(status?, _) where Self.isPermanent(status):
                forget(item.id)
                verdicts.append(.parked)
            case let .failed(status, retryAfter):
                if let asked = retryAfter { askedMs = max(askedMs ?? 0, min(asked, Self.maxRetryAfterMillis)) }
                // A wait asked for (429, Retry-After) is about the receiver, never the event's fault.
                // Once an event failed while others went, its later HTTP 5xx count too: the receiver
                // answers, and otherwise a poison left alone in the queue would never be parked.
                let singledOut = strikes[item.id] != nil && (status.map { (500..<600).contains($0) } ?? false)
                if (taking || singledOut) && retryAfter == nil && status != 429 {
                    let count = (strikes[item.id]?.count ?? 0) + 1
                    if count >= settings.parkAfterFailures {
                        forget(item.id)
                        verdicts.append(.poisoned(failures: count))
                        continue
                    }
                    strikes[item.id] = (count, now)
                }
                // A press that goes first is retried within retry_initial_ms while the receiver takes
                // requests (its own answers are what keep a visitor waiting); otherwise backoff grows.
                let attempt = taking && presses[item.id] != nil ? 0 : item.attempts
                verdicts.append(retry(item, attempt: attempt, nowMonoMicros: now, nowWallMs: nowWallMs, random: &random))
            }
        }
        if wentAny {
            receiverFailures = 0
            receiverNotBefore = 0
        } else if verdicts.contains(where: { if case .retry = $0 { return true } else { return false } }) {
            receiverFailures += 1
            receiverNotBefore = now + Int64(settings.backoff.delay(attempt: receiverFailures - 1, random: &random)) * 1000
        }
        receiverAskedToWait = askedMs != nil
        if let asked = askedMs { receiverNotBefore = max(receiverNotBefore, now + Int64(asked) * 1000) }
        windowSize = wentAny && askedMs == nil ? max(1, settings.maxInFlight) : 1
        if !wentAny {
            // The next probe is another event: one that just failed waits past the receiver's
            // backoff, so a poison event at the head is not the probe every time.
            for i in verdicts.indices {
                guard case .retry = verdicts[i] else { continue }
                let id = answers[i].item.id
                let at = max(notBefore[id] ?? 0, receiverNotBefore + 1_000)
                notBefore[id] = at
                let delayMs = Int((at - now + 999) / 1000)
                verdicts[i] = .retry(delayMs: delayMs, nextAttemptAtWallMs: nowWallMs + Int64(delayMs))
            }
        }
        return verdicts
    }

    private mutating func forget(_ id: String) {
        notBefore[id] = nil
        strikes[id] = nil
        presses[id] = nil
    }

    /// Parking could not be stored: the event is tried again after a backoff instead.
    public mutating func parkingFailed(_ item: UplinkItem, nowMonoMicros: Int64, nowWallMs: Int64, random: inout some RandomNumberGenerator) -> Verdict {
        retry(item, attempt: item.attempts, nowMonoMicros: nowMonoMicros, nowWallMs: nowWallMs, random: &random)
    }

    private mutating func retry(_ item: UplinkItem, attempt: Int, nowMonoMicros: Int64, nowWallMs: Int64,
                                random: inout some RandomNumberGenerator) -> Verdict {
        let delayMs = settings.backoff.delay(attempt: attempt, random: &random)
        notBefore[item.id] = nowMonoMicros + Int64(delayMs) * 1000
        return .retry(delayMs: delayMs, nextAttemptAtWallMs: nowWallMs + Int64(delayMs))
    }

    /// Live presses — doorbell events made in the last 30 s, or while the last window was in
    /// flight — go ahead of a backlog: a ring that is minutes old can wait a moment longer, the
    /// visitor at the door cannot. The receiver still sees `sequence`, so it can tell.
    public static func livePresses(_ pending: [UplinkItem], nowWallMs: Int64, lastSendWallMs: Int64?) -> [UplinkItem] {
        let since = min(nowWallMs, lastSendWallMs ?? nowWallMs) - livePressMillis
        return pending.filter { $0.type.hasPrefix("doorbell.") && $0.createdAtMs > since }
    }

    /// The events sent together: `head`, then the oldest other due events in sequence order, up
    /// to `size`. An event waiting out its own backoff is not in `due`: the others pass it.
    public static func window(_ due: [UplinkItem], head: UplinkItem, size: Int) -> [UplinkItem] {
        var out = [head]
        for item in due where out.count < size && item.id != head.id { out.append(item) }
        return out
    }
}
