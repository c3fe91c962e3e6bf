// Hex text for bytes (addresses, UUIDs, key ids, raw frames): one buffer, no string per byte;
// the BLE path formats an address or UUID for every new advertiser it hears. And back: the one
// strict reader every hex field in config, JSON and TOML goes through.

public enum Hex {
    /// `separator` goes between bytes, or only before the byte indexes in `groups` when given.
    /// Written straight into the String's storage: no buffer of its own, no copy.
    public static func encode(_ bytes: some Collection<UInt8>, uppercase: Bool = false, separator: UInt8? = nil, groups: [Int]? = nil) -> String {
        let digits: StaticString = uppercase ? "0123456789ABCDEF" : "0123456789abcdef"
        return String(unsafeUninitializedCapacity: bytes.count * 3) { out in
            var n = 0, i = 0
            for b in bytes {
                if let separator, i > 0, groups?.contains(i) ?? true { out[n] = separator; n += 1 }
                out[n] = digits.utf8Start[Int(b >> 4)]
                out[n + 1] = digits.utf8Start[Int(b & 0x0F)]
                n += 2
                i += 1
            }
            return n
        }
    }

    /// A 48-bit address as printed, "C0:11:22:33:44:02" (most significant byte in the high bits).
    public static func address(_ key: UInt64) -> String {
        let digits: StaticString = "0123456789ABCDEF"
        return String(unsafeUninitializedCapacity: 17) { out in
            for i in 0..<6 {
                let b = Int(truncatingIfNeeded: key >> (8 * (5 - i))) & 0xFF
                if i > 0 { out[3 * i - 1] = UInt8(ascii: ":") }
                out[3 * i] = digits.utf8Start[b >> 4]
                out[3 * i + 1] = digits.utf8Start[b & 0x0F]
            }
            return 17
        }
    }

    /// The value of one hex digit, any case; nil for anything else (no sign, no space).
    public static func digit(_ c: UInt8) -> UInt8? {
        switch c {
        case 0x30...0x39: c - 0x30
        case 0x41...0x46: c - 0x41 + 10
        case 0x61...0x66: c - 0x61 + 10
        default: nil
        }
    }

    /// Hex digits (any case, nothing else) → bytes; nil unless exactly `count` bytes when given.
    public static func decode(_ text: some StringProtocol, count: Int? = nil) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count % 2 == 0, count.map({ digits.count == 2 * $0 }) ?? true else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(digits.count / 2)
        var i = 0
        while i < digits.count {
            guard let hi = digit(digits[i]), let lo = digit(digits[i + 1]) else { return nil }
            out.append(hi << 4 | lo)
            i += 2
        }
        return out
    }
}
