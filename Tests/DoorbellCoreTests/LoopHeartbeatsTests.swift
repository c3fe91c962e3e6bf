import DoorbellCore
import PropertyBased
import Testing

/// The watchdog's rule: every running loop must have beaten within two of its own periods plus a
/// grace; a loop that ended while needed, or sits silent longer, withholds the ping.
@Suite struct LoopHeartbeatsTests {
    static let s: Int64 = 1_000_000

    @Test func aLoopSilentPastTwoPeriodsAndTheGraceIsStuckEachByItsOwnPeriod() {
        var h = LoopHeartbeats(graceMicros: 10 * Self.s)
        h.started("control", periodMicros: 5 * Self.s, at: 0)
        h.started("uplink", periodMicros: 60 * Self.s, at: 0)
        #expect(h.problems(at: 20 * Self.s).isEmpty, "exactly at the deadline is not late")
        #expect(h.problems(at: 20 * Self.s + 1) == ["control: no heartbeat for 20 s (it wakes at least every 5 s): stuck"])
        h.beat("control", at: 100 * Self.s)
        #expect(h.problems(at: 100 * Self.s).isEmpty, "the uplink's own period is longer: 100 s of silence is within it")
        #expect(h.problems(at: 131 * Self.s) == ["control: no heartbeat for 31 s (it wakes at least every 5 s): stuck",
                                                  "uplink: no heartbeat for 131 s (it wakes at least every 60 s): stuck"])
    }

    @Test func anEndedLoopIsDeadAtOnceAndABeatDoesNotReviveItButAStartDoes() {
        var h = LoopHeartbeats()
        h.started("control", periodMicros: 5 * Self.s, at: 0)
        h.ended("control", reason: "accept on /run/x.sock failed: Invalid argument", at: Self.s)
        #expect(h.problems(at: Self.s) == ["control: the loop ended: accept on /run/x.sock failed: Invalid argument"])
        h.beat("control", at: 2 * Self.s)
        #expect(h.problems(at: 2 * Self.s).count == 1)
        h.started("control", periodMicros: 5 * Self.s, at: 3 * Self.s)
        #expect(h.problems(at: 3 * Self.s).isEmpty)
    }

    @Test func aLoopThatNeverStartedIsDeadAndAStoppedOneIsNotWatched() {
        var h = LoopHeartbeats()
        h.ended("uplink", reason: "its thread could not start (Resource temporarily unavailable)", at: 0)
        #expect(h.problems(at: 0) == ["uplink: the loop ended: its thread could not start (Resource temporarily unavailable)"])
        h.started("radio ble", periodMicros: Self.s, at: 0)
        h.stopped("radio ble")
        h.stopped("uplink")
        #expect(h.problems(at: 3_600 * Self.s).isEmpty, "a reload or a finished replay stopped them on purpose")
    }

    /// What `agentctl status` shows (issue #27 item 6's rest): every watched loop with its state,
    /// and a stuck or ended one as a problem, the same loops the watchdog ping is withheld for.
    /// Before, the status listed no loops and a stuck spill or metrics loop was nowhere.
    @Test func theStatusShowsEveryLoopAndTheStuckAndEndedOnesAreItsProblems() {
        var h = LoopHeartbeats(graceMicros: 10 * Self.s)
        h.started("spill", periodMicros: 30 * Self.s, at: 0)
        h.started("metrics", periodMicros: 30 * Self.s, at: 0)
        h.started("control", periodMicros: 5 * Self.s, at: 0)
        h.beat("control", at: 95 * Self.s)
        h.beat("metrics", at: 90 * Self.s)
        h.ended("uplink", reason: "its thread could not start (Resource temporarily unavailable)", at: 1 * Self.s)
        var report = AgentStatusReport(version: "1", gatewayID: "gw", pid: 1, uptimeSeconds: 95,
                                       clock: .init(synchronized: true, reason: "", requireSync: false, deliveryHeld: false, bootID: "", nowWallMicros: 0),
                                       outbox: .init(stateDir: "/var/lib/doorbell-agent"))
        report.loops = h.states(at: 100 * Self.s)
        #expect(report.loops.map(\.health) == [.stuck, .running, .running, .ended])
        #expect(report.loops.map(\.silentSeconds) == [100, 10, 5, 99])
        #expect(report.problems.count == 2)
        #expect(report.problems.first?.hasPrefix("loop spill: no heartbeat for 100 s (it wakes at least every 30 s): stuck; the watchdog ping is withheld") == true,
                "\(report.problems)")
        #expect(report.problems.last?.hasPrefix("loop uplink: the loop ended: its thread could not start") == true)
        #expect(report.problems.map { String($0.dropFirst(5).prefix { $0 != ";" }) } == h.problems(at: 100 * Self.s),
                "the same lines as the watchdog's")
        let row = StatusTable.render(report).split(separator: "\n").first { $0.hasPrefix("loops ") }
        #expect(row?.hasSuffix("  2 running, spill stuck, uplink ended") == true, "\(StatusTable.render(report))")
        #expect(AgentStatusReport(json: report.json)?.loops == report.loops, "agentctl reads back what the agent meant")
    }

    /// Whatever the schedule, a loop that beats at least once a period is never reported, and one
    /// that stops beating is reported exactly when its silence passes the deadline.
    @Test func beatsWithinThePeriodAreAlwaysAliveAndSilenceIsFoundAtTheDeadline() async {
        await propertyCheck(input: Gen.int(in: 1...30), Gen.int(in: 0...1_000).array(of: 1...80), Gen.int(in: 0...100)) { periodS, gaps, graceS in
            let period = Int64(periodS) * Self.s
            var h = LoopHeartbeats(graceMicros: Int64(graceS) * Self.s)
            h.started("radio rtl433", periodMicros: period, at: 0)
            var now: Int64 = 0
            for gap in gaps {
                now += period * Int64(gap) / 1_000 // up to one period between beats
                #expect(h.problems(at: now).isEmpty)
                h.beat("radio rtl433", at: now)
            }
            let deadline = h.deadline(periodMicros: period)
            #expect(h.problems(at: now + deadline).isEmpty)
            #expect(h.problems(at: now + deadline + 1).count == 1)
        }
    }
}

/// The control socket's bounds: requests and followers each capped, refused with what to do.
@Suite struct ControlAdmissionTests {
    @Test func followersAreCappedApartFromRequestsAndTheRefusalSaysWhatToDo() {
        var a = ControlAdmission(maxRequests: 2, maxFollowers: 1)
        #expect(a.admit(.request) == nil)
        #expect(a.promote() == nil, "the first follower")
        #expect(a.requests == 0 && a.followers == 1)
        #expect(a.admit(.request) == nil)
        let refused = a.promote()
        #expect(refused?.contains("1 followers (agentctl events --follow, agentctl capture) are already connected") ?? false, "\(refused ?? "nil")")
        #expect(a.requests == 0 && a.followers == 1, "a refused follower gives its request slot back")
        #expect(a.admit(.request) == nil && a.admit(.request) == nil, "status still has its slots while a follower hangs")
        #expect(a.admit(.request)?.contains("already serving 2 control connections") ?? false)
    }

    @Test func noSequenceOfConnectionsPassesTheCapsOrGoesNegative() async {
        await propertyCheck(input: Gen.int(in: 0...3).array(of: 0...200)) { steps in
            var a = ControlAdmission(maxRequests: 3, maxFollowers: 2)
            var held: [ControlAdmission.Slot] = []
            for step in steps {
                switch step {
                case 0: if a.admit(.request) == nil { held.append(.request) }
                case 1:
                    if let i = held.firstIndex(of: .request) {
                        held.remove(at: i)
                        if a.promote() == nil { held.append(.follower) }
                    }
                default:
                    if let slot = held.popLast() { a.release(slot) }
                }
                #expect(a.requests == held.filter { $0 == .request }.count)
                #expect(a.followers == held.filter { $0 == .follower }.count)
                #expect(a.requests <= 3 && a.followers <= 2)
            }
        }
    }
}
