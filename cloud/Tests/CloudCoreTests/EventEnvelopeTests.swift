import CloudCore
import Testing

@Suite struct EventEnvelopeTests {
    static let protocolExample = """
        {
          "id": "019a4f6e-2b1c-7c3d-8e9f-0a1b2c3d4e5f",
          "sequence": 42,
          "type": "doorbell.pressed",
          "gateway_id": "gw-0001",
          "occurred_at": "2026-11-22T14:03:07.123456Z",
          "clock_synced": true,
          "test": false,
          "device": { "id": "front-door", "name": "Front door", "radio": "rtl433" },
          "data": { "code": "91568f", "model": "EV1527-flex", "rssi_db": -0.1, "suppressed": 0 },
          "agent": { "version": "0.1.0" },
          "some_future_field": [1, 2, 3]
        }
        """

    @Test func parsesTheProtocolExample() throws {
        let envelope = try EventEnvelope.parse(Array(Self.protocolExample.utf8))
        #expect(envelope == EventEnvelope(
            id: "019a4f6e-2b1c-7c3d-8e9f-0a1b2c3d4e5f", sequence: 42, type: "doorbell.pressed",
            gatewayID: "gw-0001", deviceID: "front-door", occurredAt: "2026-11-22T14:03:07.123456Z",
            deviceName: "Front door", isTest: false))
    }

    @Test func testFlagAndDeviceNameAreRead() throws {
        let body = #"{"id":"a","sequence":1,"type":"doorbell.pressed","gateway_id":"g","occurred_at":"t","test":true,"device":{"id":"d"}}"#
        let envelope = try EventEnvelope.parse(Array(body.utf8))
        #expect(envelope.isTest)
        #expect(envelope.deviceName == nil)
    }

    @Test func deviceIsOptional() throws {
        let body = #"{"id":"a","sequence":1,"type":"gateway.started","gateway_id":"g","occurred_at":"t"}"#
        #expect(try EventEnvelope.parse(Array(body.utf8)).deviceID == nil)
    }

    @Test(arguments: [
        ("[1,2]", "invalid body: not a JSON object"),
        ("\"x\"", "invalid body: not a JSON object"),
        // Where it breaks, from the strict check that runs before decoding.
        ("{\"id\":", "invalid body: not valid JSON: the text ends where a value should be at byte 6"),
        ("", "invalid body: not valid JSON: the text ends where a value should be at byte 0"),
        (#"{"id":"a","type":"t","gateway_id":"g","occurred_at":"o"}"#, "invalid body: missing field 'sequence'"),
        (#"{"id":"a","sequence":"1","type":"t","gateway_id":"g","occurred_at":"o"}"#,
         "invalid body: field 'sequence' must be an integer"),
        (#"{"id":"a","sequence":0,"type":"t","gateway_id":"g","occurred_at":"o"}"#,
         "invalid body: field 'sequence' must be an integer ≥ 1, got 0"),
        (#"{"id":"a","sequence":1,"type":"","gateway_id":"g","occurred_at":"o"}"#, "invalid body: field 'type' is empty"),
        (#"{"id":"a","sequence":1,"type":"t","gateway_id":"g","occurred_at":"o","device":{}}"#,
         "invalid body: missing field 'device.id'"),
    ])
    func rejectsMalformedBodies(_ body: String, _ message: String) {
        #expect {
            try EventEnvelope.parse(Array(body.utf8))
        } throws: { error in
            (error as? Rejection)?.message == message && (error as? Rejection)?.category == .validation
        }
    }
}
