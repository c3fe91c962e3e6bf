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

    /// An even number of hex digits, any case → bytes; nil for anything else.
    public static func decode(_ text: some StringProtocol) -> [UInt8]? {
        let utf8 = Array(text.utf8)
        guard utf8.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(utf8.count / 2)
        var i = 0
        while i < utf8.count {
            guard let hi = digit(utf8[i]), let lo = digit(utf8[i + 1]) else { return nil }
            out.append(hi << 4 | lo)
            i += 2
        }
        return out
    }
}
