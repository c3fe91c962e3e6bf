#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import DoorbellCore
import PropertyBased
import Testing

/// The pairing responder driven by an initiator written here from the same SMPCrypto functions
/// (the phone's side of LE Secure Connections Just Works), on a fake clock.
struct SMPResponderTests {
    static let baseStation = BLEIdentityAddress(type: 0, address: [0xB8, 0x27, 0xEB, 0x12, 0x34, 0x56])
    /// The phone's resolvable private address for this connection, and its identity.
    static let phoneRPA = BLEIdentityAddress(type: 1, address: [0x70, 0x81, 0x94, 0x0D, 0xFB, 0xAA])
    static let phoneIdentity = BLEIdentityAddress(type: 0, address: [0x3C, 0x22, 0xFB, 0x00, 0x11, 0x22])
    static let phoneIRK: [UInt8] = SMPCryptoTests.h("ec0234a3 57c8ad05 341010a6 0a397d9b")
    /// What iOS sends: KeyboardDisplay, bonding + MITM + SC + CT2, all keys both ways.
    static let iOSRequest = SMPPairingParameters(ioCapability: 0x04, oobDataFlag: 0, authReq: 0x2D, maxKeySize: 16, initiatorKeys: 0x07, responderKeys: 0x07)

    /// The phone: a key pair, a nonce, and the checks an initiator makes.
    struct Phone {
        let keys: P256KeyPair
        let nonce: [UInt8] = Array(1...16)
        var request = SMPResponderTests.iOSRequest
        var responderKey: [UInt8] = []
        var confirm: [UInt8] = []
        var response: SMPPairingParameters?

        init() throws { keys = try P256KeyPair() }

        var publicKeyPDU: SMPPDU { .pairingPublicKey(x: Array(keys.publicKey[..<32]), y: Array(keys.publicKey[32...])) }

        func dhKeyCheck(responderNonce nb: [UInt8]) throws -> (ea: [UInt8], eb: [UInt8], ltk: [UInt8]) {
            let w = try keys.dhKey(peerPublicKey: responderKey)
            let a = SMPResponderTests.phoneRPA.field, b = SMPResponderTests.baseStation.field
            let (macKey, ltk) = SMPCrypto.f5(w: w, n1: nonce, n2: nb, a1: a, a2: b)
            let zero = [UInt8](repeating: 0, count: 16)
            let ea = SMPCrypto.f6(w: macKey, n1: nonce, n2: nb, r: zero, ioCap: request.ioCapField, a1: a, a2: b)
            let eb = SMPCrypto.f6(w: macKey, n1: nb, n2: nonce, r: zero, ioCap: response?.ioCapField ?? [0x09, 0, 0x03], a1: b, a2: a)
            return (ea, eb, ltk)
        }
    }

    static func responder(nonce: [UInt8] = Array(repeating: 0x5A, count: 16)) throws -> SMPResponder {
        SMPResponder(local: baseStation, peer: phoneRPA, keyPair: try P256KeyPair(), nonce: nonce)
    }

    @Test func aPhonePairsAndBondsWithItsIdentity() throws {
        var phone = try Phone()
        var r = try Self.responder()
        var t: Int64 = 0
        func send(_ pdu: SMPPDU) -> SMPResponder.Step { t += 50_000; return r.received(pdu.bytes, at: t) }

        // Pairing Request → Pairing Response: Just Works, SC, bonding, only the phone's identity.
        let s1 = send(.pairingRequest(phone.request))
        let expected = SMPPairingParameters(ioCapability: 0x03, oobDataFlag: 0, authReq: 0x09, maxKeySize: 16, initiatorKeys: 0x02, responderKeys: 0)
        #expect(s1 == SMPResponder.Step(send: [.pairingResponse(expected)]))
        phone.response = expected

        // Public keys, then the responder's confirm Cb = f4(PKbx, PKax, Nb, 0).
        let s2 = send(phone.publicKeyPDU)
        try #require(s2.send.count == 2 && s2.outcome == nil)
        guard case let .pairingPublicKey(x, y) = s2.send[0], case let .pairingConfirm(cb) = s2.send[1] else {
            Issue.record("expected the public key and the confirm, got \(s2.send)")
            return
        }
        phone.responderKey = x + y
        phone.confirm = cb

        // Nonces: the phone checks Cb against Nb.
        let s3 = send(.pairingRandom(phone.nonce))
        guard case let .pairingRandom(nb)? = s3.send.first else { Issue.record("no Pairing Random: \(s3)"); return }
        #expect(SMPCrypto.f4(u: x, v: Array(phone.keys.publicKey[..<32]), x: nb, z: 0) == phone.confirm, "Cb verifies")

        // DHKey checks both ways; the LTK is the one the phone derived.
        let (ea, eb, ltk) = try phone.dhKeyCheck(responderNonce: nb)
        let s4 = send(.pairingDHKeyCheck(ea))
        #expect(s4 == SMPResponder.Step(send: [.pairingDHKeyCheck(eb)], outcome: .encryptionKey(ltk)))

        // Encrypted: the phone distributes its IRK and identity address.
        #expect(r.encrypted(at: t) == SMPResponder.Step())
        #expect(send(.identityInformation(irk: Self.phoneIRK)) == SMPResponder.Step())
        let s5 = send(.identityAddressInformation(Self.phoneIdentity))
        let bond = SMPBond(ltk: ltk, peerIRK: Self.phoneIRK, peerIdentity: Self.phoneIdentity, authenticated: false)
        #expect(s5 == SMPResponder.Step(outcome: .paired(bond)))
        #expect(r.isFinished && r.deadline == nil)
    }

    /// A whole pairing as air bytes (`smp-just-works.transcript`): recorded from a run of the
    /// responder (RECORD_GOLDEN=1), checked here with SMPCrypto and by Tests/helpers/smp_reference.py
    /// with Bumble's own PDU parser and crypto — the byte order and every composition agree.
    @Test func theRecordedTranscriptVerifies() throws {
        if ProcessInfo.processInfo.environment["RECORD_GOLDEN"] == "1" { try Self.recordTranscript() }
        var t: [String: [UInt8]] = [:]
        for line in try Golden.read("smp-just-works.transcript").split(separator: "\n") where !line.hasPrefix("#") {
            let parts = line.split(separator: " ")
            t[String(parts[0])] = hexBytes(parts[1])
        }
        func pdu(_ name: String) throws -> SMPPDU { try SMPPDU(parsing: try #require(t[name], "\(name) missing")) }
        guard case let .pairingRequest(req) = try pdu("pairing_request"), case let .pairingResponse(res) = try pdu("pairing_response"),
              case let .pairingPublicKey(pkax, _) = try pdu("public_key_initiator"), case let .pairingPublicKey(pkbx, _) = try pdu("public_key_responder"),
              case let .pairingConfirm(cb) = try pdu("pairing_confirm"), case let .pairingRandom(na) = try pdu("random_initiator"),
              case let .pairingRandom(nb) = try pdu("random_responder"), case let .pairingDHKeyCheck(ea) = try pdu("dhkey_check_initiator"),
              case let .pairingDHKeyCheck(eb) = try pdu("dhkey_check_responder"), let w = t["dhkey"], let a = t["initiator_address"], let b = t["responder_address"]
        else { Issue.record("transcript does not parse"); return }
        #expect(SMPCrypto.f4(u: pkbx, v: pkax, x: nb, z: 0) == cb)
        let (macKey, ltk) = SMPCrypto.f5(w: w, n1: na, n2: nb, a1: a, a2: b)
        let zero = [UInt8](repeating: 0, count: 16)
        #expect(SMPCrypto.f6(w: macKey, n1: na, n2: nb, r: zero, ioCap: req.ioCapField, a1: a, a2: b) == ea)
        #expect(SMPCrypto.f6(w: macKey, n1: nb, n2: na, r: zero, ioCap: res.ioCapField, a1: b, a2: a) == eb)
        #expect(ltk == t["ltk"])
    }

    static func recordTranscript() throws {
        var phone = try Phone()
        var r = try Self.responder(nonce: SecureRandom.bytes(16))
        var lines = ["# LE Secure Connections Just Works, the phone (initiator) against SMPResponder: each PDU as",
                     "# its air bytes (code, fields least significant octet first); addresses (type ‖ address),",
                     "# DHKey and LTK most significant octet first. Re-record: RECORD_GOLDEN=1 swift test --filter SMPResponderTests"]
        func line(_ name: String, _ bytes: [UInt8]) { lines.append("\(name) \(hexString(bytes))") }
        line("initiator_address", phoneRPA.field)
        line("responder_address", baseStation.field)
        let request = SMPPDU.pairingRequest(phone.request)
        line("pairing_request", request.bytes)
        let s1 = r.received(request.bytes, at: 0)
        line("pairing_response", s1.send[0].bytes)
        if case let .pairingResponse(p) = s1.send[0] { phone.response = p }
        line("public_key_initiator", phone.publicKeyPDU.bytes)
        let s2 = r.received(phone.publicKeyPDU.bytes, at: 1)
        line("public_key_responder", s2.send[0].bytes)
        line("pairing_confirm", s2.send[1].bytes)
        if case let .pairingPublicKey(x, y) = s2.send[0] { phone.responderKey = x + y }
        let na = SMPPDU.pairingRandom(phone.nonce)
        line("random_initiator", na.bytes)
        let s3 = r.received(na.bytes, at: 2)
        line("random_responder", s3.send[0].bytes)
        guard case let .pairingRandom(nb) = s3.send[0] else { return }
        let (ea, _, ltk) = try phone.dhKeyCheck(responderNonce: nb)
        line("dhkey_check_initiator", SMPPDU.pairingDHKeyCheck(ea).bytes)
        let s4 = r.received(SMPPDU.pairingDHKeyCheck(ea).bytes, at: 3)
        line("dhkey_check_responder", s4.send[0].bytes)
        line("dhkey", try phone.keys.dhKey(peerPublicKey: phone.responderKey))
        line("ltk", ltk)
        try (lines.joined(separator: "\n") + "\n").write(toFile: Golden.fixtures + "/smp-just-works.transcript", atomically: true, encoding: .utf8)
    }

    @Test func aPhoneThatSendsNoIdentityIsBondedUnderItsAddress() throws {
        var phone = try Phone()
        phone.request.initiatorKeys = 0x01
        var r = try Self.responder()
        _ = r.received(SMPPDU.pairingRequest(phone.request).bytes, at: 0)
        phone.response = SMPPairingParameters(ioCapability: 0x03, oobDataFlag: 0, authReq: 0x09, maxKeySize: 16, initiatorKeys: 0, responderKeys: 0)
        let s2 = r.received(phone.publicKeyPDU.bytes, at: 1)
        guard case let .pairingPublicKey(x, y) = s2.send.first else { Issue.record("\(s2)"); return }
        phone.responderKey = x + y
        guard case let .pairingRandom(nb)? = r.received(SMPPDU.pairingRandom(phone.nonce).bytes, at: 2).send.first else { Issue.record("no random"); return }
        let (ea, _, ltk) = try phone.dhKeyCheck(responderNonce: nb)
        #expect(r.received(SMPPDU.pairingDHKeyCheck(ea).bytes, at: 3).outcome == .encryptionKey(ltk))
        #expect(r.encrypted(at: 4).outcome == .paired(SMPBond(ltk: ltk, peerIRK: nil, peerIdentity: Self.phoneRPA, authenticated: false)))
    }

    static func failure(_ step: SMPResponder.Step) -> SMPFailure? {
        if case let .failed(f)? = step.outcome { return f }
        return nil
    }

    @Test func legacyPairingIsRefusedWithAReason() throws {
        var r = try Self.responder()
        var legacy = Self.iOSRequest
        legacy.authReq = 0x05 // bonding + MITM, no Secure Connections
        let s = r.received(SMPPDU.pairingRequest(legacy).bytes, at: 0)
        #expect(s.send == [.pairingFailed(.authenticationRequirements)])
        #expect(Self.failure(s)?.description.contains("legacy") == true)
        #expect(r.isFinished && r.received(SMPPDU.pairingRequest(Self.iOSRequest).bytes, at: 1) == SMPResponder.Step())
    }

    @Test func shortKeysAndOutOfBandAreRefused() throws {
        var short = Self.iOSRequest
        short.maxKeySize = 7
        var r = try Self.responder()
        #expect(r.received(SMPPDU.pairingRequest(short).bytes, at: 0).send == [.pairingFailed(.encryptionKeySize)])
        var oob = Self.iOSRequest
        oob.oobDataFlag = 1
        r = try Self.responder()
        #expect(r.received(SMPPDU.pairingRequest(oob).bytes, at: 0).send == [.pairingFailed(.oobNotAvailable)])
    }

    @Test func anInvalidDebugOrReflectedPublicKeyAbortsPairing() throws {
        let phone = try Phone()
        var offCurve = phone.keys.publicKey
        offCurve[40] ^= 0x10
        let debug = SMPCryptoTests.u + SMPCryptoTests.h("dc809c49 652aeb6d 63329abf 5a52155c 766345c2 8fed3024 741c8ed0 1589d28b")
        for (key, reason) in [(offCurve, SMPFailureReason.dhKeyCheckFailed), (debug, .authenticationRequirements)] {
            var r = try Self.responder()
            _ = r.received(SMPPDU.pairingRequest(Self.iOSRequest).bytes, at: 0)
            let s = r.received(SMPPDU.pairingPublicKey(x: Array(key[..<32]), y: Array(key[32...])).bytes, at: 1)
            #expect(s.send == [.pairingFailed(reason)] && Self.failure(s)?.origin == .local)
        }
        // Our own key sent back.
        let keys = try P256KeyPair()
        var r = SMPResponder(local: Self.baseStation, peer: Self.phoneRPA, keyPair: keys, nonce: Array(repeating: 1, count: 16))
        _ = r.received(SMPPDU.pairingRequest(Self.iOSRequest).bytes, at: 0)
        let s = r.received(SMPPDU.pairingPublicKey(x: Array(keys.publicKey[..<32]), y: Array(keys.publicKey[32...])).bytes, at: 1)
        #expect(s.send == [.pairingFailed(.dhKeyCheckFailed)] && Self.failure(s)?.description.contains("reflection") == true)
    }

    @Test func aWrongDHKeyCheckFails() throws {
        var phone = try Phone()
        var r = try Self.responder()
        _ = r.received(SMPPDU.pairingRequest(phone.request).bytes, at: 0)
        guard case let .pairingPublicKey(x, y)? = r.received(phone.publicKeyPDU.bytes, at: 1).send.first else { Issue.record("no key"); return }
        phone.responderKey = x + y
        guard case let .pairingRandom(nb)? = r.received(SMPPDU.pairingRandom(phone.nonce).bytes, at: 2).send.first else { Issue.record("no random"); return }
        var (ea, _, _) = try phone.dhKeyCheck(responderNonce: nb)
        ea[0] ^= 1
        let s = r.received(SMPPDU.pairingDHKeyCheck(ea).bytes, at: 3)
        #expect(s.send == [.pairingFailed(.dhKeyCheckFailed)] && Self.failure(s)?.reason == .dhKeyCheckFailed)
    }

    @Test func pairingThatStallsFor30SecondsTimesOutAndSaysNothingMore() throws {
        var r = try Self.responder()
        _ = r.received(SMPPDU.pairingRequest(Self.iOSRequest).bytes, at: 1_000_000)
        #expect(r.deadline == 31_000_000)
        #expect(r.tick(at: 30_999_999) == SMPResponder.Step())
        let s = r.tick(at: 31_000_000)
        #expect(s.send.isEmpty && Self.failure(s)?.origin == .timeout)
        #expect(r.received(try Phone().publicKeyPDU.bytes, at: 31_000_001) == SMPResponder.Step())
    }

    @Test func thePhoneEndingPairingAndPDUsOutOfTurnAreFailures() throws {
        var r = try Self.responder()
        _ = r.received(SMPPDU.pairingRequest(Self.iOSRequest).bytes, at: 0)
        let s = r.received(SMPPDU.pairingFailed(.numericComparisonFailed).bytes, at: 1)
        #expect(s.send.isEmpty && Self.failure(s)?.origin == .peer && Self.failure(s)?.reason == .numericComparisonFailed)

        var early = try Self.responder()
        let e = early.received(SMPPDU.pairingConfirm(Array(repeating: 0, count: 16)).bytes, at: 0)
        #expect(e.send == [.pairingFailed(.unspecifiedReason)])
        var garbled = try Self.responder()
        #expect(garbled.received([0x01, 0x04], at: 0).send == [.pairingFailed(.invalidParameters)])
        var unknown = try Self.responder()
        #expect(unknown.received([0x42], at: 0).send == [.pairingFailed(.commandNotSupported)])
    }

    @Test func pdusReadBackToTheirBytesAndGarbageNeverTraps() async throws {
        let key = try P256KeyPair().publicKey
        let pdus: [SMPPDU] = [
            .pairingRequest(Self.iOSRequest), .pairingConfirm(Array(1...16)), .pairingFailed(.repeatedAttempts),
            .identityAddressInformation(Self.phoneIdentity), .pairingPublicKey(x: Array(key[..<32]), y: Array(key[32...])),
            .centralIdentification(ediv: 0x1234, rand: Array(1...8)), .securityRequest(authReq: 0x09),
        ]
        for p in pdus { #expect((try? SMPPDU(parsing: p.bytes)) == p) }
        // Air order: the address goes least significant octet first.
        #expect(SMPPDU.identityAddressInformation(Self.phoneIdentity).bytes == [0x09, 0x00, 0x22, 0x11, 0x00, 0xFB, 0x22, 0x3C])
        await propertyCheck(input: Gen.int(in: 0...255).array(of: 0...70)) { ints in
            let bytes = ints.map { UInt8($0) }
            if let pdu = try? SMPPDU(parsing: bytes) { #expect(pdu.bytes == bytes) }
        }
    }
}
