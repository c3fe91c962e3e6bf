// Hex text for bytes (addresses, UUIDs, key ids, raw frames): one buffer, no string per byte;
// the BLE path formats an address or UUID for every new advertiser it hears. And back: the one
// strict reader every hex field in config, JSON and TOML goes through.

public enum Hex {
    private static let lower = Array("0123456789abcdef".utf8)
    private static let upper = Array("0123456789ABCDEF".utf8)

    /// `separator` goes between bytes, or only before the byte indexes in `groups` when given.
    public static func encode(_ bytes: some Collection<UInt8>, uppercase: Bool = false, separator: UInt8? = nil, groups: [Int]? = nil) -> String {
        let digits = uppercase ? upper : lower
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 3)
        for (i, b) in bytes.enumerated() {
            if let separator, i > 0, groups?.contains(i) ?? true { out.append(separator) }
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
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
