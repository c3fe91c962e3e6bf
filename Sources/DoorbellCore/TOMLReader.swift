// A TOML 1.0 reader for agent.toml: pure Swift, no Foundation.
//
// Why our own: TOMLKit wraps C++ toml++, which drags full Foundation and libstdc++ into the
// agent (most of its binary and RSS) and aborted the process on some malformed table headers.
// This reader is total: any bytes give a value tree or a TOMLError with a 1-based line and
// column and a message that says what to write instead. Nesting is bounded (maxDepth), time
// is linear in the input, and keys keep document order (the loader reports in that order).

/// A parsed TOML value. Dates and times are validated but kept only by kind: `.other("date")`,
/// `.other("time")`, `.other("date-time")` (offset or local); the config has no use for them.
public indirect enum TOMLNode: Sendable, Equatable {
    case table([(String, TOMLNode)])
    case array([TOMLNode])
    case string(String)
    case int(Int64)
    case double(Double)
    case bool(Bool)
    case other(String)

    /// Structural equality; NaN equals NaN, so a parsed tree equals itself.
    public static func == (a: TOMLNode, b: TOMLNode) -> Bool {
        switch (a, b) {
        case let (.table(x), .table(y)): return x.count == y.count && zip(x, y).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        case let (.array(x), .array(y)): return x == y
        case let (.string(x), .string(y)): return x == y
        case let (.int(x), .int(y)): return x == y
        case let (.double(x), .double(y)): return x == y || (x.isNaN && y.isNaN)
        case let (.bool(x), .bool(y)): return x == y
        case let (.other(x), .other(y)): return x == y
        default: return false
        }
    }

    var typeName: String {
        switch self {
        case .table: "a table"
        case .array: "an array"
        case .string: "a string"
        case .int: "an integer"
        case .double: "a float"
        case .bool: "a boolean"
        case let .other(name): "a \(name)"
        }
    }
}

public struct TOMLError: Error, Sendable, Equatable, CustomStringConvertible {
    /// 1-based; columns count Unicode scalars, a tab is one column.
    public let line: Int
    public let column: Int
    public let message: String
    public init(line: Int, column: Int, message: String) {
        self.line = line
        self.column = column
        self.message = message
    }
    public var description: String { "\(line):\(column): \(message)" }
}

public enum TOMLReader {
    /// Deeper nesting (tables, arrays, dotted keys together) is refused: hostile input must
    /// not blow the stack, and no config comes close.
    public static let maxDepth = 64

    public static func parse(_ text: String) throws(TOMLError) -> TOMLNode {
        try parse(bytes: Array(text.utf8))
    }

    public static func parse(bytes: [UInt8]) throws(TOMLError) -> TOMLNode {
        do {
            try validateUTF8(bytes)
            var parser = Parser(bytes)
            return try parser.document()
        } catch {
            throw error.located(in: bytes)
        }
    }

    /// The first ill-formed sequence (overlong, surrogate, beyond U+10FFFF, cut short) is an error.
    static func validateUTF8(_ b: [UInt8]) throws(Failure) {
        var i = 0
        while i < b.count {
            let c = b[i]
            if c < 0x80 { i += 1; continue }
            let length: Int, low: UInt8, high: UInt8 // allowed range of the second byte
            switch c {
            case 0xC2...0xDF: (length, low, high) = (2, 0x80, 0xBF)
            case 0xE0: (length, low, high) = (3, 0xA0, 0xBF)
            case 0xED: (length, low, high) = (3, 0x80, 0x9F) // no surrogates
            case 0xE1...0xEF: (length, low, high) = (3, 0x80, 0xBF)
            case 0xF0: (length, low, high) = (4, 0x90, 0xBF)
            case 0xF4: (length, low, high) = (4, 0x80, 0x8F) // ≤ U+10FFFF
            case 0xF1...0xF3: (length, low, high) = (4, 0x80, 0xBF)
            default: throw Failure(i, Self.invalidUTF8(c))
            }
            guard i + 1 < b.count, b[i + 1] >= low, b[i + 1] <= high else { throw Failure(i, Self.invalidUTF8(c)) }
            for k in 2..<length {
                guard i + k < b.count, b[i + k] & 0xC0 == 0x80 else { throw Failure(i, Self.invalidUTF8(c)) }
            }
            i += length
        }
    }

    static func invalidUTF8(_ byte: UInt8) -> String {
        "invalid UTF-8 (byte 0x\(TOMLReader.hex(byte, width: 2))); TOML files must be UTF-8: re-save the file as UTF-8"
    }

    /// A failure at a byte offset; line and column are worked out once, when it is reported.
    struct Failure: Error {
        let offset: Int
        let message: String
        init(_ offset: Int, _ message: String) { self.offset = offset; self.message = message }

        func located(in b: [UInt8]) -> TOMLError {
            var line = 1, column = 1
            var i = 0
            while i < min(offset, b.count) {
                if b[i] == 0x0A { line += 1; column = 1 } else if b[i] & 0xC0 != 0x80 { column += 1 }
                i += 1
            }
            return TOMLError(line: line, column: column, message: message)
        }
    }
}

// MARK: - The parser

extension TOMLReader {
    struct Parser {
        let b: [UInt8]
        var pos = 0
        /// Start offset of every line, for "first defined on line N".
        let lineStarts: [Int]
        /// Each [header] starts a section and each inline table is one: dotted keys may only
        /// reopen tables made in their own section.
        var sections = 0

        init(_ bytes: [UInt8]) {
            b = bytes
            var starts = [0]
            for (i, c) in bytes.enumerated() where c == 0x0A { starts.append(i + 1) }
            lineStarts = starts
        }

        // MARK: Characters

        func peek(_ k: Int = 0) -> UInt8? { pos + k < b.count ? b[pos + k] : nil }
        func at(_ c: UInt8, _ k: Int = 0) -> Bool { pos + k < b.count && b[pos + k] == c }
        var atEnd: Bool { pos >= b.count }

        func fail(_ message: String, at offset: Int? = nil) -> Failure { Failure(offset ?? pos, message) }

        func line(of offset: Int) -> Int {
            var lo = 0, hi = lineStarts.count - 1
            while lo < hi {
                let mid = (lo + hi + 1) / 2
                if lineStarts[mid] <= offset { lo = mid } else { hi = mid - 1 }
            }
            return lo + 1
        }

        /// The character at `offset` for messages: 'x', or a description of an invisible one.
        func describe(_ offset: Int) -> String {
            guard offset < b.count else { return "end of file" }
            let c = b[offset]
            switch c {
            case 0x0A: return "end of line"
            case 0x0D: return "a carriage return"
            case 0x09: return "a tab"
            case 0x20: return "a space"
            case 0x27: return "\"'\""
            case 0x21...0x7E: return "'\(Character(Unicode.Scalar(c)))'"
            case 0x80...: return "'\(scalar(at: offset))'"
            default: return "control character U+\(TOMLReader.hex(c, width: 4))"
            }
        }

        /// The (already validated) UTF-8 scalar starting at `offset`.
        func scalar(at offset: Int) -> String {
            var end = offset + 1
            while end < b.count, end - offset < 4, b[end] & 0xC0 == 0x80 { end += 1 }
            return String(decoding: b[offset..<end], as: UTF8.self)
        }

        static func isBareKeyByte(_ c: UInt8) -> Bool {
            (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || (c >= 0x30 && c <= 0x39) || c == 0x2D || c == 0x5F
        }

        static func isControl(_ c: UInt8) -> Bool { (c < 0x20 && c != 0x09) || c == 0x7F }

        mutating func skipBlanks() {
            while pos < b.count, b[pos] == 0x20 || b[pos] == 0x09 { pos += 1 }
        }

        /// A newline (LF or CRLF) at pos, consumed.
        mutating func newline() -> Bool {
            if at(0x0A) { pos += 1; return true }
            if at(0x0D), at(0x0A, 1) { pos += 2; return true }
            return false
        }

        /// From '#' to the end of the line; a comment may hold anything but control characters.
        mutating func comment() throws(Failure) {
            pos += 1
            while pos < b.count, b[pos] != 0x0A {
                if b[pos] == 0x0D, at(0x0A, 1) { return }
                if Self.isControl(b[pos]) {
                    throw fail("\(describe(pos)) is not allowed in a comment; delete it")
                }
                pos += 1
            }
        }

        /// Blanks, newlines and comments: what may sit between array elements.
        mutating func skipBlankLines() throws(Failure) {
            while true {
                skipBlanks()
                if newline() { continue }
                if at(0x23) { try comment(); continue }
                return
            }
        }

        /// After a key = value or a header only blanks and a comment may follow on the line;
        /// false when something else does.
        mutating func endOfLine() throws(Failure) -> Bool {
            skipBlanks()
            if at(0x23) { try comment() }
            if atEnd || newline() { return true }
            if at(0x0D) { throw fail("a carriage return must be followed by a line feed (\\r\\n); save the file with Unix or Windows line endings") }
            return false
        }

        func junk(after what: String) -> Failure {
            fail("expected the end of the line after \(what), found \(describe(pos)); write one key = value or [table] per line")
        }

        // MARK: Document

        mutating func document() throws(Failure) -> TOMLNode {
            let root = Table(origin: .header, depth: 0)
            var current = root
            var section = 0
            // A UTF-8 byte order mark (Windows editors write one) is not content.
            if b.count >= 3, b[0] == 0xEF, b[1] == 0xBB, b[2] == 0xBF { pos = 3 }
            while true {
                skipBlanks()
                guard let c = peek() else { break }
                switch c {
                case 0x0A: pos += 1
                case 0x0D:
                    guard newline() else { throw fail("a carriage return must be followed by a line feed (\\r\\n); save the file with Unix or Windows line endings") }
                case 0x23: try comment()
                case 0x5B: // [
                    sections += 1
                    section = sections
                    if at(0x5B, 1) {
                        current = try arrayTableHeader(root)
                    } else {
                        current = try tableHeader(root)
                    }
                default:
                    let key = try keyValue(into: current, section: section)
                    guard try endOfLine() else { throw junk(after: "the value of \(display(key))") }
                }
            }
            return root.node
        }
    }
}

extension TOMLReader {

    static func hex(_ v: UInt8, width: Int) -> String {
        String(repeating: "0", count: max(0, width - 2)) + Hex.encode([v], uppercase: true)
    }
}
