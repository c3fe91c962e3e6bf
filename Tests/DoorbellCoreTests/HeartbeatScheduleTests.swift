import DoorbellCore
import PropertyBased
import Testing

/// When the uplink sends a heartbeat, with a clock the test moves (microseconds).
@Suite struct HeartbeatScheduleTests {
    static let backoff = FullJitterBackoff(initialMillis: 1_000, capMillis: 300_000)
    static let second: Int64 = 1_000_000

    @Test func oneAtStartUpThenEveryInterval() {
        var s = HeartbeatSchedule(intervalSeconds: 900, backoff: Self.backoff)
        var rng = SeededRandom(seed: 1)
        #expect(s.next(nowMonoMicros: 5 * Self.second, uplink: .idle) == .send, "due at start-up, nothing delivered yet")
        s.finished(accepted: true, nowMonoMicros: 6 * Self.second, random: &rng)
        #expect(s.next(nowMonoMicros: 7 * Self.second, uplink: .idle) == .wait(untilMonoMicros: 906 * Self.second))
        #expect(s.next(nowMonoMicros: 906 * Self.second, uplink: .idle) == .send)
    }

    @Test func zeroIntervalIsOff() {
        var s = HeartbeatSchedule(intervalSeconds: 0, backoff: Self.backoff)
        #expect(s.next(nowMonoMicros: 0, uplink: .idle) == .off)
        #expect(s.next(nowMonoMicros: 10_000 * Self.second, uplink: .idle) == .off)
    }

    /// A delivered event is as good as a heartbeat: a busy uplink sends none.
    @Test func anEventsTwoHundredCountsAsAHeartbeat() {
        var s = HeartbeatSchedule(intervalSeconds: 900, backoff: Self.backoff)
        s.cloudAnswered(nowMonoMicros: 2 * Self.second)
        #expect(s.next(nowMonoMicros: 3 * Self.second, uplink: .idle) == .wait(untilMonoMicros: 902 * Self.second))
    }

    /// Presses first: due while events are to be sent (or held for the clock), it is skipped and
    /// looked at again later — never queued ahead of them.
    @Test(arguments: [(HeartbeatSchedule.Uplink.busy, 1 * second), (.held, UplinkMachine.clockRecheckMicros)])
    func skippedNotQueuedWhileTheUplinkIsBusy(_ state: HeartbeatSchedule.Uplink, _ recheck: Int64) {
        var s = HeartbeatSchedule(intervalSeconds: 900, backoff: Self.backoff)
        #expect(s.next(nowMonoMicros: 10 * Self.second, uplink: state) == .wait(untilMonoMicros: 10 * Self.second + recheck))
        #expect(s.next(nowMonoMicros: 10 * Self.second + recheck, uplink: .idle) == .send)
    }

    /// While the receiver backs off after failed events, the heartbeat waits for the same end.
    @Test func waitsOutTheReceiversBackoff() {
        var s = HeartbeatSchedule(intervalSeconds: 900, backoff: Self.backoff)
        #expect(s.next(nowMonoMicros: 10 * Self.second, uplink: .backingOff(untilMonoMicros: 40 * Self.second))
                == .wait(untilMonoMicros: 40 * Self.second))
        #expect(s.next(nowMonoMicros: 40 * Self.second, uplink: .backingOff(untilMonoMicros: 40 * Self.second)) == .send)
    }

    /// A refused or lost heartbeat is tried again after a full-jitter backoff that grows with
    /// failures in a row, at most the interval; a success resets it.
    @Test func aFailedHeartbeatBacksOffUpToTheInterval() async {
        await propertyCheck(input: Gen.int(in: 60...3_600), Gen.int(in: 1...40), Gen.int(in: 0...1_000_000)) { interval, failures, seed in
            var s = HeartbeatSchedule(intervalSeconds: interval, backoff: Self.backoff)
            var rng = SeededRandom(seed: UInt64(seed))
            var now: Int64 = 0
            for n in 0..<failures {
                #expect(s.next(nowMonoMicros: now, uplink: .idle) == .send)
                s.finished(accepted: false, nowMonoMicros: now, random: &rng)
                let wait = s.dueMonoMicros - now
                #expect(wait >= 1_000 && wait <= Int64(interval) * Self.second)
                #expect(wait <= Int64(Self.backoff.ceiling(attempt: n)) * 1_000 || wait == 1_000)
                #expect(s.next(nowMonoMicros: now, uplink: .idle) == .wait(untilMonoMicros: s.dueMonoMicros), "not before its backoff")
                now = s.dueMonoMicros
            }
            #expect(s.failures == failures)
            s.finished(accepted: true, nowMonoMicros: now, random: &rng)
            #expect(s.failures == 0 && s.dueMonoMicros == now + Int64(interval) * Self.second)
        }
    }

    /// Whatever the uplink does, never two heartbeats closer than the backoff's floor, and never
    /// one while events are to be sent.
    @Test func neverWhileBusyAndNeverBackToBack() async {
        let states: [HeartbeatSchedule.Uplink] = [.idle, .busy, .held, .backingOff(untilMonoMicros: 0)]
        await propertyCheck(input: Gen.int(in: 0...3).array(of: 1...80), Gen.int(in: 0...5_000).array(of: 80...80), Gen.bool.array(of: 80...80)) {
            picks, steps, answers in
            var s = HeartbeatSchedule(intervalSeconds: 60, backoff: Self.backoff)
            var rng = SeededRandom(seed: 7)
            var now: Int64 = 0
            var lastSent: Int64?
            for (i, pick) in picks.enumerated() {
                now += Int64(steps[i]) * 10_000
                var state = states[pick]
                if case .backingOff = state { state = .backingOff(untilMonoMicros: now + 2 * Self.second) }
                if s.next(nowMonoMicros: now, uplink: state) == .send {
                    #expect(state == .idle, "sent while \(state)")
                    if let lastSent { #expect(now - lastSent >= 1_000) }
                    lastSent = now
                    s.finished(accepted: answers[i], nowMonoMicros: now, random: &rng)
                }
            }
        }
    }

    @Test func theUplinksStateFromTheMachinesAction() {
        let item = UplinkItem(id: "e1", sequence: 1, type: "doorbell.pressed", createdAtMs: 0, attempts: 0)
        func state(_ a: UplinkMachine.Action, notBefore: Int64 = 0, sync: Bool = true, synced: Bool = true) -> HeartbeatSchedule.Uplink {
            HeartbeatSchedule.uplink(a, receiverNotBeforeMono: notBefore, nowMonoMicros: 100, requireClockSync: sync) { synced }
        }
        #expect(state(.send([item], clockResumed: false)) == .busy)
        #expect(state(.holdForClock(started: true)) == .held)
        #expect(state(.endpointGone) == .held)
        #expect(state(.waitForWork) == .idle)
        #expect(state(.waitForWork, synced: false) == .held, "a heartbeat's timestamp needs the clock too")
        #expect(state(.waitForWork, sync: false, synced: false) == .idle)
        #expect(state(.sleep(untilMonoMicros: 500), notBefore: 400) == .backingOff(untilMonoMicros: 400))
    }

    @Test func theHeartbeatURLIsBesideTheEventsURL() {
        #expect(HeartbeatRequest.url(forEventsURL: "https://cloud.example.com/events") == "https://cloud.example.com/heartbeat")
        #expect(HeartbeatRequest.url(forEventsURL: "https://127.0.0.1:8443/gw/v1/events?x=1") == "https://127.0.0.1:8443/gw/v1/heartbeat")
        #expect(HeartbeatRequest.url(forEventsURL: "https://cloud.example.com") == "https://cloud.example.com/heartbeat")
        #expect(HeartbeatRequest.url(forEventsURL: "https://cloud.example.com/") == "https://cloud.example.com/heartbeat")
    }

    @Test func theBodyAndTheBootSlot() throws {
        let body = HeartbeatRequest.body(id: "hb-1", gatewayID: "gw-1", agentVersion: "1.2.3", bootSlot: "B", sentAt: 1_800_000_000)
        #expect(String(decoding: body, as: UTF8.self)
                == #"{"id":"hb-1","type":"gateway.heartbeat","gateway_id":"gw-1","agent_version":"1.2.3","boot_slot":"B","sent_at":1800000000}"#)
        #expect(HeartbeatRequest.bootSlot(kernelCommandLine: "console=ttyS0 root=PARTUUID=abc-02 rauc.slot=B rw\n") == "B")
        #expect(HeartbeatRequest.bootSlot(kernelCommandLine: "console=ttyS0 root=/dev/sda2") == nil)
        #expect(HeartbeatRequest.bootSlot(kernelCommandLine: "rauc.slot=") == nil)
        var rng = SeededRandom(seed: 3)
        #expect(HeartbeatRequest.makeID(unixMillis: 1, random: &rng) != HeartbeatRequest.makeID(unixMillis: 1, random: &rng))
    }
}
