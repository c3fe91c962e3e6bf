import CCrypto

// The gateway's device key (Ed25519, RFC 8032) on libcrypto. The 32-byte seed is what the key
// file holds; the public key is what enrollment registers.

public struct Ed25519Error: Error, Sendable, CustomStringConvertible {
    public let description: String
}

/// Immutable after init; libcrypto allows concurrent signing with one EVP_PKEY.
public final class Ed25519SigningKey: @unchecked Sendable {
    private let pkey: OpaquePointer
    public let seed: [UInt8]
    public let publicKey: [UInt8]

    /// A new key from the system's random source.
    public convenience init() {
        // 32 random bytes are a valid seed: Ed25519 hashes and clamps it.
        do { try self.init(seed: SecureRandom.bytes(32)) } catch { preconditionFailure("\(error)") }
    }

    public init(seed: [UInt8]) throws(Ed25519Error) {
        guard seed.count == 32 else { throw Ed25519Error(description: "an Ed25519 private key is 32 bytes, got \(seed.count)") }
        guard let pkey = seed.withUnsafeBufferPointer({ EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nil, $0.baseAddress, 32) }) else {
            ERR_clear_error()
            throw Ed25519Error(description: "libcrypto refused the Ed25519 key")
        }
        var pub = [UInt8](repeating: 0, count: 32)
        var length = 32
        let ok = pub.withUnsafeMutableBufferPointer { EVP_PKEY_get_raw_public_key(pkey, $0.baseAddress, &length) }
        guard ok == 1, length == 32 else {
            EVP_PKEY_free(pkey)
            ERR_clear_error()
            throw Ed25519Error(description: "libcrypto could not derive the Ed25519 public key")
        }
        self.pkey = pkey
        self.seed = seed
        self.publicKey = pub
    }

    deinit { EVP_PKEY_free(pkey) }

    /// A fresh libcrypto context per signature: reusing one for a second one-shot
    /// `EVP_DigestSign` works with OpenSSL 3.0 (Debian 12) but fails with trixie's 3.5 (found by
    /// the field rig's arm64 Debian 13 board), and would save only ~10 % of a signature.
    public func signature(for message: [UInt8]) throws(Ed25519Error) -> [UInt8] {
        guard let ctx = EVP_MD_CTX_new() else { throw Ed25519Error(description: "libcrypto is out of memory") }
        defer { EVP_MD_CTX_free(ctx) }
        var sig = [UInt8](repeating: 0, count: 64)
        var length = 64
        let ok = withBytes(message) { m, count in
            sig.withUnsafeMutableBufferPointer { s in
                EVP_DigestSignInit(ctx, nil, nil, nil, pkey) == 1 && EVP_DigestSign(ctx, s.baseAddress, &length, m, count) == 1
            }
        }
        guard ok, length == 64 else {
            ERR_clear_error()
            throw Ed25519Error(description: "Ed25519 signing failed in libcrypto")
        }
        return sig
    }
}

public enum Ed25519 {
    /// Checks `signature` over `message` with a raw 32-byte public key (what receivers do).
    public static func isValidSignature(_ signature: [UInt8], for message: [UInt8], publicKey: [UInt8]) -> Bool {
        guard signature.count == 64, publicKey.count == 32,
              let pkey = publicKey.withUnsafeBufferPointer({ EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nil, $0.baseAddress, 32) })
        else { ERR_clear_error(); return false }
        defer { EVP_PKEY_free(pkey) }
        guard let ctx = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(ctx) }
        let ok = withBytes(message) { m, count in
            signature.withUnsafeBufferPointer { s in
                EVP_DigestVerifyInit(ctx, nil, nil, nil, pkey) == 1 && EVP_DigestVerify(ctx, s.baseAddress, 64, m, count) == 1
            }
        }
        ERR_clear_error()
        return ok
    }
}
