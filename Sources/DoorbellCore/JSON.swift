// A small, total JSON reader and an ordered writer.
//
// Why our own: rtl_433 lines and control requests arrive from outside, so parsing must never
// trap, must report *where* it failed, and must not pull in JSONSerialization (full Foundation).
// The writer keeps key order, so event bodies are byte-stable and easy to read in logs.

public enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([(String, JSONValue)])

    public static func == (a: JSONValue, b: JSONValue) -> Bool {
        switch (a, b) {
        case (.null, .null): return true
        case let (.bool(x), .bool(y)): return x == y
        case let (.number(x), .number(y)): return x == y
        case let (.string(x), .string(y)): return x == y
        case let (.array(x), .array(y)): return x == y
        case let (.object(x), .object(y)):
            return x.count == y.count && zip(x, y).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        default: return false
        }
    }

    public subscript(key: String) -> JSONValue? {
        guard case let .object(members) = self else { return nil }
        return members.first(where: { $0.0 == key })?.1
    }

    public var stringValue: String? { if case let .string(s) = self { return s } else { return nil } }
    public var arrayValues: [JSONValue]? { if case let .array(a) = self { return a } else { return nil } }
    public var doubleValue: Double? { if case let .number(n) = self { return n } else { return nil } }
    public var boolValue: Bool? { if case let .bool(b) = self { return b } else { return nil } }
    public var intValue: Int64? {
        guard case let .number(n) = self, n.rounded() == n, abs(n) < 9.007_199_254_740_992e15 else { return nil }
        return Int64(n)
    }
}

public struct JSONParseError: Error, Equatable, CustomStringConvertible, Sendable {
    public let offset: Int
    public let reason: String
    public var description: String { "invalid JSON at byte \(offset): \(reason)" }
}

public enum JSONReader {
    /// Nesting deeper than this is refused: hostile input must not blow the stack.
    public static let maxDepth = 64

    public static func parse(_ text: String) throws(JSONParseError) -> JSONValue {
        var utf8 = Array(text.utf8)
        return try parse(bytes: &utf8)
    }

    public static func parse(bytes: [UInt8]) throws(JSONParseError) -> JSONValue {
        var copy = bytes
        return try parse(bytes: &copy)
    }

    static func parse(bytes: inout [UInt8]) throws(JSONParseError) -> JSONValue {
        try bytes.withUnsafeBufferPointer { (buf) throws(JSONParseError) -> JSONValue in
            var p = Parser(buf: buf)
            p.skipWhitespace()
            let value = try p.value(depth: 0)
            p.skipWhitespace()
            guard p.pos == buf.count else { throw p.fail("unexpected data after the JSON value") }
            return value
        }
    }

    struct Parser {
        let buf: UnsafeBufferPointer<UInt8>
        var pos = 0

        init(buf: UnsafeBufferPointer<UInt8>) { self.buf = buf }

        func fail(_ reason: String) -> JSONParseError { JSONParseError(offset: pos, reason: reason) }

        mutating func skipWhitespace() {
            while pos < buf.count, buf[pos] == 0x20 || buf[pos] == 0x0A || buf[pos] == 0x0D || buf[pos] == 0x09 {
                pos += 1
            }
        }

        mutating func value(depth: Int) throws(JSONParseError) -> JSONValue {
            guard depth < JSONReader.maxDepth else { throw fail("nested too deeply") }
            guard pos < buf.count else { throw fail("unexpected end of input") }
            switch buf[pos] {
            case UInt8(ascii: "{"): return try object(depth: depth)
            case UInt8(ascii: "["): return try array(depth: depth)
            case UInt8(ascii: "\""): return .string(try string())
            case UInt8(ascii: "t"): try literal("true"); return .bool(true)
            case UInt8(ascii: "f"): try literal("false"); return .bool(false)
            case UInt8(ascii: "n"): try literal("null"); return .null
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try number())
            default: throw fail("unexpected character")
            }
        }

        mutating func literal(_ word: String) throws(JSONParseError) {
            var i = pos
            for expected in word.utf8 {
                guard i < buf.count, buf[i] == expected else { throw fail("invalid literal") }
                i += 1
            }
            pos = i
        }

        mutating func object(depth: Int) throws(JSONParseError) -> JSONValue {
            pos += 1
            var members: [(String, JSONValue)] = []
            skipWhitespace()
            if pos < buf.count, buf[pos] == UInt8(ascii: "}") { pos += 1; return .object(members) }
            while true {
                skipWhitespace()
                guard pos < buf.count, buf[pos] == UInt8(ascii: "\"") else { throw fail("expected a string key") }
                let key = try string()
                skipWhitespace()
                guard pos < buf.count, buf[pos] == UInt8(ascii: ":") else { throw fail("expected ':'") }
                pos += 1
                skipWhitespace()
                members.append((key, try value(depth: depth + 1)))
                skipWhitespace()
                guard pos < buf.count else { throw fail("unterminated object") }
                if buf[pos] == UInt8(ascii: ",") { pos += 1; continue }
                if buf[pos] == UInt8(ascii: "}") { pos += 1; return .object(members) }
                throw fail("expected ',' or '}'")
            }
        }

        mutating func array(depth: Int) throws(JSONParseError) -> JSONValue {
            pos += 1
            var items: [JSONValue] = []
            skipWhitespace()
            if pos < buf.count, buf[pos] == UInt8(ascii: "]") { pos += 1; return .array(items) }
            while true {
                skipWhitespace()
                items.append(try value(depth: depth + 1))
                skipWhitespace()
                guard pos < buf.count else { throw fail("unterminated array") }
                if buf[pos] == UInt8(ascii: ",") { pos += 1; continue }
                if buf[pos] == UInt8(ascii: "]") { pos += 1; return .array(items) }
                throw fail("expected ',' or ']'")
            }
        }

        mutating func hex4() throws(JSONParseError) -> UInt32 {
            guard pos + 4 <= buf.count else { throw fail("truncated \\u escape") }
            var v: UInt32 = 0
            for _ in 0..<4 {
                guard let d = Hex.digit(buf[pos]) else { throw fail("bad hex digit in \\u escape") }
                v = v << 4 | UInt32(d)
                pos += 1
            }
            return v
        }

        mutating func string() throws(JSONParseError) -> String {
            pos += 1
            var out: [UInt8] = []
            while true {
                guard pos < buf.count else { throw fail("unterminated string") }
                let c = buf[pos]
                if c == UInt8(ascii: "\"") { pos += 1; break }
                if c < 0x20 { throw fail("control character in string") }
                if c != UInt8(ascii: "\\") { out.append(c); pos += 1; continue }
                pos += 1
                guard pos < buf.count else { throw fail("unterminated escape") }
                let e = buf[pos]
                pos += 1
                switch e {
                case UInt8(ascii: "\""): out.append(0x22)
                case UInt8(ascii: "\\"): out.append(0x5C)
                case UInt8(ascii: "/"): out.append(0x2F)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try hex4()
                    if (0xD800..<0xDC00).contains(scalar) {
                        // A high surrogate must be followed by \u low surrogate.
                        guard pos + 2 <= buf.count, buf[pos] == UInt8(ascii: "\\"), buf[pos + 1] == UInt8(ascii: "u") else {
                            throw fail("unpaired surrogate")
                        }
                        pos += 2
                        let low = try hex4()
                        guard (0xDC00..<0xE000).contains(low) else { throw fail("unpaired surrogate") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    }
                    guard let u = Unicode.Scalar(scalar) else { throw fail("invalid unicode scalar") }
                    out.append(contentsOf: Array(String(Character(u)).utf8))
                default: throw fail("invalid escape")
                }
            }
            // Invalid UTF-8 is repaired rather than refused: a device name is not worth a dropped line.
            return String(decoding: out, as: UTF8.self)
        }

        mutating func number() throws(JSONParseError) -> Double {
            let start = pos
            if buf[pos] == UInt8(ascii: "-") { pos += 1 }
            var digits = 0
            while pos < buf.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(buf[pos]) { pos += 1; digits += 1 }
            guard digits > 0 else { throw fail("invalid number") }
            if pos < buf.count, buf[pos] == UInt8(ascii: ".") {
                pos += 1
                var frac = 0
                while pos < buf.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(buf[pos]) { pos += 1; frac += 1 }
                guard frac > 0 else { throw fail("invalid number") }
            }
            if pos < buf.count, buf[pos] == UInt8(ascii: "e") || buf[pos] == UInt8(ascii: "E") {
                pos += 1
                if pos < buf.count, buf[pos] == UInt8(ascii: "+") || buf[pos] == UInt8(ascii: "-") { pos += 1 }
                var exp = 0
                while pos < buf.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(buf[pos]) { pos += 1; exp += 1 }
                guard exp > 0 else { throw fail("invalid number") }
            }
            let text = String(decoding: UnsafeBufferPointer(rebasing: buf[start..<pos]), as: UTF8.self)
            guard let v = Double(text), v.isFinite else { throw fail("number out of range") }
            return v
        }
    }
}

/// Writes JSON with keys in insertion order. Integers that fit are written without a fraction.
public struct JSONWriter {
    public private(set) var bytes: [UInt8] = []

    public init() {}

    public static func encode(_ value: JSONValue) -> [UInt8] {
        var w = JSONWriter()
        w.write(value)
        return w.bytes
    }

    public static func string(_ value: JSONValue) -> String {
        String(decoding: encode(value), as: UTF8.self)
    }

    public mutating func write(_ value: JSONValue) {
        switch value {
        case .null: bytes.append(contentsOf: "null".utf8)
        case let .bool(b): bytes.append(contentsOf: (b ? "true" : "false").utf8)
        case let .number(n): writeNumber(n)
        case let .string(s): writeString(s)
        case let .array(items):
            bytes.append(UInt8(ascii: "["))
            for i in items.indices {
                if i > 0 { bytes.append(UInt8(ascii: ",")) }
                write(items[i])
            }
            bytes.append(UInt8(ascii: "]"))
        case let .object(members):
            bytes.append(UInt8(ascii: "{"))
            // By index: no (key, value) tuple copied out per member.
            for i in members.indices {
                if i > 0 { bytes.append(UInt8(ascii: ",")) }
                writeString(members[i].0)
                bytes.append(UInt8(ascii: ":"))
                write(members[i].1)
            }
            bytes.append(UInt8(ascii: "}"))
        }
    }

    mutating func writeNumber(_ n: Double) { Self.appendNumber(n, to: &bytes) }

    mutating func writeString(_ s: String) { Self.appendString(s, to: &bytes) }

    /// Writes straight into the caller's buffer (AgentEvent's encoder reuses one per replay).
    public static func append(_ value: JSONValue, to out: inout [UInt8]) {
        var w = JSONWriter()
        swap(&w.bytes, &out)
        w.write(value)
        swap(&w.bytes, &out)
    }

    /// Fixed text (the encoder's keys and punctuation) copied from the binary: a String's UTF-8
    /// view took the generic per-byte path, 14 times per event.
    public static func appendLiteral(_ text: StaticString, to out: inout [UInt8]) {
        out.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    /// Integers that fit a Double exactly are written without a fraction, others as Swift prints them.
    public static func appendNumber(_ n: Double, to out: inout [UInt8]) {
        guard n.isFinite else { out.append(contentsOf: "null".utf8); return }
        if n.rounded() == n, abs(n) < 9.007_199_254_740_992e15 {
            appendInteger(Int64(n), to: &out)
        } else {
            out.append(contentsOf: "\(n)".utf8)
        }
    }

    /// Decimal digits without making a String (the encoder writes several per event).
    public static func appendInteger(_ v: Int64, to out: inout [UInt8]) {
        if v < 0 { out.append(UInt8(ascii: "-")) }
        // The magnitude as unsigned, so Int64.min has one too.
        var m = v.magnitude
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0) // 24 bytes: room for 20 digits
        var count = 0
        withUnsafeMutableBytes(of: &digits) { buf in
            repeat {
                buf[23 - count] = UInt8(truncatingIfNeeded: m % 10) + 0x30
                m /= 10
                count += 1
            } while m > 0
            // As a typed buffer: appending a slice of the raw one took the generic per-byte path.
            guard let base = buf.baseAddress else { return }
            out.append(contentsOf: UnsafeBufferPointer(start: base.assumingMemoryBound(to: UInt8.self) + (24 - count), count: count))
        }
    }

    /// A JSON string: `"` and `\` escaped, newline/CR/tab as \n \r \t, other control characters
    /// as \u00XX, everything else (UTF-8 included) as it is. Runs without escapes are copied in
    /// one append.
    public static func appendString(_ s: String, to out: inout [UInt8]) {
        var s = s
        s.withUTF8 { utf8 in
            out.append(UInt8(ascii: "\""))
            var run = 0
            for i in 0..<utf8.count {
                let b = utf8[i]
                guard b < 0x20 || b == 0x22 || b == 0x5C else { continue }
                if run < i { out.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[run..<i])) }
                run = i + 1
                switch b {
                case 0x22: out.append(0x5C); out.append(0x22)
                case 0x5C: out.append(0x5C); out.append(0x5C)
                case 0x0A: out.append(0x5C); out.append(UInt8(ascii: "n"))
                case 0x0D: out.append(0x5C); out.append(UInt8(ascii: "r"))
                case 0x09: out.append(0x5C); out.append(UInt8(ascii: "t"))
                default:
                    let hex: StaticString = "0123456789abcdef"
                    out.append(contentsOf: [0x5C, UInt8(ascii: "u"), 0x30, 0x30, hex.utf8Start[Int(b >> 4)], hex.utf8Start[Int(b & 0xF)]])
                }
            }
            if run < utf8.count { out.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[run...])) }
            out.append(UInt8(ascii: "\""))
        }
    }
}
