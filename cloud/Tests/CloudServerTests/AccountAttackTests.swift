import CloudCore
import CloudServer
@testable import CloudStore
import Foundation
import Hummingbird
import HummingbirdTesting
import Testing

/// #30 over HTTP: Alice owns gw-0001:front-door, Bob is her guest, Carol a stranger with an
/// account of her own, trying what the issue found.
extension FanOutTests {
    func phoneBody(_ token: String, secret: String? = nil, name: String? = nil, shareName: Bool = false) -> String {
        let name = name.map { #","name":"\#($0)""# } ?? ""
        return #"{"environment":"sandbox","bundle_id":"\#(APNsTestServer.topic)","installation_secret":"\#(secret ?? installationSecret(of: token))"\#(name),"share_name":\#(shareName)}"#
    }

    @Test(arguments: StoreBackend.available)
    func carolCannotTakeAlicesPhone(backend: StoreBackend) async throws {
        let apns = try APNsTestServer(script: ["default": ["status": 200]])
        let cloud = try await cloud(apns, backend: backend)
        let alicesPhone = randomDeviceToken()
        try await cloud.app.test(.router) { client in
            let alice = try await household(client, guests: 0)[0]
            let carol = try await createAccount(client, "Carol")
            try await register(client, alicesPhone, account: alice.token)
            // Carol, with the token and an installation of her own.
            var (status, json) = try await call(client, .put, "/phones/\(alicesPhone)", token: carol.token,
                                                phoneBody(alicesPhone, secret: String(repeating: "c", count: 43)))
            #expect(status == .forbidden, "\(json)")
            #expect((json["reason"] as? String)?.contains("installation_secret") == true)
            (status, json) = try await call(client, .get, "/phones", token: alice.token)
            #expect((json["phones"] as? [[String: Any]])?.map { $0["token"] as? String } == [alicesPhone], "still Alice's")
            (status, _) = try await call(client, .delete, "/phones/\(alicesPhone)", token: carol.token)
            #expect(status == .notFound)
            let pressed = try await press(client, id: "019ab2c4-5d6e-7f80-9a1b-2c3d4e5f6c01")
            #expect(pressed.1["pushes"] as? Int == 1)
            #expect(try await cloud.store.deliveries(eventID: "019ab2c4-5d6e-7f80-9a1b-2c3d4e5f6c01").map(\.accountID) == [alice.id],
                    "Alice's press rings Alice's phone")
            // The phone itself, signed into Carol's account (it holds the secret), may move.
            (status, json) = try await call(client, .put, "/phones/\(alicesPhone)", token: carol.token, phoneBody(alicesPhone))
            #expect(status == .ok && json["status"] as? String == "moved", "\(json)")
        }
        await cloud.client.shutdown()
    }

    @Test func theOwnerSeesHerGuestsPhonesByIdAndNameOnlyIfShared() async throws {
        let apns = try APNsTestServer(script: ["default": ["status": 200]])
        let cloud = try await cloud(apns)
        let alicesPhone = randomDeviceToken()
        let bobsPhone = randomDeviceToken()
        let eventID = "019ab2c4-5d6e-7f80-9a1b-2c3d4e5f6c02"
        try await cloud.app.test(.router) { client in
            let accounts = try await household(client, guests: 1)
            let (alice, bob) = (accounts[0], accounts[1])
            for (phone, account, name) in [(alicesPhone, alice, "Alice's iPhone"), (bobsPhone, bob, "Bob's iPhone")] {
                let (status, json) = try await call(client, .put, "/phones/\(phone)", token: account.token, phoneBody(phone, name: name))
                #expect(status == .ok, "\(json)")
            }
            #expect(try await press(client, id: eventID).1["pushes"] as? Int == 2)
            let raw = try await client.execute(uri: "/events/\(eventID)/deliveries", method: .get,
                                               headers: [.authorization: "Bearer " + alice.token]) { String(buffer: $0.body) }
            #expect(!raw.contains(bobsPhone) && !raw.contains(alicesPhone), "no device token in the view: \(raw)")
            var rows = try #require(try await call(client, .get, "/events/\(eventID)/deliveries", token: alice.token).1["deliveries"] as? [[String: Any]])
            func row(_ token: String) -> [String: Any]? { rows.first { $0["phone_id"] as? String == PhoneClaim.phoneID(token: token) } }
            #expect(row(alicesPhone)?["phone_name"] as? String == "Alice's iPhone")
            #expect(row(bobsPhone) != nil)
            #expect(row(bobsPhone)?["phone_name"] is NSNull, "Bob did not share his phone's name")
            // Bob allows it.
            _ = try await call(client, .put, "/phones/\(bobsPhone)", token: bob.token, phoneBody(bobsPhone, name: "Bob's iPhone", shareName: true))
            rows = try #require(try await call(client, .get, "/events/\(eventID)/deliveries", token: alice.token).1["deliveries"] as? [[String: Any]])
            #expect(row(bobsPhone)?["phone_name"] as? String == "Bob's iPhone")
        }
        await cloud.client.shutdown()
    }

    @Test func oddInputIsRefusedWithOneClearAnswer() async throws {
        let apns = try APNsTestServer(script: ["default": ["status": 200]])
        let cloud = try await cloud(apns)
        try await cloud.app.test(.router) { client in
            let alice = try await household(client, guests: 0)[0]
            let cases: [(HTTPRequest.Method, String, String?, String, HTTPResponse.Status, String)] = [
                (.post, "/accounts", adminToken, #"{"name":"Eve\u0000Admin"}"#, .badRequest, "control characters"),
                (.post, "/accounts", adminToken, #"{"name":"Z\#(String(repeating: "\u{301}", count: 15_000))"}"#, .badRequest, "400 bytes"),
                (.post, "/accounts", adminToken, #"{"name":"Eve","name":"Admin"}"#, .badRequest, "appears twice"),
                (.put, "/doorbells/gw-0001:front-door", alice.token, #"{"name":"Front\u001b[2J"}"#, .badRequest, "control characters"),
                (.post, "/gateways", alice.token, #"{"id":"gw-9","secret":"\#(secret)","id":"gw-0001"}"#, .badRequest, "appears twice"),
                (.put, "/beacon-messages", alice.token, #"{"uuid":"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0","major":1,"minor":2,"site":"home","title":"t","body":"\#(String(repeating: "\\u0001", count: 1000))"}"#, .badRequest, "control characters"),
                (.put, "/beacon-messages", alice.token, #"{"uuid":"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0","major":1,"minor":2,"site":"home","title":"t","body":"\#(String(repeating: "🚪", count: 1000))"}"#, .badRequest, "APNs takes at most 4096"),
            ]
            for (method, uri, token, body, status, hint) in cases {
                let (got, json) = try await call(client, method, uri, token: token, body)
                #expect(got == status, "\(method) \(uri): \(json)")
                #expect((json["reason"] as? String)?.contains(hint) == true, "\(method) \(uri): \(json)")
            }
            // Oversized bodies: one 413 with the limit, on every route, never a type name.
            for (uri, size, limit) in [("/gateways", 100 * 1024, 64 * 1024), ("/beacon-messages", 200 * 1024, 64 * 1024),
                                       ("/accounts", 70 * 1024, 64 * 1024)] {
                let body = #"{"name":""# + String(repeating: "a", count: size) + #""}"#
                let (got, json) = try await call(client, uri == "/beacon-messages" ? .put : .post, uri,
                                                 token: uri == "/accounts" ? adminToken : alice.token, body)
                #expect(got == .contentTooLarge, "\(uri): \(json)")
                #expect(json["error"] as? String == "payload_too_large" && json["limit_bytes"] as? Int == limit, "\(uri): \(json)")
                #expect((json["reason"] as? String)?.contains("NIO") == false)
            }
            let (got, json) = try await post(client, id: "big", body: #"{"data":""# + String(repeating: "a", count: 1024 * 1024) + #""}"#)
            #expect(got == .contentTooLarge && json["limit_bytes"] as? Int == 256 * 1024, "\(json)")
            // A signed event whose gateway_id appears twice is refused, not stored under the first.
            let twice = #"{"id":"019ab2c4-5d6e-7f80-9a1b-2c3d4e5f6c03","sequence":1,"type":"doorbell.pressed","gateway_id":"gw-0001","occurred_at":"2026-11-23T18:00:00Z","device":{"id":"front-door"},"gateway_id":"gw-evil"}"#
            let (status, answer) = try await post(client, id: "019ab2c4-5d6e-7f80-9a1b-2c3d4e5f6c03", body: twice)
            #expect(status == .badRequest && (answer["reason"] as? String)?.contains("appears twice") == true, "\(answer)")
            #expect(try await cloud.store.event(id: "019ab2c4-5d6e-7f80-9a1b-2c3d4e5f6c03") == nil)
        }
        await cloud.client.shutdown()
    }

    /// Carol probing Alice's ids gets what an id nobody has gets.
    @Test func aStrangerCannotTellAnotherAccountsIdsFromMissingOnes() async throws {
        let apns = try APNsTestServer(script: ["default": ["status": 200]])
        let cloud = try await cloud(apns)
        try await cloud.app.test(.router) { client in
            let accounts = try await household(client, guests: 1)
            let (alice, bob) = (accounts[0], accounts[1])
            let carol = try await createAccount(client, "Carol")
            var (status, json) = try await call(client, .put, "/beacon-messages", token: alice.token,
                #"{"uuid":"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0","major":1,"minor":2,"doorbell_id":"gw-0001:front-door","title":"Hi","body":""}"#)
            let message = try #require((json["message"] as? [String: Any])?["id"] as? String, "\(json)")
            // (method, uri for Alice's id, uri for a missing id, body)
            let probes: [(HTTPRequest.Method, String, String, String)] = [
                (.put, "/doorbells/gw-0001:back", "/doorbells/gw-none:back", "{}"),
                (.get, "/doorbells/gw-0001:front-door/shares", "/doorbells/gw-none:front-door/shares", ""),
                (.post, "/doorbells/gw-0001:front-door/shares", "/doorbells/gw-none:front-door/shares", #"{"account_id":"\#(carol.id)"}"#),
                (.delete, "/doorbells/gw-0001:front-door/shares/\(bob.id)", "/doorbells/gw-none:front-door/shares/\(bob.id)", ""),
                (.delete, "/doorbells/gw-0001:front-door", "/doorbells/gw-none:front-door", ""),
                (.delete, "/gateways/gw-0001", "/gateways/gw-none", ""),
                (.delete, "/beacon-messages/\(message)", "/beacon-messages/bm_none", ""),
            ]
            for (method, existing, missing, body) in probes {
                let real = try await call(client, method, existing, token: carol.token, body)
                let none = try await call(client, method, missing, token: carol.token, body)
                #expect(real.0 == .notFound && none.0 == .notFound, "\(method) \(existing): \(real.1) / \(none.1)")
                #expect(real.1["error"] as? String == none.1["error"] as? String)
                let reason = (real.1["reason"] as? String)?.replacingOccurrences(of: "gw-0001", with: "gw-none")
                    .replacingOccurrences(of: message, with: "bm_none")
                #expect(reason == none.1["reason"] as? String, "\(method) \(existing)")
            }
            (status, json) = try await call(client, .put, "/beacon-messages", token: carol.token,
                #"{"uuid":"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0","major":1,"minor":2,"doorbell_id":"gw-0001:front-door","title":"Hi","body":""}"#)
            #expect(status == .notFound, "\(json)")
            // Bob, a guest, knows the doorbell: he is told he is not its owner.
            (status, json) = try await call(client, .delete, "/doorbells/gw-0001:front-door", token: bob.token)
            #expect(status == .forbidden, "\(json)")
            #expect(try await cloud.store.doorbell(id: "gw-0001:front-door") != nil, "nothing was removed")
            #expect(try await cloud.store.beaconMessages(accountID: alice.id).count == 1)
        }
        await cloud.client.shutdown()
    }

    /// A doorbell's whole life: removed, its gateway removed and enrolled by a new owner, whose
    /// events the old owner cannot see; beacon messages read and deleted; an account deleted.
    @Test(arguments: StoreBackend.available)
    func aGatewayHandedToANewOwnerAndAnAccountDeleted(backend: StoreBackend) async throws {
        let apns = try APNsTestServer(script: ["default": ["status": 200]])
        let cloud = try await cloud(apns, backend: backend)
        try await cloud.app.test(.router) { client in
            let accounts = try await household(client, guests: 1)
            let (alice, bob) = (accounts[0], accounts[1])
            let carol = try await createAccount(client, "Carol")
            let uuid = "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0"
            var (status, json) = try await call(client, .put, "/beacon-messages", token: alice.token,
                #"{"namespace":"edd1ebeac04e5defa017","site":"home","title":"Hi","body":"one"}"#)
            let first = try #require((json["message"] as? [String: Any])?["id"] as? String, "\(json)")
            (status, json) = try await call(client, .put, "/beacon-messages", token: alice.token,
                #"{"namespace":"EDD1EBEAC04E5DEFA017","site":"home","title":"Hi","body":"two"}"#)
            #expect((json["message"] as? [String: Any])?["id"] as? String == first, "one region, one id")
            (status, json) = try await call(client, .put, "/beacon-messages", token: alice.token,
                #"{"uuid":"\#(uuid)","major":1,"minor":2,"site":"home","title":"Hi","body":"door"}"#)
            (status, json) = try await call(client, .get, "/beacon-messages", token: alice.token)
            let listed = try #require(json["messages"] as? [[String: Any]])
            #expect(listed.count == 2 && listed.contains { $0["namespace"] as? String == "edd1ebeac04e5defa017" && $0["body"] as? String == "two" })
            (status, _) = try await call(client, .delete, "/beacon-messages/\(first)", token: alice.token)
            #expect(status == .noContent)

            let before = "019ab2c4-5d6e-7f80-9a1b-2c3d4e5f6c10"
            #expect(try await press(client, id: before).0 == .ok)
            (status, _) = try await call(client, .delete, "/doorbells/gw-0001:front-door", token: alice.token)
            #expect(status == .noContent)
            (status, json) = try await call(client, .get, "/doorbells", token: bob.token)
            #expect((json["doorbells"] as? [Any])?.isEmpty == true, "the share went with it")

            // Carol cannot enroll Alice's gateway; Alice removes it; then Carol can.
            let enroll = #"{"id":"gw-0001","secret":"\#(secret)"}"#
            (status, _) = try await call(client, .post, "/gateways", token: carol.token, enroll)
            #expect(status == .conflict)
            (status, _) = try await call(client, .delete, "/gateways/gw-0001", token: alice.token)
            #expect(status == .noContent)
            (status, _) = try await call(client, .post, "/gateways", token: carol.token, enroll)
            #expect(status == .created)
            let after = "019ab2c4-5d6e-7f80-9a1b-2c3d4e5f6c11"
            #expect(try await press(client, id: after, sequence: 2).0 == .ok)
            (status, _) = try await call(client, .get, "/events/\(after)/deliveries", token: alice.token)
            #expect(status == .notFound, "the old owner sees nothing of the new owner's")
            (status, _) = try await call(client, .get, "/events/\(after)/deliveries", token: carol.token)
            #expect(status == .ok)
            (status, _) = try await call(client, .get, "/events/\(before)/deliveries", token: carol.token)
            #expect(status == .notFound, "nor the new owner anything from before")

            (status, json) = try await call(client, .delete, "/me", token: alice.token, "{}")
            #expect(status == .badRequest && (json["reason"] as? String)?.contains(alice.id) == true, "\(json)")
            (status, _) = try await call(client, .delete, "/me", token: alice.token, #"{"confirm":"\#(alice.id)"}"#)
            #expect(status == .noContent)
            (status, _) = try await call(client, .get, "/me", token: alice.token)
            #expect(status == .unauthorized)
            #expect(try await cloud.store.beaconMessages(accountID: alice.id).isEmpty)
        }
        await cloud.client.shutdown()
    }

    /// A message too large to push (one stored before sizes were checked) answers no_message and
    /// does not spend the phone's rate-limit slot: once it is fixed, the next report is pushed.
    @Test func aMessageThatCannotBeSentSpendsNoRateLimitSlot() async throws {
        let apns = try APNsTestServer(script: ["default": ["status": 200]])
        let cloud = try await cloud(apns)
        let phone = randomDeviceToken()
        let uuid = "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0"
        try await cloud.app.test(.router) { client in
            let alice = try await household(client, guests: 0)[0]
            try await register(client, phone, account: alice.token)
            let aliceID = try #require(try await cloud.store.account(bearer: alice.token)?.id)
            try await cloud.store.database.query(
                "INSERT INTO beacon_messages (id, account_id, region, doorbell_id, site, event, title, body) VALUES ($1, $2, $3, NULL, 'home', 'entered', 'Hi', $4)",
                [.text("bm_old"), .text(aliceID), .text("ibeacon:\(uuid)/1/2"), .text(String(repeating: "\u{1F6AA}", count: 1100))],
                operation: "store an oversized message as an older release could")
            let report = #"{"uuid":"\#(uuid)","major":1,"minor":2,"token":"\#(phone)"}"#
            var (status, json) = try await call(client, .post, "/beacon-reports", token: alice.token, report)
            #expect(status == .ok && json["status"] as? String == "no_message", "\(json)")
            (status, json) = try await call(client, .put, "/beacon-messages", token: alice.token,
                                            #"{"uuid":"\#(uuid)","major":1,"minor":2,"site":"home","title":"Hi","body":"short"}"#)
            #expect(status == .ok && (json["message"] as? [String: Any])?["id"] as? String == "bm_old", "\(json)")
            (status, json) = try await call(client, .post, "/beacon-reports", token: alice.token, report)
            #expect(status == .accepted, "the slot was not spent: \(json)")
        }
        await cloud.client.shutdown()
    }
}
