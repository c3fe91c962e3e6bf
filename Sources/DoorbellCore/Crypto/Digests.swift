import CCrypto

// SHA-256 and HMAC-SHA256 from libcrypto (one-shot calls: the agent hashes short messages).
// A failure here means libcrypto could not allocate; there is nothing sensible to go on with.

public enum SHA256 {
    public static func hash(_ message: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        let ok = withBytes(message) { m, count in
            out.withUnsafeMutableBufferPointer { EVP_Digest(m, count, $0.baseAddress, &length, EVP_sha256(), nil) }
        }
        precondition(ok == 1 && length == 32, "libcrypto SHA-256 failed")
        return out
    }
}

public enum HMACSHA256 {
    public static func authenticationCode(_ message: [UInt8], key: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        let result = withBytes(key) { k, keyCount in
            withBytes(message) { m, count in
                out.withUnsafeMutableBufferPointer { HMAC(EVP_sha256(), k, Int32(keyCount), m, count, $0.baseAddress, &length) }
            }
        }
        precondition(result != nil && length == 32, "libcrypto HMAC-SHA256 failed")
        return out
    }
}

extension HMACSHA256 {
    /// A key set up once in libcrypto, for many messages (the webhook secret signs every
    /// delivery). Not Sendable: one context, used by one thread at a time.
    public final class Keyed {
        private let ctx: OpaquePointer

        public init(key: [UInt8]) {
            let made = withBytes(key) { k, count in doorbell_hmac_sha256_new(k, count) }
            guard let made else { preconditionFailure("libcrypto could not set up HMAC-SHA256") }
            ctx = made
        }

        deinit { EVP_MAC_CTX_free(ctx) }

        /// The MAC of `prefix` followed by `message`, without joining them.
        public func authenticationCode(prefix: [UInt8], _ message: [UInt8]) -> [UInt8] {
            var out = [UInt8](repeating: 0, count: 32)
            let ok = withBytes(prefix) { p, pCount in
                withBytes(message) { m, mCount in out.withUnsafeMutableBufferPointer { doorbell_hmac_sha256(ctx, p, pCount, m, mCount, $0.baseAddress) } }
            }
            precondition(ok == 1, "libcrypto HMAC-SHA256 failed")
            return out
        }
    }
}

public enum SecureRandom {
    /// Bytes from libcrypto's DRBG, seeded from the kernel (getrandom).
    public static func bytes(_ count: Int) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        let ok = out.withUnsafeMutableBufferPointer { RAND_bytes($0.baseAddress, Int32($0.count)) }
        precondition(ok == 1 || count == 0, "libcrypto could not produce random bytes")
        return out
    }
}

/// libcrypto wants a valid pointer even for zero bytes, which an empty Swift array may not have.
@inline(__always)
func withBytes<R>(_ bytes: [UInt8], _ body: (UnsafePointer<UInt8>, Int) -> R) -> R {
    if bytes.isEmpty {
        var zero: UInt8 = 0
        return withUnsafePointer(to: &zero) { body($0, 0) }
    }
    return bytes.withUnsafeBufferPointer { body($0.baseAddress!, $0.count) } // non-empty: has storage
}
