import CloudCore
import CloudServer
@testable import CloudStore
import Foundation
import Hummingbird
import HummingbirdTesting
import Testing

/// `POST /heartbeat` over a live HTTP server: verified exactly like an event, recorded as the
/// gateway's last-seen time and version (SQLite and PostgreSQL), never a push, shown to the owner.
extension FanOutTests {
    func heartbeatBody(id: String, timestamp: Int64, gateway: String = "gw-0001", slot: String? = "B") -> String {
        let slot = slot.map { #""\#($0)""# } ?? "null"
        return #"{"id":"\#(id)","type":"gateway.heartbeat","gateway_id":"\#(gateway)","agent_version":"9.8.7","boot_slot":\#(slot),"sent_at":\#(timestamp)}"#
    }

    /// POSTs a heartbeat v1-signed with `secret` (the enrolled one unless given); `omit` leaves a header out.
    func heartbeat(_ client: some TestClientProtocol, id: String, timestamp: Int64 = Int64(Date().timeIntervalSince1970),
                   body: String? = nil, secret: String? = nil, omit: String? = nil) async throws -> (HTTPResponse.Status, String) {
        let body = body ?? heartbeatBody(id: id, timestamp: timestamp)
        let signature = SignatureVerifier.v1Signature(
            secret: try WebhookSecret(parsing: secret ?? self.secret), id: id, timestamp: String(timestamp), body: Array(body.utf8))
        var headers = HTTPFields()
        for (name, value) in [("webhook-id", id), ("webhook-timestamp", String(timestamp)), ("webhook-signature", signature),
                              ("doorbell-gateway-id", "gw-0001"), ("content-type", "application/json")] where name != omit {
            headers[try #require(HTTPFields.Element.Name(name))] = value
        }
        return try await client.execute(uri: "/heartbeat", method: .post, headers: headers, body: ByteBuffer(string: body)) {
            ($0.status, String(buffer: $0.body))
        }
    }

    @Test(arguments: StoreBackend.available)
    func aSignedHeartbeatIsRecordedAndShownToTheOwnerOnly(backend: StoreBackend) async throws {
        let apns = try APNsTestServer(script: ["default": ["status": 200]])
        let cloud = try await cloud(apns, backend: backend)
        try await cloud.app.test(.live) { client in
            let alice = try await household(client, guests: 1)[0]
            try await register(client, randomDeviceToken(), account: alice.token)
            var (status, json) = try await call(client, .get, "/gateways", token: alice.token)
            var gateways = try #require(json["gateways"] as? [[String: Any]], "\(json)")
            #expect(gateways.count == 1 && gateways.first?["last_seen_ms"] is NSNull, "no heartbeat yet: \(json)")

            let before = WallClock.system.millisecondsSinceEpoch()
            let (answer, text) = try await heartbeat(client, id: "hb-1")
            #expect(answer == .noContent, "\(text)")
            (status, json) = try await call(client, .get, "/gateways", token: alice.token)
            #expect(status == .ok)
            gateways = try #require(json["gateways"] as? [[String: Any]], "\(json)")
            #expect(gateways.first?["id"] as? String == "gw-0001")
            #expect(gateways.first?["agent_version"] as? String == "9.8.7")
            #expect(gateways.first?["boot_slot"] as? String == "B")
            #expect(((gateways.first?["last_seen_ms"] as? Int).map(Int64.init) ?? 0) >= before)

            // A guest of a doorbell sees no gateway.
            let bob = try await createAccount(client, "Bob")
            (status, json) = try await call(client, .get, "/gateways", token: bob.token)
            #expect((json["gateways"] as? [[String: Any]])?.isEmpty == true, "\(json)")
        }
        #expect(try await cloud.store.allEvents().isEmpty, "a heartbeat is not an event")
        #expect(try apns.processed().isEmpty, "a heartbeat pushes to no phone")
        await cloud.client.shutdown()
    }

    @Test(arguments: StoreBackend.available)
    func forgedReplayedStaleOrUnsignedHeartbeatsAreRefusedAsEventsAre(backend: StoreBackend) async throws {
        let apns = try APNsTestServer(script: ["default": ["status": 200]])
        let cloud = try await cloud(apns, backend: backend)
        try await cloud.app.test(.live) { client in
            let alice = try await household(client, guests: 0)[0]
            let now = Int64(Date().timeIntervalSince1970)
            var (status, text) = try await heartbeat(client, id: "hb-forged", secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
            #expect(status == .unauthorized && text.contains(#""error":"bad_signature""#), "\(text)")
            (status, text) = try await heartbeat(client, id: "hb-stale", timestamp: now - 301)
            #expect(status == .unauthorized && text.contains(#""error":"stale_timestamp""#), "\(text)")
            (status, text) = try await heartbeat(client, id: "hb-unsigned", omit: "webhook-signature")
            #expect(status == .unauthorized && text.contains(#""error":"missing_header""#), "\(text)")
            (status, text) = try await heartbeat(client, id: "hb-other", body: heartbeatBody(id: "hb-x", timestamp: now))
            #expect(status == .badRequest && text.contains(#""error":"id_mismatch""#), "\(text)")
            (status, text) = try await heartbeat(client, id: "hb-late", timestamp: now, body: heartbeatBody(id: "hb-late", timestamp: now - 60))
            #expect(status == .badRequest && text.contains("sent_at"), "\(text)")
            var (_, json) = try await call(client, .get, "/gateways", token: alice.token)
            #expect((json["gateways"] as? [[String: Any]])?.first?["last_seen_ms"] is NSNull, "nothing refused was recorded: \(json)")

            (status, text) = try await heartbeat(client, id: "hb-1", timestamp: now)
            #expect(status == .noContent, "\(text)")
            (_, json) = try await call(client, .get, "/gateways", token: alice.token)
            let seen = (json["gateways"] as? [[String: Any]])?.first?["last_seen_ms"] as? Int
            // The same signed request again, within the tolerance: refused, last-seen unchanged.
            (status, text) = try await heartbeat(client, id: "hb-1", timestamp: now)
            #expect(status == .unauthorized && text.contains(#""error":"replayed""#), "\(text)")
            (_, json) = try await call(client, .get, "/gateways", token: alice.token)
            #expect((json["gateways"] as? [[String: Any]])?.first?["last_seen_ms"] as? Int == seen)
        }
        await cloud.client.shutdown()
    }
}
