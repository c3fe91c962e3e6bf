import CloudCore
import Crypto
import Foundation
import Testing

@Suite struct GatewayKeysTests {
    @Test func secretIsTrimmedAndDecoded() throws {
        let secret = try WebhookSecret(parsing: "  whsec_AAEC\n")
        #expect(secret.keyBytes == [0, 1, 2])
    }

    @Test func secretErrors() {
        #expect(throws: KeyError.missingSecretPrefix) { try WebhookSecret(parsing: "AAEC") }
        #expect(throws: KeyError.invalidSecretBase64) { try WebhookSecret(parsing: "whsec_*") }
        #expect(throws: KeyError.emptySecret) { try WebhookSecret(parsing: "whsec_") }
    }

    @Test func publicKeyWithAndWithoutPrefix() throws {
        let key = Curve25519.Signing.PrivateKey().publicKey
        let base64 = key.rawRepresentation.base64EncodedString()
        #expect(try GatewayPublicKey(parsing: base64 + "\n").rawRepresentation == Array(key.rawRepresentation))
        #expect(try GatewayPublicKey(parsing: " ed25519:" + base64).rawRepresentation == Array(key.rawRepresentation))
    }

    @Test func publicKeyErrors() {
        #expect(throws: KeyError.invalidPublicKeyBase64) { try GatewayPublicKey(parsing: "not base64!") }
        #expect(throws: KeyError.wrongPublicKeyLength(3)) { try GatewayPublicKey(parsing: "AAEC") }
    }

    @Test func atLeastOneKeyIsRequired() {
        #expect(throws: KeyError.noKeys) { try GatewayKeys(secret: nil, publicKey: nil) }
    }
}
