import DoorbellCore
import PropertyBased
import Testing

/// The watchdog ping's rhythm (WatchdogSchedule) with the loops' rule (LoopHeartbeats): a frozen
/// process that resumes before systemd's deadline is not restarted; a stuck loop still is.
@Suite struct WatchdogScheduleTests {
    static let s: Int64 = 1_000_000

    @Test func healthyLooksEveryTickAndAProblemIsLookedAtAgainWithinASecondAndReportedOnTheSecondLook() {
        var w = WatchdogSchedule(tickMicros: 15 * Self.s, now: 0)
        #expect(w.waitMicros(at: 0) == 15 * Self.s)
        #expect(w.decide(problems: [], at: 15 * Self.s) == .ping)
        #expect(w.waitMicros(at: 15 * Self.s) == 15 * Self.s)
        #expect(w.decide(problems: ["control: stuck"], at: 30 * Self.s) == .withhold(report: false))
        #expect(w.waitMicros(at: 30 * Self.s) == Self.s)
        #expect(w.decide(problems: ["control: stuck"], at: 31 * Self.s) == .withhold(report: true))
        #expect(w.decide(problems: ["control: stuck"], at: 32 * Self.s) == .withhold(report: false), "one report per streak")
        #expect(w.decide(problems: [], at: 33 * Self.s) == .ping)
        #expect(w.decide(problems: ["control: stuck"], at: 48 * Self.s) == .withhold(report: false), "a new streak")
    }

    @Test func aWakeUpLaterThanOrdinarySchedulingIsAFreezeOfThatExcess() {
        let w = WatchdogSchedule(tickMicros: 15 * Self.s, now: 0)
        #expect(w.frozenMicros(wokeAt: 15 * Self.s + WatchdogSchedule.frozenSlackMicros) == 0)
        #expect(w.frozenMicros(wokeAt: 35 * Self.s) == 20 * Self.s)
    }

    @Test func aFreezeIsNotSilenceButALoopStuckBeforeItIsStillStuck() {
        var h = LoopHeartbeats(graceMicros: 10 * Self.s)
        h.started("control", periodMicros: 5 * Self.s, at: 0)
        h.started("radio", periodMicros: Self.s, at: 0)
        h.beat("radio", at: 10 * Self.s)
        // Frozen from 10 s to 32 s; the radio beat once it ran again, the control loop had not yet.
        h.beat("radio", at: 32 * Self.s)
        h.forgive(frozenMicros: 22 * Self.s, at: 32 * Self.s)
        #expect(h.problems(at: 32 * Self.s).isEmpty)
        #expect(h.states(at: 32 * Self.s).map(\.silentSeconds) == [10, 0], "the control loop's 10 s before the freeze still count")
        // It stays silent: stuck once its own deadline (20 s) passes in running time.
        #expect(h.problems(at: 42 * Self.s).isEmpty)
        #expect(h.problems(at: 43 * Self.s) == ["control: no heartbeat for 21 s (it wakes at least every 5 s): stuck"])
    }

    /// A second-by-second simulation of the agent under systemd (WatchdogSec 30 s, ping tick 15 s):
    /// loops beat every period while the process runs; the process is frozen once, at any phase,
    /// for any length. Whenever systemd's deadline had not passed by the time the loops could run
    /// again, the agent is not restarted; and a loop that really stops is restarted within its
    /// deadline plus WatchdogSec. Before, a problem was looked at again only a tick later, and a
    /// freeze of 16–28 s cost a restart.
    @Test func aFreezeThatEndsBeforeSystemdsDeadlineNeverCostsARestartAndAStuckLoopAlwaysDoes() async {
        await propertyCheck(input: Gen.int(in: 0...59_000), Gen.int(in: 0...40_000), Gen.int(in: 0...1)) { startMs, lengthMs, stuckPick in
            let ms: Int64 = 1_000
            let watchdog = 30 * Self.s, step = 100 * ms
            let periods: [(String, Int64)] = [("radio", Self.s), ("control", 5 * Self.s), ("uplink", 60 * Self.s)]
            let freeze = (Int64(startMs) * ms)..<(Int64(startMs + lengthMs) * ms)
            // With stuckPick the control loop stops beating for good at the freeze's start instead.
            let stuckAt: Int64? = stuckPick == 1 ? freeze.lowerBound : nil
            var h = LoopHeartbeats()
            var w = WatchdogSchedule(tickMicros: watchdog / 2, now: 0)
            var lastBeat = [Int64](repeating: 0, count: periods.count)
            for (name, period) in periods { h.started(name, periodMicros: period, at: 0) }
            var lastPing: Int64 = 0, restartedAt: Int64?, lastPingBeforeFreeze: Int64 = 0
            var t: Int64 = 0
            let frozenFor = stuckAt == nil ? freeze : 0..<0
            while t < 200 * Self.s, restartedAt == nil {
                if t - lastPing > watchdog { restartedAt = t; break }
                if !frozenFor.contains(t) {
                    // The worst order: on resuming, the watchdog looks before any loop has run.
                    if t >= w.nextWakeMicros {
                        h.forgive(frozenMicros: w.frozenMicros(wokeAt: t), at: t)
                        if w.decide(problems: h.problems(at: t), at: t) == .ping { lastPing = t }
                    }
                    for (i, (name, period)) in periods.enumerated() where t - lastBeat[i] >= period {
                        if name == "control", let stuckAt, t >= stuckAt { continue }
                        h.beat(name, at: t)
                        lastBeat[i] = t
                    }
                }
                if t < freeze.lowerBound { lastPingBeforeFreeze = lastPing }
                t += step
            }
            if let stuckAt {
                #expect(restartedAt != nil, "a stuck loop must cost a restart")
                if let r = restartedAt { #expect(r <= stuckAt + 20 * Self.s + 10 * Self.s + watchdog + Self.s) }
            } else if freeze.upperBound + 2 * Self.s - lastPingBeforeFreeze < watchdog {
                #expect(restartedAt == nil, "frozen \(lengthMs) ms from \(startMs) ms, last ping \(lastPingBeforeFreeze)")
            }
        }
    }
}
