import DoorbellCore
import Testing

/// LE Secure Connections crypto against the Core specification's own sample data (Vol 3 Part H
/// Appendix D, printed most significant octet first — the order SMPCrypto uses) and RFC 4493.
/// The same values were checked against Bumble's independent implementation (bumble.crypto,
/// which works least significant octet first) when this test was written.
struct SMPCryptoTests {
    static func h(_ s: String) -> [UInt8] { hexBytes(s.filter { $0 != " " }) }

    // Appendix D.2–D.5 share these.
    static let u = h("20b003d2 f297be2c 5e2c83a7 e9f9a5b9 eff49111 acf4fddb cc030148 0e359de6")
    static let v = h("55188b3d 32f6bb9a 900afcfb eed4e72a 59cb9ac2 f19d7cfb 6b4fdd49 f47fc5fd")
    static let n1 = h("d5cb8454 d177733e ffffb2ec 712baeab")
    static let n2 = h("a6e8e7cc 25a75f6e 216583f7 ff3dc4cf")
    static let w = h("ec0234a3 57c8ad05 341010a6 0a397d9b 99796b13 b4f866f1 868d34f3 73bfa698")
    static let a1 = h("00561237 37bfce")
    static let a2 = h("00a71370 2dcfc1")
    static let macKey = h("2965f176 a1084a02 fd3f6a20 ce636e20")

    @Test func aesCMACMatchesRFC4493AndAppendixD1() {
        let key = Self.h("2b7e1516 28aed2a6 abf71588 09cf4f3c")
        let m = Self.h("6bc1bee2 2e409f96 e93d7e11 7393172a ae2d8a57 1e03ac9c 9eb76fac 45af8e51 30c81c46 a35ce411 e5fbc119 1a0a52ef f69f2445 df4f9b17 ad2b417b e66c3710")
        let vectors: [(Int, String)] = [
            (0, "bb1d6929 e9593728 7fa37d12 9b756746"),
            (16, "070a16b4 6b4d4144 f79bdd9d d04a287c"),
            (40, "dfa66747 de9ae630 30ca3261 1497c827"),
            (64, "51f0bebf 7e3b9d92 fc497417 79363cfe"),
        ]
        for (length, mac) in vectors {
            #expect(SMPCrypto.aesCMAC(key: key, Array(m[..<length])) == Self.h(mac), "RFC 4493 example with \(length) octets")
        }
    }

    @Test func f4MatchesAppendixD2() {
        #expect(SMPCrypto.f4(u: Self.u, v: Self.v, x: Self.n1, z: 0) == Self.h("f2c916f1 07a9bd1c f1eda1be a974872d"))
    }

    @Test func f5MatchesAppendixD3() {
        let (macKey, ltk) = SMPCrypto.f5(w: Self.w, n1: Self.n1, n2: Self.n2, a1: Self.a1, a2: Self.a2)
        #expect(macKey == Self.macKey)
        #expect(ltk == Self.h("69867911 69d7cd23 980522b5 94750a38"))
    }

    @Test func f6MatchesAppendixD4() {
        let r = Self.h("12a3343b b453bb54 08da42d2 0c2d0fc8")
        #expect(SMPCrypto.f6(w: Self.macKey, n1: Self.n1, n2: Self.n2, r: r, ioCap: [0x01, 0x01, 0x02], a1: Self.a1, a2: Self.a2)
                == Self.h("e3c47398 9cd0e8c5 d26c0b09 da958f61"))
    }

    @Test func g2MatchesAppendixD5() {
        #expect(SMPCrypto.g2(u: Self.u, v: Self.v, x: Self.n1, y: Self.n2) == 0x2F9E_D5BA)
        #expect(SMPCrypto.g2(u: Self.u, v: Self.v, x: Self.n1, y: Self.n2) % 1_000_000 == 0x2F9E_D5BA % 1_000_000)
    }

    @Test func ahMatchesAppendixD7AndResolvesThePrivateAddress() {
        let irk = Self.h("ec0234a3 57c8ad05 341010a6 0a397d9b")
        #expect(SMPCrypto.ah(irk: irk, prand: Self.h("708194")) == Self.h("0dfbaa"))
        // The address the phone would use: prand ‖ hash, MSB first (70:81:94:0D:FB:AA); the bonds
        // keep the IRK in air order.
        let bonds = PhoneBonds([PhoneBond(address: Self.h("3c22fb 001122"), addressIsRandom: false, irk: Array(irk.reversed()),
                                          ltk: Array(repeating: 0, count: 16), name: "", bondedAtMicros: 0)])
        #expect(bonds.resolve(address: Self.h("708194 0dfbaa"), isRandom: true) != nil)
        #expect(bonds.resolve(address: Self.h("708194 0dfbab"), isRandom: true) == nil, "another hash")
        #expect(bonds.resolve(address: Self.h("308194 0dfbaa"), isRandom: true) == nil, "top bits 00: not resolvable")
        #expect(bonds.resolve(address: Self.h("708194 0dfbaa"), isRandom: false) == nil, "the same bytes as a public address")
    }

    @Test func addressFieldsAndAirOrder() {
        #expect(SMPCrypto.addressField(type: 0, address: Self.h("561237 37bfce")) == Self.a1)
        #expect(SMPCrypto.addressField(type: 1, address: Self.h("c1cf2d 7013a7")) == Self.h("01c1cf2d 7013a7"))
        #expect(SMPCrypto.air(Self.h("0102 03")) == [3, 2, 1])
    }

    @Test func twoKeyPairsAgreeOnTheDHKey() throws {
        let a = try P256KeyPair()
        let b = try P256KeyPair()
        #expect(a.publicKey.count == 64 && a.publicKey != b.publicKey)
        let ab = try a.dhKey(peerPublicKey: b.publicKey)
        #expect(ab.count == 32)
        #expect(ab == (try b.dhKey(peerPublicKey: a.publicKey)))
    }

    @Test func theSpecificationsDebugPublicKeyIsAValidPoint() throws {
        // Vol 3 Part H §2.3.5.6.1; its private key is public, so a responder must not accept
        // it outside debug mode — the pairing machine refuses it, the curve check must not.
        let debug = Self.u + Self.h("dc809c49 652aeb6d 63329abf 5a52155c 766345c2 8fed3024 741c8ed0 1589d28b")
        #expect((try P256KeyPair().dhKey(peerPublicKey: debug)).count == 32)
    }

    @Test func aPublicKeyNotOnTheCurveIsRefused() throws {
        let own = try P256KeyPair()
        var offCurve = try P256KeyPair().publicKey
        offCurve[63] ^= 0x01
        #expect(throws: SMPCryptoError.invalidPublicKey) { try own.dhKey(peerPublicKey: offCurve) }
        #expect(throws: SMPCryptoError.invalidPublicKey) { try own.dhKey(peerPublicKey: [UInt8](repeating: 0, count: 64)) }
        #expect(throws: SMPCryptoError.invalidPublicKey) { try own.dhKey(peerPublicKey: Array(offCurve.prefix(63))) }
        #expect(SMPCryptoError.invalidPublicKey.description.contains("pairing aborted"))
    }
}
