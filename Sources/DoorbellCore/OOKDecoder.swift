// Fixed-code OOK words from (high, low) pulse pairs: EV1527, PT2262 and the rc-switch protocol
// table 1–6 (protocol 6 inverted). Pure and streaming: one pulse in, at most one code out.
//
// Written from the EV1527/PT2262 data sheets and rc-switch's protocol table (ratios only):
// a word is `bits` bit pairs between two sync gaps. EV1527 sends its sync (1T high, 31T low)
// before the bits, PT2262 after them; in a burst of repeats both look like sync, bits, sync, …
// and differ only at the ends, so words are counted between gaps, not by where the sync sits.
// T is not fixed: it comes from the sync (31T for protocol 1), so remotes from ~190 to ~530 µs
// decode, and bits are classified by a midpoint threshold between the short and long high
// (cheap remotes have skewed duty cycles: 0.7T / 2.7T instead of 1T / 3T).
// A code is reported only from the second identical consecutive word on: noise can form one
// plausible word, and damaged words happen.

public struct OOKProtocol: Sendable, Equatable {
    public var number: Int
    /// Durations in units of T; for an inverted protocol "high" is the line's low level.
    public var syncHigh: Double, syncLow: Double
    public var zeroHigh: Double, zeroLow: Double
    public var oneHigh: Double, oneLow: Double
    public var inverted: Bool
    /// The nominal T of the table, for the encoder; the decoder measures T itself.
    public var nominalMicros: Int

    var bitPeriod: Double { zeroHigh + zeroLow }
    var syncPeriod: Double { syncHigh + syncLow }

    /// rc-switch's table (pulse length; sync, zero, one as high:low ratios; inverted).
    public static let table: [OOKProtocol] = [
        OOKProtocol(number: 1, syncHigh: 1, syncLow: 31, zeroHigh: 1, zeroLow: 3, oneHigh: 3, oneLow: 1, inverted: false, nominalMicros: 350),
        OOKProtocol(number: 2, syncHigh: 1, syncLow: 10, zeroHigh: 1, zeroLow: 2, oneHigh: 2, oneLow: 1, inverted: false, nominalMicros: 650),
        OOKProtocol(number: 3, syncHigh: 30, syncLow: 71, zeroHigh: 4, zeroLow: 11, oneHigh: 9, oneLow: 6, inverted: false, nominalMicros: 100),
        OOKProtocol(number: 4, syncHigh: 1, syncLow: 6, zeroHigh: 1, zeroLow: 3, oneHigh: 3, oneLow: 1, inverted: false, nominalMicros: 380),
        OOKProtocol(number: 5, syncHigh: 6, syncLow: 14, zeroHigh: 1, zeroLow: 2, oneHigh: 2, oneLow: 1, inverted: false, nominalMicros: 500),
        OOKProtocol(number: 6, syncHigh: 23, syncLow: 1, zeroHigh: 1, zeroLow: 2, oneHigh: 2, oneLow: 1, inverted: true, nominalMicros: 450),
    ]
}

/// A confirmed fixed code: what a GPIO receiver heard at least twice in a row.
public struct OOKCode: Sendable, Equatable {
    public var code: UInt32
    public var bits: Int
    /// "ev1527", "pt2262" (protocol 1, told apart by where the first word's sync sat) or "rcswitch-N".
    public var protocolName: String
    public var rcSwitchProtocol: Int
    /// T measured from the sync gap, microseconds.
    public var timeUnitMicros: Int
    /// The word as 12 PT2262 tri-state symbols (0, 1, F) when it is a valid one.
    public var tristate: String?
    /// 2 for the word that confirmed the code, then 3, 4, … for the rest of the burst.
    public var repeatIndex: Int

    /// Hex with at least 6 digits, lower case: the identity rtl_433 flex decoders print too.
    public var hex: String {
        let s = String(code, radix: 16)
        let digits = (bits + 3) / 4
        return s.count >= max(6, digits) ? s : String(repeating: "0", count: max(6, digits) - s.count) + s
    }

    /// PT2262 symbols from bit pairs: 00 → 0, 11 → 1, 01 → F (float); 10 is not a PT2262 symbol.
    public static func tristate(code: UInt32, bits: Int) -> String? {
        guard bits == 24 else { return nil }
        var out = ""
        for i in stride(from: 22, through: 0, by: -2) {
            switch (code >> UInt32(i)) & 3 {
            case 0: out.append("0")
            case 3: out.append("1")
            case 1: out.append("F")
            default: return nil
            }
        }
        return out
    }
}

public struct OOKDecoder: Sendable {
    public struct Settings: Sendable, Equatable {
        /// rc-switch protocol numbers to try, in order.
        public var protocols: [Int] = [1, 2, 3, 4, 5, 6]
        /// Bits per word (EV1527 and PT2262: 24).
        public var bits: Int = 24
        /// The slowest time unit T the decoder must take (`[radio.ook] max_time_unit_us`). Bells
        /// use 190–530 µs; a slow remote or a line that stretches levels (gpio-sim under
        /// emulation) needs more. Every duration that tells a bit from a gap grows with it, never
        /// below the values tuned for bells (those are what the default gives).
        public var maxTimeUnitMicros: Int = Settings.defaultMaxTimeUnitMicros
        /// How far a high may be off its nominal length, in T (rc-switch allows 60 %).
        public var toleranceT: Double = 0.6
        /// Plausible T; below it a "word" is noise.
        public var minTimeUnitMicros: Int = 50
        public init(protocols: [Int] = [1, 2, 3, 4, 5, 6], bits: Int = 24, maxTimeUnitMicros: Int = Settings.defaultMaxTimeUnitMicros) {
            self.protocols = protocols
            self.bits = bits
            self.maxTimeUnitMicros = maxTimeUnitMicros
        }

        public static let defaultMaxTimeUnitMicros = 600
        public static let maxTimeUnitRange = defaultMaxTimeUnitMicros...10_000

        /// A low at least this long ends a word (a sync gap or silence): 3⅓ T, between the
        /// longest bit low (3T) and the shortest sync low (6T, protocol 4). At the default it is
        /// 2 ms: a 3T low at T = 600 µs stays below, a 6T sync at 380 µs above.
        public var separatorMicros: Int { max(2_000, maxTimeUnitMicros * 10 / 3) }
        /// The largest T a word may measure: 1.5 ms for the rc-switch table at the default (the
        /// separator keeps protocol 1 under ~600 µs there), then a quarter above the setting so a
        /// stretched word still counts.
        public var timeUnitLimitMicros: Int { max(1_500, maxTimeUnitMicros * 5 / 4) }
        /// A low this long ends a burst: longer than any sync low (31T for protocol 1, 71T for 3).
        public var burstSilenceMicros: Int { max(100_000, maxTimeUnitMicros * 80) }
        /// How long a receiver line must stay low before the burst's last pulse is complete
        /// (longer than a sync low, so a slow sync is not cut short).
        public var lineIdleMicros: Int64 { Int64(max(50_000, maxTimeUnitMicros * 40)) }
        /// Frames of one press come a word apart (128T for protocol 1), or three when a word in
        /// between was damaged: the tracker's repeat gap is at least 3.5 words, so the repeats of
        /// a slow press stay one press. At the default (269 ms) the tracker's 300 ms stands.
        public var minRepeatGapMicros: Int64 { Int64(maxTimeUnitMicros) * 448 }
        public static let bitRange = 8...32
    }

    public struct Counters: Sendable, Equatable {
        public var pulses = 0
        /// Words that decoded (confirmed or not).
        public var words = 0
        /// Codes reported (second and later identical words).
        public var codes = 0
        /// Stretches between gaps that were not a word: noise, damaged words, other protocols.
        public var rejected = 0
    }

    public let settings: Settings
    public private(set) var counters = Counters()
    private var normal: Segmenter
    private var inverted: Segmenter?
    private var pendingLow: Int?
    /// The plain pairing decoded a word in the current burst: then the inverted pairing's words
    /// of that burst are the same signal read the other way, never a second code.
    private var plainWordThisBurst = false
    private var pendingLowWasSilence = false

    public init(settings: Settings = Settings()) {
        self.settings = settings
        let table = OOKProtocol.table.filter { settings.protocols.contains($0.number) }
        normal = Segmenter(protocols: table.filter { !$0.inverted }, invertedStream: false, bits: settings.bits)
        let inv = table.filter(\.inverted)
        inverted = inv.isEmpty ? nil : Segmenter(protocols: inv, invertedStream: true, bits: settings.bits)
    }

    /// One (high, low) pair from the receiver. Returns a code once a word has repeated.
    public mutating func feed(_ pulse: Pulse) -> OOKCode? {
        counters.pulses += 1
        // The inverted pairing closes a burst one pulse later than the plain one: after a
        // silence, its pair (silence, next high) still belongs to the burst before.
        let plainInBurstBefore = plainWordThisBurst
        if pendingLowWasSilence { plainWordThisBurst = false }
        var found = normal.push(pulse, settings: settings, counters: &counters)
        if normal.last != nil { plainWordThisBurst = true }
        if inverted != nil {
            // Inverted protocols pair each low with the high after it. A burst that fits both
            // pairings (all zeros of protocol 1 read as all ones of protocol 6, and their
            // neighbours) belongs to the plain one: one press, one code, never both.
            let plainInItsBurst = pendingLowWasSilence ? plainInBurstBefore : plainWordThisBurst
            if let low = pendingLow, let code = inverted?.push(Pulse(high: low, low: pulse.highMicros), settings: settings, counters: &counters),
               !plainInItsBurst {
                found = found ?? code
            }
            pendingLow = pulse.lowMicros
        }
        pendingLowWasSilence = pulse.lowMicros >= settings.burstSilenceMicros
        if found != nil { counters.codes += 1 }
        return found
    }

    /// Pairs between gaps, for one pairing of the line levels.
    struct Segmenter: Sendable {
        let protocols: [OOKProtocol]
        /// Inverted stream: the long level opens a word (it is the pair's first element).
        let invertedStream: Bool
        let bits: Int
        var run: [Pulse] = []
        var runPeriodSum = 0
        var overflow = false
        /// The gap pair that opened the current run.
        var before: Pulse?
        var last: (code: UInt32, proto: Int)?
        var repeats = 0
        var firstHadLeadingSync = false

        init(protocols: [OOKProtocol], invertedStream: Bool, bits: Int) {
            self.protocols = protocols
            self.invertedStream = invertedStream
            self.bits = bits
            run.reserveCapacity(bits + 1)
        }

        mutating func push(_ pair: Pulse, settings: Settings, counters: inout Counters) -> OOKCode? {
            let long = invertedStream ? pair.highMicros : pair.lowMicros
            // Every bit of a word lasts about the same; a level much longer than the bits so far
            // is a gap even when it is short in µs (protocol 4's sync is only 6T).
            let gap = long >= settings.separatorMicros
                || (run.count >= 4 && long * 4 * run.count >= 5 * runPeriodSum && long >= 4 * settings.minTimeUnitMicros)
            guard gap else {
                if run.count < bits {
                    run.append(pair)
                    runPeriodSum += pair.highMicros + pair.lowMicros
                } else {
                    overflow = true
                }
                return nil
            }
            defer {
                before = pair
                run.removeAll(keepingCapacity: true)
                runPeriodSum = 0
                overflow = false
            }
            return close(by: pair, settings: settings, counters: &counters)
        }

        private mutating func close(by gapPair: Pulse, settings: Settings, counters: inout Counters) -> OOKCode? {
            if run.isEmpty && !overflow { return nil } // gap after gap: silence, not a broken word
            var word: (code: UInt32, proto: OOKProtocol, t: Double, leading: Bool)?
            if !overflow {
                for p in protocols {
                    if let w = decode(p, closing: gapPair, settings: settings) { word = (w.code, p, w.t, w.leading); break }
                }
            }
            guard let word else {
                counters.rejected += 1
                last = nil
                repeats = 0
                return nil
            }
            counters.words += 1
            if let l = last, l.code == word.code, l.proto == word.proto.number {
                repeats += 1
            } else {
                last = (word.code, word.proto.number)
                repeats = 1
                firstHadLeadingSync = word.leading
            }
            guard repeats >= 2 else { return nil }
            let tristate = OOKCode.tristate(code: word.code, bits: bits)
            let name: String
            if word.proto.number == 1 {
                name = firstHadLeadingSync || tristate == nil ? "ev1527" : "pt2262"
            } else {
                name = "rcswitch-\(word.proto.number)"
            }
            return OOKCode(code: word.code, bits: bits, protocolName: name, rcSwitchProtocol: word.proto.number,
                           timeUnitMicros: Int(word.t.rounded()), tristate: tristate, repeatIndex: repeats)
        }

        /// The run as one word of protocol `p`, or nil.
        private func decode(_ p: OOKProtocol, closing: Pulse, settings: Settings) -> (code: UInt32, t: Double, leading: Bool)? {
            // `bits` pairs then a gap pair (its high is the sync's, or PT2262's trailing sync); or,
            // at the end of a normal burst, `bits - 1` pairs and a last bit whose low is the silence.
            let lastBitInGap: Bool
            if run.count == bits {
                lastBitInGap = false
            } else if run.count == bits - 1 && !invertedStream {
                lastBitInGap = true
            } else {
                return nil
            }
            // T from the bit periods: robust against one skewed duty cycle.
            var periods: [Int] = []
            periods.reserveCapacity(run.count)
            for b in run { periods.append(b.highMicros + b.lowMicros) }
            periods.sort()
            let tBits = Double(periods[periods.count / 2]) / p.bitPeriod
            guard tBits >= Double(settings.minTimeUnitMicros), tBits <= Double(settings.timeUnitLimitMicros) else { return nil }

            func syncT(_ s: Pulse) -> Double? {
                let t = Double(s.highMicros + s.lowMicros) / p.syncPeriod
                guard abs(t - tBits) <= 0.35 * tBits else { return nil }
                guard abs(Double(s.highMicros) - p.syncHigh * t) <= max(settings.toleranceT * t, 0.35 * p.syncHigh * t),
                      abs(Double(s.lowMicros) - p.syncLow * t) <= max(settings.toleranceT * t, 0.35 * p.syncLow * t) else { return nil }
                return t
            }
            let leading = before.flatMap(syncT)
            let trailing = lastBitInGap || invertedStream ? nil : syncT(closing)
            // The sync gap sets T: a word with neither sync is noise between two silences.
            guard let t = leading ?? trailing else { return nil }

            let threshold = (p.zeroHigh + p.oneHigh) / 2 * t
            let tolerance = settings.toleranceT * t
            var code: UInt32 = 0
            func bit(_ b: Pulse, full: Bool) -> Bool? {
                let h = Double(b.highMicros)
                let one = h >= threshold
                guard abs(h - (one ? p.oneHigh : p.zeroHigh) * t) <= tolerance else { return nil }
                if full {
                    let period = Double(b.highMicros + b.lowMicros)
                    guard abs(period - p.bitPeriod * t) <= 0.35 * p.bitPeriod * t else { return nil }
                    // The long part of a bit says which it is, whatever the duty cycle.
                    guard one ? b.highMicros > b.lowMicros : b.highMicros < b.lowMicros else { return nil }
                }
                return one
            }
            for b in run {
                guard let one = bit(b, full: true) else { return nil }
                code = code << 1 | (one ? 1 : 0)
            }
            if lastBitInGap {
                guard let one = bit(closing, full: false) else { return nil }
                code = code << 1 | (one ? 1 : 0)
            }
            return (code, t, leading != nil)
        }
    }
}
