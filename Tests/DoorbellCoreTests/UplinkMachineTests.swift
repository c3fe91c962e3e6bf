import DoorbellCore
import PropertyBased
import Testing

/// The uplink's policy without a network or a clock: times are numbers the test moves.
@Suite struct UplinkMachineTests {
    static let settings = UplinkMachine.Settings(maxInFlight: 4, backoff: FullJitterBackoff(initialMillis: 1_000, capMillis: 60_000),
                                                 requireClockSync: false)

    static func items(_ range: ClosedRange<Int64>, type: String = "beacon.entered", createdAtMs: Int64 = 0, attempts: Int = 0) -> [UplinkItem] {
        range.map { UplinkItem(id: "e\($0)", sequence: $0, type: type, createdAtMs: createdAtMs, attempts: attempts) }
    }

    static func sent(_ action: UplinkMachine.Action) -> [Int64]? {
        if case let .send(items, _) = action { return items.map(\.sequence) }
        return nil
    }

    /// Times are far from the epoch so that "created 0 ms" is never a live press.
    static let wallMs: Int64 = 1_800_000_000_000

    @Test func oneRequestProbesTheReceiverThenAWholeWindowGoes() {
        var m = UplinkMachine(settings: Self.settings)
        var rng = SeededRandom(seed: 1)
        var pending = Self.items(1...10)
        #expect(m.next(pending: [], nowMonoMicros: 0, nowWallMs: Self.wallMs) { true } == .waitForWork)
        let first = m.next(pending: pending, nowMonoMicros: 0, nowWallMs: Self.wallMs) { true }
        #expect(Self.sent(first) == [1])
        #expect(m.settle([(pending[0], .delivered)], nowMonoMicros: 1, nowWallMs: Self.wallMs, random: &rng) == [.delivered])
        pending.removeFirst()
        #expect(Self.sent(m.next(pending: pending, nowMonoMicros: 2, nowWallMs: Self.wallMs) { true }) == [2, 3, 4, 5])
    }

    @Test func aFailureShrinksTheWindowAndTheEventWaitsOutItsBackoff() {
        var m = UplinkMachine(settings: Self.settings)
        var rng = SeededRandom(seed: 2)
        let pending = Self.items(1...6)
        _ = m.settle([(pending[0], .delivered)], nowMonoMicros: 0, nowWallMs: Self.wallMs, random: &rng)
        let window = Array(pending[1...4])
        let verdicts = m.settle(window.map { ($0, $0.sequence == 3 ? .failed(status: 500, retryAfterMillis: nil) : .delivered) },
                                nowMonoMicros: 10, nowWallMs: Self.wallMs, random: &rng)
        guard case let .retry(delay, at) = verdicts[1] else { Issue.record("\(verdicts)"); return }
        #expect((0...1_000).contains(delay))
        #expect(at == Self.wallMs + Int64(delay))
        #expect(m.windowSize == 1)
        let left = pending.filter { [3, 6].contains($0.sequence) }
        if delay > 0 {
            #expect(m.next(pending: left, nowMonoMicros: 10, nowWallMs: Self.wallMs) { true } == .sleep(untilMonoMicros: 10 + Int64(delay) * 1000))
        }
        // Once due it goes alone (the probe), and nothing overtook it.
        #expect(Self.sent(m.next(pending: left, nowMonoMicros: 10 + Int64(delay) * 1000, nowWallMs: Self.wallMs) { true }) == [3])
    }

    @Test func answersThatRetryingCannotChangeParkTheEvent() {
        var rng = SeededRandom(seed: 3)
        for status in [400, 401, 403, 404, 413, 422] {
            var m = UplinkMachine(settings: Self.settings)
            #expect(m.settle([(Self.items(1...1)[0], .failed(status: status, retryAfterMillis: nil))], nowMonoMicros: 0, nowWallMs: 0, random: &rng) == [.parked])
        }
        for status in [nil, 408, 409, 425, 429, 500, 502, 503] as [Int?] {
            var m = UplinkMachine(settings: Self.settings)
            let v = m.settle([(Self.items(1...1)[0], .failed(status: status, retryAfterMillis: nil))], nowMonoMicros: 0, nowWallMs: 0, random: &rng)
            guard case .retry = v[0] else { Issue.record("\(String(describing: status)) → \(v)"); continue }
        }
    }

    /// A refusal that could not be stored as a dead letter is retried after a backoff instead.
    @Test func aParkingThatCouldNotBeStoredIsRetriedLater() {
        var rng = SeededRandom(seed: 7)
        var m = UplinkMachine(settings: Self.settings)
        let item = Self.items(1...1)[0]
        #expect(m.settle([(item, .failed(status: 400, retryAfterMillis: nil))], nowMonoMicros: 0, nowWallMs: 0, random: &rng) == [.parked])
        guard case let .retry(delay, _) = m.parkingFailed(item, nowMonoMicros: 10, nowWallMs: 0, random: &rng) else { Issue.record("not retried"); return }
        #expect(m.notBefore["e1"] == 10 + Int64(delay) * 1000)
    }

    @Test func retryAfterIsHonouredUpToAnHour() {
        var rng = SeededRandom(seed: 4)
        var m = UplinkMachine(settings: UplinkMachine.Settings(maxInFlight: 1, backoff: FullJitterBackoff(initialMillis: 100, capMillis: 100),
                                                               requireClockSync: false))
        let item = Self.items(1...1)[0]
        #expect(m.settle([(item, .failed(status: 503, retryAfterMillis: 5_000))], nowMonoMicros: 0, nowWallMs: 0, random: &rng)
                == [.retry(delayMs: 5_000, nextAttemptAtWallMs: 5_000)])
        #expect(m.settle([(item, .failed(status: 429, retryAfterMillis: 86_400_000))], nowMonoMicros: 0, nowWallMs: 0, random: &rng)
                == [.retry(delayMs: 3_600_000, nextAttemptAtWallMs: 3_600_000)])
        #expect(m.notBefore["e1"] == 3_600_000_000)
    }

    @Test func aGoneEndpointSendsNothingMoreAndKeepsTheEvents() {
        var rng = SeededRandom(seed: 5)
        var m = UplinkMachine(settings: Self.settings)
        let pending = Self.items(1...3)
        #expect(m.settle([(pending[0], .failed(status: 410, retryAfterMillis: nil))], nowMonoMicros: 0, nowWallMs: 0, random: &rng) == [.gone])
        #expect(m.next(pending: pending, nowMonoMicros: 1_000_000_000, nowWallMs: Self.wallMs) { true } == .endpointGone)
    }

    @Test func aHoldForTheClockIsToldOnceAndSoIsItsEnd() {
        var m = UplinkMachine(settings: UplinkMachine.Settings(maxInFlight: 4, backoff: Self.settings.backoff, requireClockSync: true))
        var asked = 0
        #expect(m.next(pending: [], nowMonoMicros: 0, nowWallMs: 0) { asked += 1; return false } == .waitForWork)
        #expect(asked == 0, "the clock is read only when an event is due")
        let pending = Self.items(1...2)
        #expect(m.next(pending: pending, nowMonoMicros: 0, nowWallMs: 0) { false } == .holdForClock(started: true))
        #expect(m.next(pending: pending, nowMonoMicros: 1, nowWallMs: 0) { false } == .holdForClock(started: false))
        #expect(m.next(pending: pending, nowMonoMicros: 2, nowWallMs: Self.wallMs) { true } == .send([pending[0]], clockResumed: true))
        #expect(m.next(pending: pending, nowMonoMicros: 3, nowWallMs: Self.wallMs) { true } == .send([pending[0]], clockResumed: false))
    }

    @Test func aLivePressGoesAheadOfABacklogButNotOfItsOwnBackoff() {
        var m = UplinkMachine(settings: Self.settings)
        var rng = SeededRandom(seed: 6)
        let backlog = Self.items(1...5)
        let press = UplinkItem(id: "press", sequence: 6, type: "doorbell.pressed", createdAtMs: Self.wallMs - 2_000, attempts: 0)
        _ = m.settle([(backlog[0], .delivered)], nowMonoMicros: 0, nowWallMs: Self.wallMs, random: &rng)
        #expect(Self.sent(m.next(pending: Array(backlog[1...]) + [press], nowMonoMicros: 1, nowWallMs: Self.wallMs) { true }) == [6, 2, 3, 4])
        // 30 s later it is no longer live: sequence order again.
        #expect(Self.sent(m.next(pending: Array(backlog[1...]) + [press], nowMonoMicros: 1, nowWallMs: Self.wallMs + 29_000) { true }) == [2, 3, 4, 5])
    }

    /// Whatever the receiver answers and however time moves: nothing is sent before its backoff
    /// ends, a window never exceeds max_in_flight, after a failure the next window is one event,
    /// and every event that was not delivered or parked is still sent again eventually.
    @Test func noEventIsSentBeforeItsTimeAndNoneIsForgotten() async {
        let answers = Gen.int(in: 0...5).array(of: 1...60)
        await propertyCheck(input: answers, Gen.int(in: 0...2_000).array(of: 60...60)) { script, steps in
            var m = UplinkMachine(settings: Self.settings)
            var rng = SeededRandom(seed: UInt64(script.count))
            var pending = Self.items(1...12)
            var now: Int64 = 0
            var due: [String: Int64] = [:]
            var previousFailed = false
            var step = 0
            var answerIndex = 0
            // Bounded: at most 400 rounds, enough for every event to go with backoffs ≤ 60 s.
            for _ in 0..<400 where !pending.isEmpty {
                now += Int64(steps[step % steps.count]) * 1_000
                step += 1
                switch m.next(pending: pending, nowMonoMicros: now, nowWallMs: Self.wallMs) { true } {
                case let .sleep(until):
                    #expect(until > now)
                    now = until
                case let .send(window, _):
                    #expect(window.count <= 4)
                    if previousFailed { #expect(window.count == 1) }
                    for item in window { #expect((due[item.id] ?? 0) <= now, "sent before its backoff ended") }
                    let answered = window.map { item -> (UplinkItem, UplinkMachine.Answer) in
                        defer { answerIndex += 1 }
                        // Once the script runs out, the receiver is healthy.
                        let a = answerIndex < script.count ? script[answerIndex] : 0
                        return (item, [.delivered, .failed(status: nil, retryAfterMillis: nil), .failed(status: 500, retryAfterMillis: nil),
                                       .failed(status: 503, retryAfterMillis: 2_000), .failed(status: 400, retryAfterMillis: nil),
                                       .delivered][a])
                    }
                    let verdicts = m.settle(answered, nowMonoMicros: now, nowWallMs: Self.wallMs, random: &rng)
                    previousFailed = false
                    for ((item, _), verdict) in zip(answered, verdicts) {
                        switch verdict {
                        case .delivered, .parked: pending.removeAll { $0.id == item.id }
                        case let .retry(delay, _):
                            due[item.id] = now + Int64(delay) * 1000
                            previousFailed = true
                        case .gone: Issue.record("no 410 in the script")
                        }
                    }
                case .waitForWork, .holdForClock, .endpointGone:
                    Issue.record("unexpected action with events pending")
                }
            }
            #expect(pending.isEmpty, "left undelivered: \(pending.map(\.sequence))")
        }
    }
}
