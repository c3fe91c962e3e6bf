import DoorbellCore
import PropertyBased
import Testing

/// `[radio.ook] max_time_unit_us`: a slow time unit decodes like a bell's, because the word gap,
/// the burst silence, the line's idle and the repeat gap of one press all grow with it.
struct OOKTimeUnitTests {
    /// Every press of a valid code, at any T the setting allows, through the agent's pipeline
    /// (edges, idle flush, decoder, tracker): one press, and every code heard is the one sent.
    @Test func anyValidPressAtAnyAllowedTimeUnitDecodesToTheSameCode() async {
        let range = OOKDecoder.Settings.maxTimeUnitRange
        await propertyCheck(input: Gen.int(in: 0...0xFF_FFFF), Gen.int(in: range), Gen.int(in: 0...1_000), Gen.int(in: 0...3),
                            Gen.int(in: 3...8), Gen.int(in: 0...1), Gen.int(in: 0...Int(UInt32.max))) { code, maxT, tPick, protoPick, repeats, order, seed in
            let settings = OOKDecoder.Settings(maxTimeUnitMicros: maxT)
            // Any T from the protocol's fastest remote (a bell's 190 µs for protocol 1; rc-switch's
            // nominal T less 40 % for the others) up to the setting.
            let proto = [1, 2, 4, 5][protoPick]
            let fastest = proto == 1 ? 190 : OOKProtocol.table[proto - 1].nominalMicros * 6 / 10
            let t = fastest + (maxT - fastest) * tPick / 1_000
            var encoder = EV1527Encoder(timeUnitMicros: t, repeats: repeats, jitterMicros: max(1, t / 12))
            encoder.rcSwitchProtocol = proto
            encoder.syncFirst = order == 0
            var rng = SeededRandom(seed: UInt64(seed))
            let run = OOKDecoderTests.run(edges: PulseRecording.edges(pulses: encoder.press(code: UInt32(code), random: &rng)), settings: settings)
            let what = "max \(maxT) µs, protocol \(proto) T \(t) µs, \(repeats) words, code \(String(code, radix: 16))"
            #expect(!run.codes.isEmpty, "\(what): no code")
            #expect(run.codes.allSatisfy { $0.code == UInt32(code) && $0.rcSwitchProtocol == proto },
                    "\(what): \(run.codes.map { ($0.rcSwitchProtocol, String($0.code, radix: 16)) })")
            #expect(run.presses.count == 1, "\(what): \(run.presses.count) presses; the repeats of one press are one")
        }
    }

    /// The durations derived from the setting: at the default exactly those tuned for bells, and
    /// above it each still sits between the levels it must tell apart (protocol 1 at T = setting).
    @Test func derivedDurationsKeepTheirOrderAtEverySetting() async {
        let d = OOKDecoder.Settings()
        #expect(d.separatorMicros == 2_000 && d.timeUnitLimitMicros == 1_500 && d.burstSilenceMicros == 100_000 && d.lineIdleMicros == 50_000)
        #expect(d.minRepeatGapMicros < ButtonTracker.Settings().repeatGapMicros, "the default keeps the tracker's own repeat gap")
        await propertyCheck(input: Gen.int(in: OOKDecoder.Settings.maxTimeUnitRange)) { m in
            let s = OOKDecoder.Settings(maxTimeUnitMicros: m)
            #expect(3 * m < s.separatorMicros && s.separatorMicros < 31 * m, "a bit's 3T low stays in the word, the 31T sync ends it")
            #expect(Int64(31 * m) < s.lineIdleMicros && Int(s.lineIdleMicros) < s.burstSilenceMicros, "a sync low is not cut short by the idle flush")
            #expect(s.minRepeatGapMicros > Int64(3 * 128 * m), "three words apart (one damaged between) is still the same press")
            #expect(s.timeUnitLimitMicros >= m)
        }
    }

    /// What rig scenario needs: a slow press with a stretched line (levels 1 ms longer or
    /// shorter, as gpio-sim under emulation drives them) still decodes once at T = 2 ms.
    @Test func aSlowPressWithMillisecondStretchesDecodesOnce() {
        var rng = SeededRandom(seed: 25)
        let encoder = EV1527Encoder(timeUnitMicros: 2_000, repeats: 6, jitterMicros: 1_000)
        let pulses = encoder.press(code: 0xA57D00, random: &rng)
        let slow = OOKDecoderTests.run(edges: PulseRecording.edges(pulses: pulses), settings: OOKDecoder.Settings(maxTimeUnitMicros: 3_000))
        #expect(Set(slow.codes.map(\.code)) == [0xA57D00])
        #expect(slow.presses.count == 1)
        // The bell's settings take nothing from it: T = 2 ms is no bell.
        let bell = OOKDecoderTests.run(edges: PulseRecording.edges(pulses: pulses))
        #expect(bell.codes.isEmpty && bell.presses.isEmpty)
    }
}
