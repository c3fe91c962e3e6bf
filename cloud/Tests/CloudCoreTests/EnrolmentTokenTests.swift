@testable import CloudCore
import Testing

/// #29's enrolment tokens as rules: expiry, single use, the retry of the same gateway and key,
/// the token's gateway id, the lifetime's bounds.
struct EnrolmentTokenTests {
    let key = "ed25519:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
    let otherKey = "ed25519:BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB="

    @Test func aFreshTokenEnrolsUntilItExpires() {
        let row = EnrolmentToken.Row(accountID: "acct_a", gatewayID: nil, expiresAtMilliseconds: 1_000)
        #expect(EnrolmentToken.decide(row, gatewayID: "gw-1", publicKey: key, now: 999) == .enrol(accountID: "acct_a"))
        #expect(EnrolmentToken.decide(row, gatewayID: "gw-1", publicKey: key, now: 1_000) == .expired)
        #expect(EnrolmentToken.decide(nil, gatewayID: "gw-1", publicKey: key, now: 0) == .unknown)
    }

    @Test func aUsedTokenOnlyAnswersTheSameGatewayAndKeyAgain() {
        let used = EnrolmentToken.Row(accountID: "acct_a", gatewayID: nil, expiresAtMilliseconds: 1_000,
                                      usedByGatewayID: "gw-1", usedWithPublicKey: key)
        #expect(EnrolmentToken.decide(used, gatewayID: "gw-1", publicKey: key, now: 10) == .alreadyEnrolled(accountID: "acct_a"))
        #expect(EnrolmentToken.decide(used, gatewayID: "gw-1", publicKey: otherKey, now: 10) == .used, "a copied token with another key")
        #expect(EnrolmentToken.decide(used, gatewayID: "gw-2", publicKey: key, now: 10) == .used)
        #expect(EnrolmentToken.decide(used, gatewayID: "gw-1", publicKey: key, now: 1_000) == .expired)
    }

    /// Over gateways, keys and times: a token enrols at most one (gateway, key) pair, and never
    /// after its expiry.
    @Test func neverTwoGatewaysFromOneToken() {
        let gateways = ["gw-1", "gw-2"]
        let keys = [key, otherKey]
        for bound in [nil, "gw-1"] as [String?] {
            for usedBy in [nil, "gw-1", "gw-2"] as [String?] {
                for usedKey in keys {
                    let row = EnrolmentToken.Row(accountID: "a", gatewayID: bound, expiresAtMilliseconds: 100,
                                                 usedByGatewayID: usedBy, usedWithPublicKey: usedBy == nil ? nil : usedKey)
                    for gateway in gateways {
                        for presented in keys {
                            for now in [0, 99, 100, 5_000] as [Int64] {
                                let decision = EnrolmentToken.decide(row, gatewayID: gateway, publicKey: presented, now: now)
                                if now >= 100 { #expect(decision == .expired) }
                                if case .enrol = decision { #expect(usedBy == nil && (bound == nil || bound == gateway)) }
                                if case .alreadyEnrolled = decision { #expect(usedBy == gateway && usedKey == presented) }
                            }
                        }
                    }
                }
            }
        }
    }

    @Test func aTokenForOneGatewayRefusesAnother() {
        let row = EnrolmentToken.Row(accountID: "a", gatewayID: "gw-1", expiresAtMilliseconds: 100)
        #expect(EnrolmentToken.decide(row, gatewayID: "gw-2", publicKey: key, now: 0) == .otherGateway)
    }

    @Test func lifetimesAndShapes() {
        #expect(EnrolmentToken.ttl(nil) == .success(86_400))
        #expect(EnrolmentToken.ttl(59) == .failure(.badTTL))
        #expect(EnrolmentToken.ttl(30 * 86_400 + 1) == .failure(.badTTL))
        #expect(EnrolmentToken.ttl(3_600) == .success(3_600))
        #expect(EnrolmentToken.isWellFormed("dbe_" + String(repeating: "a", count: 43)))
        #expect(!EnrolmentToken.isWellFormed("dbe_" + String(repeating: "a", count: 42)))
        #expect(!EnrolmentToken.isWellFormed("dbk_" + String(repeating: "a", count: 43)), "an account token is not one")
        #expect(!EnrolmentToken.isWellFormed("dbe_" + String(repeating: "a", count: 42) + "="))
        // Every refusal has its own code, and none names an account.
        let problems: [EnrolmentToken.TokenProblem] = [.unknown, .expired, .used, .otherGateway]
        #expect(Set(problems.map(\.code)).count == problems.count)
        #expect(problems.allSatisfy { !$0.description.contains("acct_") })
    }

    @Test func onlyALiveTokenReports() {
        let row = EnrolmentToken.Row(accountID: "a", gatewayID: nil, expiresAtMilliseconds: 100, usedByGatewayID: "gw-1", usedWithPublicKey: key)
        #expect(EnrolmentToken.mayReport(row, now: 99))
        #expect(!EnrolmentToken.mayReport(row, now: 100))
        #expect(!EnrolmentToken.mayReport(nil, now: 0))
    }
}
