// TOML strings: basic, literal and multi-line, escapes, and what may not appear in them.

extension TOMLReader.Parser {
    mutating func basicString() throws(TOMLReader.Failure) -> String {
        let open = pos
        pos += 1
        var out: [UInt8] = []
        while true {
            guard let c = peek() else { throw fail("unterminated string; close it with \" before the end of the line", at: open) }
            switch c {
            case 0x22: pos += 1; return String(decoding: out, as: UTF8.self)
            case 0x5C: try escape(into: &out)
            case 0x0A, 0x0D:
                if c == 0x0D, !at(0x0A, 1) { throw controlInString() }
                throw fail("unterminated string; close it with \" before the end of the line (use \"\"\" for text over several lines)", at: open)
            default:
                if Self.isControl(c) { throw controlInString() }
                out.append(c)
                pos += 1
            }
        }
    }

    mutating func literalString() throws(TOMLReader.Failure) -> String {
        let open = pos
        pos += 1
        let start = pos
        while true {
            guard let c = peek() else { throw fail("unterminated string; close it with ' before the end of the line", at: open) }
            switch c {
            case 0x27:
                pos += 1
                if let next = peek(), Self.isBareKeyByte(next) {
                    throw fail("a 'literal string' ends at the next ' and cannot contain one; use \"double quotes\" for text with an apostrophe", at: pos - 1)
                }
                return String(decoding: b[start..<(pos - 1)], as: UTF8.self)
            case 0x0A, 0x0D:
                if c == 0x0D, !at(0x0A, 1) { throw controlInString() }
                throw fail("unterminated string; close it with ' before the end of the line (use ''' for text over several lines)", at: open)
            default:
                if Self.isControl(c) { throw controlInString(literal: true) }
                pos += 1
            }
        }
    }

    mutating func multiLineBasicString() throws(TOMLReader.Failure) -> String {
        let open = pos
        pos += 3
        _ = newline() // a newline right after the opening quotes is not content
        var out: [UInt8] = []
        while true {
            guard let c = peek() else { throw fail("unterminated multi-line string; close it with \"\"\"", at: open) }
            switch c {
            case 0x22:
                if let end = closeQuotes(0x22, into: &out) { pos = end; return String(decoding: out, as: UTF8.self) }
            case 0x5C:
                if let next = peek(1), next == 0x20 || next == 0x09 || next == 0x0A || next == 0x0D {
                    try lineEndingBackslash()
                } else {
                    try escape(into: &out)
                }
            case 0x0D:
                guard at(0x0A, 1) else { throw controlInString() }
                out.append(0x0A) // CRLF is a newline in the value
                pos += 2
            default:
                if Self.isControl(c) && c != 0x0A { throw controlInString() }
                out.append(c)
                pos += 1
            }
        }
    }

    mutating func multiLineLiteralString() throws(TOMLReader.Failure) -> String {
        let open = pos
        pos += 3
        _ = newline()
        var out: [UInt8] = []
        while true {
            guard let c = peek() else { throw fail("unterminated multi-line string; close it with '''", at: open) }
            switch c {
            case 0x27:
                if let end = closeQuotes(0x27, into: &out) { pos = end; return String(decoding: out, as: UTF8.self) }
            case 0x0D:
                guard at(0x0A, 1) else { throw controlInString(literal: true) }
                out.append(0x0A)
                pos += 2
            default:
                if Self.isControl(c) && c != 0x0A { throw controlInString(literal: true) }
                out.append(c)
                pos += 1
            }
        }
    }

    /// A run of quotes inside a multi-line string: fewer than three are content; three close
    /// it, and up to two more right before them belong to the content (`""""` ends in `"`).
    /// Returns the end offset when the string closes, else consumes the run as content.
    mutating func closeQuotes(_ q: UInt8, into out: inout [UInt8]) -> Int? {
        var run = 0
        while at(q, run) { run += 1 }
        if run >= 3 {
            let extra = min(run - 3, 2)
            out.append(contentsOf: repeatElement(q, count: extra))
            return pos + 3 + extra
        }
        out.append(contentsOf: repeatElement(q, count: run))
        pos += run
        return nil
    }

    /// `\` at the end of a line joins it with the next non-blank text.
    mutating func lineEndingBackslash() throws(TOMLReader.Failure) {
        let slash = pos
        pos += 1
        skipBlanks()
        guard newline() else {
            if atEnd { return } // the unterminated string is reported by the caller
            throw fail("a backslash followed by a space is not an escape; a line-ending backslash must be the last thing on its line (write \\\\ for a backslash)", at: slash)
        }
        while true {
            skipBlanks()
            if !newline() { return }
        }
    }

    mutating func escape(into out: inout [UInt8]) throws(TOMLReader.Failure) {
        let slash = pos
        guard let e = peek(1) else { throw fail("unterminated string after '\\'") }
        pos += 2
        switch e {
        case 0x62: out.append(0x08) // \b
        case 0x74: out.append(0x09) // \t
        case 0x6E: out.append(0x0A) // \n
        case 0x66: out.append(0x0C) // \f
        case 0x72: out.append(0x0D) // \r
        case 0x22: out.append(0x22)
        case 0x5C: out.append(0x5C)
        case 0x75, 0x55: // \uXXXX, \UXXXXXXXX
            let digits = e == 0x75 ? 4 : 8
            var v: UInt32 = 0
            for k in 0..<digits {
                guard let h = peek(k).flatMap(Hex.digit) else {
                    throw fail("\\\(e == 0x75 ? "u" : "U") needs exactly \(digits) hex digits, e.g. \(e == 0x75 ? "\\u00E9" : "\\U0001F514")", at: slash)
                }
                v = v << 4 | UInt32(h)
            }
            pos += digits
            guard let s = Unicode.Scalar(v) else {
                let written = String(decoding: b[slash..<pos], as: UTF8.self)
                throw fail(v >= 0xD800 && v <= 0xDFFF
                    ? "\(written) is a UTF-16 surrogate, not a character; write the character itself or its \\U code point"
                    : "\(written) is beyond U+10FFFF, the last Unicode code point", at: slash)
            }
            UTF8.encode(s) { out.append($0) }
        default:
            let shown = e >= 0x80 ? scalar(at: slash + 1) : (e < 0x20 || e == 0x7F ? "U+" + TOMLReader.hex(e, width: 4) : String(Character(Unicode.Scalar(e))))
            throw fail("invalid escape '\\\(shown)'; the escapes are \\b \\t \\n \\f \\r \\\" \\\\ \\uXXXX \\UXXXXXXXX (write \\\\ for a backslash)", at: slash)
        }
    }

    func controlInString(literal: Bool = false) -> TOMLReader.Failure {
        let c = b[min(pos, b.count - 1)]
        let fix = literal ? "use a \"basic string\" with the escape \\u\(TOMLReader.hex(c, width: 4))" : "write it as the escape \\u\(TOMLReader.hex(c, width: 4))"
        return fail("\(describe(pos)) is not allowed in a string; \(fix)")
    }

    // MARK: Numbers, booleans, dates and times

    static func isValueByte(_ c: UInt8) -> Bool { isBareKeyByte(c) || c == 0x2B || c == 0x2E || c == 0x3A }
}
