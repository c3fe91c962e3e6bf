import CloudCore
import Testing

@Suite struct WebhookIntakeTests {
    let secret: WebhookSecret
    let intake: WebhookIntake
    let now: Int64 = 1_700_000_000

    init() throws {
        secret = try WebhookSecret(parsing: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
        intake = WebhookIntake(keys: try GatewayKeys(secret: secret, publicKey: nil))
    }

    func body(id: String = "e1", gateway: String = "gw-1") -> [UInt8] {
        Array(#"{"id":"\#(id)","sequence":7,"type":"doorbell.pressed","gateway_id":"\#(gateway)","occurred_at":"x","device":{"id":"d"}}"#.utf8)
    }

    func request(id: String? = "e1", timestamp: String? = "1700000000", body: [UInt8]? = nil,
                 signedID: String = "e1", gateway: String? = nil) -> WebhookRequest {
        let body = body ?? self.body()
        let signature = SignatureVerifier.v1Signature(secret: secret, id: signedID, timestamp: timestamp ?? "", body: body)
        return WebhookRequest(webhookID: id, webhookTimestamp: timestamp, webhookSignature: signature,
                              gatewayID: gateway, body: body)
    }

    @Test func acceptsAGoodDelivery() throws {
        let event = try intake.verify(request(gateway: "gw-1"), now: now)
        #expect(event.envelope.id == "e1")
        #expect(event.verified == [.v1])
        #expect(Array(event.bodyText.utf8) == body())
    }

    @Test func missingHeadersAreNamed() {
        #expect(throws: Rejection.missingHeader("webhook-id")) { try intake.verify(request(id: nil), now: now) }
        #expect(throws: Rejection.missingHeader("webhook-timestamp")) {
            try intake.verify(request(timestamp: nil), now: now)
        }
        var unsigned = request()
        unsigned.webhookSignature = ""
        #expect(throws: Rejection.missingHeader("webhook-signature")) { try intake.verify(unsigned, now: now) }
    }

    @Test func badSignatureListsTheVersionsSeen() {
        var forged = request()
        forged.webhookSignature = "v1,AAAA v9,BBBB"
        #expect(throws: Rejection.noValidSignature(versions: ["v1", "v9"])) { try intake.verify(forged, now: now) }
    }

    @Test func staleTimestampIsRejectedBeforeTheSignature() {
        #expect(throws: Rejection.timestampOutOfTolerance(timestamp: now, now: now + 301, toleranceSeconds: 300)) {
            try intake.verify(request(), now: now + 301)
        }
    }

    @Test func bodyIDMustEqualWebhookID() {
        let mismatched = request(id: "e2", signedID: "e2")
        #expect(throws: Rejection.idMismatch(bodyID: "e1", headerID: "e2")) { try intake.verify(mismatched, now: now) }
    }

    @Test func gatewayHeaderMustMatchTheBody() {
        #expect(throws: Rejection.gatewayMismatch(bodyGatewayID: "gw-1", headerGatewayID: "gw-2")) {
            try intake.verify(request(gateway: "gw-2"), now: now)
        }
    }

    func heartbeat(id: String = "hb-1", sentAt: Int64 = 1_700_000_000, type: String = "gateway.heartbeat",
                   version: String = "0.1.0", slot: String = #""A""#) -> [UInt8] {
        Array(#"{"id":"\#(id)","type":"\#(type)","gateway_id":"gw-1","agent_version":"\#(version)","boot_slot":\#(slot),"sent_at":\#(sentAt)}"#.utf8)
    }

    /// A heartbeat passes the event's checks (headers, tolerance, signature, id and gateway) and
    /// its own: the type, short printable texts, `sent_at` equal to the signed timestamp.
    @Test func aHeartbeatIsVerifiedLikeAnEvent() throws {
        let good = try intake.verifyHeartbeat(request(id: "hb-1", body: heartbeat(), signedID: "hb-1", gateway: "gw-1"), now: now)
        #expect(good == GatewayHeartbeat(id: "hb-1", gatewayID: "gw-1", agentVersion: "0.1.0", bootSlot: "A", sentAt: now))
        #expect(try intake.verifyHeartbeat(request(id: "hb-1", body: heartbeat(slot: "null"), signedID: "hb-1"), now: now).bootSlot == nil)
        #expect(throws: Rejection.timestampOutOfTolerance(timestamp: now, now: now + 301, toleranceSeconds: 300)) {
            try intake.verifyHeartbeat(request(id: "hb-1", body: heartbeat(), signedID: "hb-1"), now: now + 301)
        }
        var forged = request(id: "hb-1", body: heartbeat(), signedID: "hb-1")
        forged.webhookSignature = "v1,AAAA"
        #expect(throws: Rejection.noValidSignature(versions: ["v1"])) { try intake.verifyHeartbeat(forged, now: now) }
        #expect(throws: Rejection.idMismatch(bodyID: "hb-1", headerID: "hb-2")) {
            try intake.verifyHeartbeat(request(id: "hb-2", body: heartbeat(), signedID: "hb-2"), now: now)
        }
        #expect(throws: Rejection.gatewayMismatch(bodyGatewayID: "gw-1", headerGatewayID: "gw-2")) {
            try intake.verifyHeartbeat(request(id: "hb-1", body: heartbeat(), signedID: "hb-1", gateway: "gw-2"), now: now)
        }
        for (body, words) in [(heartbeat(sentAt: now - 1), "sent_at"), (heartbeat(type: "doorbell.pressed"), "type"),
                              (heartbeat(version: "1\\u0000"), "control"), (heartbeat(version: String(repeating: "9", count: 65)), "agent_version"),
                              (body(id: "hb-1"), "missing field")] {
            do {
                _ = try intake.verifyHeartbeat(request(id: "hb-1", body: body, signedID: "hb-1"), now: now)
                Issue.record("accepted \(String(decoding: body, as: UTF8.self))")
            } catch {
                #expect(error.code == "invalid_body" && error.message.contains(words), "\(error)")
            }
        }
    }
}
