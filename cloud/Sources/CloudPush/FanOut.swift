import CloudCore
import CloudStore
import Logging
import NIOPosix
import Synchronization

/// Drains the delivery queue to APNs: due deliveries in batches, up to `concurrency` at once on
/// the HTTP/2 connection, each outcome recorded as it arrives, so one bad token never holds up
/// the others and a crash resumes with exactly the unsent ones. Woken by new events; sleeps
/// until the next retry is due otherwise (no polling while idle).
public final class FanOut: Sendable {
    let store: CloudStore
    let client: APNsClient
    let logger: Logger
    let clock: @Sendable () -> Int64
    /// Told of every recorded outcome (the `PUSH` lines of `doorbell-cloud serve`).
    let onOutcome: @Sendable (Delivery, CloudStore.Outcome, CloudStore.TokenEffect) -> Void
    private let wake: Mutex<CheckedContinuation<Void, Never>?> = Mutex(nil)
    private let pendingWake = Atomic<Bool>(false)
    private let stopping = Atomic<Bool>(false)
    let stats = Mutex(FanOutStats())
    /// Who holds the pushes this fan-out claims: the same id after a restart takes them back at
    /// once; other ids wait for the lease. Two fan-outs running at once need different ids.
    let owner: String
    let lease: LeasePolicy
    /// Where the fan-out's own work runs: a thread at a lower priority than the request threads
    /// (the server's event loops and Swift concurrency's pool), so a 10,000-phone fan-out takes
    /// the CPU they leave free instead of queueing ahead of every ingest.
    /// (`APNsSettings.niceness` lower).
    private let executor: DedicatedThreadExecutor

    public init(store: CloudStore, client: APNsClient, logger: Logger,
                clock: @escaping @Sendable () -> Int64, owner: String,
                onOutcome: @escaping @Sendable (Delivery, CloudStore.Outcome, CloudStore.TokenEffect) -> Void = { _, _, _ in }) {
        self.onOutcome = onOutcome
        self.owner = owner
        lease = LeasePolicy(requestTimeoutSeconds: client.settings.requestTimeoutSeconds)
        executor = DedicatedThreadExecutor(name: "fan-out", niceness: client.settings.niceness)
        self.store = store
        self.client = client
        self.logger = logger
        self.clock = clock
    }

    /// New work was queued: start a pass now.
    public func notify() {
        pendingWake.store(true, ordering: .sequentiallyConsistent)
        let continuation = wake.withLock { value -> CheckedContinuation<Void, Never>? in
            defer { value = nil }
            return value
        }
        continuation?.resume()
    }

    public var statistics: FanOutStats { stats.withLock { $0 } }

    /// Whether APNs accepts our provider tokens, and how many were signed since start.
    public var providerTokenStatus: (health: ProviderTokenHealth, signed: Int) { client.providerTokenStatus }

    /// Stop gracefully: claim nothing more, let the pushes on the wire finish (at most
    /// `lease.drainMilliseconds`, then they are cancelled), record their outcomes, release the
    /// claimed ones not yet sent; `run()` then returns.
    public func stop() {
        stopping.store(true, ordering: .sequentiallyConsistent)
        notify()
    }

    var isStopping: Bool { stopping.load(ordering: .sequentiallyConsistent) }

    deinit {
        executor.stop()
    }

    /// Runs until `stop()` (or, abruptly, until the task is cancelled), on the fan-out's thread.
    public func run() async {
        await withTaskExecutorPreference(executor) { await runLoop() }
    }

    /// First takes back what a previous run of this instance claimed and never finished (it
    /// crashed); then passes, sleeping until the next is due.
    private func runLoop() async {
        do {
            let reclaimed = try await store.reclaimLeases(owner: owner, now: clock())
            if reclaimed > 0 {
                logger.notice("took back pushes a previous run claimed and did not finish",
                              metadata: ["count": "\(reclaimed)", "owner": "\(owner)"])
            }
        } catch {
            logger.error("fan-out: could not take back earlier leases; they are sent when the lease runs out",
                         metadata: ["error": "\(error)"])
        }
        while !Task.isCancelled && !isStopping {
            pendingWake.store(false, ordering: .sequentiallyConsistent)
            let sent: Int
            do {
                sent = try await pass()
            } catch {
                logger.error("fan-out: the delivery queue could not be read; retrying in 5 s",
                             metadata: ["error": "\(error)"])
                await sleep(milliseconds: 5_000)
                continue
            }
            if sent > 0 || isStopping { continue }
            // Never longer than the idle check: other servers' new and orphaned pushes wake no one here.
            let next = (try? await store.nextDueTime()) ?? nil
            let now = clock()
            let wait = min(next.map { max(0, $0 - now) } ?? lease.idleCheckMilliseconds, lease.idleCheckMilliseconds)
            if wait > 0 { await sleep(milliseconds: wait) }
        }
    }

    /// One result of a pass's task group: a push's outcome, the drain deadline after `stop()`,
    /// or the moment the oldest unwritten outcome must be written.
    private enum Finished: Sendable {
        case push(CloudStore.Outcome, Delivery)
        case drainDeadline
        case flushDue
    }

    /// Sends every delivery due now, batch after batch. Returns how many were attempted.
    func pass() async throws -> Int {
        let batchSize = max(client.settings.concurrency * 4, 64)
        let due = try await store.claimDue(now: clock(), limit: batchSize, leaseMilliseconds: lease.leaseMilliseconds, owner: owner)
        guard !due.isEmpty else { return 0 }
        let limit = max(client.settings.concurrency, 1)
        // Outcomes are written in groups (one transaction, one fsync), but small and young ones
        // (LeasePolicy.outcomeGroupLimit, .outcomeDelayMilliseconds): an answered push whose
        // outcome is not written yet is pushed again after a SIGKILL.
        var finished: [(CloudStore.Outcome, Delivery)] = []
        let groupSize = min(max(limit / 2, 1), LeasePolicy.outcomeGroupLimit)
        var flushTimerRunning = false
        var started = 0
        await withTaskGroup(of: Finished.self) { group in
            // After stop(), pushes on the wire get lease.drainMilliseconds to finish.
            group.addTask { [self] in
                while !isStopping {
                    do { try await Task.sleep(for: .milliseconds(50)) } catch { return .drainDeadline }
                }
                try? await Task.sleep(for: .milliseconds(lease.drainMilliseconds))
                return .drainDeadline
            }
            var running = 0
            func take(_ result: Finished) async {
                switch result {
                case .push(let outcome, let delivery):
                    running -= 1
                    finished.append((outcome, delivery))
                    if finished.count >= groupSize || running == 0 {
                        await flush(&finished)
                    } else if !flushTimerRunning {
                        flushTimerRunning = true
                        group.addTask {
                            try? await Task.sleep(for: .milliseconds(LeasePolicy.outcomeDelayMilliseconds))
                            return .flushDue
                        }
                    }
                case .flushDue:
                    flushTimerRunning = false
                    await flush(&finished)
                case .drainDeadline:
                    if !Task.isCancelled {
                        logger.warning("fan-out: pushes still unanswered at the end of the drain; cancelled, sent again later",
                                       metadata: ["count": "\(running)"])
                    }
                    group.cancelAll()
                }
            }
            for delivery in due {
                if isStopping { break }
                while running >= limit, let result = await group.next() { await take(result) }
                if isStopping { break }
                group.addTask { .push(await self.attempt(delivery), delivery) }
                running += 1
                started += 1
            }
            while running > 0, let result = await group.next() { await take(result) }
            group.cancelAll()  // the drain watchdog and a flush timer
        }
        await flush(&finished)
        if started < due.count {
            do {
                try await store.releaseLeases(Array(due[started...]), owner: owner, now: clock())
            } catch {
                logger.error("fan-out: could not release unsent pushes; they are sent when the lease runs out",
                             metadata: ["error": "\(error)"])
            }
        }
        return started
    }

    /// One delivery: send, and on a rejected provider token sign a new one and send once more.
    func attempt(_ delivery: Delivery) async -> CloudStore.Outcome {
        let started = clock()
        guard started <= delivery.expiresAtMilliseconds else {
            return .retry(status: nil, reason: "expired before it could be sent", at: .max)
        }
        var verdict: APNsVerdict
        do {
            verdict = try await sendWithProviderToken(delivery)
        } catch {
            verdict = .retry(reason: "could not sign the provider token: \(error)", afterSeconds: 60)
        }
        switch verdict {
        case .delivered:
            return .delivered
        case .unregistered(let reason, let timestamp):
            return .unregistered(reason: reason, timestampMs: timestamp ?? started)
        case .badDeviceToken:
            return .badDeviceToken
        case .providerTokenRejected(let reason):
            return .retry(status: 403, reason: reason, at: clock() + backoff(delivery, nil))
        case .retry(let reason, let after):
            return .retry(status: nil, reason: reason, at: clock() + backoff(delivery, after))
        case .permanent(let reason):
            return .failed(status: nil, reason: reason)
        }
    }

    /// Sends with the current provider token. A rejected token is replaced once per burst (the
    /// schedule decides) and the push sent again; while a rejected replacement holds pushes,
    /// nothing is sent and the push waits until the schedule allows a new token.
    private func sendWithProviderToken(_ delivery: Delivery) async throws -> APNsVerdict {
        for _ in 0..<2 {
            let now = clock() / 1000
            let token: APNsProviderToken
            switch try client.providerToken(now: now) {
            case .success(let current): token = current
            case .failure(let held): return .retry(reason: "provider token rejected; held", afterSeconds: max(held.until - now, 1))
            }
            let verdict = await client.send(delivery, token: token)
            guard case .providerTokenRejected(let reason) = verdict else {
                if case .delivered = verdict { client.providerTokenAccepted(token) }
                return verdict
            }
            switch client.providerTokenRejected(token, reason: reason, now: clock() / 1000) {
            case .resend:
                logger.warning("APNs rejected the provider token; using a new one",
                               metadata: ["reason": "\(reason)", "iat": "\(token.issuedAt)"])
            case .hold(let notBefore, let firstTime):
                if firstTime {
                    // Alert once: the key, key id or team id is wrong, or the key was revoked.
                    logger.critical("APNs rejects freshly signed provider tokens: check --apns-key, --apns-key-id and --apns-team-id; pushes wait until then",
                                    metadata: ["reason": "\(reason)", "next_try": "\(notBefore)"])
                }
                return .retry(reason: reason, afterSeconds: max(notBefore - clock() / 1000, 1))
            }
        }
        return .retry(reason: "provider token rejected twice", afterSeconds: nil)
    }

    private func backoff(_ delivery: Delivery, _ retryAfter: Int64?) -> Int64 {
        PushBackoff.delayMilliseconds(attempt: Int(delivery.attempts) + 1, retryAfterSeconds: retryAfter,
                                      random: Double.random(in: 0..<1))
    }

    private func flush(_ finished: inout [(CloudStore.Outcome, Delivery)]) async {
        guard !finished.isEmpty else { return }
        defer { finished.removeAll(keepingCapacity: true) }
        let effects: [CloudStore.TokenEffect]
        do {
            effects = try await store.record(finished, now: clock(), owner: owner)
        } catch {
            // The pushes happened (or not); their rows stay pending and are attempted again.
            logger.error("fan-out: could not record \(finished.count) push outcomes", metadata: ["error": "\(error)"])
            return
        }
        let superseded = effects.filter { $0 == .superseded }.count
        if superseded > 0 {
            // Our lease ran out and another server took these: its outcome stands, not ours.
            logger.warning("fan-out: outcomes not recorded, another server holds those pushes now",
                           metadata: ["count": "\(superseded)", "owner": "\(owner)"])
        }
        stats.withLock { stats in
            for ((outcome, _), effect) in zip(finished, effects) where effect != .superseded { stats.count(outcome, effect) }
        }
        for ((outcome, delivery), effect) in zip(finished, effects) where effect != .superseded { onOutcome(delivery, outcome, effect) }
        let pruned = effects.filter { $0 == .pruned }.count
        if pruned > 0 { logger.info("pruned dead device tokens", metadata: ["count": "\(pruned)"]) }
    }

    private func sleep(milliseconds: Int64) async {
        await withTaskCancellationHandler {
            await withTaskGroup(of: Void.self) { group in
                group.addTask { [self] in
                    await withCheckedContinuation { continuation in
                        let resumeNow = wake.withLock { value -> Bool in
                            if pendingWake.load(ordering: .sequentiallyConsistent) { return true }
                            value = continuation
                            return false
                        }
                        if resumeNow { continuation.resume() }
                    }
                }
                group.addTask {
                    try? await Task.sleep(for: .milliseconds(milliseconds))
                }
                await group.next()
                group.cancelAll()
                notify()  // releases the continuation if the timer won
                pendingWake.store(false, ordering: .sequentiallyConsistent)
            }
        } onCancel: {
            notify()
        }
    }
}

/// Counters since start, for logs and `/healthz`.
public struct FanOutStats: Sendable, Equatable {
    public var delivered = 0
    public var retried = 0
    public var failed = 0
    public var unregistered = 0
    public var pruned = 0

    mutating func count(_ outcome: CloudStore.Outcome, _ effect: CloudStore.TokenEffect) {
        switch outcome {
        case .delivered: delivered += 1
        case .retry: retried += 1
        case .unregistered: unregistered += 1
        case .badDeviceToken, .failed: failed += 1
        }
        if effect == .pruned { pruned += 1 }
    }
}

