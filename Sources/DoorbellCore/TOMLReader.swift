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

// MARK: - Building tables with TOML's definition rules

extension TOMLReader {
    /// A key as written: its name and where it starts (for positions and "first defined on line").
    struct Key {
        var name: String
        var offset: Int
    }

    /// A table under construction. How it came to exist decides what may still extend it.
    final class Table {
        enum Origin: Equatable {
            case implicit             // a parent named by a header ([a.b] makes `a`): one header may still define it
            case header               // defined by [header] or [[header]]: closed to headers and dotted keys
            case dotted(section: Int) // made by dotted keys: open to dotted keys of the same section only
        }
        enum Slot {
            case table(Table)
            case tables(TableArray) // [[array of tables]]
            case value(TOMLNode)    // any value written after '=': inline tables and arrays are complete
        }

        var origin: Origin
        let depth: Int
        var keys: [String] = []
        var slots: [Slot] = []
        var offsets: [Int] = []
        var index: [String: Int] = [:]

        init(origin: Origin, depth: Int) {
            self.origin = origin
            self.depth = depth
        }

        func slot(_ key: String) -> (slot: Slot, offset: Int)? {
            guard let i = index[key] else { return nil }
            return (slots[i], offsets[i])
        }

        func add(_ key: String, _ slot: Slot, offset: Int) {
            index[key] = keys.count
            keys.append(key)
            slots.append(slot)
            offsets.append(offset)
        }

        var node: TOMLNode {
            var members: [(String, TOMLNode)] = []
            members.reserveCapacity(keys.count)
            for (key, slot) in zip(keys, slots) {
                switch slot {
                case let .table(t): members.append((key, t.node))
                case let .tables(a): members.append((key, .array(a.elements.map(\.node))))
                case let .value(v): members.append((key, v))
                }
            }
            return .table(members)
        }
    }

    final class TableArray {
        var elements: [Table]
        init(_ first: Table) { elements = [first] }
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

        // MARK: Keys

        /// A bare or quoted key, or several joined by dots: `a`, `"a b"`, `a . 'b' . c`.
        mutating func key(header: Bool = false) throws(Failure) -> [Key] {
            var parts: [Key] = []
            while true {
                skipBlanks()
                parts.append(try simpleKey(header: header, first: parts.isEmpty))
                // A long dotted key already fails the depth check when it is used; stop early.
                guard parts.count <= TOMLReader.maxDepth else { throw fail(tooDeep, at: parts[parts.count - 1].offset) }
                skipBlanks()
                guard at(0x2E) else { return parts }
                pos += 1
            }
        }

        mutating func simpleKey(header: Bool, first: Bool) throws(Failure) -> Key {
            let start = pos
            if at(0x22) {
                if at(0x22, 1), at(0x22, 2) { throw fail("a multi-line string cannot be a key; use \"one line\" quotes") }
                return Key(name: try basicString(), offset: start)
            }
            if at(0x27) {
                if at(0x27, 1), at(0x27, 2) { throw fail("a multi-line string cannot be a key; use 'one line' quotes") }
                return Key(name: try literalString(), offset: start)
            }
            while pos < b.count, Self.isBareKeyByte(b[pos]) { pos += 1 }
            if pos < b.count, b[pos] >= 0x80 { throw nonASCIIInKey(keyStart: start) }
            guard pos > start else {
                if header {
                    throw fail("a [table] name must start with a letter, digit, '-', '_' or a quote, e.g. [uplink] or [[device]]; found \(describe(pos))")
                }
                if !first { throw fail("expected a key after '.', found \(describe(pos)); a dotted key is like a.b = 1") }
                throw fail("expected a key, found \(describe(pos)); a line holds a key = value, a [table] header or a # comment")
            }
            return Key(name: String(decoding: b[start..<pos], as: UTF8.self), offset: start)
        }

        /// Keys outside quotes are ASCII; suggest the quoted form of what was written.
        func nonASCIIInKey(keyStart: Int) -> Failure {
            var end = keyStart
            while end < b.count, Self.isBareKeyByte(b[end]) || b[end] >= 0x80 { end += 1 }
            let written = String(decoding: b[keyStart..<end], as: UTF8.self)
            let ch = scalar(at: pos)
            let hint = ch == "\u{FFFD}" ? " (U+FFFD usually means the file was not saved as UTF-8)" : ""
            return fail("a non-ASCII character ('\(ch)')\(hint) cannot be part of a bare key; bare keys are ASCII letters, digits, '-' and '_': quote the key (\"\(written)\") or fix the typo")
        }

        /// A dotted key as the user would write it, for messages.
        func display(_ key: [Key]) -> String {
            "`" + key.map { Self.render(key: $0.name) }.joined(separator: ".") + "`"
        }

        static func render(key: String) -> String {
            if !key.isEmpty, key.utf8.allSatisfy(isBareKeyByte) { return key }
            var out = "\""
            for s in key.unicodeScalars {
                switch s {
                case "\"": out += "\\\""
                case "\\": out += "\\\\"
                case "\n": out += "\\n"
                case "\t": out += "\\t"
                default:
                    if s.value < 0x20 || s.value == 0x7F { out += "\\u" + TOMLReader.hex(UInt8(s.value), width: 4) } else { out.unicodeScalars.append(s) }
                }
            }
            return out + "\""
        }

        // MARK: Headers

        /// [a.b.c]: parents are created on the way (implicitly), the last one is defined here.
        mutating func tableHeader(_ root: Table) throws(Failure) -> Table {
            pos += 1
            let key = try self.key(header: true)
            guard at(0x5D) else { throw fail("expected ']' to close the table header [\(plain(key)), found \(describe(pos))") }
            pos += 1
            guard try endOfLine() else { throw junk(after: "the table header [\(plain(key))]") }
            let parent = try walk(root, to: key.dropLast(), header: "[\(plain(key))]")
            let last = key[key.count - 1]
            let name = "[\(plain(key))]"
            if let (slot, offset) = parent.slot(last.name) {
                switch slot {
                case let .table(t):
                    switch t.origin {
                    case .implicit:
                        t.origin = .header
                        return t
                    case .header:
                        throw fail("table \(name) is defined twice (first on line \(line(of: offset))); put all its keys under one header", at: last.offset)
                    case .dotted:
                        throw fail("table \(name) was already made by dotted keys on line \(line(of: offset)); add its keys there, or write them all under \(name)", at: last.offset)
                    }
                case .tables:
                    throw fail("\(name) is an array of tables (first [[\(plain(key))]] on line \(line(of: offset))); add an element with [[\(plain(key))]]", at: last.offset)
                case let .value(v):
                    throw fail(overwrite(key, holding: v, offset: offset, as: "a table"), at: last.offset)
                }
            }
            let t = try newTable(.header, parent: parent, at: last.offset)
            parent.add(last.name, .table(t), offset: last.offset)
            return t
        }

        /// [[a.b]]: appends a table to the array a.b (creating it at the first header).
        mutating func arrayTableHeader(_ root: Table) throws(Failure) -> Table {
            pos += 2
            let key = try self.key(header: true)
            guard at(0x5D), at(0x5D, 1) else {
                throw fail("expected ']]' to close the header [[\(plain(key)), found \(describe(pos))")
            }
            pos += 2
            guard try endOfLine() else { throw junk(after: "the header [[\(plain(key))]]") }
            let parent = try walk(root, to: key.dropLast(), header: "[[\(plain(key))]]")
            let last = key[key.count - 1]
            if let (slot, offset) = parent.slot(last.name) {
                switch slot {
                case let .tables(array):
                    let t = try newTable(.header, parent: parent, at: last.offset, extra: 1)
                    array.elements.append(t)
                    return t
                case .table:
                    throw fail("[[\(plain(key))]] cannot start an array of tables: \(display(key)) is already a table (line \(line(of: offset))); use one form for it", at: last.offset)
                case let .value(v):
                    if case .array = v {
                        throw fail("[[\(plain(key))]] cannot add to \(display(key)): it is an array written with [ ] on line \(line(of: offset)), which is complete as written; use either [[\(plain(key))]] sections or the array", at: last.offset)
                    }
                    throw fail(overwrite(key, holding: v, offset: offset, as: "an array of tables"), at: last.offset)
                }
            }
            let t = try newTable(.header, parent: parent, at: last.offset, extra: 1)
            parent.add(last.name, .tables(TableArray(t)), offset: last.offset)
            return t
        }

        /// The parent tables of a header: created if missing, the last element of an array of tables.
        mutating func walk(_ root: Table, to path: ArraySlice<Key>, header: String) throws(Failure) -> Table {
            var t = root
            var walked: [Key] = []
            for part in path {
                walked.append(part)
                if let (slot, offset) = t.slot(part.name) {
                    switch slot {
                    case let .table(next): t = next
                    case let .tables(array): t = array.elements[array.elements.count - 1]
                    case let .value(v): throw fail(overwrite(walked, holding: v, offset: offset, as: "a table", header: header), at: part.offset)
                    }
                } else {
                    let next = try newTable(.implicit, parent: t, at: part.offset)
                    t.add(part.name, .table(next), offset: part.offset)
                    t = next
                }
            }
            return t
        }

        func newTable(_ origin: Table.Origin, parent: Table, at offset: Int, extra: Int = 0) throws(Failure) -> Table {
            let depth = parent.depth + 1 + extra
            guard depth <= TOMLReader.maxDepth else { throw fail(tooDeep, at: offset) }
            return Table(origin: origin, depth: depth)
        }

        var tooDeep: String { "nested too deeply: more than \(TOMLReader.maxDepth) levels of tables, arrays and dotted keys" }

        func plain(_ key: [Key]) -> String { key.map { Self.render(key: $0.name) }.joined(separator: ".") }

        /// Why a key that already holds a value cannot become a table.
        func overwrite(_ key: [Key], holding v: TOMLNode, offset: Int, as what: String, header: String? = nil) -> String {
            let line = line(of: offset)
            let via = header.map { " for \($0)" } ?? ""
            if case .table = v {
                return "\(display(key)) is an inline table (line \(line)), which is complete as written; it cannot be extended\(via): add the keys inside its { }"
            }
            if case .array = v {
                return "\(display(key)) is an array (line \(line)), which is complete as written; it cannot be extended\(via)"
            }
            return "\(display(key)) already holds \(v.typeName) (line \(line)), so it cannot also be \(what)\(via)"
        }

        // MARK: Key = value

        /// `key = value` into a table (a section or an inline table). Returns the key for messages.
        @discardableResult
        mutating func keyValue(into table: Table, section: Int) throws(Failure) -> [Key] {
            let key = try self.key()
            skipBlanks()
            guard at(0x3D) else {
                if atEnd || at(0x0A) || at(0x0D) {
                    throw fail("expected '=' after key \(display(key)); write \(plain(key)) = value")
                }
                throw fail("expected '=' after key \(display(key)), found \(describe(pos))")
            }
            pos += 1
            skipBlanks()
            let value = try self.value(depth: table.depth + key.count, for: key)
            try insert(value, at: key, into: table, section: section)
            return key
        }

        /// The dotted-key rules: parents are made or reopened only within the section that made
        /// them; tables from headers, inline tables and arrays stay closed.
        func insert(_ value: TOMLNode, at key: [Key], into table: Table, section: Int) throws(Failure) {
            var t = table
            var walked: [Key] = []
            for part in key.dropLast() {
                walked.append(part)
                if let (slot, offset) = t.slot(part.name) {
                    switch slot {
                    case let .table(next):
                        switch next.origin {
                        case .implicit:
                            next.origin = .dotted(section: section)
                        case let .dotted(s) where s == section:
                            break
                        case .dotted:
                            throw fail("table \(display(walked)) was made by dotted keys on line \(line(of: offset)) and cannot be extended from another section; add \(display(key)) there", at: part.offset)
                        case .header:
                            throw fail("table \(display(walked)) is defined by its [header] on line \(line(of: offset)); write this key under that header instead of through a dotted key", at: part.offset)
                        }
                        t = next
                    case .tables:
                        throw fail("\(display(walked)) is an array of tables (line \(line(of: offset))); add keys under its [[header]], not through a dotted key", at: part.offset)
                    case let .value(v):
                        throw fail(overwrite(walked, holding: v, offset: offset, as: "a table"), at: part.offset)
                    }
                } else {
                    let next = try newTable(.dotted(section: section), parent: t, at: part.offset)
                    t.add(part.name, .table(next), offset: part.offset)
                    t = next
                }
            }
            let last = key[key.count - 1]
            if let (slot, offset) = t.slot(last.name) {
                if case .value = slot {
                    throw fail("duplicate key \(display(key)) (first defined on line \(line(of: offset))); a key may appear only once per table", at: last.offset)
                }
                throw fail("duplicate key \(display(key)): it is already a table (line \(line(of: offset))); a key may appear only once per table", at: last.offset)
            }
            t.add(last.name, .value(value), offset: last.offset)
        }

        // MARK: Values

        mutating func value(depth: Int, for key: [Key]) throws(Failure) -> TOMLNode {
            guard depth <= TOMLReader.maxDepth else { throw fail(tooDeep) }
            guard let c = peek() else { throw fail("expected a value for \(display(key)) after '='") }
            switch c {
            case 0x22:
                if at(0x22, 1), at(0x22, 2) { return .string(try multiLineBasicString()) }
                return .string(try basicString())
            case 0x27:
                if at(0x27, 1), at(0x27, 2) { return .string(try multiLineLiteralString()) }
                return .string(try literalString())
            case 0x5B: return try array(depth: depth, for: key)
            case 0x7B: return try inlineTable(depth: depth)
            case 0x0A, 0x0D, 0x23:
                throw fail("expected a value for \(display(key)) on the same line, e.g. \(plain(key)) = \"text\", 1, true, [ ] or { }")
            default: return try scalarValue(for: key)
            }
        }

        mutating func array(depth: Int, for key: [Key]) throws(Failure) -> TOMLNode {
            let open = pos
            pos += 1
            var items: [TOMLNode] = []
            while true {
                try skipBlankLines()
                if atEnd { throw fail("unterminated array; close it with ']'", at: open) }
                if at(0x5D) { pos += 1; return .array(items) }
                if at(0x2C) { throw fail(items.isEmpty ? "expected a value or ']' in the array, found ','" : "expected a value after ',' in the array, found another ','") }
                items.append(try value(depth: depth + 1, for: key))
                try skipBlankLines()
                if at(0x2C) { pos += 1; continue }
                if at(0x5D) { pos += 1; return .array(items) }
                if atEnd { throw fail("unterminated array; close it with ']'", at: open) }
                throw fail("expected ',' or ']' after an array element, found \(describe(pos))")
            }
        }

        /// { a = 1, b.c = 2 }: one line, no trailing comma, complete once closed.
        mutating func inlineTable(depth: Int) throws(Failure) -> TOMLNode {
            let open = pos
            pos += 1
            sections += 1
            let section = sections
            let table = Table(origin: .header, depth: depth)
            skipBlanks()
            if at(0x7D) { pos += 1; return table.node }
            while true {
                skipBlanks()
                if atEnd || at(0x0A) || at(0x0D) || at(0x23) { throw unclosedInline(open) }
                if at(0x7D) { throw fail("a trailing comma is not allowed in an inline table; remove the ',' before '}'") }
                try keyValue(into: table, section: section)
                skipBlanks()
                if at(0x2C) { pos += 1; continue }
                if at(0x7D) { pos += 1; return table.node }
                if atEnd || at(0x0A) || at(0x0D) || at(0x23) { throw unclosedInline(open) }
                throw fail("expected ',' or '}' in the inline table, found \(describe(pos))")
            }
        }

        func unclosedInline(_ open: Int) -> Failure {
            fail("an inline table { } must be closed on the line where it starts (no newlines or comments inside); for a longer table use a [table] section", at: open)
        }

    }
}

extension TOMLReader {

    static func hex(_ v: UInt8, width: Int) -> String {
        String(repeating: "0", count: max(0, width - 2)) + Hex.encode([v], uppercase: true)
    }
}
