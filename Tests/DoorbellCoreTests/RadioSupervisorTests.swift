import DoorbellCore
import PropertyBased
import Testing

/// The radios' supervision policy, driven with given times: no radio, no sleeps.
@Suite struct RadioSupervisorTests {
    static let policy = RadioSupervisor.Policy(backoff: FullJitterBackoff(initialMillis: 1_000, capMillis: 60_000), floorMillis: 1_000,
                                               healthyRunMicros: 30_000_000)

    @Test func anAbsentDeviceIsMissingAndToldOnceUntilTheReasonChanges() {
        var s = RadioSupervisor(policy: Self.policy)
        var rng = SeededRandom(seed: 1)
        var told: [Bool] = []
        for i in 0..<5 {
            s.starting()
            #expect(s.state == .starting)
            let r = s.failed("gpiochip9: no such chip", absent: true, at: Int64(i) * 1_000_000, random: &rng)
            #expect(s.state == .missing)
            #expect(r.afterMicros >= 1_000_000, "never polled faster than the floor")
            #expect(!r.endedARun)
            told.append(r.isNews)
        }
        #expect(told == [true, false, false, false, false])
        #expect(s.restarts == 0, "a start that did not succeed is not a restart")
        #expect(s.failed("permission denied", absent: false, at: 9_000_000, random: &rng).isNews)
        #expect(s.state == .restarting)
        #expect(s.lastError == "permission denied")
    }

    @Test func aCrashLoopBacksOffFurtherAndAHealthyRunStartsAgain() {
        var s = RadioSupervisor(policy: Self.policy)
        var rng = SeededRandom(seed: 2)
        var now: Int64 = 0
        // Five runs of 1 s each: each failure is a restart and the exponent keeps growing.
        for n in 1...5 {
            s.running(at: now)
            #expect(s.state == .running)
            #expect(s.lastError == nil)
            now += 1_000_000
            let r = s.failed("rtl_433 exited 2", absent: false, at: now, random: &rng)
            #expect(r.endedARun)
            #expect(s.restarts == n)
            #expect(s.attempt == n)
            #expect(r.afterMicros <= Int64(Self.policy.backoff.ceiling(attempt: n - 1)) * 1000 + 1_000_000)
        }
        // A run of 30 s was healthy: the backoff starts over, and the same failure is news again.
        s.running(at: now)
        let r = s.failed("rtl_433 exited 2", absent: false, at: now + 30_000_000, random: &rng)
        #expect(s.attempt == 1)
        #expect(r.afterMicros <= 1_000_000)
        #expect(r.isNews)
    }

    @Test func aStallResetCountsAsARestartAndShowsItsReasonUntilRecovered() {
        var s = RadioSupervisor(policy: Self.policy)
        s.running(at: 0)
        s.resetInPlace("no advertising reports for 60 s", at: 60_000_000)
        #expect(s.state == .running)
        #expect(s.restarts == 1)
        #expect(s.lastError == "no advertising reports for 60 s")
        s.recovered()
        #expect(s.lastError == nil)
    }

    /// Any mix of failures, runs and gaps: every delay is within [floor, max(floor, cap)], the
    /// exponent only resets after a healthy run, and the state always says what happened last.
    @Test func delaysStayWithinTheirBoundsWhateverHappens() async {
        let step = Gen.int(in: 0...3).array(of: 1...80)
        await propertyCheck(input: step, Gen.int(in: 0...120_000).array(of: 80...80)) { kinds, gapsMs in
            var s = RadioSupervisor(policy: Self.policy)
            var rng = SeededRandom(seed: UInt64(kinds.count))
            var now: Int64 = 0
            var running = false
            for (i, kind) in kinds.enumerated() {
                now += Int64(gapsMs[i]) * 1000
                switch kind {
                case 0:
                    s.running(at: now)
                    running = true
                    #expect(s.state == .running)
                default:
                    let before = s.attempt
                    let r = s.failed("failure \(kind)", absent: kind == 1, at: now, random: &rng)
                    #expect(r.afterMicros >= 1_000_000 && r.afterMicros <= 60_000_000)
                    #expect(r.endedARun == running)
                    #expect(s.attempt == before + 1 || (running && s.attempt == 1))
                    #expect(s.state == (kind == 1 ? .missing : .restarting))
                    running = false
                }
            }
        }
    }
}
