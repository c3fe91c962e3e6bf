import DoorbellCore
import Glibc

// The uplink: takes events from the outbox in sequence order, signs each attempt afresh
// (webhook-timestamp is the attempt's time), POSTs it over one kept-alive libcurl handle, and
// removes it only after a 2xx. Failures back off with full jitter; nothing is dropped.

public struct UplinkStatus: Sendable, Equatable {
    public var url: String
    public var delivered = 0
    public var failedAttempts = 0
    public var lastSuccessWallMicros: Int64?
    public var lastErrorWallMicros: Int64?
    public var lastError: String?
    public var lastLatencyMicros: Int64?
    /// The receiver answered 410: the endpoint is gone. Delivery stops (events are kept) until
    /// the uplink is reconfigured or the agent restarts.
    public var endpointGone: Bool = false
    /// Events wait because the wall clock is not synchronized yet.
    public var heldForClock: Bool = false
    /// Failed attempts by reason (transport error kind or HTTP status class), for metrics.
    public var failuresByReason: [String: Int] = [:]
    /// Created → acknowledged, seconds: counts per upper bound (cumulative buckets built at render).
    public var deliveredLatency = LatencyHistogram()
    public init(url: String) { self.url = url }
}

public struct LatencyHistogram: Sendable, Equatable {
    public static let bounds: [Double] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 3600]
    public var counts = [Int](repeating: 0, count: LatencyHistogram.bounds.count + 1)
    public var sum: Double = 0
    public var count = 0
    public mutating func observe(_ seconds: Double) {
        let i = Self.bounds.firstIndex { seconds <= $0 } ?? Self.bounds.count
        counts[i] += 1
        sum += seconds
        count += 1
    }
}

public final class Deliverer: @unchecked Sendable {
    let settings: UplinkSettings
    let clock: ClockSettings
    let gatewayID: String
    let signer: WebhookSigner
    let outbox: Outbox
    let log: Logger
    public let status: Locked<UplinkStatus>
    private let wake = WakeSignal()
    private let done = WakeSignal()
    private let stopping = Locked(false)
    /// Monotonic time before which an event is not retried. In memory on purpose: after a restart
    /// everything is due at once, which is what an installer expects after fixing the network.
    private var notBefore: [String: Int64] = [:]
    private var client: HTTPSClient?
    private let busySince = Locked<Int64?>(nil)
    /// Monotonic time the current request started, nil when idle.
    public var busySinceMicros: Int64? { busySince.snapshot }

    public init(settings: UplinkSettings, clock: ClockSettings = ClockSettings(requireSync: false), gatewayID: String,
                signer: WebhookSigner, outbox: Outbox, log: Logger) {
        self.settings = settings
        self.clock = clock
        self.gatewayID = gatewayID
        self.signer = signer
        self.outbox = outbox
        self.log = log
        self.status = Locked(UplinkStatus(url: settings.url))
    }

    public func start() {
        startThread(name: "uplink") { [self] in
            loop()
            client = nil
            done.signal()
        }
    }

    /// New work in the outbox.
    public func notify() { wake.signal() }

    /// Lets an in-flight request finish within `graceMicros`; an abandoned one stays in the
    /// outbox and is delivered after the restart (the receiver deduplicates).
    public func stop(graceMicros: Int64) {
        stopping.withLock { $0 = true }
        wake.signal()
        if !done.wait(timeoutMicros: graceMicros) {
            log.warning("uplink.stop_abandoned_request", [("grace_ms", String(graceMicros / 1000))])
        }
    }

    private var isStopping: Bool { stopping.snapshot }

    private func loop() {
        let backoff = FullJitterBackoff(initialMillis: settings.retryInitialMs, capMillis: settings.retryMaxMs)
        var rng = SystemRandomNumberGenerator()
        while !isStopping {
            let pending: [OutboxEntry]
            do {
                pending = try outbox.pending(limit: 64)
            } catch {
                log.error("outbox.read_failed", [("error", error.description)])
                wake.wait(timeoutMicros: 5_000_000)
                continue
            }
            let now = Clocks.monotonicMicros()
            notBefore = notBefore.filter { id, _ in pending.contains { $0.id == id } }
            // Per-gateway order: the oldest undelivered event goes first; while it waits out its
            // backoff, later ones wait too (receivers see sequences in order).
            guard let first = pending.first else {
                wake.wait(timeoutMicros: nil)
                continue
            }
            let head = Self.next(pending, first: first, notBefore: notBefore, nowMono: now, nowWallMs: Clocks.wallMicros() / 1000)
            if let due = notBefore[head.id], due > now {
                wake.wait(timeoutMicros: due - now)
                continue
            }
            // No timestamps from 1970: wait for NTP. The check is cheap, and it only runs while
            // events are waiting and the clock is not yet set.
            let synced = Clocks.isWallClockSynchronized(clock)
            if clock.requireSync && !synced {
                if !status.snapshot.heldForClock {
                    status.withLock { $0.heldForClock = true }
                    log.warning("uplink.held_for_clock", [("events", String(pending.count)), ("hint", "the wall clock is not synchronized; check NTP (timedatectl)")])
                }
                wake.wait(timeoutMicros: 2_000_000)
                continue
            }
            if status.snapshot.heldForClock {
                status.withLock { $0.heldForClock = false }
                log.notice("uplink.clock_synchronized", [("events", String(pending.count))])
            }
            var entry = head
            if synced, ClockCorrection.needsCorrection(head.body),
               let fixed = ClockCorrection.correct(head.body, nowWallMicros: Clocks.wallMicros(), nowMonoMicros: Clocks.monotonicMicros(),
                                                   bootID: Clocks.bootID) {
                // Stored before the first send, so every retry carries the same bytes.
                do {
                    try outbox.replaceBody(id: head.id, body: fixed)
                    entry = OutboxEntry(id: head.id, sequence: head.sequence, type: head.type, body: fixed, createdAtMs: head.createdAtMs,
                                        attempts: head.attempts, lastError: head.lastError, dead: head.dead)
                } catch {
                    log.error("outbox.write_failed", [("error", error.description)])
                }
            }
            retryAfterMillis = nil
            let outcome = deliver(entry)
            if outcome == .gone {
                // Keep everything, say so, and wait for a new uplink (reload) or a stop.
                while !isStopping { wake.wait(timeoutMicros: nil) }
                break
            }
            if outcome == .delivered || outcome == .parked {
                notBefore[head.id] = nil
            } else {
                let attempt = head.attempts
                var delayMs = backoff.delay(attempt: attempt, random: &rng)
                if let asked = retryAfterMillis { delayMs = max(delayMs, min(asked, 3_600_000)) }
                notBefore[head.id] = Clocks.monotonicMicros() + Int64(delayMs) * 1000
                do {
                    try outbox.recordFailure(id: head.id, error: status.snapshot.lastError ?? "unknown",
                                             nextAttemptAtMs: Clocks.wallMicros() / 1000 + Int64(delayMs))
                } catch {
                    log.error("outbox.write_failed", [("error", error.description)])
                }
                log.info("uplink.retry_scheduled", [("event.id", head.id), ("attempt", String(attempt + 1)), ("delay_ms", String(delayMs))])
            }
        }
    }

    /// A live press (the newest doorbell event from the last 30 s) goes ahead of a backlog: a
    /// ring that is minutes old can wait a moment longer, the visitor at the door cannot. The
    /// receiver still sees `sequence`, so it can tell. Otherwise the oldest event goes first.
    static func next(_ pending: [OutboxEntry], first: OutboxEntry, notBefore: [String: Int64], nowMono: Int64, nowWallMs: Int64) -> OutboxEntry {
        guard pending.count > 1,
              let live = pending.last(where: { $0.type.hasPrefix("doorbell.") && nowWallMs - $0.createdAtMs < 30_000 }),
              live.id != first.id, (notBefore[live.id] ?? 0) <= nowMono else { return first }
        return live
    }

    enum Outcome { case delivered, retry, parked, gone }
    /// A server's wish to be left alone (429/503 Retry-After), honoured up to an hour.
    private var retryAfterMillis: Int?

    /// 4xx that will not change by retrying: park the event as a dead letter (kept, counted,
    /// shown in `agentctl queue`). 408/409/425/429 are about timing and are retried.
    static func isPermanent(_ status: Int) -> Bool {
        (400..<500).contains(status) && ![408, 409, 425, 429].contains(status)
    }

    /// One attempt.
    private func deliver(_ entry: OutboxEntry) -> Outcome {
        if client == nil {
            do {
                client = try HTTPSClient(options: HTTPSClientOptions(
                    url: settings.url, caFile: settings.caFile, connectTimeoutMs: settings.connectTimeoutMs,
                    requestTimeoutMs: settings.requestTimeoutMs, userAgent: "doorbell-agent/\(AgentVersion.current)",
                    pinnedPublicKey: settings.pinnedPublicKey, clientCertFile: settings.clientCertFile,
                    clientKeyFile: settings.clientKeyFile, proxy: settings.proxy))
            } catch {
                fail(entry, error.description)
                return .retry
            }
        }
        guard let client else { return .retry }
        let headers: [(String, String)]
        do {
            headers = try signer.headers(id: entry.id, timestamp: Clocks.wallSeconds(), body: entry.body,
                                         gatewayID: gatewayID, userAgent: "doorbell-agent/\(AgentVersion.current)")
        } catch {
            fail(entry, error.description)
            return .retry
        }
        let started = Clocks.monotonicMicros()
        busySince.withLock { $0 = started }
        let result = client.post(body: entry.body, headers: headers)
        busySince.withLock { $0 = nil }
        switch result {
        case let .failure(error):
            fail(entry, error.description, reason: "\(error.code)")
            return .retry
        case let .success(response):
            guard (200..<300).contains(response.status) else {
                let snippet = String(decoding: response.body.prefix(200), as: UTF8.self)
                let message = "receiver answered HTTP \(response.status)" + (snippet.isEmpty ? "" : ": \(snippet)")
                fail(entry, message, reason: "http_\(response.status / 100)xx")
                if response.status == 429 || response.status == 503,
                   let value = response.header("retry-after"),
                   let seconds = RetryAfter.seconds(value, nowUnixSeconds: Clocks.wallSeconds()) {
                    retryAfterMillis = Int(seconds) * 1000
                }
                if response.status == 410 {
                    status.withLock { $0.endpointGone = true }
                    log.error("uplink.endpoint_gone", [("url", settings.url),
                                                       ("hint", "the receiver says this endpoint no longer exists (410); events are kept. Fix uplink.url and reload.")])
                    return .gone
                }
                if Self.isPermanent(response.status) {
                    do {
                        try outbox.markDead(id: entry.id, error: message)
                        log.error("uplink.event_parked", [("event.id", entry.id), ("status", String(response.status)),
                                                          ("hint", "the receiver refused it for good; see agentctl queue --dead, then agentctl queue retry or purge --dead")])
                        return .parked
                    } catch {
                        log.error("outbox.write_failed", [("error", error.description)])
                    }
                }
                return .retry
            }
            do {
                try outbox.markDelivered(id: entry.id)
            } catch {
                // Delivered but not marked: it will be sent again and the receiver deduplicates.
                log.error("outbox.mark_delivered_failed", [("event.id", entry.id), ("error", error.description)])
            }
            let latency = Clocks.monotonicMicros() - started
            let now = Clocks.wallMicros()
            status.withLock {
                $0.delivered += 1
                $0.lastSuccessWallMicros = now
                $0.lastLatencyMicros = latency
                $0.deliveredLatency.observe(Double(max(0, now / 1000 - entry.createdAtMs)) / 1000)
            }
            log.info("uplink.delivered", [("event.id", entry.id), ("sequence", String(entry.sequence)),
                                          ("status", String(response.status)), ("latency_ms", String(latency / 1000))])
            return .delivered
        }
    }

    private func fail(_ entry: OutboxEntry, _ message: String, reason: String = "local") {
        status.withLock {
            $0.failuresByReason[reason, default: 0] += 1
            $0.failedAttempts += 1
            $0.lastError = message
            $0.lastErrorWallMicros = Clocks.wallMicros()
        }
        log.warning("uplink.attempt_failed", [("event.id", entry.id), ("error", message)])
    }
}
