import CloudCore
import Testing

@Suite struct EventLineTests {
    @Test func eventLineHasTheDocumentedShapeAndOrder() {
        let envelope = EventEnvelope(id: "e1", sequence: 3, type: "doorbell.pressed", gatewayID: "gw-1",
                                     deviceID: "front-door", occurredAt: "2026-11-22T14:03:07.123456Z")
        #expect(EventLine.json(envelope, verified: [.v1, .v1a]) ==
            #"{"id":"e1","sequence":3,"type":"doorbell.pressed","gateway_id":"gw-1","device":"front-door","occurred_at":"2026-11-22T14:03:07.123456Z","verified":["v1","v1a"]}"#)
    }

    @Test func missingDeviceIsNull() {
        let envelope = EventEnvelope(id: "e1", sequence: 1, type: "t", gatewayID: "g", deviceID: nil, occurredAt: "o")
        #expect(EventLine.json(envelope, verified: [.v1a]).contains(#""device":null"#))
    }

    @Test func stringsAreEscaped() {
        #expect(JSONText.object(["k": .string("a\"b\\c\nd\u{1}é")]) == #"{"k":"a\"b\\c\nd\u0001é"}"#)
    }
}
