// TOML values after '=': strings, arrays and inline tables here; numbers, booleans and dates in
// TOMLReader+Scalars.

extension TOMLReader.Parser {
    // MARK: Values

    mutating func value(depth: Int, for key: [TOMLReader.Key]) throws(TOMLReader.Failure) -> TOMLNode {
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

    mutating func array(depth: Int, for key: [TOMLReader.Key]) throws(TOMLReader.Failure) -> TOMLNode {
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
    mutating func inlineTable(depth: Int) throws(TOMLReader.Failure) -> TOMLNode {
        let open = pos
        pos += 1
        sections += 1
        let section = sections
        let table = TOMLReader.Table(origin: .header, depth: depth)
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

    func unclosedInline(_ open: Int) -> TOMLReader.Failure {
        fail("an inline table { } must be closed on the line where it starts (no newlines or comments inside); for a longer table use a [table] section", at: open)
    }
}
