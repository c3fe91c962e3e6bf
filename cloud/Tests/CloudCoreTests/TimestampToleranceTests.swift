import CloudCore
import Testing

@Suite struct TimestampToleranceTests {
    let tolerance = TimestampTolerance(seconds: 300)
    let now: Int64 = 1_700_000_000

    @Test func acceptsWithinToleranceBothWays() throws {
        #expect(try tolerance.check("1700000000", now: now) == now)
        #expect(try tolerance.check("1699999700", now: now) == now - 300)
        #expect(try tolerance.check("1700000300", now: now) == now + 300)
    }

    @Test func rejectsBeyondTolerance() {
        #expect(throws: Rejection.timestampOutOfTolerance(timestamp: now - 301, now: now, toleranceSeconds: 300)) {
            try tolerance.check("1699999699", now: now)
        }
        #expect(throws: Rejection.timestampOutOfTolerance(timestamp: now + 301, now: now, toleranceSeconds: 300)) {
            try tolerance.check("1700000301", now: now)
        }
        // A gateway without RTC that booted in 1970.
        #expect(throws: Rejection.timestampOutOfTolerance(timestamp: 12, now: now, toleranceSeconds: 300)) {
            try tolerance.check("12", now: now)
        }
    }

    @Test(arguments: ["", "abc", "-5", "+1700000000", "1700000000.5", " 1700000000", "1e9", "9999999999999999999999"])
    func rejectsNonIntegerTimestamps(_ header: String) {
        #expect(throws: Rejection.invalidTimestamp(header)) { try tolerance.check(header, now: now) }
    }

    @Test func rejectionIsAnAuthenticationFailure() {
        #expect(Rejection.timestampOutOfTolerance(timestamp: 0, now: now, toleranceSeconds: 300).category == .authentication)
        #expect(Rejection.timestampOutOfTolerance(timestamp: 0, now: now, toleranceSeconds: 300).code == "stale_timestamp")
    }
}
