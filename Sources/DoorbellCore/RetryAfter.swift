// The Retry-After response header (RFC 9110 §10.2.3): either delay-seconds or an HTTP-date
// (IMF-fixdate, "Sun, 06 Nov 1994 08:49:37 GMT"). Pure; the caller passes its wall clock.

public enum RetryAfter {
    /// Seconds to wait, or nil when the value is neither form. A date in the past means 0.
    public static func seconds(_ value: String, nowUnixSeconds: Int64) -> Int64? {
        let v = value.trimmingCharacters(in: " \t")
        if let n = Int64(v) { return n >= 0 ? n : nil }
        guard let date = parseIMFFixdate(v) else { return nil }
        return max(0, date - nowUnixSeconds)
    }

    static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// "Sun, 06 Nov 1994 08:49:37 GMT" → Unix seconds.
    static func parseIMFFixdate(_ s: String) -> Int64? {
        let parts = s.split(separator: " ")
        guard parts.count == 6, parts[0].hasSuffix(","), parts[5] == "GMT",
              let day = Int64(parts[1]), (1...31).contains(day),
              let monthIndex = months.firstIndex(of: String(parts[2])),
              let year = Int64(parts[3]), (1970...9999).contains(year) else { return nil }
        let time = parts[4].split(separator: ":")
        guard time.count == 3, let h = Int64(time[0]), let m = Int64(time[1]), let sec = Int64(time[2]),
              (0...23).contains(h), (0...59).contains(m), (0...60).contains(sec) else { return nil }
        return daysFromCivil(year: year, month: Int64(monthIndex + 1), day: day) * 86_400 + h * 3_600 + m * 60 + sec
    }

    /// Howard Hinnant's days_from_civil.
    static func daysFromCivil(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }
}
