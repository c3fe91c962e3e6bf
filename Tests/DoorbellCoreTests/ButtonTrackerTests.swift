import DoorbellCore
import PropertyBased
import Testing

@Suite struct ButtonTrackerTests {
    let settings = ButtonTracker.Settings() // 300 ms gap, 1.5 s hold, 3 s cooldown

    /// Frame times of one burst: starts at `start`, each gap within the repeat gap.
    static func burst(start: Int64, gaps: [Int64]) -> [Int64] {
        var t = start
        var out = [t]
        for g in gaps { t += g; out.append(t) }
        return out
    }

    @Test func firstFrameEmitsAtOnce() {
        var tracker = ButtonTracker(settings: settings)
        #expect(tracker.observe(device: "a", at: 1_000) == .pressed(device: "a", at: 1_000, suppressed: 0))
        #expect(tracker.observe(device: "a", at: 47_000) == nil)
    }

    @Test func anyBurstOfRepeatsIsOnePress() async {
        await propertyCheck(input: Gen.int(in: 0...300_000).array(of: 0...69)) { gaps in
            var tracker = ButtonTracker(settings: settings)
            let times = Self.burst(start: 5_000_000, gaps: gaps.map(Int64.init))
            let outputs = times.compactMap { tracker.observe(device: "bell", at: $0) }
            let pressed = outputs.filter { if case .pressed = $0 { true } else { false } }
            let held = outputs.filter { if case .held = $0 { true } else { false } }
            #expect(pressed.count == 1)
            let duration = (times.last ?? 0) - (times.first ?? 0)
            #expect(held.count == (duration >= settings.holdAfterMicros ? 1 : 0))
        }
    }

    @Test func pressesFurtherApartThanGapAndCooldownAreSeparate() async {
        await propertyCheck(input: Gen.int(in: 1...8), Gen.int(in: 3_000_001...60_000_000)) { presses, pause in
            var tracker = ButtonTracker(settings: settings)
            var t: Int64 = 0
            var pressed = 0
            for _ in 0..<presses {
                for frame in Self.burst(start: t, gaps: Array(repeating: 46_000, count: 20)) {
                    if case .pressed = tracker.observe(device: "bell", at: frame) { pressed += 1 }
                }
                t += Int64(pause) + 20 * 46_000
            }
            #expect(pressed == presses)
        }
    }

    @Test func pressWithinCooldownIsCountedAndReportedWithTheNextForwardedOne() {
        var tracker = ButtonTracker(settings: settings)
        #expect(tracker.observe(device: "a", at: 0) == .pressed(device: "a", at: 0, suppressed: 0))
        // 1 s later: a separate press (gap > 300 ms) but inside the 3 s cooldown.
        #expect(tracker.observe(device: "a", at: 1_000_000) == nil)
        #expect(tracker.observe(device: "a", at: 2_000_000) == nil)
        #expect(tracker.counters.suppressed == 2)
        // 4 s after the forwarded press: forwarded, carrying the two swallowed presses.
        #expect(tracker.observe(device: "a", at: 4_000_000) == .pressed(device: "a", at: 4_000_000, suppressed: 2))
    }

    /// What `agentctl inject press` tells the user: a frame within the repeat gap is the same press,
    /// a new press within the cooldown is suppressed, and a forwarded press clears the reason.
    @Test func theReasonAFrameForwardedNothing() {
        var tracker = ButtonTracker(settings: ButtonTracker.Settings(repeatGapMicros: 300_000, holdAfterMicros: 1_500_000, cooldownMicros: 0))
        #expect(tracker.observe(device: "a", at: 1_000_000) != nil && tracker.lastSwallowed == nil)
        #expect(tracker.observe(device: "a", at: 1_100_000) == nil)
        #expect(tracker.lastSwallowed == .samePress, "within the repeat gap, although the cooldown is 0")
        #expect(tracker.observe(device: "a", at: 2_000_000) != nil && tracker.lastSwallowed == nil)
        var cooling = ButtonTracker(settings: settings)
        _ = cooling.observe(device: "a", at: 1_000_000)
        #expect(cooling.observe(device: "a", at: 2_000_000) == nil && cooling.lastSwallowed == .cooldown)
        _ = cooling.observeDiscrete(device: "a", at: 2_100_000, continuation: true)
        #expect(cooling.lastSwallowed == .samePress)
    }

    @Test func holdEmitsOnceAfterHoldAfter() {
        var tracker = ButtonTracker(settings: settings)
        var outputs: [ButtonTracker.Output] = []
        for t in stride(from: Int64(0), through: 4_000_000, by: 100_000) {
            if let o = tracker.observe(device: "a", at: t) { outputs.append(o) }
        }
        #expect(outputs == [.pressed(device: "a", at: 0, suppressed: 0), .held(device: "a", at: 1_500_000, pressStartedAt: 0)])
    }

    @Test func interleavedDevicesDoNotConfuseEachOther() async {
        let schedule = Gen.int(in: 0...2_000_000).array(of: 1...12)
        await propertyCheck(input: schedule, schedule) { a, b in
            // Build each device's frame times from its own pause list, then merge them.
            func times(_ pauses: [Int]) -> [Int64] {
                var t: Int64 = 0
                return pauses.map { t += Int64($0); return t }
            }
            let ta = times(a), tb = times(b).map { $0 + 123 }
            var alone = ButtonTracker(settings: settings)
            let expectedA = ta.compactMap { alone.observe(device: "a", at: $0) }
            alone = ButtonTracker(settings: settings)
            let expectedB = tb.compactMap { alone.observe(device: "b", at: $0) }

            let merged = (ta.map { ("a", $0) } + tb.map { ("b", $0) }).sorted { $0.1 < $1.1 }
            var together = ButtonTracker(settings: settings)
            var gotA: [ButtonTracker.Output] = [], gotB: [ButtonTracker.Output] = []
            for (device, t) in merged {
                guard let o = together.observe(device: device, at: t) else { continue }
                if device == "a" { gotA.append(o) } else { gotB.append(o) }
            }
            #expect(gotA == expectedA)
            #expect(gotB == expectedB)
        }
    }

    @Test func stateStaysBoundedUnderManyCodes() {
        var tracker = ButtonTracker(settings: settings)
        for i in 0..<10_000 { _ = tracker.observe(device: "noise-\(i)", at: Int64(i) * 10) }
        #expect(tracker.trackedDevices <= ButtonTracker.maxTrackedDevices)
    }
}
