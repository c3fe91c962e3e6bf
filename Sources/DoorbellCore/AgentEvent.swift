// Events and their wire encoding (docs/protocol.md). The body is built once, when the event
// enters the outbox, and the exact bytes are what gets signed and sent on every attempt.

public enum EventType: String, Sendable, CaseIterable {
    case doorbellPressed = "doorbell.pressed"
    case doorbellHeld = "doorbell.held"
    case doorbellDoublePressed = "doorbell.double_pressed"
    case doorbellTriplePressed = "doorbell.triple_pressed"
    case doorbellLongPressed = "doorbell.long_pressed"
    case doorbellLongDoublePressed = "doorbell.long_double_pressed"
    case doorbellLongTriplePressed = "doorbell.long_triple_pressed"
    /// A press of an answer button (`[[device]] kind = "answer_button"`): someone opened the door.
    case doorAnswered = "door.answered"
    case beaconEntered = "beacon.entered"
    case beaconExited = "beacon.exited"
    /// The outbox hit its bounds and dropped events (data lists them): explains sequence gaps.
    case gatewayEvicted = "gateway.evicted"
    /// The uplink parked an event as a dead letter (refused for good, or failing while the
    /// receiver took others): data says which, why, and how to send it again.
    case gatewayDeadLetter = "gateway.dead_letter"
    /// From the owner's iPhones over ANCS (`[radio.ble] ancs`): delivery receipts of the pushes,
    /// notifications chosen as local triggers, and the bonds' changes.
    case pushDisplayed = "push.displayed"
    case pushNotDisplayed = "push.not_displayed"
    case phoneNotification = "phone.notification"
    /// A notification reported as `phone.notification` changed or went on the phone (a call
    /// answered or declined, a message read): same `uid` and phone.
    case phoneNotificationModified = "phone.notification_modified"
    case phoneNotificationRemoved = "phone.notification_removed"
    case phonePaired = "phone.paired"
    case phonePairingFailed = "phone.pairing_failed"
    case phoneForgotten = "phone.forgotten"
}

public struct DeviceRef: Sendable, Equatable {
    public var id: String
    public var name: String
    public var radio: String
    public init(id: String, name: String, radio: String) { self.id = id; self.name = name; self.radio = radio }
}

public struct AgentEvent: Sendable, Equatable {
    public var type: EventType
    public var device: DeviceRef
    /// Wall-clock time of the first frame, Unix microseconds.
    public var occurredAtMicros: Int64
    public var clockSynced: Bool
    public var test: Bool
    public var data: JSONValue
    /// Monotonic time and boot of the first frame: what corrects `occurred_at` once the wall
    /// clock is synchronized (same boot only).
    public var monotonicMicros: Int64?
    public var bootID: String?

    public init(type: EventType, device: DeviceRef, occurredAtMicros: Int64, clockSynced: Bool, test: Bool = false,
                data: JSONValue = .object([])) {
        self.type = type
        self.device = device
        self.occurredAtMicros = occurredAtMicros
        self.clockSynced = clockSynced
        self.test = test
        self.data = data
    }

    public func json(id: String, sequence: Int64, gatewayID: String, agentVersion: String) -> JSONValue {
        .object([
            ("id", .string(id)),
            ("sequence", .number(Double(sequence))),
            ("type", .string(type.rawValue)),
            ("gateway_id", .string(gatewayID)),
            ("occurred_at", .string(RFC3339.format(micros: occurredAtMicros))),
            ("clock_synced", .bool(clockSynced)),
            ("monotonic_us", monotonicMicros.map { .number(Double($0)) } ?? .null),
            ("boot_id", bootID.map(JSONValue.string) ?? .null),
            ("test", .bool(test)),
            ("device", .object([("id", .string(device.id)), ("name", .string(device.name)), ("radio", .string(device.radio))])),
            ("data", data),
            ("agent", .object([("version", .string(agentVersion))])),
        ])
    }

    public func body(id: String, sequence: Int64, gatewayID: String, agentVersion: String) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(320)
        write(into: &out, id: id, sequence: sequence, gatewayID: gatewayID, agentVersion: agentVersion)
        return out
    }

    /// The bytes of `JSONWriter.encode(json(...))`, appended to `out` without building the tree
    /// (replay prints hundreds of thousands of events into one reused buffer). The tests hold the
    /// two to the same bytes for any event.
    public func write(into out: inout [UInt8], id: String, sequence: Int64, gatewayID: String, agentVersion: String) {
        write(into: &out, gatewayID: gatewayID, agentVersion: agentVersion, sequence: sequence) { JSONWriter.appendString(id, to: &$0) }
    }

    /// The same with the id written by `writeID` (a quoted JSON string), so a caller that makes
    /// ids can write them in place.
    public func write(into out: inout [UInt8], gatewayID: String, agentVersion: String, sequence: Int64,
                      writeID: (inout [UInt8]) -> Void) {
        JSONWriter.appendLiteral(#"{"id":"#, to: &out)
        writeID(&out)
        JSONWriter.appendLiteral(#","sequence":"#, to: &out)
        JSONWriter.appendNumber(Double(sequence), to: &out) // as .number(Double(sequence)) encodes
        JSONWriter.appendLiteral(#","type":"#, to: &out)
        JSONWriter.appendString(type.rawValue, to: &out)
        JSONWriter.appendLiteral(#","gateway_id":"#, to: &out)
        JSONWriter.appendString(gatewayID, to: &out)
        JSONWriter.appendLiteral(#","occurred_at":""#, to: &out)
        RFC3339.append(micros: occurredAtMicros, to: &out)
        JSONWriter.appendLiteral(clockSynced ? #"","clock_synced":true,"monotonic_us":"# : #"","clock_synced":false,"monotonic_us":"#, to: &out)
        if let monotonicMicros { JSONWriter.appendNumber(Double(monotonicMicros), to: &out) } else { JSONWriter.appendLiteral("null", to: &out) }
        JSONWriter.appendLiteral(#","boot_id":"#, to: &out)
        if let bootID { JSONWriter.appendString(bootID, to: &out) } else { JSONWriter.appendLiteral("null", to: &out) }
        JSONWriter.appendLiteral(test ? #","test":true,"device":{"id":"# : #","test":false,"device":{"id":"#, to: &out)
        JSONWriter.appendString(device.id, to: &out)
        JSONWriter.appendLiteral(#","name":"#, to: &out)
        JSONWriter.appendString(device.name, to: &out)
        JSONWriter.appendLiteral(#","radio":"#, to: &out)
        JSONWriter.appendString(device.radio, to: &out)
        JSONWriter.appendLiteral(#"},"data":"#, to: &out)
        JSONWriter.append(data, to: &out)
        JSONWriter.appendLiteral(#","agent":{"version":"#, to: &out)
        JSONWriter.appendString(agentVersion, to: &out)
        JSONWriter.appendLiteral("}}", to: &out)
    }
}

public enum RFC3339 {
    /// Year, month, day, second of the day and microseconds of a Unix time in microseconds.
    static func civil(micros: Int64) -> (year: Int64, month: Int64, day: Int64, secOfDay: Int64, frac: Int64) {
        let secondsTotal = micros >= 0 ? micros / 1_000_000 : (micros - 999_999) / 1_000_000
        let frac = micros - secondsTotal * 1_000_000
        let days = secondsTotal >= 0 ? secondsTotal / 86_400 : (secondsTotal - 86_399) / 86_400
        let secOfDay = secondsTotal - days * 86_400
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yoe + era * 400 + (month <= 2 ? 1 : 0)
        return (year, month, day, secOfDay, frac)
    }

    /// "2026-11-22T14:03:07.123456Z". Civil-from-days (Howard Hinnant's algorithm), no Foundation.
    public static func format(micros: Int64) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(27)
        append(micros: micros, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// `format`'s text appended to `out`, with no String made.
    public static func append(micros: Int64, to out: inout [UInt8]) {
        let (year, month, day, secOfDay, frac) = civil(micros: micros)
        pad(year, 4, &out)
        out.append(UInt8(ascii: "-"))
        pad(month, 2, &out)
        out.append(UInt8(ascii: "-"))
        pad(day, 2, &out)
        out.append(UInt8(ascii: "T"))
        pad(secOfDay / 3600, 2, &out)
        out.append(UInt8(ascii: ":"))
        pad(secOfDay / 60 % 60, 2, &out)
        out.append(UInt8(ascii: ":"))
        pad(secOfDay % 60, 2, &out)
        out.append(UInt8(ascii: "."))
        pad(frac, 6, &out)
        out.append(UInt8(ascii: "Z"))
    }

    /// The inverse of `format`: "YYYY-MM-DDTHH:MM:SS[.f{1,6}]Z" in UTC; nil for anything else.
    public static func parse(_ text: String) -> Int64? {
        let b = Array(text.utf8)
        guard b.count >= 20, b.last == UInt8(ascii: "Z"), b[4] == UInt8(ascii: "-"), b[7] == UInt8(ascii: "-"),
              b[10] == UInt8(ascii: "T"), b[13] == UInt8(ascii: ":"), b[16] == UInt8(ascii: ":") else { return nil }
        func field(_ from: Int, _ count: Int) -> Int64? {
            var v: Int64 = 0
            for c in b[from..<from + count] {
                guard c >= 0x30, c <= 0x39 else { return nil }
                v = v * 10 + Int64(c - 0x30)
            }
            return v
        }
        guard let y = field(0, 4), let mo = field(5, 2), let d = field(8, 2), let h = field(11, 2), let mi = field(14, 2), let s = field(17, 2),
              (1...12).contains(mo), (1...31).contains(d), h < 24, mi < 60, s < 61 else { return nil }
        var frac: Int64 = 0
        if b.count > 20 {
            let digits = b.count - 21
            guard b[19] == UInt8(ascii: "."), (1...6).contains(digits), let f = field(20, digits) else { return nil }
            frac = f
            for _ in digits..<6 { frac *= 10 }
        } else if b.count != 20 {
            return nil
        }
        // Days from civil (Howard Hinnant), the inverse of `format`'s conversion.
        let yy = mo <= 2 ? y - 1 : y
        let era = (yy >= 0 ? yy : yy - 399) / 400
        let yoe = yy - era * 400
        let doy = (153 * (mo > 2 ? mo - 3 : mo + 9) + 2) / 5 + d - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        let days = era * 146_097 + doe - 719_468
        return ((days * 86_400 + h * 3600 + mi * 60 + s) * 1_000_000) + frac
    }

    /// `v` in decimal, zero-padded on the left to `width` digits (as String(v) padded: a negative
    /// year keeps its sign before the zeros' place, as it did).
    static func pad(_ v: Int64, _ width: Int, _ out: inout [UInt8]) {
        if v >= 0 {
            var digits = 1, rest = v / 10
            while rest > 0 { digits += 1; rest /= 10 }
            for _ in digits..<max(width, digits) { out.append(0x30) }
        } else {
            // String(v) counts the sign among the width.
            var digits = 2, rest = v / 10
            while rest != 0 { digits += 1; rest /= 10 }
            for _ in digits..<max(width, digits) { out.append(0x30) }
        }
        JSONWriter.appendInteger(v, to: &out)
    }
}

public enum UUIDv7 {
    /// RFC 9562 version 7: 48-bit Unix milliseconds, version, 12 random bits, variant, 62 random bits.
    /// Sorts by creation time, which keeps the outbox and receiver logs readable.
    public static func make(unixMillis: Int64, random: inout some RandomNumberGenerator) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(36)
        append(unixMillis: unixMillis, random: &random, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// `make`'s 36 characters appended to `out` (no String, no array of its own).
    public static func append(unixMillis: Int64, random: inout some RandomNumberGenerator, to out: inout [UInt8]) {
        let ms = UInt64(max(0, unixMillis)) & 0xFFFF_FFFF_FFFF
        let r1 = random.next() as UInt64
        let r2 = random.next() as UInt64
        // Bytes 0–5 the time; 6–7 r1's two top bytes, lower first, under the version nibble;
        // 8–15 r2's bytes lowest first, under the variant bits (as this has always laid them).
        let high = ms << 16 | (0x70 | r1 >> 48 & 0x0F) << 8 | r1 >> 56
        let low = (r2.byteSwapped & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000
        let hex: StaticString = "0123456789abcdef"
        for i in 0..<16 {
            if i == 4 || i == 6 || i == 8 || i == 10 { out.append(UInt8(ascii: "-")) }
            let byte = i < 8 ? UInt8(truncatingIfNeeded: high >> (56 - 8 * UInt64(i))) : UInt8(truncatingIfNeeded: low >> (56 - 8 * UInt64(i - 8)))
            out.append(hex.utf8Start[Int(byte >> 4)])
            out.append(hex.utf8Start[Int(byte & 0x0F)])
        }
    }
}

/// Exponential backoff with full jitter (AWS architecture blog): the delay is uniform in
/// [0, min(cap, initial * 2^attempt)], so a fleet of gateways coming back from an outage
/// doesn't hit the cloud in lock-step.
public struct FullJitterBackoff: Sendable, Equatable {
    public var initialMillis: Int
    public var capMillis: Int
    public init(initialMillis: Int, capMillis: Int) { self.initialMillis = initialMillis; self.capMillis = capMillis }

    public func ceiling(attempt: Int) -> Int {
        let shift = min(max(attempt, 0), 30)
        let grown = initialMillis.multipliedReportingOverflow(by: 1 << shift)
        return grown.overflow ? capMillis : min(capMillis, grown.partialValue)
    }

    public func delay(attempt: Int, random: inout some RandomNumberGenerator) -> Int {
        Int.random(in: 0...ceiling(attempt: attempt), using: &random)
    }
}

/// What an event's outbox row keeps about the clock that recorded it, in columns of its own, so
/// correcting the time later needs no parse of the stored body.
public struct ClockStamp: Sendable, Equatable {
    public var monotonicMicros: Int64?
    public var bootID: String?
    public init(monotonicMicros: Int64?, bootID: String?) {
        self.monotonicMicros = monotonicMicros
        self.bootID = bootID
    }
}

extension AgentEvent {
    /// Set when the event was recorded before the wall clock was synchronized: its time is
    /// corrected before the first delivery.
    public var clockStamp: ClockStamp? { clockSynced ? nil : ClockStamp(monotonicMicros: monotonicMicros, bootID: bootID) }
}

/// Rewrites the `occurred_at` of an event recorded before the wall clock was synchronized.
/// Pure: the caller passes the synchronized clock, its monotonic reading and the current boot.
public enum ClockCorrection {
    /// Whether `body` still needs a look (cheap byte search before any parsing).
    public static func needsCorrection(_ body: [UInt8]) -> Bool {
        body.containsSequence(Array(#""clock_synced":false"#.utf8)) && !body.containsSequence(Array(#""clock_corrected""#.utf8))
    }

    /// The stamp written in a body (outboxes from before the stamp had columns); nil when the body
    /// is not a JSON object.
    public static func stamp(of body: [UInt8]) -> ClockStamp? {
        guard let value = try? JSONReader.parse(bytes: body), case .object = value else { return nil }
        return ClockStamp(monotonicMicros: value["monotonic_us"]?.intValue, bootID: value["boot_id"]?.stringValue)
    }

    /// The corrected time, or nil when it cannot be corrected.
    /// Same boot: occurred_at = now − (monotonic now − monotonic then). Another boot: the
    /// monotonic clock restarted. An unknown boot (no boot_id readable) is never the same boot:
    /// its monotonic time may be an earlier boot's.
    public static func correctedTime(_ stamp: ClockStamp, nowWallMicros: Int64, nowMonoMicros: Int64, bootID: String) -> Int64? {
        guard bootID != "unknown", !bootID.isEmpty, stamp.bootID == bootID, let mono = stamp.monotonicMicros, mono <= nowMonoMicros else { return nil }
        return nowWallMicros - (nowMonoMicros - mono)
    }

    /// Returns the corrected body, or nil when it is not JSON (then it is sent as it is).
    /// Same boot: `occurred_at` corrected, `clock_corrected: true`; otherwise `clock_corrected: false`.
    public static func correct(_ body: [UInt8], nowWallMicros: Int64, nowMonoMicros: Int64, bootID: String) -> [UInt8]? {
        guard let stamp = stamp(of: body) else { return nil }
        return correct(body, recordedBy: stamp, nowWallMicros: nowWallMicros, nowMonoMicros: nowMonoMicros, bootID: bootID)
    }

    /// The same from the row's stamp, without parsing: the body is the agent's own encoding
    /// (`AgentEvent.json`), where the top-level `occurred_at` comes before any nested object and a
    /// key's `":"` cannot occur inside a string (its quotes are escaped), so the first match is it.
    /// The bytes around the two members stay exactly as signed. Nil when they are not there.
    public static func correct(_ body: [UInt8], recordedBy stamp: ClockStamp, nowWallMicros: Int64, nowMonoMicros: Int64,
                               bootID: String) -> [UInt8]? {
        guard let synced = body.firstRange(of: Array(#""clock_synced":false"#.utf8)),
              let key = body.firstRange(of: Array(#""occurred_at":""#.utf8)), key.upperBound <= synced.lowerBound,
              let valueEnd = body[key.upperBound..<synced.lowerBound].firstIndex(of: UInt8(ascii: "\"")) else { return nil }
        let time = correctedTime(stamp, nowWallMicros: nowWallMicros, nowMonoMicros: nowMonoMicros, bootID: bootID)
        var out = body
        // The later splice first, so the earlier one's offsets still hold.
        out.insert(contentsOf: Array(",\"clock_corrected\":\(time != nil)".utf8), at: synced.upperBound)
        if let time { out.replaceSubrange(key.upperBound..<valueEnd, with: Array(RFC3339.format(micros: time).utf8)) }
        return out
    }
}

extension Array where Element == UInt8 {
    func containsSequence(_ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, count >= needle.count else { return false }
        return (0...(count - needle.count)).contains { i in self[i..<(i + needle.count)].elementsEqual(needle) }
    }
}
