/// Shape checks for identifiers that arrive from outside (UUIDs, APNs device tokens).
public enum TextChecks {
    /// 8-4-4-4-12 hex digits with hyphens, either case.
    public static func isCanonicalUUID(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard bytes.count == 36 else { return false }
        return bytes.enumerated().allSatisfy { index, byte in
            [8, 13, 18, 23].contains(index) ? byte == UInt8(ascii: "-") : isHexDigit(byte)
        }
    }

    /// Only hex digits, and a length in `lengths`.
    public static func isHex(_ text: String, lengths: ClosedRange<Int>) -> Bool {
        lengths.contains(text.utf8.count) && text.utf8.allSatisfy(isHexDigit)
    }

    /// What is wrong with free text a person typed (a name, a title), or nil when it is fine:
    /// 1…`characters` characters (grapheme clusters, what a person counts) and at most `bytes`
    /// bytes of UTF-8 (one character may carry thousands of combining marks), no control
    /// characters (NUL, which a C reader truncates at, escapes, DEL, C1) nor line or paragraph
    /// separators; `newlines` allows line feeds (a message body).
    public static func freeTextProblem(_ text: String, field: String, characters: Int, bytes: Int,
                                       newlines: Bool = false, empty: Bool = false) -> String? {
        let count = text.count
        guard count <= characters, text.utf8.count <= bytes, empty || count > 0 else {
            return "\(field) must be \(empty ? 0 : 1) to \(characters) characters and at most \(bytes) bytes of UTF-8"
        }
        let refused = text.unicodeScalars.first { scalar in
            (scalar.properties.generalCategory == .control && !(newlines && scalar == "\n"))
                || scalar.properties.generalCategory == .lineSeparator || scalar.properties.generalCategory == .paragraphSeparator
        }
        if let refused {
            let hex = String(refused.value, radix: 16, uppercase: true)
            return "\(field) must not contain control characters (found U+\(String(repeating: "0", count: max(0, 4 - hex.count)) + hex))"
        }
        return nil
    }

    static func isHexDigit(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte | 0x20)
    }
}
