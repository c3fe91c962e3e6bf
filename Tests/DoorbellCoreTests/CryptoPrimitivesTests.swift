import DoorbellCore
import PropertyBased
import Testing

// The primitives the agent takes from libcrypto, checked against their specifications' vectors.
@Suite struct CryptoPrimitivesTests {
    @Test func sha256MatchesFIPS180Vector() {
        #expect(hexString(SHA256.hash(Array("abc".utf8))) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(hexString(SHA256.hash([])) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    @Test func hmacMatchesRFC4231TestCase2() {
        let mac = HMACSHA256.authenticationCode(Array("what do ya want for nothing?".utf8), key: Array("Jefe".utf8))
        #expect(hexString(mac) == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    }

    @Test(arguments: [
        ("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60", "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", "",
         "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"),
        ("4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb", "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", "72",
         "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"),
    ])
    func ed25519MatchesRFC8032Vectors(seed: String, publicKey: String, message: String, signature: String) throws {
        let key = try Ed25519SigningKey(seed: hexBytes(seed))
        #expect(hexString(key.publicKey) == publicKey)
        let sig = try key.signature(for: hexBytes(message))
        #expect(hexString(sig) == signature)
        #expect(Ed25519.isValidSignature(sig, for: hexBytes(message), publicKey: key.publicKey))
        #expect(!Ed25519.isValidSignature(sig, for: hexBytes(message) + [0], publicKey: key.publicKey))
    }

    /// The keyed HMAC context set up once and the one parsed device key, used for every message
    /// (the uplink signs every delivery with them), give what a fresh one-shot computation gives,
    /// message after message.
    @Test func reusedContextsSignLikeFreshOnes() async throws {
        let hmacKey = Array("a webhook secret of 24 b".utf8)
        let keyed = HMACSHA256.Keyed(key: hmacKey)
        let deviceKey = try Ed25519SigningKey(seed: [UInt8](repeating: 0x42, count: 32))
        let signer = deviceKey
        await propertyCheck(input: Gen.int(in: 0...255).array(of: 0...40), Gen.int(in: 0...255).array(of: 0...300)) { p, b in
            let prefix = p.map { UInt8($0) }, body = b.map { UInt8($0) }
            #expect(keyed.authenticationCode(prefix: prefix, body) == HMACSHA256.authenticationCode(prefix + body, key: hmacKey))
            let reused = try signer.signature(for: prefix + body), fresh = try Ed25519SigningKey(seed: deviceKey.seed).signature(for: prefix + body)
            #expect(reused == fresh)
        }
    }

    @Test func ed25519RefusesAKeyOfTheWrongLength() {
        #expect(throws: Ed25519Error.self) { try Ed25519SigningKey(seed: [UInt8](repeating: 1, count: 31)) }
        #expect(!Ed25519.isValidSignature([UInt8](repeating: 0, count: 64), for: [], publicKey: [1, 2, 3]))
    }

    @Test func newKeysDiffer() {
        #expect(Ed25519SigningKey().seed != Ed25519SigningKey().seed)
    }

    @Test func aesCCMHandlesAnEmptyPayload() throws {
        let key = [UInt8](repeating: 7, count: 16), nonce = [UInt8](repeating: 1, count: 13)
        let sealed = try AESCCM.encrypt([], key: key, nonce: nonce, tagLength: 4)
        #expect(sealed.count == 4)
        #expect(try AESCCM.decrypt(sealed, key: key, nonce: nonce, tagLength: 4) == [])
        #expect(throws: AESCCM.Failure.authenticationFailed) { try AESCCM.decrypt(sealed.map { $0 ^ 1 }, key: key, nonce: nonce, tagLength: 4) }
        #expect(throws: AESCCM.Failure.badParameters) { try AESCCM.decrypt([1, 2], key: key, nonce: nonce, tagLength: 4) }
        #expect(throws: AESCCM.Failure.badParameters) { try AESCCM.encrypt([1], key: [1, 2, 3], nonce: nonce, tagLength: 4) }
    }

    @Test func aesCCMRoundTripsAnyPayloadWithAnyKeySize() async {
        await propertyCheck(input: Gen.int(in: 0...255).array(of: 0...80), Gen.int(in: 0...2)) { bytes, size in
            let payload = bytes.map { UInt8($0) }
            let key = [UInt8](repeating: 0x5A, count: [16, 24, 32][size])
            let nonce = Array(payload.prefix(13)) + [UInt8](repeating: 9, count: 13 - min(13, payload.count))
            let sealed = try AESCCM.encrypt(payload, key: key, nonce: nonce, tagLength: 8)
            #expect(sealed.count == payload.count + 8)
            #expect(try AESCCM.decrypt(sealed, key: key, nonce: nonce, tagLength: 8) == payload)
        }
    }

    @Test(arguments: [("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="), ("fooba", "Zm9vYmE="), ("foobar", "Zm9vYmFy")])
    func base64MatchesRFC4648Vectors(plain: String, encoded: String) {
        #expect(Base64.encode(Array(plain.utf8)) == encoded)
        #expect(Base64.decode(encoded) == Array(plain.utf8))
    }

    @Test(arguments: ["Zg=", "Zh==", "Zm9=", "Zm9v\n", "Zm=v", "Z===", "Zm9vYg==Zm9v", "Zm9v YmFy", "Zm9vYmF_"])
    func base64RefusesNonCanonicalText(text: String) {
        #expect(Base64.decode(text) == nil)
    }

    @Test func base64RoundTripsAnyBytes() async {
        await propertyCheck(input: Gen.int(in: 0...255).array(of: 0...100)) { ints in
            let bytes = ints.map { UInt8($0) }
            #expect(Base64.decode(Base64.encode(bytes)) == bytes)
        }
    }
}

@Suite struct HexTests {
    @Test func hexAgreesWithTheByteByByteFormatting() async {
        await propertyCheck(input: Gen.int(in: 0...255).array(of: 0...40)) { ints in
            let bytes = ints.map { UInt8($0) }
            #expect(Hex.encode(bytes) == hexString(bytes))
            #expect(Hex.encode(bytes, uppercase: true, separator: UInt8(ascii: ":")) == bytes.map { hexString([$0]).uppercased() }.joined(separator: ":"))
        }
    }

    @Test func decodeIsTheInverseOfEncodeInEitherCase() async {
        await propertyCheck(input: Gen.int(in: 0...255).array(of: 0...40)) { ints in
            let bytes = ints.map { UInt8($0) }
            #expect(Hex.decode(Hex.encode(bytes)) == bytes)
            #expect(Hex.decode(Hex.encode(bytes, uppercase: true)) == bytes)
        }
    }

    /// One strict reader: what Int(_:radix:) would let through (a sign) is not hex here.
    @Test(arguments: ["f", "+f", "-1", " 0a", "0a ", "0x0a", "g0", "é0"]) func decodeRefusesWhatIsNotPlainHex(_ text: String) {
        #expect(Hex.decode(text) == nil)
    }

    @Test func addressesAndUUIDsAreStrict() {
        #expect(BLEAdvertisingReport.parse(address: "c0:11:22:33:44:0A") == [0xC0, 0x11, 0x22, 0x33, 0x44, 0x0A])
        #expect(BLEAdvertisingReport.parse(address: "+0:11:22:33:44:0A") == nil)
        #expect(BLEAdvertisingReport.parse(address: "C0:11:22:33:44") == nil)
        #expect(BLEAdvertisingReport.parse(address: "C0:11:22:33:44:0A:") == nil)
        #expect(IBeacon.parse(uuid: "e2c56db5dffb48d2b060d0f5a71096e0") == IBeacon.parse(uuid: "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0"))
        #expect(IBeacon.parse(uuid: "E2C56DB5-DFFB-48D2-B060-D0F5A71096E") == nil)
    }

    @Test func uuidsAndAddressesReadAsUsual() {
        #expect(IBeacon.format(uuid: hexBytes("E2C56DB5DFFB48D2B060D0F5A71096E0")) == "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")
        #expect(DeviceKey.keyID([UInt8](repeating: 0, count: 32)).count == 16)
    }
}
