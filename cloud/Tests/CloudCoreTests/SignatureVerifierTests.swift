import CloudCore
import Crypto
import Testing

@Suite struct SignatureVerifierTests {
    // The Standard Webhooks specification's published test vector.
    static let vectorSecret = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"
    static let vectorID = "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk"
    static let vectorTimestamp = "1649367553"
    static let vectorBody = Array(#"{"email":"test@example.com","username":"test_user"}"#.utf8)
    static let vectorSignature = "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw="

    static func hmacVerifier() throws -> SignatureVerifier {
        SignatureVerifier(keys: try GatewayKeys(secret: WebhookSecret(parsing: vectorSecret), publicKey: nil))
    }

    @Test func v1PublishedVectorVerifies() throws {
        let verified = try Self.hmacVerifier().verifiedVersions(
            id: Self.vectorID, timestamp: Self.vectorTimestamp, body: Self.vectorBody,
            signatureHeader: Self.vectorSignature)
        #expect(verified == [.v1])
    }

    @Test func v1SigningReproducesPublishedVector() throws {
        let signature = SignatureVerifier.v1Signature(
            secret: try WebhookSecret(parsing: Self.vectorSecret), id: Self.vectorID,
            timestamp: Self.vectorTimestamp, body: Self.vectorBody)
        #expect(signature == Self.vectorSignature)
    }

    @Test func v1FailsWhenAnySignedPartChanges() throws {
        let verifier = try Self.hmacVerifier()
        var body = Self.vectorBody
        body.append(UInt8(ascii: " "))
        #expect(verifier.verifiedVersions(id: Self.vectorID, timestamp: Self.vectorTimestamp, body: body,
                                          signatureHeader: Self.vectorSignature).isEmpty)
        #expect(verifier.verifiedVersions(id: Self.vectorID, timestamp: "1649367554", body: Self.vectorBody,
                                          signatureHeader: Self.vectorSignature).isEmpty)
        #expect(verifier.verifiedVersions(id: "msg_other", timestamp: Self.vectorTimestamp, body: Self.vectorBody,
                                          signatureHeader: Self.vectorSignature).isEmpty)
    }

    @Test func v1IsFoundAmongOtherEntries() throws {
        let header = "v2,bm90aGluZw== v1,AAAA   v1,not-base64! \(Self.vectorSignature) v1a,AAAA"
        let verified = try Self.hmacVerifier().verifiedVersions(
            id: Self.vectorID, timestamp: Self.vectorTimestamp, body: Self.vectorBody, signatureHeader: header)
        #expect(verified == [.v1])
    }

    @Test func v1aVerifiesWithGeneratedKey() throws {
        let privateKey = Curve25519.Signing.PrivateKey()
        let keys = try GatewayKeys(secret: nil, publicKey: GatewayPublicKey(privateKey.publicKey))
        let body = Array(#"{"id":"e1"}"#.utf8)
        let header = try SignatureVerifier.v1aSignature(privateKey: privateKey, id: "e1", timestamp: "1700000000", body: body)
        let verifier = SignatureVerifier(keys: keys)
        #expect(verifier.verifiedVersions(id: "e1", timestamp: "1700000000", body: body, signatureHeader: header) == [.v1a])
        #expect(verifier.verifiedVersions(id: "e1", timestamp: "1700000001", body: body, signatureHeader: header).isEmpty)

        let otherKey = Curve25519.Signing.PrivateKey()
        let forged = try SignatureVerifier.v1aSignature(privateKey: otherKey, id: "e1", timestamp: "1700000000", body: body)
        #expect(verifier.verifiedVersions(id: "e1", timestamp: "1700000000", body: body, signatureHeader: forged).isEmpty)
    }

    @Test func bothVersionsAreReportedWhenBothVerify() throws {
        let privateKey = Curve25519.Signing.PrivateKey()
        let secret = try WebhookSecret(parsing: Self.vectorSecret)
        let keys = try GatewayKeys(secret: secret, publicKey: GatewayPublicKey(privateKey.publicKey))
        let body = Self.vectorBody
        let v1 = SignatureVerifier.v1Signature(secret: secret, id: "e1", timestamp: "5", body: body)
        let v1a = try SignatureVerifier.v1aSignature(privateKey: privateKey, id: "e1", timestamp: "5", body: body)
        let verifier = SignatureVerifier(keys: keys)
        #expect(verifier.verifiedVersions(id: "e1", timestamp: "5", body: body, signatureHeader: "\(v1a) \(v1)") == [.v1, .v1a])
    }

    @Test func entriesForAbsentKeysAreIgnored() throws {
        // Only an Ed25519 key is configured: a correct v1 signature proves nothing here.
        let keys = try GatewayKeys(secret: nil, publicKey: GatewayPublicKey(Curve25519.Signing.PrivateKey().publicKey))
        let verified = SignatureVerifier(keys: keys).verifiedVersions(
            id: Self.vectorID, timestamp: Self.vectorTimestamp, body: Self.vectorBody,
            signatureHeader: Self.vectorSignature)
        #expect(verified.isEmpty)
    }

    @Test func headerParsing() {
        let entries = SignatureHeader.parse("  v1,AAAA  junk v1a,@@ ")
        #expect(entries.map(\.version) == ["v1", "v1a"])
        #expect(entries[0].signature == [0, 0, 0])
        #expect(entries[1].signature == nil)
    }
}
