/// A check of JSON text from outside, run before it is decoded: well-formed (RFC 8259), nested
/// at most `maximumDepth` deep, and no object with the same key twice. Decoders take the first
/// (JSONDecoder) or the last duplicate as they like, while a signed body is stored whole: a reader
/// that takes the other one would see another event (another gateway), so a duplicate is refused.
/// Pure; one pass over the bytes, no allocation but the keys of the objects open on the path.
public enum StrictJSON {
    public static let maximumDepth = 32

    public struct Problem: Error, Sendable, Equatable, CustomStringConvertible {
        public let description: String
    }

    public static func check(_ bytes: [UInt8], maximumDepth: Int = maximumDepth) throws(Problem) {
        var scanner = Scanner(bytes: bytes, maximumDepth: maximumDepth)
        try scanner.skipSpace()
        try scanner.value(depth: 0)
        try scanner.skipSpace()
        guard scanner.at == bytes.count else { throw scanner.problem("text after the JSON value") }
    }

    private struct Scanner {
        let bytes: [UInt8]
        let maximumDepth: Int
        var at = 0

        func problem(_ what: String) -> Problem { Problem(description: "not valid JSON: \(what) at byte \(at)") }

        var current: UInt8? { at < bytes.count ? bytes[at] : nil }

        mutating func skipSpace() throws(Problem) {
            while let byte = current, byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D { at += 1 }
        }

        mutating func expect(_ literal: StaticString) throws(Problem) {
            let text = literal.utf8Start
            for index in 0..<literal.utf8CodeUnitCount {
                guard current == text[index] else { throw problem("unexpected character") }
                at += 1
            }
        }

        mutating func value(depth: Int) throws(Problem) {
            switch current {
            case UInt8(ascii: "{"): try object(depth: depth + 1)
            case UInt8(ascii: "["): try array(depth: depth + 1)
            case UInt8(ascii: "\""): _ = try string()
            case UInt8(ascii: "t"): try expect("true")
            case UInt8(ascii: "f"): try expect("false")
            case UInt8(ascii: "n"): try expect("null")
            case .some(let byte) where byte == UInt8(ascii: "-") || (0x30...0x39).contains(byte): try number()
            case nil: throw problem("the text ends where a value should be")
            default: throw problem("unexpected character")
            }
        }

        mutating func object(depth: Int) throws(Problem) {
            guard depth <= maximumDepth else { throw Problem(description: "JSON nested deeper than \(maximumDepth) levels") }
            at += 1
            try skipSpace()
            if current == UInt8(ascii: "}") { at += 1; return }
            var keys = Set<[UInt8]>()
            while true {
                guard current == UInt8(ascii: "\"") else { throw problem("an object key must be a string") }
                let key = try string()
                guard keys.insert(key).inserted else {
                    throw Problem(description: "the key \"\(String(decoding: key, as: UTF8.self))\" appears twice in one object; send each key once")
                }
                try skipSpace()
                guard current == UInt8(ascii: ":") else { throw problem("':' expected") }
                at += 1
                try skipSpace()
                try value(depth: depth)
                try skipSpace()
                switch current {
                case UInt8(ascii: ","): at += 1; try skipSpace()
                case UInt8(ascii: "}"): at += 1; return
                default: throw problem("',' or '}' expected")
                }
            }
        }

        mutating func array(depth: Int) throws(Problem) {
            guard depth <= maximumDepth else { throw Problem(description: "JSON nested deeper than \(maximumDepth) levels") }
            at += 1
            try skipSpace()
            if current == UInt8(ascii: "]") { at += 1; return }
            while true {
                try value(depth: depth)
                try skipSpace()
                switch current {
                case UInt8(ascii: ","): at += 1; try skipSpace()
                case UInt8(ascii: "]"): at += 1; return
                default: throw problem("',' or ']' expected")
                }
            }
        }

        /// A string's value as UTF-8 (escapes resolved, so `"a"` and `"\u0061"` are one key).
        mutating func string() throws(Problem) -> [UInt8] {
            at += 1
            var out: [UInt8] = []
            while true {
                guard let byte = current else { throw problem("unterminated string") }
                at += 1
                switch byte {
                case UInt8(ascii: "\""):
                    guard String(validating: out, as: UTF8.self) != nil else { throw problem("a string that is not UTF-8") }
                    return out
                case UInt8(ascii: "\\"):
                    guard let escaped = current else { throw problem("unterminated string") }
                    at += 1
                    switch escaped {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(escaped)
                    case UInt8(ascii: "b"): out.append(0x08)
                    case UInt8(ascii: "f"): out.append(0x0C)
                    case UInt8(ascii: "n"): out.append(0x0A)
                    case UInt8(ascii: "r"): out.append(0x0D)
                    case UInt8(ascii: "t"): out.append(0x09)
                    case UInt8(ascii: "u"):
                        var scalar = try hex4()
                        if (0xD800...0xDBFF).contains(scalar) {
                            guard current == UInt8(ascii: "\\"), at + 1 < bytes.count, bytes[at + 1] == UInt8(ascii: "u")
                            else { throw problem("a lone surrogate") }
                            at += 2
                            let low = try hex4()
                            guard (0xDC00...0xDFFF).contains(low) else { throw problem("a lone surrogate") }
                            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                        } else if (0xDC00...0xDFFF).contains(scalar) {
                            throw problem("a lone surrogate")
                        }
                        guard let unicode = Unicode.Scalar(scalar) else { throw problem("an invalid \\u escape") }
                        out.append(contentsOf: Array(String(Character(unicode)).utf8))
                    default: throw problem("an invalid escape")
                    }
                case 0..<0x20: throw problem("a control character inside a string")
                default: out.append(byte)
                }
            }
        }

        mutating func hex4() throws(Problem) -> UInt32 {
            var value: UInt32 = 0
            for _ in 0..<4 {
                guard let byte = current, TextChecks.isHexDigit(byte) else { throw problem("an invalid \\u escape") }
                at += 1
                let digit = byte <= 0x39 ? byte - 0x30 : (byte | 0x20) - 0x61 + 10
                value = value << 4 | UInt32(digit)
            }
            return value
        }

        mutating func number() throws(Problem) {
            if current == UInt8(ascii: "-") { at += 1 }
            func isDigit(_ byte: UInt8?) -> Bool { byte.map { (0x30...0x39).contains($0) } ?? false }
            guard isDigit(current) else { throw problem("a digit expected") }
            if current == 0x30 { at += 1 } else { while isDigit(current) { at += 1 } }
            if current == UInt8(ascii: ".") {
                at += 1
                guard isDigit(current) else { throw problem("a digit expected") }
                while isDigit(current) { at += 1 }
            }
            if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
                at += 1
                if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { at += 1 }
                guard isDigit(current) else { throw problem("a digit expected") }
                while isDigit(current) { at += 1 }
            }
        }
    }
}
