import CloudCore
import Foundation
import Testing

/// The reference each push carries in its subtitle, and the receipts that quote it.
@Suite struct PushReferenceTests {
    let token = String(repeating: "ab", count: 32)

    @Test func aReferenceIsFiveUnambiguousCharactersOfTheEventAndTheToken() {
        let r = PushReference.make(eventID: "e1", token: token)
        #expect(r.count == 5)
        #expect(r.allSatisfy { "0123456789ABCDEFGHJKMNPQRSTVWXYZ".contains($0) })
        #expect(r == PushReference.make(eventID: "e1", token: token.uppercased()), "APNs tokens are case-insensitive")
        // Over many tokens the references of one event spread: a collision is rare, not common.
        let many = Set((0..<1000).map { PushReference.make(eventID: "e1", token: String(format: "%064x", $0)) })
        #expect(many.count > 990)
    }

    @Test func aReferenceIsFoundWhereverTheSubtitleHasItAndForgivesLookAlikes() {
        #expect(PushReference.find(in: "#K3QF7") == "K3QF7")
        #expect(PushReference.find(in: "Front door · #k3qf7") == "K3QF7")
        #expect(PushReference.find(in: "#K3QFO") == "K3QF0")
        #expect(PushReference.find(in: "#K3QFL ok") == "K3QF1")
        #expect(PushReference.find(in: "#K3QF77") == nil, "six characters are not a reference")
        #expect(PushReference.find(in: "#K3Q") == nil)
        #expect(PushReference.find(in: "#K3QU7") == nil, "U is not in the alphabet")
        #expect(PushReference.find(in: "") == nil)
    }

    @Test func eachPushGetsItsOwnReferenceInTheSubtitleAndNowhereElse() throws {
        let event = EventEnvelope(id: "e1", sequence: 1, type: "doorbell.pressed", gatewayID: "gw", deviceID: "front",
                                  occurredAt: "2026-11-23T18:00:00Z", deviceName: nil, isTest: false)
        // A name that spells the placeholder member must stay the name.
        let name = ##""subtitle":"#?????""##
        let stored = try #require(PushPayload.forEvent(event, doorbell: .init(id: "gw:front", name: name, gatewayID: "gw")))
        let sent = PushPayload.personalized(stored, eventID: "e1", token: token)
        #expect(sent.utf8.count == stored.utf8.count, "the stored payload's size check holds for every push")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(sent.utf8)) as? [String: Any])
        let alert = try #require((json["aps"] as? [String: Any])?["alert"] as? [String: Any])
        #expect(alert["subtitle"] as? String == "#" + PushReference.make(eventID: "e1", token: token))
        #expect(alert["title"] as? String == name)
    }

    @Test func receiptsAreReadStrictly() {
        func parse(_ type: String, _ data: String) -> PushReceiptReport? {
            PushReceiptReport.parse(type: type, body: Array(#"{"id":"r","type":"\#(type)","data":\#(data)}"#.utf8))
        }
        let shown = parse("push.displayed", ##"{"reference":"#K3QF7","phone":{"id":"p1","name":"Anna"},"displayed_at":"2026-11-23T18:00:01.25Z"}"##)
        #expect(shown == PushReceiptReport(kind: .displayed, pressEventID: nil, reference: "K3QF7", phoneID: "p1", phoneName: "Anna",
                                           displayedAtMilliseconds: 1_795_456_801_250))
        #expect(parse("push.displayed", #"{"subtitle":"Front · #K3QF7","phone":{"id":"p1"}}"#)?.reference == "K3QF7")
        #expect(parse("push.displayed", #"{"phone":{"id":"p1"}}"#) == nil, "no reference")
        #expect(parse("push.displayed", ##"{"reference":"#K3QF7","phone":{"id":""}}"##) == nil, "no phone")
        #expect(parse("push.not_displayed", #"{"phone":{"id":"p1"}}"#) == nil, "no press")
        #expect(parse("push.not_displayed", #"{"press_event_id":"e1","phone":{"id":"p1"}}"#)?.pressEventID == "e1")
        #expect(parse("doorbell.pressed", ##"{"reference":"#K3QF7","phone":{"id":"p1"}}"##) == nil)
        #expect(PushReceiptReport.parse(type: "push.displayed", body: Array("not json".utf8)) == nil)
    }
}
