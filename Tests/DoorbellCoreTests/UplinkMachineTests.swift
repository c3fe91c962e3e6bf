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

    /// One event failing in a window that otherwise went: it waits out its own backoff while the
    /// others pass it, and the window stays wide (the receiver takes requests).
    @Test func aFailedEventWaitsOutItsOwnBackoffWhileTheOthersPassIt() {
        var m = UplinkMachine(settings: Self.settings)
        var rng = SeededRandom(seed: 2)
        let pending = Self.items(1...8)
        _ = m.settle([(pending[0], .delivered)], nowMonoMicros: 0, nowWallMs: Self.wallMs, random: &rng)
        let window = Array(pending[1...4])
        let verdicts = m.settle(window.map { ($0, $0.sequence == 3 ? .failed(status: 500, retryAfterMillis: nil) : .delivered) },
                                nowMonoMicros: 10, nowWallMs: Self.wallMs, random: &rng)
        guard case let .retry(delay, at) = verdicts[1] else { Issue.record("\(verdicts)"); return }
        #expect((0...1_000).contains(delay))
        #expect(at == Self.wallMs + Int64(delay))
        #expect(m.windowSize == 4)
        let left = pending.filter { [3, 6, 7, 8].contains($0.sequence) }
        if delay > 0 {
            #expect(Self.sent(m.next(pending: left, nowMonoMicros: 10, nowWallMs: Self.wallMs) { true }) == [6, 7, 8])
            #expect(m.next(pending: [left[0]], nowMonoMicros: 10, nowWallMs: Self.wallMs) { true } == .sleep(untilMonoMicros: 10 + Int64(delay) * 1000))
        }
        #expect(Self.sent(m.next(pending: left, nowMonoMicros: 10 + Int64(delay) * 1000, nowWallMs: Self.wallMs) { true }) == [3, 6, 7, 8])
    }

    /// A window in which nothing went: the receiver backs off, the next window is one request,
    /// and that probe is not the event that just failed (it waits out its own backoff).
    @Test func afterAFailedProbeTheNextProbeIsAnotherEvent() {
        for seed in 1...20 {
            var m = Self.parking(after: 15)
            var rng = SeededRandom(seed: UInt64(seed))
            let pending = Self.items(1...5)
            #expect(Self.sent(m.next(pending: pending, nowMonoMicros: 0, nowWallMs: Self.wallMs) { true }) == [1])
            let verdict = m.settle([(pending[0], .failed(status: 502, retryAfterMillis: nil))], nowMonoMicros: 0, nowWallMs: Self.wallMs, random: &rng)
            #expect(m.windowSize == 1)
            let wait = m.receiverNotBefore
            if wait > 0 {
                #expect(m.next(pending: pending, nowMonoMicros: wait - 1, nowWallMs: Self.wallMs) { true } == .sleep(untilMonoMicros: wait))
            }
            // Once the receiver's backoff is over, the probe is event 2: event 1 waits past it,
            // and the time stored for it says so.
            #expect(Self.sent(m.next(pending: pending, nowMonoMicros: wait, nowWallMs: Self.wallMs) { true }) == [2], "seed \(seed)")
            guard case let .retry(delay, at) = verdict[0] else { Issue.record("\(verdict)"); continue }
            #expect(Int64(delay) * 1000 > wait && at == Self.wallMs + Int64(delay))
        }
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

    /// Retry-After is about the receiver: nothing at all is sent before it ends (not even a live
    /// press), up to an hour; the event that drew it waits just past it, so another probes.
    @Test func retryAfterHoldsEveryRequestUpToAnHour() {
        var rng = SeededRandom(seed: 4)
        var m = UplinkMachine(settings: UplinkMachine.Settings(maxInFlight: 1, backoff: FullJitterBackoff(initialMillis: 100, capMillis: 100),
                                                               requireClockSync: false))
        let item = Self.items(1...1)[0]
        let press = UplinkItem(id: "press", sequence: 2, type: "doorbell.pressed", createdAtMs: Self.wallMs, attempts: 0)
        guard case let .retry(delay, _) = m.settle([(item, .failed(status: 503, retryAfterMillis: 5_000))], nowMonoMicros: 0, nowWallMs: 0, random: &rng)[0]
        else { Issue.record("not retried"); return }
        #expect(delay > 5_000 && delay <= 5_100)
        #expect(m.receiverNotBefore >= 5_000_000)
        #expect(m.next(pending: [item, press], nowMonoMicros: 4_999_999, nowWallMs: Self.wallMs) { true } == .sleep(untilMonoMicros: m.receiverNotBefore))
        #expect(Self.sent(m.next(pending: [item, press], nowMonoMicros: m.receiverNotBefore, nowWallMs: Self.wallMs) { true }) == [2])
        _ = m.settle([(item, .failed(status: 429, retryAfterMillis: 86_400_000))], nowMonoMicros: 0, nowWallMs: 0, random: &rng)
        #expect(m.receiverNotBefore == 3_600_000_000)
    }

    /// The receiver's own backoff (no Retry-After) does not hold a live press: it goes alone, now.
    @Test func aLivePressDoesNotWaitOutTheReceiversOwnBackoff() {
        var rng = SeededRandom(seed: 11)
        var m = UplinkMachine(settings: UplinkMachine.Settings(maxInFlight: 4, backoff: FullJitterBackoff(initialMillis: 30_000, capMillis: 30_000),
                                                               requireClockSync: false))
        let backlog = Self.items(1...3)
        _ = m.settle([(backlog[0], .failed(status: nil, retryAfterMillis: nil))], nowMonoMicros: 0, nowWallMs: Self.wallMs, random: &rng)
        let press = UplinkItem(id: "press", sequence: 4, type: "doorbell.pressed", createdAtMs: Self.wallMs, attempts: 0)
        if m.receiverNotBefore > 1 {
            #expect(m.next(pending: Array(backlog[1...]), nowMonoMicros: 1, nowWallMs: Self.wallMs) { true } == .sleep(untilMonoMicros: m.receiverNotBefore))
        }
        #expect(Self.sent(m.next(pending: Array(backlog[1...]) + [press], nowMonoMicros: 1, nowWallMs: Self.wallMs) { true }) == [4])
    }

    /// A press seen while live keeps going first until it is delivered, however long the
    /// receiver was down and whatever it failed meanwhile: the ring goes first after the heal, not
    /// after the backlog.
    @Test func aPressMadeDuringAnOutageGoesFirstAfterTheHeal() {
        var rng = SeededRandom(seed: 12)
        var m = UplinkMachine(settings: Self.settings)
        let backlog = Self.items(1...10)
        _ = m.settle([(backlog[0], .failed(status: nil, retryAfterMillis: nil))], nowMonoMicros: 0, nowWallMs: Self.wallMs, random: &rng)
        let press = UplinkItem(id: "press", sequence: 11, type: "doorbell.pressed", createdAtMs: Self.wallMs + 1_000, attempts: 0)
        // Seen at once (it goes alone, past the receiver's backoff) and fails: the receiver is down.
        #expect(Self.sent(m.next(pending: backlog + [press], nowMonoMicros: 1_000_000, nowWallMs: Self.wallMs + 1_000) { true }) == [11])
        _ = m.settle([(press, .failed(status: nil, retryAfterMillis: nil))], nowMonoMicros: 1_000_000, nowWallMs: Self.wallMs + 1_000, random: &rng)
        // Ten minutes later the receiver is back: the press, ten minutes old now, still goes first.
        let later: Int64 = 600_000
        #expect(Self.sent(m.next(pending: backlog + [press], nowMonoMicros: later * 1000, nowWallMs: Self.wallMs + later) { true })?.first == 11)
    }

    /// A press that goes first and fails while the receiver takes requests is retried within
    /// retry_initial_ms however often it failed before; the backlog's events back off as usual.
    @Test func aFailingPressIsRetriedSoonWhileTheReceiverTakesRequests() {
        for seed in 1...10 {
            var rng = SeededRandom(seed: UInt64(seed))
            var m = UplinkMachine(settings: Self.settings)
            let backlog = Self.items(1...3, attempts: 5)
            let press = UplinkItem(id: "press", sequence: 4, type: "doorbell.pressed", createdAtMs: Self.wallMs, attempts: 5)
            _ = m.settle([(backlog[0], .delivered)], nowMonoMicros: 0, nowWallMs: Self.wallMs, random: &rng)
            #expect(Self.sent(m.next(pending: Array(backlog[1...]) + [press], nowMonoMicros: 1, nowWallMs: Self.wallMs) { true }) == [4, 2, 3])
            let verdicts = m.settle([(press, .failed(status: 500, retryAfterMillis: nil)), (backlog[1], .delivered), (backlog[2], .delivered)],
                                    nowMonoMicros: 1, nowWallMs: Self.wallMs, random: &rng)
            guard case let .retry(delay, _) = verdicts[0] else { Issue.record("\(verdicts)"); continue }
            #expect(delay <= Self.settings.backoff.initialMillis, "seed \(seed)")
        }
    }

    static func parking(after failures: Int) -> UplinkMachine {
        UplinkMachine(settings: UplinkMachine.Settings(maxInFlight: 4, backoff: FullJitterBackoff(initialMillis: 1_000, capMillis: 30_000),
                                                       requireClockSync: false, parkAfterFailures: failures))
    }

    /// Runs `m` for at most `rounds` steps or until `now` reaches `until`: a sleep moves the clock
    /// to its end, a window is answered by `answer` and settled (50 ms a round trip), each
    /// verdict handed to `settled`.
    static func drive(_ m: inout UplinkMachine, rounds: Int, until: Int64 = .max, pending: () -> [UplinkItem],
                      answer: (UplinkItem, Int64) -> UplinkMachine.Answer, settled: (UplinkItem, UplinkMachine.Verdict) -> Void) {
        var rng = SeededRandom(seed: UInt64(rounds))
        var now: Int64 = 0
        for _ in 0..<rounds where now < until && !pending().isEmpty {
            switch m.next(pending: pending(), nowMonoMicros: now, nowWallMs: wallMs, clockSynced: { true }) {
            case let .sleep(end): now = end
            case let .send(window, _):
                let answers = window.map { ($0, answer($0, now)) }
                for ((item, _), v) in zip(answers, m.settle(answers, nowMonoMicros: now, nowWallMs: wallMs, random: &rng)) { settled(item, v) }
                now += 50_000
            default: Issue.record("unexpected action")
            }
        }
    }

    /// An event that keeps failing while the receiver takes the others never holds them: they all
    /// go, and it is parked after `parkAfterFailures` such failures — not before.
    @Test func aPoisonEventIsPassedThenParked() {
        var m = Self.parking(after: 5)
        var pending = Self.items(1...40)
        var poisonTries = 0
        var parked: [UplinkMachine.Verdict] = []
        Self.drive(&m, rounds: 500, pending: { pending }) { item, _ in
            guard item.id == "e1" else { return .delivered }
            poisonTries += 1
            return .failed(status: 500, retryAfterMillis: nil)
        } settled: { item, v in
            switch v {
            case .delivered: pending.removeAll { $0.id == item.id }
            case .poisoned:
                parked.append(v)
                pending.removeAll { $0.id == item.id }
            default: break
            }
        }
        #expect(pending.isEmpty)
        #expect(parked == [.poisoned(failures: 5)])
        #expect(poisonTries <= 6, "one probe that did not count, then five failures while the others went")
    }

    /// An outage (nothing goes for an hour) never parks anything: failures count only while the
    /// receiver takes other events.
    @Test func anOutageParksNothing() {
        var m = Self.parking(after: 3)
        let pending = Self.items(1...5)
        var sent = 0
        Self.drive(&m, rounds: 2_000, until: 3_600_000_000, pending: { pending }) { _, now in
            sent += 1
            return .failed(status: [nil, 500, 503][Int(now / 50_000 % 3)], retryAfterMillis: nil)
        } settled: { _, v in
            if case .retry = v {} else { Issue.record("\(v) during an outage") }
        }
        #expect(sent > 10)
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
        // It failed: while it waits out its own backoff the backlog goes; once due it is first again.
        guard case let .retry(delay, _) = m.settle([(press, .failed(status: 500, retryAfterMillis: nil)), (backlog[1], .delivered)],
                                                   nowMonoMicros: 1, nowWallMs: Self.wallMs, random: &rng)[0] else { Issue.record("not retried"); return }
        if delay > 0 {
            #expect(Self.sent(m.next(pending: Array(backlog[2...]) + [press], nowMonoMicros: 2, nowWallMs: Self.wallMs) { true }) == [3, 4, 5])
        }
        let due = 1 + Int64(delay) * 1000
        #expect(Self.sent(m.next(pending: Array(backlog[2...]) + [press], nowMonoMicros: due, nowWallMs: Self.wallMs + 40_000) { true }) == [6, 3, 4, 5])
        // A press first seen more than 30 s after it was made is backlog: sequence order.
        var fresh = UplinkMachine(settings: Self.settings)
        #expect(Self.sent(fresh.next(pending: Array(backlog[1...]) + [press], nowMonoMicros: 1, nowWallMs: Self.wallMs + 29_000) { true }) == [2])
    }

    /// Whatever the receiver answers and however time moves: nothing is sent before its backoff
    /// (or the receiver's) ends, a window never exceeds max_in_flight, after a window in which
    /// nothing went the next is one event, and every event that was not delivered or parked is
    /// still sent again eventually.
    @Test func noEventIsSentBeforeItsTimeAndNoneIsForgotten() async {
        let answers = Gen.int(in: 0...5).array(of: 1...60)
        await propertyCheck(input: answers, Gen.int(in: 0...2_000).array(of: 60...60)) { script, steps in
            var m = UplinkMachine(settings: Self.settings)
            var rng = SeededRandom(seed: UInt64(script.count))
            var pending = Self.items(1...12)
            var now: Int64 = 0
            var due: [String: Int64] = [:]
            var receiverDue: Int64 = 0
            var previousFailed = false
            var step = 0
            var answerIndex = 0
            // Bounded: at most 400 rounds, enough for every event to go with backoffs ≤ 60 s.
            for _ in 0..<400 where !pending.isEmpty {
                now += Int64(steps[step % steps.count]) * 1_000
                step += 1
                switch m.next(pending: pending, nowMonoMicros: now, nowWallMs: Self.wallMs, clockSynced: { true }) {
                case let .sleep(until):
                    #expect(until > now)
                    now = until
                case let .send(window, _):
                    #expect(window.count <= 4)
                    if previousFailed { #expect(window.count == 1) }
                    #expect(receiverDue <= now, "sent before the receiver's backoff ended")
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
                    previousFailed = !verdicts.contains(.delivered)
                    receiverDue = m.receiverNotBefore
                    for ((item, _), verdict) in zip(answered, verdicts) {
                        switch verdict {
                        case .delivered, .parked, .poisoned: pending.removeAll { $0.id == item.id }
                        case let .retry(delay, _): due[item.id] = now + Int64(delay) * 1000
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

    /// The issue's promise, for any mix of outages, Retry-After, random 5xx and a poison event in
    /// the backlog: a press made now is in the very next request window — unless the receiver
    /// asked for quiet (Retry-After), then in the first window after it — and is delivered there
    /// if the receiver takes it; a press that failed never falls behind the backlog (while one is
    /// due, every window starts with a press). Meanwhile the poison event holds nothing: once the
    /// receiver is healthy everything else is delivered and the poison is parked.
    @Test func aPoisonEventNeverDelaysAFreshPressBeyondOneRoundTrip() async {
        await propertyCheck(input: Gen.int(in: 0...3).array(of: 1...80), Gen.int(in: 0...4).array(of: 1...80)) { modes, pressAt in
            var m = UplinkMachine(settings: Self.settings)
            var rng = SeededRandom(seed: UInt64(modes.count * 131 + pressAt.count))
            var pending = Self.items(1...40)
            let poison = "e7"
            var now: Int64 = 0
            var nextSequence: Int64 = 41
            var watching: String?
            var poisonParked = false
            // Bounded: the script is at most 80 rounds; then the receiver is healthy and 3,000
            // rounds are far more than the backlog and 15 backoffs of at most 60 s need.
            for round in 0..<3_000 {
                let mode = round < modes.count ? modes[round] : 0
                let wallMs = Self.wallMs + now / 1000
                if round < pressAt.count, pressAt[round] == 0 {
                    let press = UplinkItem(id: "p\(nextSequence)", sequence: nextSequence, type: "doorbell.pressed", createdAtMs: wallMs, attempts: 0)
                    pending.append(press)
                    nextSequence += 1
                    watching = press.id
                }
                if pending.isEmpty { break }
                let pressDue = pending.contains { $0.type == "doorbell.pressed" && (m.notBefore[$0.id] ?? 0) <= now }
                switch m.next(pending: pending, nowMonoMicros: now, nowWallMs: wallMs, clockSynced: { true }) {
                case let .sleep(until):
                    let askedFor = m.receiverAskedToWait && until == m.receiverNotBefore
                    #expect(watching == nil || askedFor, "a fresh press waited for something other than a Retry-After")
                    now = until
                case let .send(window, _):
                    var answers: [(item: UplinkItem, answer: UplinkMachine.Answer)] = []
                    for item in window {
                        let flaky = Int.random(in: 0..<10, using: &rng) < 3
                        let answer: UplinkMachine.Answer
                        if item.id == poison {
                            answer = .failed(status: 500, retryAfterMillis: nil)
                        } else if mode == 1 {
                            answer = flaky ? .failed(status: 500, retryAfterMillis: nil) : .delivered
                        } else if mode == 2 {
                            answer = .failed(status: nil, retryAfterMillis: nil)
                        } else if mode == 3 {
                            answer = .failed(status: 429, retryAfterMillis: 5_000)
                        } else {
                            answer = .delivered
                        }
                        answers.append((item, answer))
                    }
                    let verdicts = m.settle(answers, nowMonoMicros: now, nowWallMs: wallMs, random: &rng)
                    #expect(!pressDue || window[0].type == "doorbell.pressed", "a due press behind the backlog")
                    let sentIDs = window.map(\.id)
                    let index = watching.flatMap { sentIDs.firstIndex(of: $0) }
                    #expect(watching == nil || index != nil, "a fresh press not in the first window after it was made")
                    let deliveredWhenUp = index.map { mode != 0 || verdicts[$0] == .delivered } ?? true
                    #expect(deliveredWhenUp, "a fresh press not delivered by a receiver that takes requests")
                    watching = nil
                    for ((item, _), verdict) in zip(answers, verdicts) {
                        switch verdict {
                        case .delivered, .parked: pending.removeAll { $0.id == item.id }
                        case .poisoned:
                            #expect(item.id == poison, "a healthy event was parked")
                            poisonParked = true
                            pending.removeAll { $0.id == item.id }
                        case .retry:
                            if let i = pending.firstIndex(where: { $0.id == item.id }) {
                                let p = pending[i]
                                pending[i] = UplinkItem(id: p.id, sequence: p.sequence, type: p.type, createdAtMs: p.createdAtMs, attempts: p.attempts + 1)
                            }
                        case .gone: Issue.record("no 410 in the script")
                        }
                    }
                    now += 50_000 // a round trip
                case .waitForWork, .holdForClock, .endpointGone:
                    Issue.record("unexpected action with events pending")
                }
            }
            #expect(pending.isEmpty, "left: \(pending.map(\.id))")
            #expect(poisonParked)
        }
    }
}
