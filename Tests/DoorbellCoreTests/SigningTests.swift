import DoorbellCore
import Testing

@Suite struct SigningTests {
    /// The Standard Webhooks specification's published test vector.
    @Test func v1MatchesTheSpecificationVector() throws {
        let secret = try WebhookSecret(parsing: "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD")
        let signer = WebhookSigner(hmacSecret: secret, deviceKey: nil)
        let body = Array(#"{"email":"test@example.com","username":"test_user"}"#.utf8)
        #expect(signer.v1(id: "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk", timestamp: 1_649_367_553, body: body)
            == "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw=")
    }

    @Test func v1aVerifiesWithThePublicKey() throws {
        let key = Ed25519SigningKey()
        let signer = WebhookSigner(hmacSecret: nil, deviceKey: key)
        let body = Array(#"{"id":"x"}"#.utf8)
        let header = try #require(try signer.v1a(id: "x", timestamp: 1_700_000_000, body: body))
        #expect(header.hasPrefix("v1a,"))
        let sig = try #require(Base64.decode(header.dropFirst(4)))
        #expect(Ed25519.isValidSignature(sig, for: Array("x.1700000000.".utf8) + body, publicKey: key.publicKey))
        #expect(!Ed25519.isValidSignature(sig, for: Array("x.1700000001.".utf8) + body, publicKey: key.publicKey))
    }

    @Test func headerCarriesBothSignaturesAndTheAttemptTimestamp() throws {
        let signer = WebhookSigner(hmacSecret: try WebhookSecret(parsing: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),
                                   deviceKey: Ed25519SigningKey())
        let headers = try signer.headers(id: "e1", timestamp: 42, body: [0x7B, 0x7D], gatewayID: "gw", userAgent: "ua")
        let dict = Dictionary(uniqueKeysWithValues: headers)
        #expect(dict["webhook-timestamp"] == "42")
        #expect(dict["webhook-id"] == "e1")
        let parts = try #require(dict["webhook-signature"]).split(separator: " ")
        #expect(parts.count == 2 && parts[0].hasPrefix("v1,") && parts[1].hasPrefix("v1a,"))
    }

    @Test(arguments: ["C2FVsBQIhrscChlQIMV+b5sSYspob7oD", "whsec_", "whsec_!!!notbase64", "whsec_c2hvcnQ="])
    func badSecretsAreRefusedWithAHint(text: String) {
        #expect(throws: SigningError.self) { try WebhookSecret(parsing: text) }
    }
}

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
