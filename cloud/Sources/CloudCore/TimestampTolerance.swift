/// The `webhook-timestamp` rule: integer Unix seconds, at most `seconds` away from the receiver's
/// clock in either direction.
public struct TimestampTolerance: Sendable, Equatable {
    public let seconds: Int64

    /// Standard Webhooks' default: five minutes.
    public static let standard = TimestampTolerance(seconds: 300)

    public init(seconds: Int64) {
        self.seconds = seconds
    }

    /// Parses `header` and checks it against `now` (Unix seconds). Returns the parsed timestamp.
    public func check(_ header: String, now: Int64) throws(Rejection) -> Int64 {
        guard let timestamp = Self.parse(header) else { throw .invalidTimestamp(header) }
        let distance = timestamp.subtractingReportingOverflow(now)
        guard !distance.overflow, distance.partialValue.magnitude <= UInt64(seconds.magnitude) else {
            throw .timestampOutOfTolerance(timestamp: timestamp, now: now, toleranceSeconds: seconds)
        }
        return timestamp
    }

    /// ASCII digits only (no sign, no spaces, no fraction), at most 18 of them.
    static func parse(_ text: String) -> Int64? {
        let utf8 = text.utf8
        guard !utf8.isEmpty, utf8.count <= 18,
              utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") })
        else { return nil }
        return Int64(text)
    }
}
