// EV1527 / PT2262-style fixed-code transmitter (and the rc-switch protocol table), as pulses:
// what the button's encoder chip does.
// Written from the EV1527 data sheet's frame layout:
//   sync: 1T high, 31T low; then 24 bits MSB first; bit 0 = 1T high + 3T low, bit 1 = 3T high + 1T low.
// One press repeats the word `repeats` times. Used to make the sim board's recordings and, in tests,
// to check decoders against codes at any T and jitter.

public struct Pulse: Sendable, Equatable {
    /// High time and the low time after it, in microseconds.
    public var highMicros: Int
    public var lowMicros: Int
    public init(high: Int, low: Int) { highMicros = high; lowMicros = low }
}

public struct EV1527Encoder: Sendable {
    public var timeUnitMicros: Int
    public var repeats: Int
    public var jitterMicros: Int
    public var bits: Int
    /// rc-switch protocol number (1 = EV1527/PT2262 timing); see OOKProtocol.table.
    public var rcSwitchProtocol: Int = 1
    /// EV1527 sends the sync before the bits; PT2262 after them.
    public var syncFirst: Bool = true

    public init(timeUnitMicros: Int = 350, repeats: Int = 20, jitterMicros: Int = 30, bits: Int = 24) {
        self.timeUnitMicros = timeUnitMicros
        self.repeats = repeats
        self.jitterMicros = jitterMicros
        self.bits = bits
    }

    /// One press: `repeats` words with their syncs, as (high, low) pulse pairs of the line.
    public func press(code: UInt32, random: inout some RandomNumberGenerator) -> [Pulse] {
        let p = OOKProtocol.table.first { $0.number == rcSwitchProtocol } ?? OOKProtocol.table[0]
        let t = Double(timeUnitMicros)
        func jitter(_ units: Double) -> Int {
            let v = Int((units * t).rounded())
            return jitterMicros == 0 ? v : max(1, v + Int.random(in: -jitterMicros...jitterMicros, using: &random))
        }
        // Levels as the chip drives them (first level of each element is high, or low when inverted).
        var levels: [(high: Bool, micros: Int)] = []
        levels.reserveCapacity(repeats * (bits + 1) * 2)
        func element(_ a: Double, _ b: Double) {
            levels.append((!p.inverted, jitter(a)))
            levels.append((p.inverted, jitter(b)))
        }
        for _ in 0..<repeats {
            if syncFirst { element(p.syncHigh, p.syncLow) }
            for i in stride(from: bits - 1, through: 0, by: -1) {
                if (code >> UInt32(i)) & 1 == 1 { element(p.oneHigh, p.oneLow) } else { element(p.zeroHigh, p.zeroLow) }
            }
            if !syncFirst { element(p.syncHigh, p.syncLow) }
        }
        // Pair each high with the low after it; a leading low is the silence before the press.
        var out: [Pulse] = []
        out.reserveCapacity(levels.count / 2 + 1)
        var high: Int?
        for level in levels {
            if level.high {
                high = (high ?? 0) + level.micros
            } else if let h = high {
                out.append(Pulse(high: h, low: level.micros))
                high = nil
            } else if let last = out.popLast() {
                out.append(Pulse(high: last.highMicros, low: last.lowMicros + level.micros))
            }
        }
        if let h = high { out.append(Pulse(high: h, low: 100_000)) }
        return out
    }
}

/// rtl_433's pulse-data text format (`.ook`, read by `rtl_433 -r FILE.ook`).
public enum OOKPulseFile {
    /// rtl_433 ends a package at a gap of more than 10 ms that is also 10 times the longest pulse
    /// (or any gap over 100 ms); packages are written the same way so rtl_433 sees what it would
    /// have demodulated itself.
    public static func packages(_ pulses: [Pulse]) -> [[Pulse]] {
        var out: [[Pulse]] = []
        var current: [Pulse] = []
        var longest = 0
        for p in pulses {
            current.append(p)
            longest = max(longest, p.highMicros)
            if p.lowMicros > 100_000 || (p.lowMicros > 10_000 && p.lowMicros > 10 * longest) {
                out.append(current)
                current = []
                longest = 0
            }
        }
        if !current.isEmpty { out.append(current) }
        return out
    }

    public static func write(_ pulses: [Pulse], frequencyHz: Int = 433_920_000, comment: String? = nil) -> String {
        var s = ";pulse data\n;version 1\n;timescale 1us\n"
        if let comment { s += ";source \(comment)\n" }
        for package in packages(pulses) {
            s += ";ook \(package.count) pulses\n;freq1 \(frequencyHz)\n;centerfreq \(frequencyHz) Hz\n;samplerate 250000 Hz\n"
            for (i, p) in package.enumerated() {
                // The last gap of a recording is the detector's timeout, as rtl_433 writes it.
                let gap = i == package.count - 1 ? max(p.lowMicros, 10_000, 10 * (package.map(\.highMicros).max() ?? 0)) : p.lowMicros
                s += "\(p.highMicros) \(gap)\n"
            }
            s += ";end\n"
        }
        return s
    }
}

/// A small, seedable generator so recordings and tests are reproducible (SplitMix64).
public struct SeededRandom: RandomNumberGenerator, Sendable {
    private var state: UInt64
    public init(seed: UInt64) { state = seed }
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
