// Line edges → (high, low) pulses, with a glitch filter. This is the GPIO receiver's path
// (kernel-timestamped edges from libgpiod) and the replay's (.vcd edges, .ook pulses turned
// back into edges), so both run the same code.
//
// A superregenerative receiver (RXB6, SRX882) chatters: with no carrier its output is noise,
// and real pulses carry spikes. A level shorter than `glitchMicros` is folded into the level
// around it. The last low of a burst only ends at the next edge, which may be minutes away, so
// `flush(atMicros:)` ends it once the line has been quiet for `idleMicros`.

public struct EdgePulseAssembler: Sendable {
    public var glitchMicros: Int64
    public var idleMicros: Int64

    public struct Counters: Sendable, Equatable {
        public var edges = 0
        public var glitches = 0
        public var pulses = 0
    }
    public private(set) var counters = Counters()

    /// The level now on the line and since when.
    private var level: Bool?
    private var since: Int64 = 0
    /// The last level long enough to count, not yet passed on (a glitch may still extend it).
    private var held: (high: Bool, micros: Int64)?
    private var pendingHigh: Int64?
    /// Set by a flush: the quiet low was passed on already.
    private var flushed = false

    public init(glitchMicros: Int64 = 80, idleMicros: Int64 = 50_000) {
        self.glitchMicros = glitchMicros
        self.idleMicros = idleMicros
    }

    /// The line went to `high` at `atMicros`. Times must not go backwards; an edge that does is
    /// treated as simultaneous.
    public mutating func edge(high: Bool, atMicros: Int64) -> Pulse? {
        counters.edges += 1
        guard let current = level else {
            level = high
            since = atMicros
            return nil
        }
        guard current != high else { return nil } // a repeated level is no edge
        let length = max(0, atMicros - since)
        level = high
        since = atMicros
        if flushed {
            flushed = false
            return nil // the low that just ended was passed on by the flush
        }
        return segment(high: current, micros: length)
    }

    /// When the current low will have lasted `idleMicros` (nil while high or already flushed).
    public var quietDeadline: Int64? {
        level == false && !flushed ? since + idleMicros : nil
    }

    /// Call while the line is quiet: ends a low that has lasted `idleMicros`.
    public mutating func flush(atMicros now: Int64) -> Pulse? {
        guard level == false, !flushed, now - since >= idleMicros else { return nil }
        flushed = true
        var out = segment(high: false, micros: now - since)
        // Nothing can extend this low any more: pass it on now.
        if let h = held { held = nil; out = out ?? emit(h) }
        return out
    }

    private mutating func segment(high: Bool, micros: Int64) -> Pulse? {
        if micros < glitchMicros, let h = held {
            counters.glitches += 1
            held = (h.high, h.micros + micros)
            return nil
        }
        if let h = held, h.high == high {
            held = (high, h.micros + micros) // the level around a glitch, joined again
            return nil
        }
        let out = held.flatMap { emit($0) }
        held = (high, micros)
        return out
    }

    private mutating func emit(_ s: (high: Bool, micros: Int64)) -> Pulse? {
        if s.high {
            pendingHigh = s.micros
            return nil
        }
        guard let h = pendingHigh else { return nil }
        pendingHigh = nil
        counters.pulses += 1
        return Pulse(high: Int(clamping: h), low: Int(clamping: s.micros))
    }
}
