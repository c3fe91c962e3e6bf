import CloudCore
import CloudStore
import Foundation
import Hummingbird
import HummingbirdTesting
import Testing

/// Receipts end to end on the cloud's side: each push carries its own reference in the subtitle;
/// a base station reads it off a phone and reports `push.displayed`; the cloud records it on that
/// push, learns the phone, and places a later `push.not_displayed` from it. The API and
/// `doorbell-cloud events` show press → APNs → displayed per push.
extension FanOutTests {
    func receipt(_ type: String, id: String, sequence: Int64, data: String) -> String {
        #"{"id":"\#(id)","sequence":\#(sequence),"type":"\#(type)","gateway_id":"gw-0001","occurred_at":"2026-11-23T18:00:05.000000Z","test":false,"device":{"id":"front-door","name":"Front door","radio":"ble"},"data":\#(data)}"#
    }

    @Test(arguments: StoreBackend.available)
    func aPushDisplayedOnAPhoneIsRecordedOnItsOwnPush(backend: StoreBackend) async throws {
        let anna = randomDeviceToken()
        let ben = randomDeviceToken()
        let apns = try APNsTestServer(script: ["default": ["status": 200]])
        let cloud = try await cloud(apns, backend: backend)
        let first = "019ab2c4-5d6e-7f80-9a1b-2c3d4e5f6b01"
        let second = "019ab2c4-5d6e-7f80-9a1b-2c3d4e5f6b02"
        try await withFanOut(cloud) {
            try await cloud.app.test(.router) { client in
                let owner = try await household(client, guests: 0)[0]
                try await register(client, anna, account: owner.token)
                try await register(client, ben, account: owner.token)
                #expect(try await press(client, id: first).1["pushes"] as? Int == 2)
                _ = try await settled(first, cloud.store)

                // Each phone's alert carries its own reference; the base station reads Anna's.
                let requests = try apns.processed()
                func subtitle(_ token: String) -> String? {
                    let payload = requests.first { $0["token"] as? String == token }?["payload"] as? [String: Any]
                    return ((payload?["aps"] as? [String: Any])?["alert"] as? [String: Any])?["subtitle"] as? String
                }
                let annas = try #require(subtitle(anna))
                #expect(annas == "#" + PushReference.make(eventID: first, token: anna))
                #expect(subtitle(ben) != annas)

                let displayed = receipt("push.displayed", id: "r1", sequence: 2, data: #"{"reference":"\#(annas.lowercased())","phone":{"id":"ble:4c:aa:bb:cc:dd:ee","name":"Anna's iPhone"},"displayed_at":"2026-11-23T18:00:01.250000Z"}"#)
                var (status, json) = try await post(client, id: "r1", body: displayed)
                #expect(status == .ok && json["receipt"] as? String == "recorded", "\(json)")
                // A reference that is no push of this gateway's is stored but matches nothing.
                (status, json) = try await post(client, id: "r2", body: receipt("push.displayed", id: "r2", sequence: 3, data: ##"{"reference":"#00000","phone":{"id":"x"}}"##))
                #expect(json["receipt"] as? String == "unmatched", "\(json)")

                // The next press: Anna's phone, connected, never shows it; Ben's is not watched.
                #expect(try await press(client, id: second, sequence: 4).1["pushes"] as? Int == 2)
                _ = try await settled(second, cloud.store)
                (status, json) = try await post(client, id: "r3", body: receipt("push.not_displayed", id: "r3", sequence: 5, data: #"{"press_event_id":"\#(second)","phone":{"id":"ble:4c:aa:bb:cc:dd:ee"}}"#))
                #expect(json["receipt"] as? String == "recorded", "\(json)")
                // A phone never seen displaying anything cannot be placed.
                (status, json) = try await post(client, id: "r4", body: receipt("push.not_displayed", id: "r4", sequence: 6, data: #"{"press_event_id":"\#(second)","phone":{"id":"ble:unknown"}}"#))
                #expect(json["receipt"] as? String == "unmatched", "\(json)")

                (status, json) = try await call(client, .get, "/events/\(first)/deliveries", token: owner.token)
                let rows = try #require(json["deliveries"] as? [[String: Any]])
                let annaRow = try #require(rows.first { $0["phone_id"] as? String == PhoneClaim.phoneID(token: anna) })
                #expect(annaRow["receipt"] as? String == "displayed")
                #expect(annaRow["displayed_on"] as? String == "Anna's iPhone")
                #expect(annaRow["press_to_displayed_ms"] as? Int == 1_250)
                let accepted = try #require(annaRow["accepted_at_ms"] as? Int)
                #expect(annaRow["accepted_to_displayed_ms"] as? Int == 1_795_456_801_250 - accepted)
                #expect(rows.first { $0["phone_id"] as? String == PhoneClaim.phoneID(token: ben) }?["receipt"] as? String == "none")

                (status, json) = try await call(client, .get, "/events/\(second)/deliveries", token: owner.token)
                let later = try #require(json["deliveries"] as? [[String: Any]])
                #expect(later.first { $0["phone_id"] as? String == PhoneClaim.phoneID(token: anna) }?["receipt"] as? String == "not_displayed",
                        "APNs accepted it, and the phone connected to the base station never showed it")
            }
        }
    }
}
