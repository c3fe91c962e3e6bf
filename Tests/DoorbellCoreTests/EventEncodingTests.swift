import DoorbellCore
import Testing

@Suite struct EventEncodingTests {
    @Test func pressedEventBodyMatchesGolden() throws {
        let event = AgentEvent(type: .doorbellPressed, device: DeviceRef(id: "front-door", name: "Front \"door\"", radio: "rtl433"),
                               occurredAtMicros: 1_795_355_235_181_475, clockSynced: true,
                               data: .object([("code", .string("91568f")), ("model", .string("EV1527-flex")), ("suppressed", .number(0))]))
        let body = event.body(id: "019a4f6e-2b1c-7c3d-8e9f-0a1b2c3d4e5f", sequence: 42, gatewayID: "gw-0001", agentVersion: "0.1.0")
        try Golden.check(String(decoding: body, as: UTF8.self) + "\n", against: "event-pressed.golden.json")
        // The body is valid JSON whose id and sequence are what the outbox assigned.
        let parsed = try JSONReader.parse(bytes: body)
        #expect(parsed["sequence"]?.intValue == 42)
        #expect(parsed["occurred_at"]?.stringValue == "2026-11-22T13:47:15.181475Z")
    }

    @Test(arguments: [
        (Int64(0), "1970-01-01T00:00:00.000000Z"),
        (Int64(951_782_400_000_001), "2000-02-29T00:00:00.000001Z"),
        (Int64(-1), "1969-12-31T23:59:59.999999Z"),
        (Int64(4_102_444_799_999_999), "2099-12-31T23:59:59.999999Z"),
    ])
    func rfc3339(micros: Int64, expected: String) {
        #expect(RFC3339.format(micros: micros) == expected)
    }

    @Test func uuidV7HasVersionVariantAndTimeOrder() {
        var rng = SystemRandomNumberGenerator()
        let a = UUIDv7.make(unixMillis: 1_700_000_000_000, random: &rng)
        let b = UUIDv7.make(unixMillis: 1_700_000_000_001, random: &rng)
        #expect(a.count == 36)
        #expect(Array(a)[14] == "7")
        #expect("89ab".contains(Array(a)[19]))
        #expect(a < b)
        #expect(a.hasPrefix("018bcfe5-6800-7"))
    }

    @Test func backoffStaysWithinItsCeiling() {
        let backoff = FullJitterBackoff(initialMillis: 1_000, capMillis: 60_000)
        var rng = SystemRandomNumberGenerator()
        #expect(backoff.ceiling(attempt: 0) == 1_000)
        #expect(backoff.ceiling(attempt: 3) == 8_000)
        #expect(backoff.ceiling(attempt: 200) == 60_000)
        for attempt in 0..<40 { #expect((0...60_000).contains(backoff.delay(attempt: attempt, random: &rng))) }
    }
}

@Suite struct RetryAfterTests {
    @Test(arguments: [
        ("120", Int64(120)),
        ("0", Int64(0)),
        ("Sun, 06 Nov 1994 08:49:37 GMT", Int64(30)),   // now = 784111747
        ("Sun, 06 Nov 1994 08:40:00 GMT", Int64(0)),    // in the past
    ])
    func parsesBothForms(value: String, expected: Int64) {
        #expect(RetryAfter.seconds(value, nowUnixSeconds: 784_111_747) == expected)
    }

    @Test(arguments: ["-5", "soon", "Sun, 06 Nov 1994 25:49:37 GMT", "06 Nov 1994 08:49:37 GMT", ""])
    func rejectsGarbage(value: String) {
        #expect(RetryAfter.seconds(value, nowUnixSeconds: 0) == nil)
    }
}

@Suite struct ClockCorrectionTests {
    func body(synced: Bool, boot: String?, mono: Int64?) -> [UInt8] {
        var e = AgentEvent(type: .doorbellPressed, device: DeviceRef(id: "d", name: "d", radio: "rtl433"),
                           occurredAtMicros: 1_000_000, clockSynced: synced) // 1970, as a Pi without RTC says
        e.bootID = boot
        e.monotonicMicros = mono
        return e.body(id: "e", sequence: 1, gatewayID: "gw", agentVersion: "0")
    }

    @Test func sameBootIsCorrectedFromTheMonotonicOffset() throws {
        let b = body(synced: false, boot: "boot-a", mono: 5_000_000)
        #expect(ClockCorrection.needsCorrection(b))
        // Synchronized now: 2026-11-22T12:00:10Z at monotonic 15 s → the press was 10 s earlier.
        let fixed = try #require(ClockCorrection.correct(b, nowWallMicros: 1_795_348_810_000_000, nowMonoMicros: 15_000_000, bootID: "boot-a"))
        let json = try JSONReader.parse(bytes: fixed)
        #expect(json["occurred_at"]?.stringValue == "2026-11-22T12:00:00.000000Z")
        #expect(json["clock_corrected"]?.boolValue == true)
        #expect(json["clock_synced"]?.boolValue == false, "it still says how it was recorded")
        #expect(!ClockCorrection.needsCorrection(fixed), "corrected once")
    }

    @Test func anotherBootCannotBeCorrectedAndSaysSo() throws {
        let b = body(synced: false, boot: "boot-a", mono: 5_000_000)
        let fixed = try #require(ClockCorrection.correct(b, nowWallMicros: 1_795_348_810_000_000, nowMonoMicros: 15_000_000, bootID: "boot-b"))
        let json = try JSONReader.parse(bytes: fixed)
        #expect(json["occurred_at"]?.stringValue == "1970-01-01T00:00:01.000000Z")
        #expect(json["clock_corrected"]?.boolValue == false)
    }

    @Test func anUnknownBootIsNeverTheSameBoot() throws {
        // Under ProcSubset=pid an agent that cannot read boot_id says "unknown" on every boot; an
        // event from an earlier boot must not be shifted by this boot's monotonic clock.
        let b = body(synced: false, boot: "unknown", mono: 5_000_000)
        let fixed = try #require(ClockCorrection.correct(b, nowWallMicros: 1_795_348_810_000_000, nowMonoMicros: 15_000_000, bootID: "unknown"))
        let json = try JSONReader.parse(bytes: fixed)
        #expect(json["occurred_at"]?.stringValue == "1970-01-01T00:00:01.000000Z")
        #expect(json["clock_corrected"]?.boolValue == false)
    }

    @Test func syncedEventsAreLeftAlone() {
        #expect(!ClockCorrection.needsCorrection(body(synced: true, boot: "a", mono: 1)))
    }
}
