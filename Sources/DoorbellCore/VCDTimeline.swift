// Value change dump (IEEE 1364 VCD) → the edges of one 1-bit signal, in microseconds.
// rtl_433 writes them with `-W FILE.vcd` (signal `AM` is the OOK level a GPIO receiver's pin
// shows); logic analysers (sigrok/PulseView) export the same format. Only what a timeline
// needs is read: `$timescale`, `$var` declarations, `#time` and scalar changes `0x` / `1x`.

public struct VCDEdge: Sendable, Equatable {
    public var micros: Int64
    public var high: Bool
}

public struct VCDError: Error, Sendable, Equatable, CustomStringConvertible {
    public var description: String
}

public enum VCDTimeline {
    /// The edges of the signal named `signal` (default `AM`; else the only 1-bit wire).
    public static func edges(text: String, signal: String? = nil) throws(VCDError) -> [VCDEdge] {
        var scaleNanos: Int64 = 1_000 // 1 us
        var ids: [(id: Substring, name: Substring, width: Int)] = []
        var chosen: Substring?
        var now: Int64 = 0
        var out: [VCDEdge] = []
        var inHeader = true
        var lineNumber = 0
        var tokens: [Substring] = []
        var pendingTimescale = false

        func pickSignal() throws(VCDError) -> Substring {
            let wires = ids.filter { $0.width == 1 }
            if let signal {
                guard let w = wires.first(where: { $0.name == signal }) else {
                    throw VCDError(description: "no 1-bit signal named \"\(signal)\" (signals: \(wires.map { String($0.name) }.joined(separator: ", ")))")
                }
                return w.id
            }
            if let am = wires.first(where: { $0.name == "AM" }) { return am.id }
            guard wires.count == 1, let only = wires.first else {
                throw VCDError(description: wires.isEmpty ? "no 1-bit signal declared ($var wire 1 …)"
                               : "several 1-bit signals (\(wires.map { String($0.name) }.joined(separator: ", "))): name the receiver's one")
            }
            return only.id
        }

        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            lineNumber += 1
            tokens = line.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\r" })
            if inHeader {
                if pendingTimescale, let first = tokens.first {
                    scaleNanos = try timescale(String(first), line: lineNumber)
                    pendingTimescale = false
                }
                guard let first = tokens.first else { continue }
                switch first {
                case "$timescale":
                    let spec = tokens.dropFirst().filter { $0 != "$end" }.joined()
                    if spec.isEmpty { pendingTimescale = true } else { scaleNanos = try timescale(spec, line: lineNumber) }
                case "$var":
                    // $var wire 1 ' AM $end
                    guard tokens.count >= 5, let width = Int(tokens[2]) else {
                        throw VCDError(description: "line \(lineNumber): malformed $var declaration")
                    }
                    ids.append((tokens[3], tokens[4], width))
                case "$enddefinitions":
                    inHeader = false
                    chosen = try pickSignal()
                default: break
                }
                continue
            }
            for token in tokens {
                guard let c = token.first else { continue }
                if c == "#" {
                    guard let t = Int64(token.dropFirst()), t >= 0, t < Int64.max / max(1, scaleNanos) else {
                        throw VCDError(description: "line \(lineNumber): bad time \"\(token.prefix(30))\"")
                    }
                    let micros = t * scaleNanos / 1_000
                    guard micros >= now else { throw VCDError(description: "line \(lineNumber): time goes backwards") }
                    now = micros
                } else if c == "0" || c == "1" || c == "x" || c == "z" || c == "X" || c == "Z" {
                    guard token.dropFirst() == chosen else { continue }
                    let high = c == "1" // x/z: the receiver shows no carrier
                    if out.last?.high != high { out.append(VCDEdge(micros: now, high: high)) }
                } else if c == "$" {
                    continue // $dumpvars / $end around initial values
                }
            }
        }
        if inHeader { throw VCDError(description: "no $enddefinitions: not a VCD file") }
        return out
    }

    /// A timeline as VCD: one wire `AM`, 1 µs ticks, the way rtl_433 names the OOK level.
    public static func write(_ edges: [VCDEdge], comment: String? = nil) -> String {
        var s = ""
        if let comment { s += "$comment \(comment) $end\n" }
        s += "$timescale 1 us $end\n$scope module receiver $end\n$var wire 1 ' AM $end\n$upscope $end\n$enddefinitions $end\n"
        for e in edges { s += "#\(e.micros) \(e.high ? "1" : "0")'\n" }
        return s
    }

    /// Adds what a superregenerative receiver shows in silence: short random spikes (20-60 µs)
    /// in the lead-in before the first edge and the tail after the last, never inside the press.
    public static func withNoise(_ edges: [VCDEdge], spikesPerSecond: Int, random: inout some RandomNumberGenerator) -> [VCDEdge] {
        guard spikesPerSecond > 0, edges.count >= 2, let firstHigh = edges.first(where: \.high)?.micros, let end = edges.last?.micros else { return edges }
        func spikes(from: Int64, to: Int64) -> [VCDEdge] {
            guard to - from > 1_000 else { return [] }
            let n = Int((to - from) * Int64(spikesPerSecond) / 1_000_000)
            let starts = (0..<n).map { _ in Int64.random(in: from..<(to - 200), using: &random) }.sorted()
            var out: [VCDEdge] = []
            var last = from
            for s in starts where s > last + 100 {
                let width = Int64.random(in: 20...60, using: &random)
                out += [VCDEdge(micros: s, high: true), VCDEdge(micros: s + width, high: false)]
                last = s + width
            }
            return out
        }
        let tail = end + 100_000
        // Appended in steps: Swift 6.2's type checker rejects one chain mixing Array and ArraySlice.
        var out = [edges[0]]
        out += spikes(from: edges[0].micros + 1, to: firstHigh - 1_000)
        out += edges.dropFirst()
        out += spikes(from: end + 1_000, to: tail)
        out.append(VCDEdge(micros: tail, high: false))
        return out
    }

    /// "1 us", "1us", "10 ns", "1 ms", "1 s" → nanoseconds per tick.
    static func timescale(_ spec: String, line: Int) throws(VCDError) -> Int64 {
        let digits = spec.prefix { $0.isNumber }
        let unit = spec.dropFirst(digits.count).trimmingPrefix(" ")
        guard let n = Int64(digits), [1, 10, 100].contains(n) else {
            throw VCDError(description: "line \(line): unsupported timescale \"\(spec)\"")
        }
        let perUnit: Int64
        switch unit {
        case "s": perUnit = 1_000_000_000
        case "ms": perUnit = 1_000_000
        case "us": perUnit = 1_000
        case "ns": perUnit = 1
        default: throw VCDError(description: "line \(line): unsupported timescale unit \"\(unit)\" (s, ms, us, ns)")
        }
        return n * perUnit
    }
}
