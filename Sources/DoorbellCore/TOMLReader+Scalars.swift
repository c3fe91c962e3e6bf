// TOML scalars: booleans, integers (decimal, hex, octal, binary; 64-bit), floats, and RFC 3339
// dates and times.

extension TOMLReader.Parser {
    /// Reads the run of value characters (`0x1F`, `-3.5e2`, `1979-05-27T07:32:00Z`, `true`)
    /// and decides what it is.
    mutating func scalarValue(for key: [TOMLReader.Key]) throws(TOMLReader.Failure) -> TOMLNode {
        let start = pos
        while pos < b.count, Self.isValueByte(b[pos]) { pos += 1 }
        // A date and a time may be separated by one space.
        if pos - start == 10, isDate(start), at(0x20), let h1 = peek(1), let h2 = peek(2), isDigit(h1), isDigit(h2), at(0x3A, 3) {
            pos += 1
            while pos < b.count, Self.isValueByte(b[pos]) { pos += 1 }
        }
        let token = Array(b[start..<pos])
        guard !token.isEmpty else {
            let hint = b[start] >= 0x80 ? quoteHint(start) : ""
            throw fail("expected a value for \(display(key)), found \(describe(start))\(hint)", at: start)
        }
        let text = String(decoding: token, as: UTF8.self)
        switch text {
        case "true": return .bool(true)
        case "false": return .bool(false)
        case "inf", "+inf": return .double(.infinity)
        case "-inf": return .double(-.infinity)
        case "nan", "+nan": return .double(.nan)
        case "-nan": return .double(-Double.nan)
        default: break
        }
        if token.count >= 5, isDate(start) { return try dateTime(token, at: start) }
        if token.count >= 3, isDigit(token[0]), isDigit(token[1]), token[2] == 0x3A { return try localTime(token, at: start) }
        let unsigned = token[0] == 0x2B || token[0] == 0x2D ? token.dropFirst() : token[...]
        guard let first = unsigned.first, isDigit(first) || first == 0x2E else {
            let lower = text.lowercased()
            if lower == "true" || lower == "false" { throw fail("booleans are lowercase: write \(lower)", at: start) }
            if ["inf", "+inf", "-inf", "nan", "+nan", "-nan"].contains(lower) { throw fail("write \(lower) in lowercase: inf, +inf, -inf, nan", at: start) }
            if unsigned.isEmpty { throw fail("expected digits after '\(text)'", at: start) }
            throw fail("`\(word(start))` is not a TOML value\(quoteHint(start))", at: start)
        }
        if unsigned.count >= 2, unsigned[unsigned.startIndex] == 0x30, let p = unsigned.dropFirst().first, isLetter(p), p != 0x65, p != 0x45 {
            return .int(try prefixedInteger(token, at: start))
        }
        if token.contains(where: { $0 == 0x2E || $0 == 0x65 || $0 == 0x45 }) { return .double(try float(token, at: start)) }
        return .int(try decimalInteger(token, at: start))
    }

    /// The unquoted word at `start` as written, up to a blank or TOML punctuation.
    func word(_ start: Int) -> String {
        var end = start
        while end < b.count, end - start < 60, ![0x20, 0x09, 0x0A, 0x0D, 0x2C, 0x5D, 0x7D, 0x23, 0x22, 0x27].contains(b[end]) { end += 1 }
        while end < b.count, b[end] & 0xC0 == 0x80 { end += 1 } // never cut a character
        return String(decoding: b[start..<end], as: UTF8.self)
    }

    /// A forgotten pair of quotes is the usual reason for a word where a value belongs:
    /// suggest the rest of the value (up to a comment or the end of the line) in quotes.
    func quoteHint(_ start: Int) -> String {
        var end = start
        while end < b.count, end - start < 60, ![0x0A, 0x0D, 0x2C, 0x5D, 0x7D, 0x23, 0x22].contains(b[end]) { end += 1 }
        while end > start, b[end - 1] == 0x20 || b[end - 1] == 0x09 { end -= 1 }
        guard end > start, end - start < 60 else { return "; strings need quotes" }
        return "; strings need quotes, e.g. \"\(String(decoding: b[start..<end], as: UTF8.self))\""
    }

    func isDigit(_ c: UInt8) -> Bool { c >= 0x30 && c <= 0x39 }
    func isLetter(_ c: UInt8) -> Bool { (c | 0x20) >= 0x61 && (c | 0x20) <= 0x7A }

    /// YYYY- at offset.
    func isDate(_ o: Int) -> Bool {
        o + 4 < b.count && isDigit(b[o]) && isDigit(b[o + 1]) && isDigit(b[o + 2]) && isDigit(b[o + 3]) && b[o + 4] == 0x2D
    }

    /// Digits with single underscores between them, as TOML numbers allow.
    func digits(_ d: ArraySlice<UInt8>, radix: UInt8, what: String, at start: Int) throws(TOMLReader.Failure) -> [UInt8] {
        var out: [UInt8] = []
        var previousWasDigit = false
        for c in d {
            if c == 0x5F {
                guard previousWasDigit else { throw fail("\(what): an underscore must sit between two digits", at: start) }
                previousWasDigit = false
                continue
            }
            guard let v = Hex.digit(c), v < radix else {
                let name = radix == 16 ? "a hex" : radix == 8 ? "an octal" : radix == 2 ? "a binary" : "a decimal"
                throw fail("\(what): '\(Character(Unicode.Scalar(c)))' is not \(name) digit", at: start)
            }
            out.append(c)
            previousWasDigit = true
        }
        guard previousWasDigit else {
            throw fail(out.isEmpty && d.isEmpty ? "\(what): digits are missing" : "\(what): an underscore must sit between two digits", at: start)
        }
        return out
    }

    mutating func prefixedInteger(_ token: [UInt8], at start: Int) throws(TOMLReader.Failure) -> Int64 {
        let text = String(decoding: token, as: UTF8.self)
        if token[0] == 0x2B || token[0] == 0x2D {
            throw fail("\(text): hex, octal and binary integers cannot have a sign", at: start)
        }
        let radix: UInt8
        switch token[1] {
        case 0x78: radix = 16
        case 0x6F: radix = 8
        case 0x62: radix = 2
        case 0x58, 0x4F, 0x42: throw fail("\(text): the prefix is lowercase (0x, 0o, 0b)", at: start)
        default: throw fail("\(text) is not a number; integers are like 42, 0x2A, 0o52 or 0b101010, and strings need quotes", at: start)
        }
        let ds = try digits(token[2...], radix: radix, what: text, at: start)
        var v: UInt64 = 0
        for c in ds {
            let (m, o1) = v.multipliedReportingOverflow(by: UInt64(radix))
            let (s, o2) = m.addingReportingOverflow(UInt64(Hex.digit(c) ?? 0))
            guard !o1, !o2, s <= UInt64(Int64.max) else { throw outOfRange(text, at: start) }
            v = s
        }
        return Int64(v)
    }

    func outOfRange(_ text: String, at start: Int) -> TOMLReader.Failure {
        fail("\(text) does not fit in a 64-bit integer (\(Int64.min) to \(Int64.max))", at: start)
    }

    mutating func decimalInteger(_ token: [UInt8], at start: Int) throws(TOMLReader.Failure) -> Int64 {
        let text = String(decoding: token, as: UTF8.self)
        let negative = token[0] == 0x2D
        let body = token[0] == 0x2B || negative ? token.dropFirst() : token[...]
        if body.contains(where: { $0 == 0x2D || $0 == 0x2B || $0 == 0x3A }) || body.contains(where: isLetter) {
            throw fail("`\(word(start))` is not a number\(quoteHint(start))", at: start)
        }
        let ds = try digits(body, radix: 10, what: text, at: start)
        if ds.count > 1, ds[0] == 0x30 {
            let significant = ds.drop(while: { $0 == 0x30 })
            let fixed = (negative ? "-" : "") + (significant.isEmpty ? "0" : String(decoding: significant, as: UTF8.self))
            throw fail("\(text): leading zeros are not allowed in an integer (write \(fixed), or 0o… for octal)", at: start)
        }
        var v: UInt64 = 0
        let limit = negative ? UInt64(Int64.max) + 1 : UInt64(Int64.max)
        for c in ds {
            let (m, o1) = v.multipliedReportingOverflow(by: 10)
            let (s, o2) = m.addingReportingOverflow(UInt64(c - 0x30))
            guard !o1, !o2, s <= limit else { throw outOfRange(text, at: start) }
            v = s
        }
        return negative ? (v == UInt64(Int64.max) + 1 ? Int64.min : -Int64(v)) : Int64(v)
    }

    mutating func float(_ token: [UInt8], at start: Int) throws(TOMLReader.Failure) -> Double {
        let text = String(decoding: token, as: UTF8.self)
        let signed = token[0] == 0x2B || token[0] == 0x2D
        var rest = signed ? token.dropFirst() : token[...]
        let exponentAt = rest.firstIndex(where: { $0 == 0x65 || $0 == 0x45 })
        let mantissa = exponentAt.map { rest[..<$0] } ?? rest
        let dot = mantissa.firstIndex(of: 0x2E)
        let integer = dot.map { mantissa[..<$0] } ?? mantissa
        if integer.isEmpty { throw fail("\(text): a float needs a digit before the decimal point (0\(text.drop(while: { $0 == "+" || $0 == "-" })))", at: start) }
        var clean: [UInt8] = signed ? [token[0]] : []
        let intDigits = try digits(integer, radix: 10, what: text, at: start)
        if intDigits.count > 1, intDigits[0] == 0x30 { throw fail("\(text): leading zeros are not allowed in a float", at: start) }
        clean += intDigits
        if let dot {
            let fraction = mantissa[(dot + 1)...]
            if fraction.isEmpty { throw fail("\(text): a float needs a digit after the decimal point (\(String(decoding: mantissa, as: UTF8.self))0)", at: start) }
            clean.append(0x2E)
            clean += try digits(fraction, radix: 10, what: text, at: start)
        }
        if let exponentAt {
            rest = rest[(exponentAt + 1)...]
            clean.append(0x65)
            if let s = rest.first, s == 0x2B || s == 0x2D { clean.append(s); rest = rest.dropFirst() }
            if rest.isEmpty { throw fail("\(text): the exponent needs digits, e.g. 1e6 or 5e-3", at: start) }
            clean += try digits(rest, radix: 10, what: text, at: start)
        }
        // Validated above, so this is plain decimal text; values beyond Double's range are ±inf.
        guard let v = Double(String(decoding: clean, as: UTF8.self)) else { throw fail("\(text) is not a valid float", at: start) }
        return v
    }

    /// Date, local date-time or offset date-time (RFC 3339 with TOML's 'T', 't' or ' ').
    mutating func dateTime(_ t: [UInt8], at start: Int) throws(TOMLReader.Failure) -> TOMLNode {
        let text = String(decoding: t, as: UTF8.self)
        let shape = "\(text) is not a valid date or date-time; write 1979-05-27, 1979-05-27T07:32:00 or 1979-05-27T07:32:00Z / +02:00"
        guard t.count >= 10, t[7] == 0x2D, let year = number(t, 0, 4), let month = number(t, 5, 2), let day = number(t, 8, 2) else {
            throw fail(shape, at: start)
        }
        guard (1...12).contains(month) else { throw fail("\(text): month \(month) does not exist", at: start) }
        guard day >= 1, day <= daysIn(month: month, year: year) else { throw fail("\(text): day \(day) does not exist in \(year)-\(month < 10 ? "0" : "")\(month)", at: start) }
        if t.count == 10 { return .other("date") }
        guard t[10] == 0x54 || t[10] == 0x74 || t[10] == 0x20 else { throw fail(shape, at: start) }
        var i = 11
        try time(t, &i, text: text, at: start)
        if i == t.count { return .other("date-time") }
        if t[i] == 0x5A || t[i] == 0x7A {
            i += 1
        } else if t[i] == 0x2B || t[i] == 0x2D {
            guard i + 6 == t.count, t[i + 3] == 0x3A, let h = number(t, i + 1, 2), let m = number(t, i + 4, 2) else { throw fail(shape, at: start) }
            guard h <= 23, m <= 59 else { throw fail("\(text): the offset must be between -23:59 and +23:59", at: start) }
            i += 6
        }
        guard i == t.count else { throw fail(shape, at: start) }
        return .other("date-time")
    }

    mutating func localTime(_ t: [UInt8], at start: Int) throws(TOMLReader.Failure) -> TOMLNode {
        let text = String(decoding: t, as: UTF8.self)
        var i = 0
        try time(t, &i, text: text, at: start)
        guard i == t.count else { throw fail("\(text) is not a valid time; write 07:32:00 or 07:32:00.999 (a time alone has no offset)", at: start) }
        return .other("time")
    }

    /// HH:MM:SS with an optional fraction; TOML 1.0 requires the seconds.
    func time(_ t: [UInt8], _ i: inout Int, text: String, at start: Int) throws(TOMLReader.Failure) {
        guard i + 5 <= t.count, t[i + 2] == 0x3A, let h = number(t, i, 2), let m = number(t, i + 3, 2) else {
            throw fail("\(text): the time must be HH:MM:SS, e.g. 07:32:00", at: start)
        }
        guard i + 8 <= t.count, t[i + 5] == 0x3A, let s = number(t, i + 6, 2) else {
            throw fail("\(text): TOML 1.0 times need seconds, e.g. 07:32:00", at: start)
        }
        guard h <= 23, m <= 59, s <= 59 else { throw fail("\(text): a time of day runs from 00:00:00 to 23:59:59", at: start) }
        i += 8
        if i < t.count, t[i] == 0x2E {
            i += 1
            let first = i
            while i < t.count, isDigit(t[i]) { i += 1 }
            guard i > first else { throw fail("\(text): a fraction of a second needs digits after '.'", at: start) }
        }
    }

    func number(_ t: [UInt8], _ from: Int, _ count: Int) -> Int? {
        guard from + count <= t.count else { return nil }
        var v = 0
        for k in from..<(from + count) {
            guard isDigit(t[k]) else { return nil }
            v = v * 10 + Int(t[k] - 0x30)
        }
        return v
    }

    func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }
}
