import CCrypto

// AES-CCM (RFC 3610 / NIST SP 800-38C) for encrypted BTHome: 13-byte nonce, 4-byte tag, no
// AAD. The general form is kept so the RFC's own test vectors check it. libcrypto does the
// work; the ciphers are fetched once because an implicit fetch per advert costs more than
// the decryption itself.

public enum AESCCM {
    public enum Failure: Error, Sendable, Equatable {
        case badParameters
        case authenticationFailed
    }

    public static func encrypt(_ plaintext: [UInt8], key: [UInt8], nonce: [UInt8], aad: [UInt8] = [], tagLength: Int) throws(Failure) -> [UInt8] {
        let cipher = try check(key: key, nonce: nonce, aad: aad, tagLength: tagLength, payload: plaintext.count)
        var out = [UInt8](repeating: 0, count: plaintext.count + tagLength)
        let ok = withBytes(key) { k, _ in withBytes(nonce) { n, _ in withBytes(aad) { a, aadCount in withBytes(plaintext) { p, count in
            out.withUnsafeMutableBufferPointer { o in
                let base = o.baseAddress! // count + tagLength ≥ 4 bytes
                return doorbell_aes_ccm(1, cipher.pointer, k, n, Int32(nonce.count), a, Int32(aadCount), p, Int32(count),
                                        base + count, Int32(tagLength), base)
            }
        } } } }
        guard ok == 1 else { throw .badParameters }
        return out
    }

    /// `sealed` is ciphertext ‖ tag. Returns the plaintext, or throws when the tag does not match.
    public static func decrypt(_ sealed: [UInt8], key: [UInt8], nonce: [UInt8], aad: [UInt8] = [], tagLength: Int) throws(Failure) -> [UInt8] {
        guard sealed.count >= tagLength else { throw .badParameters }
        let count = sealed.count - tagLength
        let cipher = try check(key: key, nonce: nonce, aad: aad, tagLength: tagLength, payload: count)
        var tag = Array(sealed[count...])
        var out = [UInt8](repeating: 0, count: max(count, 1))
        let ok = withBytes(key) { k, _ in withBytes(nonce) { n, _ in withBytes(aad) { a, aadCount in withBytes(sealed) { s, _ in
            tag.withUnsafeMutableBufferPointer { t in
                out.withUnsafeMutableBufferPointer { o in
                    doorbell_aes_ccm(0, cipher.pointer, k, n, Int32(nonce.count), a, Int32(aadCount), s, Int32(count),
                                     t.baseAddress, Int32(tagLength), o.baseAddress)
                }
            }
        } } } }
        // Tag comparison is libcrypto's (constant time).
        guard ok == 1 else { throw .authenticationFailed }
        out.removeLast(out.count - count)
        return out
    }

    static func check(key: [UInt8], nonce: [UInt8], aad: [UInt8], tagLength: Int, payload: Int) throws(Failure) -> FetchedCipher {
        guard (7...13).contains(nonce.count), [4, 6, 8, 10, 12, 14, 16].contains(tagLength), aad.count < 0xFF00 else { throw .badParameters }
        let l = 15 - nonce.count
        guard l >= 8 || payload < 1 << (8 * l) else { throw .badParameters }
        switch key.count {
        case 16: if let c = aes128 { return c }
        case 24: if let c = aes192 { return c }
        case 32: if let c = aes256 { return c }
        default: break
        }
        throw .badParameters
    }
}

/// A cipher fetched from libcrypto's default provider, kept for the life of the process.
final class FetchedCipher: @unchecked Sendable {
    let pointer: OpaquePointer
    init?(_ name: String) {
        guard let p = EVP_CIPHER_fetch(nil, name, nil) else { ERR_clear_error(); return nil }
        pointer = p
    }
}

private let aes128 = FetchedCipher("AES-128-CCM")
private let aes192 = FetchedCipher("AES-192-CCM")
private let aes256 = FetchedCipher("AES-256-CCM")
