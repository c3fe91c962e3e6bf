import DoorbellCore
import Glibc

// The uplink: takes due events from the outbox in sequence order (a live press first), signs each
// attempt afresh (webhook-timestamp is the attempt's time), POSTs them over one kept-alive
// connection, and removes each only after a 2xx. Under a backlog a window of up to
// `uplink.max_in_flight` events is in flight at once (HTTP/2 streams; one after the other over
// HTTP/1.1), and the window's outcomes are written in one transaction — when every event of it
// went, while the next window's first request is on the wire (or before the uplink waits), so the
// receiver does not idle through the write; the next read skips those rows. Every decision (which
// events, the receiver's and each event's backoff, parking) is UplinkMachine's; nothing is dropped.
// Between windows, when HeartbeatSchedule says one is due, a signed heartbeat (not an event) goes
// to the cloud's heartbeat URL on the same connection, so status can say the cloud answers even
// when there is nothing to deliver.

/// An event the uplink parked as a dead letter, for the `gateway.dead_letter` report.
public struct ParkedEvent: Sendable, Equatable {
    public let id: String
    public let sequence: Int64
    public let type: String
    /// "refused" (a 4xx that retrying cannot change) or "failing" (failed while the receiver took others).
    public let reason: String
    public let status: Int?
    public let attempts: Int
    public let error: String
}

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
    /// The last 2xx from the cloud, to an event or a heartbeat (wall time).
    public var lastCloud2xxWallMicros: Int64?
    /// The cloud answered 2xx (event or heartbeat) since this uplink started.
    public var cloudReachedSinceStart = false
    public var heartbeatsAccepted = 0
    public var heartbeatsFailed = 0
    /// Failed attempts by reason (transport error kind or HTTP status class), for metrics.
    public var failuresByReason: [String: Int] = [:]
    /// Created → acknowledged, seconds: counts per upper bound (cumulative buckets built at render).
    public var deliveredLatency = LatencyHistogram()
    public init(url: String) { self.url = url }
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
    /// Presses committed while the uplink waited for work, handed over without a read.
    private let fresh = Locked(FreshEventHandOff<OutboxEntry>())
    /// Bodies an append is about to commit, told while the uplink waits for work: it signs them
    /// while the commit runs (`signedAhead`), and sends only once they are handed over.
    private let toSign = Locked<[(id: String, body: [UInt8])]>([])
    /// Headers signed ahead, by event id (uplink thread only): used when the body is the same
    /// and the second has not changed (webhook-timestamp stays the attempt's own time).
    private var signedAhead: [String: (timestamp: Int64, body: [UInt8], headers: [(String, String)])] = [:]
    /// How long a turn that signed ahead waits for the commit before reading the outbox instead
    /// (a commit that failed, or one that waits for its fsync: a moved sequence reservation).
    static let commitWaitMicros: Int64 = 50_000
    static let userAgent = "doorbell-agent/\(AgentVersion.current)"
    private let done = WakeSignal()
    private let stopping = Locked(false)
    private var client: HTTPSClient?
    private let busySince = Locked<Int64?>(nil)
    /// While requests are outstanding: the monotonic time the uplink last made progress (the
    /// window started, or one of its requests finished); nil when idle. The watchdog's measure.
    public var busySinceMicros: Int64? { busySince.snapshot }
    /// Every decision (window, backoff, Retry-After, 410, clock hold, parking) is the machine's.
    private var machine: UplinkMachine
    /// When a heartbeat is due; the loop only sends it.
    private var heartbeats: HeartbeatSchedule
    private let heartbeatURL: String
    /// The RAUC slot the kernel booted (`rauc.slot=` on its command line), if it says.
    private let bootSlot: String?
    /// The last window, answered 2xx throughout, whose outcomes are not written yet (`settle`):
    /// written while the next window's first request is out, or before the loop waits or ends.
    private var unwritten: (attempts: [Attempt], verdicts: [UplinkMachine.Verdict])?
    /// An idle uplink still wakes this often (one indexed read) so its heartbeat shows it alive.
    static let idleWakeMicros: Int64 = 30_000_000
    public let heartbeat: Heartbeat
    /// Told of events parked as dead letters (stored already), to report them.
    private let onParked: @Sendable ([ParkedEvent]) -> Void

    /// The longest a healthy uplink goes without a beat: an idle wait, or a window of requests
    /// each up to its connect and request timeouts (one after the other over HTTP/1.1).
    public static func heartbeatPeriod(_ settings: UplinkSettings) -> Int64 {
        idleWakeMicros + Int64(max(1, settings.maxInFlight)) * Int64(settings.connectTimeoutMs + settings.requestTimeoutMs) * 1000
    }

    public init(settings: UplinkSettings, clock: ClockSettings = ClockSettings(requireSync: false), gatewayID: String,
                signer: WebhookSigner, outbox: Outbox, log: Logger, heartbeat: Heartbeat? = nil,
                onParked: @escaping @Sendable ([ParkedEvent]) -> Void = { _ in }) {
        self.heartbeat = heartbeat ?? .unmonitored("uplink", periodMicros: Self.heartbeatPeriod(settings))
        self.onParked = onParked
        self.settings = settings
        self.clock = clock
        self.gatewayID = gatewayID
        self.signer = signer
        self.outbox = outbox
        self.log = log
        self.status = Locked(UplinkStatus(url: settings.url))
        machine = UplinkMachine(settings: UplinkMachine.Settings(
            maxInFlight: settings.maxInFlight, backoff: FullJitterBackoff(initialMillis: settings.retryInitialMs, capMillis: settings.retryMaxMs),
            requireClockSync: clock.requireSync, parkAfterFailures: settings.parkAfterFailures))
        heartbeats = HeartbeatSchedule(intervalSeconds: settings.heartbeatIntervalSeconds,
                                       backoff: FullJitterBackoff(initialMillis: settings.retryInitialMs, capMillis: settings.retryMaxMs))
        heartbeatURL = HeartbeatRequest.url(forEventsURL: settings.url)
        bootSlot = readFile("/proc/cmdline", maxBytes: 4096).flatMap { HeartbeatRequest.bootSlot(kernelCommandLine: String(decoding: $0, as: UTF8.self)) }
    }

    public func start() throws(ThreadStartError) {
        try startLoop(heartbeat, thread: "uplink") { [self] in
            do throws(OutboxError) { try outbox.clearBackoffs() } catch { log.error("outbox.write_failed", [("error", error.description)]) }
            loop()
            writeOutcomes()
            client = nil
            done.signal()
        }
    }

    /// Events about to be committed (under the outbox's lock, before COMMIT): when the uplink
    /// waits for work, it signs them now and sends them once `handOff` says they are committed.
    public func signAhead(_ events: [(id: String, body: [UInt8])]) {
        guard !events.isEmpty, fresh.withLock({ $0.awaitsCommit }) else { return }
        toSign.withLock { $0 = Array(($0 + events).suffix(8)) }
        wake.signal()
    }

    /// The outbox changed (events requeued, stored by a path that waits for its fsync): the
    /// uplink reads it.
    public func notify() {
        fresh.withLock { $0.spoil() }
        wake.signal()
    }

    /// Events just committed (right after COMMIT): an uplink waiting for work sends them without
    /// reading the outbox (FreshEventHandOff says when that is exactly what a read would give).
    public func handOff(_ batch: OutboxBatchResult) {
        fresh.withLock { box in
            if batch.evicted.isEmpty && batch.forCloud {
                box.committed(batch.report.map { batch.entries + [$0] } ?? batch.entries, commit: batch.commit)
            } else {
                box.spoil()
            }
        }
        wake.signal()
    }

    /// Lets the requests in flight finish within `graceMicros`; abandoned ones stay in the
    /// outbox and are delivered after the restart (the receiver deduplicates).
    public func stop(graceMicros: Int64) {
        stopping.withLock { $0 = true }
        heartbeat.stopped()
        wake.signal()
        if !done.wait(timeoutMicros: graceMicros) {
            log.warning("uplink.stop_abandoned_request", [("grace_ms", String(graceMicros / 1000))])
        }
    }

    private var isStopping: Bool { stopping.snapshot }

    private func loop() {
        var rng = SystemRandomNumberGenerator()
        while !isStopping {
            heartbeat.beat()
            if signAheadOfCommit() {
                heartbeat.wait(wake, timeoutMicros: Self.commitWaitMicros)
                continue
            }
            let pending: [OutboxEntry]
            var readAfterCommit: Int64? // set when this turn read the outbox
            if let handed = fresh.withLock({ $0.take() }) {
                pending = handed.sorted { $0.sequence < $1.sequence }
            } else {
                do {
                    readAfterCommit = outbox.commitCount
                    pending = try readDue()
                } catch {
                    log.error("outbox.read_failed", [("error", error.description)])
                    heartbeat.wait(wake, timeoutMicros: 5_000_000)
                    continue
                }
            }
            let now = Clocks.monotonicMicros()
            var synced: Bool?
            let action = machine.next(pending: pending.map(\.uplinkItem), nowMonoMicros: now, nowWallMs: Clocks.wallMicros() / 1000) {
                let s = Clocks.isWallClockSynchronized(clock)
                synced = s
                return s
            }
            let state = HeartbeatSchedule.uplink(action, receiverNotBeforeMono: machine.receiverNotBefore, nowMonoMicros: now,
                                                 requireClockSync: clock.requireSync) { synced ?? Clocks.isWallClockSynchronized(clock) }
            var beatDue = Int64.max
            if case .send = action {} else { writeOutcomes() } // nothing is left unwritten while the loop waits
            switch heartbeats.next(nowMonoMicros: now, uplink: state) {
            case .send:
                writeOutcomes()
                sendHeartbeat(rng: &rng)
                continue
            case let .wait(until):
                beatDue = until
            case .off:
                break
            }
            switch action {
            case .waitForWork:
                if let readAfterCommit { fresh.withLock { $0.open(readAfterCommit: readAfterCommit) } }
                heartbeat.wait(wake, timeoutMicros: min(Self.idleWakeMicros, beatDue - now))
            case let .sleep(until):
                heartbeat.wait(wake, timeoutMicros: min(until, beatDue) - now)
            case let .holdForClock(started):
                if started {
                    status.withLock { $0.heldForClock = true }
                    log.warning("uplink.held_for_clock", [("events", String(pending.count)), ("hint", "the wall clock is not synchronized; check NTP (timedatectl)")])
                }
                wake.wait(timeoutMicros: UplinkMachine.clockRecheckMicros)
            case let .send(items, resumed):
                if resumed {
                    status.withLock { $0.heldForClock = false }
                    log.notice("uplink.clock_synchronized", [("events", String(pending.count))])
                }
                let byID = Dictionary(pending.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
                let window = corrected(items.compactMap { byID[$0.id] }, synced: synced ?? Clocks.isWallClockSynchronized(clock))
                settle(deliver(window, handedOver: readAfterCommit == nil), rng: &rng)
            case .endpointGone:
                // Keep everything, say so, and wait for a new uplink (reload makes a new one) or a stop.
                while !isStopping { heartbeat.wait(wake, timeoutMicros: Self.idleWakeMicros) }
            }
        }
    }

    /// Signs what an append told of ahead; true when its commit has not been handed over yet
    /// (the turn waits for it, briefly, instead of reading the outbox).
    private func signAheadOfCommit() -> Bool {
        let ahead = toSign.withLock { list in
            defer { list.removeAll() }
            return list
        }
        guard !ahead.isEmpty else { return false }
        if signedAhead.count > 16 { signedAhead.removeAll() } // never sent: their commit failed
        let now = Clocks.wallSeconds()
        for (id, body) in ahead {
            guard let headers = try? signer.headers(id: id, timestamp: now, body: body, gatewayID: gatewayID, userAgent: Self.userAgent) else { continue }
            signedAhead[id] = (now, body, headers)
        }
        return fresh.withLock { $0.awaitsCommit }
    }

    /// The oldest due events, and the newest presses wherever they are in the backlog, without
    /// the last window's (sent, its outcome not written yet). A second early: the machine holds
    /// each event to its exact (monotonic) time, and a row the query missed by a millisecond would
    /// wait for the next wake-up. Twice a window: a window fills even when some rows are a moment
    /// short of due.
    private func readDue() throws(OutboxError) -> [OutboxEntry] {
        let unwrittenSequences = Set(unwritten?.attempts.map(\.entry.sequence) ?? [])
        let limit = max(16, 2 * settings.maxInFlight + 1) + unwrittenSequences.count
        let due = try outbox.due(nowWallMs: Clocks.wallMicros() / 1000 + 1_000, limit: limit)
        let known = Set(due.map(\.id))
        return (due + (try outbox.newestPresses(limit: 8)).filter { !known.contains($0.id) })
            .filter { !unwrittenSequences.contains($0.sequence) }.sorted { $0.sequence < $1.sequence }
    }

    /// Events recorded before the clock was synchronized get their `occurred_at` corrected,
    /// stored (one transaction for the window) before the first send, so every retry carries the
    /// same bytes.
    private func corrected(_ window: [OutboxEntry], synced: Bool) -> [OutboxEntry] {
        guard synced else { return window }
        var fixed: [(sequence: Int64, body: [UInt8])] = []
        var out = window
        for (i, e) in window.enumerated() {
            guard let stamp = e.clock, let body = ClockCorrection.correct(e.body, recordedBy: stamp, nowWallMicros: Clocks.wallMicros(),
                                                                          nowMonoMicros: Clocks.monotonicMicros(), bootID: Clocks.bootID) else { continue }
            fixed.append((e.sequence, body))
            out[i] = OutboxEntry(id: e.id, sequence: e.sequence, type: e.type, body: body, createdAtMs: e.createdAtMs,
                                 attempts: e.attempts, lastError: e.lastError, dead: e.dead)
        }
        guard !fixed.isEmpty else { return window }
        do {
            try outbox.replaceBodies(fixed)
            return out
        } catch {
            log.error("outbox.write_failed", [("error", error.description)])
            return window
        }
    }

    /// One event's attempt and what the receiver said.
    struct Attempt {
        let entry: OutboxEntry
        var answer = UplinkMachine.Answer.failed(status: nil, retryAfterMillis: nil)
        var status = 0
        var message = ""
        var latencyMicros: Int64 = 0
        var acknowledgedWallMicros: Int64 = 0
        /// Sent without a read of the outbox (FreshEventHandOff), signed while it was committed.
        var handedOver = false
        var signedAhead = false
    }

    /// The kept-alive client, made on first use (and again after a reload drops it).
    private func connectedClient() -> Result<HTTPSClient, TransportError> {
        if let client { return .success(client) }
        do {
            let made = try HTTPSClient(options: HTTPSClientOptions(
                url: settings.url, caFile: settings.caFile, connectTimeoutMs: settings.connectTimeoutMs,
                requestTimeoutMs: settings.requestTimeoutMs, userAgent: Self.userAgent,
                pinnedPublicKey: settings.pinnedPublicKey, clientCertFile: settings.clientCertFile,
                clientKeyFile: settings.clientKeyFile, proxy: settings.proxy))
            client = made
            return .success(made)
        } catch {
            return .failure(error)
        }
    }

    /// One attempt for each event of the window, each signed as it is handed to libcurl (the
    /// next one already while the one before is out), POSTed together.
    private func deliver(_ window: [OutboxEntry], handedOver: Bool) -> [Attempt] {
        let client: HTTPSClient
        switch connectedClient() {
        case let .success(c):
            client = c
        case let .failure(error):
            // Counted once, for the head; the others were not attempted.
            fail(window[0], error.description)
            return [Attempt(entry: window[0], message: error.description)]
        }
        var attempts = window.map { Attempt(entry: $0, handedOver: handedOver) }
        var ahead: [Int: HTTPRequest?] = [:] // signed while the request before was out (nil: signing failed)
        var handedOut = 0 // requests made so far: the next to sign ahead is this one
        func sign(_ i: Int) -> HTTPRequest? {
            let entry = window[i]
            if let ahead = signedAhead.removeValue(forKey: entry.id), ahead.timestamp == Clocks.wallSeconds(), ahead.body == entry.body {
                attempts[i].signedAhead = true
                return HTTPRequest(body: entry.body, headers: ahead.headers)
            }
            do {
                let headers = try signer.headers(id: entry.id, timestamp: Clocks.wallSeconds(), body: entry.body,
                                                 gatewayID: gatewayID, userAgent: Self.userAgent)
                return HTTPRequest(body: entry.body, headers: headers)
            } catch {
                fail(entry, error.description)
                attempts[i].message = error.description
                return nil
            }
        }
        busySince.withLock { $0 = Clocks.monotonicMicros() }
        client.send(count: window.count, request: { i in
            handedOut = i + 1
            if let made = ahead.removeValue(forKey: i) { return made }
            return sign(i)
        }, whileWaiting: { [self] in
            // One piece at a time, each far shorter than a request's round trip.
            if unwritten != nil {
                writeOutcomes()
            } else if handedOut < window.count && ahead[handedOut] == nil {
                ahead[handedOut] = .some(sign(handedOut))
            }
        }) { index, result in
            busySince.withLock { $0 = Clocks.monotonicMicros() }
            let i = index
            let entry = attempts[i].entry
            switch result {
            case let .failure(error):
                fail(entry, error.description, reason: "\(error.code)")
                attempts[i].message = error.description
            case let .success(response):
                attempts[i].status = response.status
                guard (200..<300).contains(response.status) else {
                    let snippet = String(decoding: response.body.prefix(200), as: UTF8.self)
                    let message = "receiver answered HTTP \(response.status)" + (snippet.isEmpty ? "" : ": \(snippet)")
                    attempts[i].message = message
                    fail(entry, message, reason: "http_\(response.status / 100)xx")
                    var retryAfter: Int?
                    if response.status == 429 || response.status == 503, let value = response.header("retry-after"),
                       let seconds = RetryAfter.seconds(value, nowUnixSeconds: Clocks.wallSeconds()) {
                        retryAfter = Int(seconds) * 1000
                    }
                    attempts[i].answer = .failed(status: response.status, retryAfterMillis: retryAfter)
                    return
                }
                attempts[i].answer = .delivered
                attempts[i].latencyMicros = response.elapsedMicros
                attempts[i].acknowledgedWallMicros = Clocks.wallMicros()
            }
        }
        busySince.withLock { $0 = nil }
        return attempts
    }

    /// The machine's verdicts. A window that went whole is written later (`writeOutcomes`), any
    /// other at once: failures, backoffs and parkings are on disk before the next decision.
    private func settle(_ attempts: [Attempt], rng: inout SystemRandomNumberGenerator) {
        let nowMono = Clocks.monotonicMicros()
        let verdicts = machine.settle(attempts.map { ($0.entry.uplinkItem, $0.answer) }, nowMonoMicros: nowMono,
                                      nowWallMs: Clocks.wallMicros() / 1000, random: &rng)
        if verdicts.contains(.delivered) { heartbeats.cloudAnswered(nowMonoMicros: nowMono) }
        writeOutcomes() // the window before, if no wait during this one came to write it
        if !verdicts.isEmpty && verdicts.allSatisfy({ $0 == .delivered }) {
            unwritten = (attempts, verdicts)
        } else {
            write(attempts, verdicts, rng: &rng)
        }
    }

    /// The last window's outcomes, if still unwritten.
    private func writeOutcomes() {
        guard let (attempts, verdicts) = unwritten else { return }
        unwritten = nil
        var rng = SystemRandomNumberGenerator()
        write(attempts, verdicts, rng: &rng)
    }

    /// The verdicts, written in one transaction; then counted and logged. A row acknowledged but
    /// not written (a failed write, a power cut before it) is sent again; receivers deduplicate.
    private func write(_ attempts: [Attempt], _ given: [UplinkMachine.Verdict], rng: inout SystemRandomNumberGenerator) {
        var verdicts = given
        let nowMono = Clocks.monotonicMicros()
        let nowWallMs = Clocks.wallMicros() / 1000
        let lastError = status.snapshot.lastError ?? "unknown"
        let failed = zip(attempts, verdicts).compactMap { a, v -> (sequence: Int64, error: String, nextAttemptAtMs: Int64)? in
            guard case let .retry(_, at) = v else { return nil }
            return (a.entry.sequence, a.message.isEmpty ? lastError : a.message, at)
        }
        let delivered = zip(attempts, verdicts).filter { $0.1 == .delivered }.map(\.0)
        var parked: [ParkedEvent] = []
        for (a, v) in zip(attempts, verdicts) {
            if let p = Self.parked(a, v, lastError: lastError) { parked.append(p) }
        }
        do {
            try outbox.settle(delivered: delivered.map(\.entry.sequence), failed: failed, dead: parked.map { ($0.sequence, $0.error) })
            if !parked.isEmpty { onParked(parked) }
        } catch {
            log.error("outbox.write_failed", [("error", error.description)])
            // Delivered but not marked: they will be sent again and the receiver deduplicates.
            for a in delivered { log.error("outbox.mark_delivered_failed", [("event.id", a.entry.id), ("error", error.description)]) }
            // Not parked after all: tried again after a backoff.
            for i in verdicts.indices {
                switch verdicts[i] {
                case .parked, .poisoned:
                    verdicts[i] = machine.parkingFailed(attempts[i].entry.uplinkItem, nowMonoMicros: nowMono, nowWallMs: nowWallMs, random: &rng)
                default: break
                }
            }
        }
        if let last = delivered.last {
            status.withLock {
                $0.delivered += delivered.count
                $0.lastSuccessWallMicros = last.acknowledgedWallMicros
                $0.lastCloud2xxWallMicros = last.acknowledgedWallMicros
                $0.cloudReachedSinceStart = true
                $0.lastLatencyMicros = last.latencyMicros
                for a in delivered {
                    $0.deliveredLatency.observe(Double(max(0, a.acknowledgedWallMicros / 1000 - a.entry.createdAtMs)) / 1000)
                }
            }
        }
        for (a, verdict) in zip(attempts, verdicts) {
            switch verdict {
            case .delivered:
                log.info("uplink.delivered", [("event.id", a.entry.id), ("sequence", String(a.entry.sequence)),
                                              ("status", String(a.status)), ("latency_ms", String(a.latencyMicros / 1000)),
                                              ("via", a.handedOver ? "hand_off" : "read"), ("signed", a.signedAhead ? "ahead" : "at_send")])
            case .parked:
                log.error("uplink.event_parked", [("event.id", a.entry.id), ("status", String(a.status)),
                                                  ("hint", "the receiver refused it for good; see agentctl queue --dead, then agentctl queue retry or purge --dead")])
            case let .poisoned(failures):
                log.error("uplink.event_parked", [("event.id", a.entry.id), ("status", String(a.status)), ("failures", String(failures)),
                                                  ("hint", "it kept failing while the receiver took other events; see agentctl queue --dead, then agentctl queue retry or purge --dead")])
            case let .retry(delayMs, _):
                log.info("uplink.retry_scheduled", [("event.id", a.entry.id), ("attempt", String(a.entry.attempts + 1)),
                                                    ("delay_ms", String(delayMs))])
            case .gone:
                break
            }
        }
        if verdicts.contains(.gone) && !status.snapshot.endpointGone {
            status.withLock { $0.endpointGone = true }
            log.error("uplink.endpoint_gone", [("url", settings.url),
                                               ("hint", "the receiver says this endpoint no longer exists (410); events are kept. Fix uplink.url and reload.")])
        }
    }

    /// What a dead letter's report says, for a verdict that parks.
    static func parked(_ a: Attempt, _ verdict: UplinkMachine.Verdict, lastError: String) -> ParkedEvent? {
        let message = a.message.isEmpty ? lastError : a.message
        let httpStatus: Int? = a.status == 0 ? nil : a.status
        let reason: String
        let error: String
        switch verdict {
        case .parked:
            reason = "refused"
            error = message
        case let .poisoned(failures):
            reason = "failing"
            error = "failed \(failures) times while the receiver took other events; last: \(message)"
        default:
            return nil
        }
        return ParkedEvent(id: a.entry.id, sequence: a.entry.sequence, type: a.entry.type, reason: reason, status: httpStatus,
                           attempts: a.entry.attempts + 1, error: error)
    }

    /// One heartbeat, signed like an event, on the kept-alive connection; its answer is only
    /// counted, shown in status and logged (events never wait for it, nothing is retried but
    /// by the schedule).
    private enum HeartbeatOutcome {
        case accepted(Int)
        case failed(String)
    }

    private func sendHeartbeat(rng: inout SystemRandomNumberGenerator) {
        let sentAt = Clocks.wallSeconds()
        let id = HeartbeatRequest.makeID(unixMillis: Clocks.wallMicros() / 1000, random: &rng)
        let body = HeartbeatRequest.body(id: id, gatewayID: gatewayID, agentVersion: AgentVersion.current, bootSlot: bootSlot, sentAt: sentAt)
        var outcome: HeartbeatOutcome
        switch connectedClient() {
        case let .failure(error):
            outcome = .failed(error.description)
        case let .success(client):
            do {
                let headers = try signer.headers(id: id, timestamp: sentAt, body: body, gatewayID: gatewayID,
                                                 userAgent: Self.userAgent)
                outcome = .failed("heartbeat to \(heartbeatURL) was not sent")
                busySince.withLock { $0 = Clocks.monotonicMicros() }
                client.send([HTTPRequest(body: body, headers: headers, url: heartbeatURL)]) { _, result in
                    switch result {
                    case let .success(response) where (200..<300).contains(response.status):
                        outcome = .accepted(response.status)
                    case let .success(response):
                        let snippet = String(decoding: response.body.prefix(200), as: UTF8.self)
                        outcome = .failed("the cloud answered the heartbeat to \(heartbeatURL) with HTTP \(response.status)"
                                           + (snippet.isEmpty ? "" : ": \(snippet)"))
                    case let .failure(error):
                        outcome = .failed("heartbeat to \(heartbeatURL): \(error.description)")
                    }
                }
                busySince.withLock { $0 = nil }
            } catch {
                outcome = .failed(error.description)
            }
        }
        let nowWall = Clocks.wallMicros()
        switch outcome {
        case let .accepted(code):
            heartbeats.finished(accepted: true, nowMonoMicros: Clocks.monotonicMicros(), random: &rng)
            status.withLock {
                $0.heartbeatsAccepted += 1
                $0.lastCloud2xxWallMicros = nowWall
                $0.cloudReachedSinceStart = true
            }
            log.info("uplink.heartbeat_accepted", [("heartbeat.id", id), ("status", String(code))])
        case let .failed(message):
            heartbeats.finished(accepted: false, nowMonoMicros: Clocks.monotonicMicros(), random: &rng)
            status.withLock {
                $0.heartbeatsFailed += 1
                $0.lastError = message
                $0.lastErrorWallMicros = nowWall
            }
            log.warning("uplink.heartbeat_failed", [("heartbeat.id", id), ("error", message),
                                                     ("retry_in_s", String(max(0, heartbeats.dueMonoMicros - Clocks.monotonicMicros()) / 1_000_000))])
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

extension OutboxEntry {
    var uplinkItem: UplinkItem { UplinkItem(id: id, sequence: sequence, type: type, createdAtMs: createdAtMs, attempts: attempts) }
}
