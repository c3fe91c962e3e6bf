// Hex text for bytes (addresses, UUIDs, key ids, raw frames): one buffer, no string per byte;
// the BLE path formats an address or UUID for every new advertiser it hears.

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
}
