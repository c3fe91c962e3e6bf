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

    static func isHexDigit(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte | 0x20)
    }
}
