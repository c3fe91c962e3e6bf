// RFC 4648 base64 (standard alphabet, padded): whsec_ secrets, signatures and public keys.
// Strict on decode, like the receivers: no whitespace, no missing padding.

public enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    private static let values: [UInt8] = {
        var t = [UInt8](repeating: 0xFF, count: 256)
        for (i, c) in alphabet.enumerated() { t[Int(c)] = UInt8(i) }
        return t
    }()

    public static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var i = 0
        while i < bytes.count {
            let b0 = bytes[i], b1 = i + 1 < bytes.count ? bytes[i + 1] : 0, b2 = i + 2 < bytes.count ? bytes[i + 2] : 0
            out.append(alphabet[Int(b0 >> 2)])
            out.append(alphabet[Int((b0 & 0x03) << 4 | b1 >> 4)])
            out.append(i + 1 < bytes.count ? alphabet[Int((b1 & 0x0F) << 2 | b2 >> 6)] : UInt8(ascii: "="))
            out.append(i + 2 < bytes.count ? alphabet[Int(b2 & 0x3F)] : UInt8(ascii: "="))
            i += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// nil unless `text` is canonical padded base64.
    public static func decode(_ text: some StringProtocol) -> [UInt8]? {
        let chars = Array(text.utf8)
        guard chars.count % 4 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(chars.count / 4 * 3)
        var i = 0
        while i < chars.count {
            let last = i + 4 == chars.count
            let pad = last ? (chars[i + 3] == UInt8(ascii: "=") ? (chars[i + 2] == UInt8(ascii: "=") ? 2 : 1) : 0) : 0
            var acc: UInt32 = 0
            for j in 0..<(4 - pad) {
                let v = values[Int(chars[i + j])]
                guard v != 0xFF else { return nil }
                acc |= UInt32(v) << (18 - 6 * j)
            }
            out.append(UInt8(truncatingIfNeeded: acc >> 16))
            if pad < 2 { out.append(UInt8(truncatingIfNeeded: acc >> 8)) }
            if pad < 1 { out.append(UInt8(truncatingIfNeeded: acc)) }
            // Bits the padding hides must be zero, or two texts would decode to one key.
            if pad == 1, acc & 0xFF != 0 { return nil }
            if pad == 2, acc & 0xFFFF != 0 { return nil }
            i += 4
        }
        return out
    }
}
