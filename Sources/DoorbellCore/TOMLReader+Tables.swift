// TOML's tables: keys, [headers] and [[arrays of tables]], and `key = value` with the rules
// on what may define or extend what.

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

extension TOMLReader.Parser {
    // MARK: Keys

    /// A bare or quoted key, or several joined by dots: `a`, `"a b"`, `a . 'b' . c`.
    mutating func key(header: Bool = false) throws(TOMLReader.Failure) -> [TOMLReader.Key] {
        var parts: [TOMLReader.Key] = []
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

    mutating func simpleKey(header: Bool, first: Bool) throws(TOMLReader.Failure) -> TOMLReader.Key {
        let start = pos
        if at(0x22) {
            if at(0x22, 1), at(0x22, 2) { throw fail("a multi-line string cannot be a key; use \"one line\" quotes") }
            return TOMLReader.Key(name: try basicString(), offset: start)
        }
        if at(0x27) {
            if at(0x27, 1), at(0x27, 2) { throw fail("a multi-line string cannot be a key; use 'one line' quotes") }
            return TOMLReader.Key(name: try literalString(), offset: start)
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
        return TOMLReader.Key(name: String(decoding: b[start..<pos], as: UTF8.self), offset: start)
    }

    /// Keys outside quotes are ASCII; suggest the quoted form of what was written.
    func nonASCIIInKey(keyStart: Int) -> TOMLReader.Failure {
        var end = keyStart
        while end < b.count, Self.isBareKeyByte(b[end]) || b[end] >= 0x80 { end += 1 }
        let written = String(decoding: b[keyStart..<end], as: UTF8.self)
        let ch = scalar(at: pos)
        let hint = ch == "\u{FFFD}" ? " (U+FFFD usually means the file was not saved as UTF-8)" : ""
        return fail("a non-ASCII character ('\(ch)')\(hint) cannot be part of a bare key; bare keys are ASCII letters, digits, '-' and '_': quote the key (\"\(written)\") or fix the typo")
    }

    /// A dotted key as the user would write it, for messages.
    func display(_ key: [TOMLReader.Key]) -> String {
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
    mutating func tableHeader(_ root: TOMLReader.Table) throws(TOMLReader.Failure) -> TOMLReader.Table {
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
    mutating func arrayTableHeader(_ root: TOMLReader.Table) throws(TOMLReader.Failure) -> TOMLReader.Table {
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
        parent.add(last.name, .tables(TOMLReader.TableArray(t)), offset: last.offset)
        return t
    }

    /// The parent tables of a header: created if missing, the last element of an array of tables.
    mutating func walk(_ root: TOMLReader.Table, to path: ArraySlice<TOMLReader.Key>, header: String) throws(TOMLReader.Failure) -> TOMLReader.Table {
        var t = root
        var walked: [TOMLReader.Key] = []
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

    func newTable(_ origin: TOMLReader.Table.Origin, parent: TOMLReader.Table, at offset: Int, extra: Int = 0) throws(TOMLReader.Failure) -> TOMLReader.Table {
        let depth = parent.depth + 1 + extra
        guard depth <= TOMLReader.maxDepth else { throw fail(tooDeep, at: offset) }
        return TOMLReader.Table(origin: origin, depth: depth)
    }

    var tooDeep: String { "nested too deeply: more than \(TOMLReader.maxDepth) levels of tables, arrays and dotted keys" }

    func plain(_ key: [TOMLReader.Key]) -> String { key.map { Self.render(key: $0.name) }.joined(separator: ".") }

    /// Why a key that already holds a value cannot become a table.
    func overwrite(_ key: [TOMLReader.Key], holding v: TOMLNode, offset: Int, as what: String, header: String? = nil) -> String {
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

    // MARK: TOMLReader.Key = value

    /// `key = value` into a table (a section or an inline table). Returns the key for messages.
    @discardableResult
    mutating func keyValue(into table: TOMLReader.Table, section: Int) throws(TOMLReader.Failure) -> [TOMLReader.Key] {
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
    func insert(_ value: TOMLNode, at key: [TOMLReader.Key], into table: TOMLReader.Table, section: Int) throws(TOMLReader.Failure) {
        var t = table
        var walked: [TOMLReader.Key] = []
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
}
