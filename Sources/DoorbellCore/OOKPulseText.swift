// rtl_433's pulse-data text (`.ook` files, and `rtl_433 -R 0 -w OOK:-` on a pipe), line by line.
//
//   ;pulse data / ;version 1 / ;timescale 1us      header
//   ;ook 699 pulses                                a package of OOK pulses starts
//   ;rssi -0.1 dB                                  package metadata
//   352 11448                                      pulse (high µs) and the gap after it (low µs)
//   ;end                                           the package ends
//
// FSK packages (`;fsk N pulses`) carry frequency shifts, not OOK levels: they are skipped. The
// gap after a package's last pulse is rtl_433's timeout, not the real silence.

public enum OOKTextLine: Sendable, Equatable {
    case pulse(Pulse)
    case packageStart
    case packageEnd(rssiDB: Double?)
    /// Header, comment, FSK data, blank: nothing for the decoder.
    case ignored
    case malformed(String)
}

public struct OOKPulseTextReader: Sendable {
    public private(set) var lineNumber = 0
    public private(set) var malformed = 0
    private var inOOK = false
    private var inFSK = false
    private var rssi: Double?

    public init() {}

    /// The signal level rtl_433 measured for the package being read.
    public var packageRSSI: Double? { rssi }

    public mutating func read(line raw: some StringProtocol) -> OOKTextLine {
        lineNumber += 1
        let line = raw.hasSuffix("\r") ? raw.dropLast() : raw[...]
        if line.hasPrefix(";") {
            let words = line.dropFirst().split(separator: " ")
            switch words.first {
            case "ook": inOOK = true; inFSK = false; rssi = nil; return .packageStart
            case "fsk": inFSK = true; inOOK = false; return .ignored
            case "rssi":
                if words.count >= 2 { rssi = Double(words[1]) }
                return .ignored
            case "end":
                defer { inOOK = false; inFSK = false; rssi = nil }
                return inOOK ? .packageEnd(rssiDB: rssi) : .ignored
            default: return .ignored
            }
        }
        let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
        if fields.isEmpty || inFSK { return .ignored }
        guard fields.count >= 2, let high = Int(fields[0]), let low = Int(fields[1]),
              high >= 0, low >= 0, high <= 10_000_000, low <= 100_000_000 else {
            malformed += 1
            return .malformed("line \(lineNumber): expected \"<pulse_us> <gap_us>\", got \"\(line.prefix(60))\"")
        }
        return .pulse(Pulse(high: high, low: low))
    }

    /// A whole file's OOK pulses, with the line of the first malformed entry if any.
    public static func pulses(text: String) -> (pulses: [Pulse], firstError: String?) {
        var reader = OOKPulseTextReader()
        var out: [Pulse] = []
        var firstError: String?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            switch reader.read(line: line) {
            case let .pulse(p): out.append(p)
            case let .malformed(m): firstError = firstError ?? m
            default: break
            }
        }
        return (out, firstError)
    }
}
