import _CryptoExtras
import Crypto

// AES-CCM (RFC 3610 / NIST SP 800-38C) on swift-crypto's AES block function: CBC-MAC over
// B0 ‖ AAD ‖ payload, CTR from A1 for the payload and A0 for the tag. BTHome uses a 13-byte
// nonce (so L = 2) and a 4-byte tag, no AAD; the general form is kept so the RFC's own test
// vectors check it.

public enum AESCCM {
    public enum Failure: Error, Sendable, Equatable {
        case badParameters
        case authenticationFailed
    }

    public static func encrypt(_ plaintext: [UInt8], key: [UInt8], nonce: [UInt8], aad: [UInt8] = [], tagLength: Int) throws(Failure) -> [UInt8] {
        let tag = try mac(plaintext, key: key, nonce: nonce, aad: aad, tagLength: tagLength)
        var out = try ctr(plaintext, key: key, nonce: nonce, startCounter: 1)
        out += try ctr(tag, key: key, nonce: nonce, startCounter: 0)
        return out
    }

    /// `sealed` is ciphertext ‖ tag. Returns the plaintext, or throws when the tag does not match.
    public static func decrypt(_ sealed: [UInt8], key: [UInt8], nonce: [UInt8], aad: [UInt8] = [], tagLength: Int) throws(Failure) -> [UInt8] {
        guard sealed.count >= tagLength else { throw .badParameters }
        let body = Array(sealed.prefix(sealed.count - tagLength))
        let plaintext = try ctr(body, key: key, nonce: nonce, startCounter: 1)
        let expected = try ctr(try mac(plaintext, key: key, nonce: nonce, aad: aad, tagLength: tagLength), key: key, nonce: nonce, startCounter: 0)
        // Constant time: a forged tag must not be found byte by byte.
        var diff: UInt8 = 0
        for (a, b) in zip(expected, sealed.suffix(tagLength)) { diff |= a ^ b }
        guard diff == 0 else { throw .authenticationFailed }
        return plaintext
    }

    static func block(_ input: [UInt8], key: SymmetricKey) throws(Failure) -> [UInt8] {
        var b = input
        do { try AES.permute(&b, key: key) } catch { throw .badParameters }
        return b
    }

    static func check(key: [UInt8], nonce: [UInt8], tagLength: Int) throws(Failure) -> Int {
        guard [16, 24, 32].contains(key.count), (7...13).contains(nonce.count),
              [4, 6, 8, 10, 12, 14, 16].contains(tagLength) else { throw .badParameters }
        return 15 - nonce.count // L
    }

    static func mac(_ payload: [UInt8], key: [UInt8], nonce: [UInt8], aad: [UInt8], tagLength: Int) throws(Failure) -> [UInt8] {
        let l = try check(key: key, nonce: nonce, tagLength: tagLength)
        guard l >= 8 || payload.count < 1 << (8 * l) else { throw .badParameters }
        let k = SymmetricKey(data: key)
        let flags = UInt8((aad.isEmpty ? 0 : 0x40) | ((tagLength - 2) / 2) << 3 | (l - 1))
        var b0: [UInt8] = [flags] + nonce
        for i in stride(from: l - 1, through: 0, by: -1) { b0.append(UInt8(truncatingIfNeeded: payload.count >> (8 * i))) }
        var x = try block(b0, key: k)
        func absorb(_ data: [UInt8]) throws(Failure) {
            var i = 0
            while i < data.count {
                var blk = Array(data[i..<min(i + 16, data.count)])
                blk += [UInt8](repeating: 0, count: 16 - blk.count)
                for j in 0..<16 { x[j] ^= blk[j] }
                x = try block(x, key: k)
                i += 16
            }
        }
        if !aad.isEmpty {
            guard aad.count < 0xFF00 else { throw .badParameters }
            try absorb([UInt8(aad.count >> 8), UInt8(aad.count & 0xFF)] + aad)
        }
        try absorb(payload)
        return Array(x.prefix(tagLength))
    }

    static func ctr(_ data: [UInt8], key: [UInt8], nonce: [UInt8], startCounter: Int) throws(Failure) -> [UInt8] {
        let l = 15 - nonce.count
        let k = SymmetricKey(data: key)
        var out: [UInt8] = []
        out.reserveCapacity(data.count)
        var counter = startCounter
        var i = 0
        while i < data.count {
            var a: [UInt8] = [UInt8(l - 1)] + nonce
            for j in stride(from: l - 1, through: 0, by: -1) { a.append(UInt8(truncatingIfNeeded: counter >> (8 * j))) }
            let s = try block(a, key: k)
            for j in 0..<min(16, data.count - i) { out.append(data[i + j] ^ s[j]) }
            counter += 1
            i += 16
        }
        return out
    }
}
