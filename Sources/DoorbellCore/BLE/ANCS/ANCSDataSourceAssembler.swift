// ANCS Data Source (22EAC6E9-24D6-4BB5-BE44-B36ACE7C7BFB): the iPhone's answer to a
// GetNotificationAttributes or GetAppAttributes command, split over as many GATT notifications
// as the ATT MTU needs. Hand-written from Apple's "ANCS Specification" (2013):
//
//   notification  00 | UID (4, LE)            | (AttributeID, Length (2, LE), Value) …
//   app           01 | AppIdentifier, NUL-end  | (AttributeID, Length (2, LE), Value) …
//
// Nothing on the wire says where a response ends: it is complete when every attribute asked
// for has arrived, so the assembler has to know the outstanding command. One command at a
// time: the caller writes the next Control Point command after this one completes, times out
// or the link drops. Bytes are consumed as they come; only the values asked for are kept, each
// to its cap, and a response past `maxResponseBytes` is abandoned — garbage cannot grow memory.

public struct ANCSDate: Hashable, Sendable, CustomStringConvertible {
    public var year, month, day, hour, minute, second: Int

    /// `yyyyMMdd'T'HHmmSS` (UTS #35), the phone's local time, e.g. `20140322T160000`.
    public init?(text: String) {
        let b = Array(text.utf8)
        guard b.count == 15, b[8] == UInt8(ascii: "T") else { return nil }
        func number(_ r: Range<Int>) -> Int? {
            var v = 0
            for c in b[r] {
                guard (48...57).contains(c) else { return nil }
                v = v * 10 + Int(c - 48)
            }
            return v
        }
        guard let y = number(0..<4), let mo = number(4..<6), let d = number(6..<8),
              let h = number(9..<11), let mi = number(11..<13), let s = number(13..<15),
              (1...12).contains(mo), (1...31).contains(d), h < 24, mi < 60, s <= 60 else { return nil }
        (year, month, day, hour, minute, second) = (y, mo, d, h, mi, s)
    }

    /// The Unix time this reading would be if the phone's zone were UTC (the pure part of turning
    /// it into an instant; the zone's offset is the caller's).
    public var unixSecondsIfUTC: Int64 {
        RetryAfter.daysFromCivil(year: Int64(year), month: Int64(month), day: Int64(day)) * 86_400
            + Int64(hour) * 3_600 + Int64(minute) * 60 + Int64(second)
    }

    public var description: String {
        func two(_ v: Int) -> String { v < 10 ? "0\(v)" : "\(v)" }
        return "\(year)-\(two(month))-\(two(day))T\(two(hour)):\(two(minute)):\(two(second))"
    }
}

public struct ANCSNotificationAttributes: Hashable, Sendable {
    public var uid: UInt32
    public var appIdentifier: String?
    public var title: String?
    public var subtitle: String?
    public var message: String?
    public var messageSize: Int?
    public var date: ANCSDate?
    public var positiveActionLabel: String?
    public var negativeActionLabel: String?

    public init(uid: UInt32) { self.uid = uid }
}

public struct ANCSAppAttributes: Hashable, Sendable {
    public var appIdentifier: String
    public var displayName: String?

    public init(appIdentifier: String, displayName: String? = nil) {
        self.appIdentifier = appIdentifier
        self.displayName = displayName
    }
}

public enum ANCSDataSourceOutcome: Equatable, Sendable {
    case notificationAttributes(ANCSNotificationAttributes)
    case appAttributes(ANCSAppAttributes)
    /// The outstanding command ended without a complete response (timeout, link drop, too large).
    case abandoned(ANCSError)
}

public struct ANCSDataSourceAssembler: Sendable {
    public struct Settings: Sendable {
        /// Silence after the command or the last matching byte before the response is given up.
        public var timeoutMicros: Int64 = 5_000_000
        /// Cap for the values that carry no max length in the command (app id, labels, display name).
        public var maxValueBytes = 256
        /// A whole response, skipped bytes included.
        public var maxResponseBytes = 4_096
        public init() {}
    }

    public struct Counters: Equatable, Sendable {
        public var fragments = 0
        public var responses = 0
        public var timeouts = 0
        public var linkDrops = 0
        /// Responses cut short (timeout or link drop after some bytes had come).
        public var truncated = 0
        /// Values longer than asked for (kept to their cap) and responses past the limit.
        public var oversized = 0
        public var unknownAttributeIDs = 0
        /// Known attributes that were not asked for, or came twice.
        public var unrequestedAttributes = 0
        /// Bytes while no command is outstanding, or after the response was complete.
        public var unexpectedData = 0
        /// A response for another command or UID than the outstanding one.
        public var unexpectedCommand = 0
        public var badDates = 0
        /// The last of the above, named, for `agentctl status`.
        public var lastProblem: String?
    }

    private enum Stage: Sendable {
        case header
        case tupleHeader
        case value(id: UInt8, remaining: Int, cap: Int)
        case skipping(remaining: Int)
    }

    private struct Pending: Sendable {
        let command: ANCSCommand
        let header: [UInt8]
        /// Attribute id → how many value bytes are kept.
        let caps: [UInt8: Int]
        var values: [UInt8: [UInt8]] = [:]
        var stage = Stage.header
        var headerMatched = 0
        var tuple: [UInt8] = []
        var value: [UInt8] = []
        var receivedBytes = 0
        var deadline: Int64
    }

    public let settings: Settings
    public private(set) var counters = Counters()
    private var pending: Pending?

    public init(settings: Settings = Settings()) { self.settings = settings }

    /// The command whose response is being assembled.
    public var outstanding: ANCSCommand? { pending?.command }
    /// When `tick` must be called if nothing arrives before.
    public var deadline: Int64? { pending?.deadline }
    /// Bytes held for the response in progress (the bound the property tests check).
    public var heldBytes: Int { pending.map { $0.values.values.reduce(0) { $0 + $1.count } + $0.value.count + $0.tuple.count } ?? 0 }

    /// The command was written to the Control Point at `now`.
    public mutating func sent(_ command: ANCSCommand, at now: Int64) throws(ANCSError) {
        if let p = pending { throw .commandOutstanding(p.command) }
        let header: [UInt8]
        var caps: [UInt8: Int] = [:]
        switch command {
        case let .getNotificationAttributes(uid, attributes):
            header = [command.id] + ANCSBytes.littleEndian(uid)
            for a in attributes { caps[a.id] = a.maxLength.map(Int.init) ?? settings.maxValueBytes }
        case let .getAppAttributes(app, attributes):
            header = [command.id] + Array(app.utf8) + [0]
            for a in attributes { caps[a.id] = settings.maxValueBytes }
        case .performNotificationAction:
            throw .noDataSourceResponse(command)
        }
        pending = Pending(command: command, header: header, caps: caps, deadline: now + settings.timeoutMicros)
    }

    /// Gives up on the outstanding command once its deadline has passed.
    public mutating func tick(at now: Int64) -> ANCSDataSourceOutcome? {
        guard let p = pending, now >= p.deadline else { return nil }
        counters.timeouts += 1
        return abandon(.timedOut(p.command, receivedBytes: p.receivedBytes), cut: p.receivedBytes > 0)
    }

    /// The link dropped: the response in progress can never complete.
    public mutating func linkDropped() -> ANCSDataSourceOutcome? {
        guard let p = pending else { return nil }
        counters.linkDrops += 1
        return abandon(.linkDropped(p.command, receivedBytes: p.receivedBytes), cut: p.receivedBytes > 0)
    }

    /// The phone refused the command (a Control Point error): no response will come.
    public mutating func cancel() { pending = nil }

    /// One Data Source GATT notification.
    public mutating func receive(_ fragment: some Collection<UInt8>, at now: Int64) -> ANCSDataSourceOutcome? {
        counters.fragments += 1
        if let timedOut = tick(at: now) {
            if !fragment.isEmpty { note(\.unexpectedData, "data after the command timed out") }
            return timedOut
        }
        guard var p = pending else {
            if !fragment.isEmpty { note(\.unexpectedData, "data with no command outstanding") }
            return nil
        }
        pending = nil
        // A header match begun in an earlier notification (re-read once from the start if it fails).
        var carried = false
        if case .header = p.stage, p.headerMatched > 0 { carried = true }
        var progressed = false
        for (offset, byte) in zip(0..., fragment) {
            switch p.stage {
            case .header:
                if carried, byte != p.header[p.headerMatched] {
                    // An earlier notification ended inside what looked like our header and this one
                    // does not go on with it: that was a stray start. This one is read afresh.
                    note(\.unexpectedData, "a notification that began like the response to \(p.command) and stopped")
                    p.headerMatched = 0
                    p.receivedBytes = 0
                    pending = p
                    counters.fragments -= 1
                    return receive(fragment, at: now)
                }
                guard byte == p.header[p.headerMatched] else {
                    // Not the start of our response (a late answer to an abandoned command):
                    // drop the rest of this notification and keep waiting.
                    note(\.unexpectedCommand, "data source response for another command than \(p.command)")
                    p.headerMatched = 0
                    pending = p
                    return nil
                }
                p.headerMatched += 1
                if p.headerMatched == p.header.count { p.stage = .tupleHeader }
            case .tupleHeader:
                p.tuple.append(byte)
                guard p.tuple.count == 3 else { break }
                let id = p.tuple[0]
                let length = Int(p.tuple[1]) | Int(p.tuple[2]) << 8
                p.tuple = []
                if let cap = p.caps[id], p.values[id] == nil {
                    if length > cap { note(\.oversized, "attribute \(id) of \(length) bytes, more than the \(cap) asked for") }
                    p.stage = .value(id: id, remaining: length, cap: cap)
                } else {
                    let known = p.command.id == 0 ? id < 8 : id == 0
                    if known { note(\.unrequestedAttributes, "attribute \(id) not asked for in \(p.command)") }
                    else { note(\.unknownAttributeIDs, "unknown attribute id \(id) in \(p.command)") }
                    p.stage = .skipping(remaining: length)
                }
            case let .value(id, remaining, cap):
                if p.value.count < cap { p.value.append(byte) }
                p.stage = .value(id: id, remaining: remaining - 1, cap: cap)
            case let .skipping(remaining):
                p.stage = .skipping(remaining: remaining - 1)
            }
            p.receivedBytes += 1
            progressed = true
            // A value of length 0, or the last byte of one, completes it without another byte.
            if case let .value(id, 0, _) = p.stage {
                p.values[id] = p.value
                p.value = []
                p.stage = .tupleHeader
            } else if case .skipping(0) = p.stage {
                p.stage = .tupleHeader
            }
            if p.receivedBytes > settings.maxResponseBytes {
                counters.oversized += 1
                pending = p
                return abandon(.responseTooLarge(p.command, limit: settings.maxResponseBytes), cut: false)
            }
            if case .tupleHeader = p.stage, p.tuple.isEmpty, p.values.count == p.caps.count {
                if offset + 1 < fragment.count { note(\.unexpectedData, "bytes after the complete response to \(p.command)") }
                counters.responses += 1
                return complete(p)
            }
        }
        if progressed { p.deadline = now + settings.timeoutMicros }
        pending = p
        return nil
    }

    private mutating func complete(_ p: Pending) -> ANCSDataSourceOutcome {
        func text(_ id: UInt8) -> String? { p.values[id].map { String(decoding: $0, as: UTF8.self) } }
        if case let .getAppAttributes(app, _) = p.command {
            return .appAttributes(ANCSAppAttributes(appIdentifier: app, displayName: text(ANCSAppAttribute.displayName.id)))
        }
        // `sent` only lets the two commands with a response in; the header holds the UID.
        var a = ANCSNotificationAttributes(uid: ANCSBytes.uint32(p.header, at: 1))
        a.appIdentifier = text(0)
        a.title = text(1)
        a.subtitle = text(2)
        a.message = text(3)
        a.messageSize = text(4).flatMap { Int($0) }
        if let d = text(5) {
            a.date = ANCSDate(text: d)
            if a.date == nil, !d.isEmpty { note(\.badDates, "date \"\(d.prefix(20))\" is not yyyyMMdd'T'HHmmSS") }
        }
        a.positiveActionLabel = text(6)
        a.negativeActionLabel = text(7)
        return .notificationAttributes(a)
    }

    private mutating func abandon(_ error: ANCSError, cut: Bool) -> ANCSDataSourceOutcome {
        if cut { counters.truncated += 1 }
        counters.lastProblem = error.description
        pending = nil
        return .abandoned(error)
    }

    private mutating func note(_ counter: WritableKeyPath<Counters, Int>, _ problem: @autoclosure () -> String) {
        counters[keyPath: counter] += 1
        counters.lastProblem = problem()
    }
}
