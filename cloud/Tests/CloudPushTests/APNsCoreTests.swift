import CloudCore
import Crypto
import Foundation
import Testing

@Suite struct ProviderTokenTests {
    let key = P256.Signing.PrivateKey()

    func decode(_ part: Substring) throws -> [UInt8] {
        var text = part.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while text.count % 4 != 0 { text += "=" }
        return Array(try #require(Data(base64Encoded: text)))
    }

    @Test func jwtIsES256OverHeaderAndClaimsAndVerifiesWithThePublicKey() throws {
        let signing = try APNsSigningKey(pem: key.pemRepresentation, teamID: "TEAM123456", keyID: "KEY1234567")
        let token = try signing.providerToken(issuedAt: 1_800_000_000)
        let parts = token.jwt.split(separator: ".")
        #expect(parts.count == 3)
        #expect(String(decoding: try decode(parts[0]), as: UTF8.self) == #"{"alg":"ES256","kid":"KEY1234567"}"#)
        #expect(String(decoding: try decode(parts[1]), as: UTF8.self) == #"{"iss":"TEAM123456","iat":1800000000}"#)
        let signature = try P256.Signing.ECDSASignature(rawRepresentation: try decode(parts[2]))
        #expect(key.publicKey.isValidSignature(signature, for: Array("\(parts[0]).\(parts[1])".utf8)))
        #expect(!token.jwt.contains("="), "base64url without padding")
    }

    @Test func badKeyFilesAndIdsAreRefusedWithWhatToDo() {
        #expect(throws: APNsKeyError.notAP256Key) {
            try APNsSigningKey(pem: "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----", teamID: "T", keyID: "K")
        }
        #expect(throws: APNsKeyError.badTeamID("")) { try APNsSigningKey(pem: key.pemRepresentation, teamID: "", keyID: "K") }
        #expect("\(APNsKeyError.notAP256Key)".contains("AuthKey_"))
    }

    /// A token signer that counts, for the schedule tests.
    final class Signer {
        let signing: APNsSigningKey
        var issued: [Int64] = []
        init(_ key: P256.Signing.PrivateKey) {
            signing = APNsSigningKey(privateKey: key, teamID: "TEAM123456", keyID: "KEY1234567")
        }
        func sign(_ iat: Int64) throws -> APNsProviderToken {
            issued.append(iat)
            return try signing.providerToken(issuedAt: iat)
        }
    }

    @Test func scheduleReusesForFiftyMinutesAndSignsWithTheWallClock() throws {
        let signer = Signer(key)
        var schedule = ProviderTokenSchedule()
        let first = try schedule.token(now: 1000, sign: signer.sign)
        #expect(try schedule.token(now: 1000 + 49 * 60, sign: signer.sign) == first)
        #expect(try schedule.token(now: 900, sign: signer.sign) == first, "a clock stepped back keeps the token")
        let second = try schedule.token(now: 1000 + 50 * 60, sign: signer.sign)
        #expect(second.issuedAt == 1000 + 50 * 60)
        #expect(signer.issued == [1000, 1000 + 50 * 60])
        #expect(schedule.signed == 2)
    }

    /// The issue's runaway: one 403 for a token that 100 pushes carried, then 700 more pushes.
    /// One replacement, stamped with the wall clock; never a token from the future.
    @Test func oneRejectionBurstSignsOneReplacementWithTheWallClock() throws {
        let signer = Signer(key)
        var schedule = ProviderTokenSchedule()
        let first = try schedule.token(now: 5000, sign: signer.sign)
        for push in 0..<100 {
            #expect(schedule.rejected(first, reason: "ExpiredProviderToken", now: 5000) == .resend)
            let token = try schedule.token(now: 5000 + Int64(push / 50), sign: signer.sign)
            #expect(token != first)
            schedule.accepted(token)
        }
        for push in 0..<700 {
            _ = try schedule.token(now: 5001 + Int64(push / 100), sign: signer.sign)
        }
        #expect(signer.issued == [5000, 5000])
        #expect(schedule.health == .ok)
    }

    /// A replacement rejected too: the key is wrong. No new token for 20 minutes (APNs would
    /// answer TooManyProviderTokenUpdates), one alert, pushes held; then one more try.
    @Test func aRejectedReplacementHoldsPushesAndAlertsOnce() throws {
        let signer = Signer(key)
        var schedule = ProviderTokenSchedule()
        let first = try schedule.token(now: 100, sign: signer.sign)
        #expect(schedule.rejected(first, reason: "InvalidProviderToken", now: 100) == .resend)
        let second = try schedule.token(now: 100, sign: signer.sign)
        #expect(schedule.rejected(second, reason: "InvalidProviderToken", now: 101) == .hold(notBefore: 100 + 20 * 60, firstTime: true))
        #expect(schedule.health == .failing(reason: "InvalidProviderToken", since: 101, until: 1300))
        #expect(schedule.rejected(second, reason: "InvalidProviderToken", now: 102) == .hold(notBefore: 1300, firstTime: false))
        #expect(schedule.rejected(first, reason: "InvalidProviderToken", now: 102) == .hold(notBefore: 1300, firstTime: false))
        #expect(try schedule.token(now: 500, sign: signer.sign) == second)
        #expect(signer.issued.count == 2)
        // 20 minutes on, one more replacement is allowed; accepted, health is back.
        #expect(schedule.rejected(second, reason: "InvalidProviderToken", now: 1300) == .resend)
        let third = try schedule.token(now: 1300, sign: signer.sign)
        schedule.accepted(third)
        #expect(schedule.health == .ok)
        #expect(signer.issued == [100, 100, 1300])
    }

    @Test func refreshAgeIsClampedToWhatAPNsAccepts() {
        #expect(ProviderTokenSchedule(refreshAfterSeconds: 60).refreshAfter == 20 * 60)
        #expect(ProviderTokenSchedule(refreshAfterSeconds: 7200).refreshAfter == 59 * 60)
    }
}

@Suite struct APNsVerdictTests {
    func verdict(_ status: Int, _ body: String = "", retryAfter: String? = nil) -> APNsVerdict {
        APNsVerdict.classify(status: status, body: Array(body.utf8), retryAfter: retryAfter)
    }

    @Test func everyDocumentedAnswerMapsToItsAction() {
        #expect(verdict(200) == .delivered)
        #expect(verdict(410, #"{"reason":"Unregistered","timestamp":1700000000123}"#)
                == .unregistered(reason: "Unregistered", timestampMs: 1_700_000_000_123))
        #expect(verdict(410, #"{"reason":"ExpiredToken"}"#) == .unregistered(reason: "ExpiredToken", timestampMs: nil))
        #expect(verdict(400, #"{"reason":"BadDeviceToken"}"#) == .badDeviceToken)
        #expect(verdict(403, #"{"reason":"ExpiredProviderToken"}"#) == .providerTokenRejected(reason: "ExpiredProviderToken"))
        #expect(verdict(403, #"{"reason":"InvalidProviderToken"}"#) == .providerTokenRejected(reason: "InvalidProviderToken"))
        #expect(verdict(403, #"{"reason":"TooManyProviderTokenUpdates"}"#)
                == .retry(reason: "TooManyProviderTokenUpdates", afterSeconds: nil))
        #expect(verdict(429, #"{"reason":"TooManyRequests"}"#, retryAfter: "30") == .retry(reason: "TooManyRequests", afterSeconds: 30))
        #expect(verdict(500, #"{"reason":"InternalServerError"}"#) == .retry(reason: "InternalServerError", afterSeconds: nil))
        #expect(verdict(503, "") == .retry(reason: "HTTP 503", afterSeconds: nil))
        #expect(verdict(413, #"{"reason":"PayloadTooLarge"}"#) == .permanent(reason: "PayloadTooLarge"))
        #expect(verdict(400, #"{"reason":"DeviceTokenNotForTopic"}"#) == .permanent(reason: "DeviceTokenNotForTopic"))
        #expect(verdict(400, "not json") == .permanent(reason: "HTTP 400"))
    }

    @Test func backoffGrowsIsCappedAndHonoursRetryAfter() {
        #expect(PushBackoff.delayMilliseconds(attempt: 1, retryAfterSeconds: nil, random: 0.999) <= 1_000)
        #expect(PushBackoff.delayMilliseconds(attempt: 1, retryAfterSeconds: nil, random: 0) == 250)
        #expect(PushBackoff.delayMilliseconds(attempt: 30, retryAfterSeconds: nil, random: 0.999) <= 300_000)
        #expect(PushBackoff.delayMilliseconds(attempt: 30, retryAfterSeconds: nil, random: 0.999) > 250_000)
        #expect(PushBackoff.delayMilliseconds(attempt: 1, retryAfterSeconds: 30, random: 0.5) == 30_000)
    }
}

@Suite struct PushPayloadTests {
    let doorbell = PushPayload.Doorbell(id: "gw-0001:front-door", name: "Front door", gatewayID: "gw-0001")

    func event(type: String = "doorbell.pressed", test: Bool = false) -> EventEnvelope {
        EventEnvelope(id: "019ab2c4-5d6e-7f80-9a1b-2c3d4e5f6a7b", sequence: 1, type: type, gatewayID: "gw-0001",
                      deviceID: "front-door", occurredAt: "2026-11-23T18:00:00.000000Z", isTest: test)
    }

    @Test func doorbellPushCarriesLocalizationKeysThreadAndEvent() throws {
        let payload = try #require(PushPayload.forEvent(event(), doorbell: doorbell))
        let json = try #require(try JSONSerialization.jsonObject(with: Data(payload.utf8)) as? [String: Any])
        let aps = try #require(json["aps"] as? [String: Any])
        let alert = try #require(aps["alert"] as? [String: Any])
        #expect(alert["loc-key"] as? String == "DOORBELL_PRESSED")
        #expect(alert["loc-args"] as? [String] == ["Front door"])
        #expect(aps["thread-id"] as? String == "doorbell-gw-0001:front-door")
        let data = try #require(json["doorbell"] as? [String: Any])
        #expect(data["event_id"] as? String == "019ab2c4-5d6e-7f80-9a1b-2c3d4e5f6a7b")
        #expect(data["occurred_at"] as? String == "2026-11-23T18:00:00.000000Z")
    }

    @Test func testEventsAndNonRingingTypesAreNotPushed() {
        #expect(PushPayload.forEvent(event(test: true), doorbell: doorbell) == nil)
        #expect(PushPayload.forEvent(event(type: "beacon.entered"), doorbell: doorbell) == nil)
        #expect(PushPayload.forEvent(event(type: "doorbell.double_pressed"), doorbell: doorbell) != nil)
    }

    @Test func anOverlongNameIsShortenedToFitFourKilobytes() throws {
        let long = PushPayload.Doorbell(id: doorbell.id, name: String(repeating: "Türklingel ", count: 400), gatewayID: "gw-0001")
        let payload = try #require(PushPayload.forEvent(event(), doorbell: long))
        #expect(payload.utf8.count <= PushPayload.maximumBytes)
        #expect(payload.utf8.count > PushPayload.maximumBytes - 200, "shortened no more than needed")
        #expect(try JSONSerialization.jsonObject(with: Data(payload.utf8)) is [String: Any])
    }

    /// Each request of a press has its own apns-id; a retry of one push keeps its own.
    @Test func apnsIDIsOnePerPushAndStableAcrossRetries() {
        let event = "019ab2c4-5d6e-7f80-9a1b-2c3d4e5f6a7b"
        let tokens = (0..<200).map { String(repeating: String(format: "%02x", $0 % 256), count: 32) }
        let ids = tokens.map { PushPayload.apnsID(eventID: event, token: $0) }
        #expect(Set(ids).count == 200)
        #expect(ids.allSatisfy { UUID(uuidString: $0) != nil && $0 == $0.lowercased() })
        #expect(PushPayload.apnsID(eventID: event, token: tokens[0]) == ids[0])
        #expect(PushPayload.apnsID(eventID: event, token: tokens[0].uppercased()) == ids[0])
        #expect(PushPayload.apnsID(eventID: "another", token: tokens[0]) != ids[0])
    }
}
