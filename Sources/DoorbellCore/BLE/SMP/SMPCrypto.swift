import CCrypto

// The cryptographic toolbox of LE Secure Connections pairing (Bluetooth Core 5.x, Vol 3 Part H
// §2.2): AES-CMAC and the functions built on it (f4 confirm values, f5 MacKey and LTK, f6 DHKey
// checks, g2 numeric comparison), ah for resolvable private addresses, and P-256 ECDH. The
// primitives are libcrypto's (already in the process for TLS); the compositions are hand-written
// from §2.2 because they are a few lines each and no Swift package on Linux provides them.
//
// Byte order — the one thing that goes wrong here. Every value in this file is a byte string
// MOST significant octet first, exactly as the specification's tables and Appendix D print it
// (and as libcrypto reads keys and blocks). SMP PDUs carry the same values LEAST significant
// octet first: whoever reads or writes a PDU reverses the field (`SMPCrypto.air(_:)`), never
// the functions here. Addresses are MSB first too (as `BLEAdvertisingReport.address`), and f5/f6
// take them as the 56-bit field `type ‖ address` (`addressField`).

public enum SMPCryptoError: Error, Sendable, Equatable, CustomStringConvertible {
    case invalidPublicKey
    case keyGenerationFailed

    public var description: String {
        switch self {
        case .invalidPublicKey:
            "the peer's P-256 public key is not a point on the curve: pairing aborted (an invalid or malicious key; the phone must pair again)"
        case .keyGenerationFailed:
            "libcrypto could not generate a P-256 key pair; check that OpenSSL 3 with its default provider is installed"
        }
    }
}

public enum SMPCrypto {
    /// AES-CMAC (RFC 4493) with a 128-bit key.
    public static func aesCMAC(key: [UInt8], _ message: [UInt8]) -> [UInt8] {
        precondition(key.count == 16, "AES-CMAC key is 16 octets")
        var out = [UInt8](repeating: 0, count: 16)
        let ok = withBytes(key) { k, _ in withBytes(message) { m, n in
            out.withUnsafeMutableBufferPointer { doorbell_aes_cmac(k, m, n, $0.baseAddress) }
        } }
        precondition(ok == 1, "libcrypto AES-CMAC failed")
        return out
    }

    /// The security function e: AES-128 of one 16-octet block.
    public static func e(key: [UInt8], _ block: [UInt8]) -> [UInt8] {
        precondition(key.count == 16 && block.count == 16, "e takes a 16-octet key and block")
        var out = [UInt8](repeating: 0, count: 16)
        let ok = withBytes(key) { k, _ in withBytes(block) { b, _ in
            out.withUnsafeMutableBufferPointer { doorbell_aes128_block(k, b, $0.baseAddress) }
        } }
        precondition(ok == 1, "libcrypto AES-128 failed")
        return out
    }

    /// f4(U, V, X, Z) = AES-CMAC_X(U ‖ V ‖ Z): the confirm value. U, V are public key X
    /// coordinates (32 octets), X a nonce (16), Z one octet (0 for Just Works).
    public static func f4(u: [UInt8], v: [UInt8], x: [UInt8], z: UInt8) -> [UInt8] {
        precondition(u.count == 32 && v.count == 32, "f4's U and V are 32 octets")
        return aesCMAC(key: x, u + v + [z])
    }

    static let f5Salt: [UInt8] = [0x6C, 0x88, 0x83, 0x91, 0xAA, 0xF5, 0xA5, 0x38, 0x60, 0x37, 0x0B, 0xDB, 0x5A, 0x60, 0x83, 0xBE]
    static let f5KeyID: [UInt8] = Array("btle".utf8)

    /// f5(W, N1, N2, A1, A2): MacKey and LTK from the DHKey W (32), the initiator's and
    /// responder's nonces (16 each) and addresses (7 each, `addressField`).
    public static func f5(w: [UInt8], n1: [UInt8], n2: [UInt8], a1: [UInt8], a2: [UInt8]) -> (macKey: [UInt8], ltk: [UInt8]) {
        precondition(w.count == 32 && n1.count == 16 && n2.count == 16 && a1.count == 7 && a2.count == 7, "f5 field sizes")
        let t = aesCMAC(key: f5Salt, w)
        // keyID ‖ N1 ‖ N2 ‖ A1 ‖ A2 ‖ Length (256, 2 octets), appended in steps for Swift 6.2's type checker.
        var tail = f5KeyID
        for part in [n1, n2, a1, a2, [0x01, 0x00]] { tail += part }
        return (aesCMAC(key: t, [0] + tail), aesCMAC(key: t, [1] + tail))
    }

    /// f6(W, N1, N2, R, IOcap, A1, A2) = AES-CMAC_W(N1 ‖ N2 ‖ R ‖ IOcap ‖ A1 ‖ A2): the DHKey
    /// check. IOcap is AuthReq ‖ OOB flag ‖ IO capability, in that order (3 octets).
    public static func f6(w: [UInt8], n1: [UInt8], n2: [UInt8], r: [UInt8], ioCap: [UInt8], a1: [UInt8], a2: [UInt8]) -> [UInt8] {
        precondition(n1.count == 16 && n2.count == 16 && r.count == 16 && ioCap.count == 3 && a1.count == 7 && a2.count == 7, "f6 field sizes")
        return aesCMAC(key: w, n1 + n2 + r + ioCap + a1 + a2)
    }

    /// g2(U, V, X, Y) = AES-CMAC_X(U ‖ V ‖ Y) mod 2³²: the six-digit number of numeric
    /// comparison is this mod 10⁶.
    public static func g2(u: [UInt8], v: [UInt8], x: [UInt8], y: [UInt8]) -> UInt32 {
        precondition(u.count == 32 && v.count == 32 && y.count == 16, "g2 field sizes")
        let m = aesCMAC(key: x, u + v + y)
        return m[12...].reduce(0) { $0 << 8 | UInt32($1) }
    }

    /// ah(k, r) = e(k, 0¹⁰⁴ ‖ r) mod 2²⁴: the hash half of a resolvable private address.
    public static func ah(irk: [UInt8], prand: [UInt8]) -> [UInt8] {
        precondition(prand.count == 3, "prand is 3 octets")
        return Array(e(key: irk, [UInt8](repeating: 0, count: 13) + prand)[13...])
    }

    /// The 56-bit address field of f5 and f6: 0 public / 1 random, then the address MSB first.
    public static func addressField(type: UInt8, address: [UInt8]) -> [UInt8] {
        precondition(address.count == 6, "an address is 6 octets")
        return [type & 1] + address
    }

    /// A value as it goes on the air (LSB first) from the spec's order, and back: the same reversal.
    public static func air(_ value: some Collection<UInt8>) -> [UInt8] { value.reversed() }
}

/// An ephemeral P-256 key pair for one pairing (Secure Connections makes a new one each time
/// it may; the private half never leaves libcrypto).
public final class P256KeyPair: @unchecked Sendable {
    private let pkey: OpaquePointer
    /// X ‖ Y, 32 octets each, MSB first.
    public let publicKey: [UInt8]

    public init() throws(SMPCryptoError) {
        var xy = [UInt8](repeating: 0, count: 64)
        guard let p = xy.withUnsafeMutableBufferPointer({ doorbell_p256_generate($0.baseAddress) }) else { throw .keyGenerationFailed }
        pkey = p
        publicKey = xy
    }

    deinit { EVP_PKEY_free(pkey) }

    /// The DHKey (the shared point's X coordinate, 32 octets MSB first) with the peer's X ‖ Y.
    /// A point not on the curve (or the point at infinity, or the wrong size) is refused: an
    /// invalid-curve attack would otherwise leak the private key.
    public func dhKey(peerPublicKey: [UInt8]) throws(SMPCryptoError) -> [UInt8] {
        guard peerPublicKey.count == 64 else { throw .invalidPublicKey }
        var secret = [UInt8](repeating: 0, count: 32)
        let ok = withBytes(peerPublicKey) { peer, _ in
            secret.withUnsafeMutableBufferPointer { doorbell_p256_derive(pkey, peer, $0.baseAddress) }
        }
        guard ok == 1 else { throw .invalidPublicKey }
        return secret
    }
}
