// Apple Notification Center Service: the Notification Source characteristic
// (9FBF120D-6301-42D9-8C58-25E699A21DBD), one GATT notification per iOS notification
// added, modified or removed. Hand-written from Apple's "ANCS Specification" (2013):
// no library exists for Swift on Linux, and the layout is eight bytes.
//
//   byte 0     EventID        0 added, 1 modified, 2 removed
//   byte 1     EventFlags     bit 0 silent, 1 important, 2 pre-existing, 3 positive action,
//                             4 negative action (the rest reserved)
//   byte 2     CategoryID     0…11 (see `ANCSCategory`)
//   byte 3     CategoryCount  active notifications in that category
//   bytes 4–7  NotificationUID, little-endian: the handle for Control Point commands
//
// Values Apple may add later (event ids, categories, flag bits) are kept and named, not refused:
// a newer iOS must not make the base station drop notifications.

public enum ANCSEvent: Equatable, Hashable, Sendable, CustomStringConvertible {
    case added, modified, removed
    case unknown(UInt8)

    public init(rawValue: UInt8) {
        switch rawValue {
        case 0: self = .added
        case 1: self = .modified
        case 2: self = .removed
        default: self = .unknown(rawValue)
        }
    }

    public var rawValue: UInt8 {
        switch self {
        case .added: 0
        case .modified: 1
        case .removed: 2
        case let .unknown(v): v
        }
    }

    public var description: String {
        switch self {
        case .added: "added"
        case .modified: "modified"
        case .removed: "removed"
        case let .unknown(v): "unknown-event-\(v)"
        }
    }
}

public struct ANCSEventFlags: OptionSet, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let silent = ANCSEventFlags(rawValue: 1 << 0)
    public static let important = ANCSEventFlags(rawValue: 1 << 1)
    public static let preExisting = ANCSEventFlags(rawValue: 1 << 2)
    public static let positiveAction = ANCSEventFlags(rawValue: 1 << 3)
    public static let negativeAction = ANCSEventFlags(rawValue: 1 << 4)
    static let known: UInt8 = 0x1F

    /// Bits the 2013 specification reserves; counted, never an error.
    public var reservedBits: UInt8 { rawValue & ~Self.known }

    /// The known flags by their event names (`phone.notification`'s `data.flags`), in bit order.
    public var names: [String] {
        [(ANCSEventFlags.silent, "silent"), (.important, "important"), (.preExisting, "pre_existing"),
         (.positiveAction, "positive_action"), (.negativeAction, "negative_action")].filter { contains($0.0) }.map(\.1)
    }

    public var description: String {
        var parts = names.map { String($0.map { $0 == "_" ? "-" : $0 }) }
        if reservedBits != 0 { parts.append("reserved-0x\(String(reservedBits, radix: 16))") }
        return parts.isEmpty ? "none" : parts.joined(separator: ",")
    }
}

public enum ANCSCategory: Equatable, Hashable, Sendable, CustomStringConvertible {
    case other, incomingCall, missedCall, voicemail, social, schedule, email, news
    case healthAndFitness, businessAndFinance, location, entertainment
    case unknown(UInt8)

    static let known: [ANCSCategory] = [
        .other, .incomingCall, .missedCall, .voicemail, .social, .schedule, .email, .news,
        .healthAndFitness, .businessAndFinance, .location, .entertainment,
    ]
    static let names = [
        "other", "incoming-call", "missed-call", "voicemail", "social", "schedule", "email", "news",
        "health-and-fitness", "business-and-finance", "location", "entertainment",
    ]

    public init(rawValue: UInt8) {
        self = Int(rawValue) < Self.known.count ? Self.known[Int(rawValue)] : .unknown(rawValue)
    }

    public var rawValue: UInt8 {
        if case let .unknown(v) = self { return v }
        return UInt8(Self.known.firstIndex(of: self) ?? 0)
    }

    /// The name a config file uses (`categories = ["incoming-call"]`).
    public var description: String {
        if case let .unknown(v) = self { return "unknown-category-\(v)" }
        return Self.names[Int(rawValue)]
    }

    public init?(name: String) {
        guard let i = Self.names.firstIndex(of: name) else { return nil }
        self = Self.known[i]
    }
}

/// One Notification Source packet.
public struct ANCSNotification: Equatable, Hashable, Sendable {
    public static let length = 8

    public var event: ANCSEvent
    public var flags: ANCSEventFlags
    public var category: ANCSCategory
    public var categoryCount: UInt8
    public var uid: UInt32

    public init(event: ANCSEvent, flags: ANCSEventFlags, category: ANCSCategory, categoryCount: UInt8, uid: UInt32) {
        self.event = event
        self.flags = flags
        self.category = category
        self.categoryCount = categoryCount
        self.uid = uid
    }

    public init(parsing bytes: some Collection<UInt8>) throws(ANCSError) {
        guard bytes.count == Self.length else { throw .notificationSourceLength(bytes.count) }
        let b = Array(bytes)
        self.init(event: ANCSEvent(rawValue: b[0]), flags: ANCSEventFlags(rawValue: b[1]),
                  category: ANCSCategory(rawValue: b[2]), categoryCount: b[3], uid: ANCSBytes.uint32(b, at: 4))
    }

    /// The packet as the iPhone sends it (for the emulated phone and round-trip tests).
    public var bytes: [UInt8] {
        [event.rawValue, flags.rawValue, category.rawValue, categoryCount] + ANCSBytes.littleEndian(uid)
    }
}

/// The Notification Source as the link layer feeds it: every GATT notification in, a parsed
/// notification or nothing out, and counts of what was odd for status and metrics.
public struct ANCSNotificationSource: Sendable {
    public struct Counters: Equatable, Sendable {
        public var received = 0
        public var wrongLength = 0
        public var unknownEvents = 0
        public var unknownCategories = 0
        public var reservedFlags = 0
        /// Last value that was not in the specification, for `agentctl status` ("unknown-category-14").
        public var lastUnknown: String?
    }

    public private(set) var counters = Counters()

    public init() {}

    public mutating func receive(_ bytes: some Collection<UInt8>) -> Result<ANCSNotification, ANCSError> {
        counters.received += 1
        let n: ANCSNotification
        do { n = try ANCSNotification(parsing: bytes) } catch {
            counters.wrongLength += 1
            return .failure(error)
        }
        if case .unknown = n.event {
            counters.unknownEvents += 1
            counters.lastUnknown = n.event.description
        }
        if case .unknown = n.category {
            counters.unknownCategories += 1
            counters.lastUnknown = n.category.description
        }
        if n.flags.reservedBits != 0 {
            counters.reservedFlags += 1
            counters.lastUnknown = n.flags.description
        }
        return .success(n)
    }
}

enum ANCSBytes {
    static func uint32(_ b: [UInt8], at i: Int) -> UInt32 {
        UInt32(b[i]) | UInt32(b[i + 1]) << 8 | UInt32(b[i + 2]) << 16 | UInt32(b[i + 3]) << 24
    }

    static func littleEndian(_ v: UInt32) -> [UInt8] {
        [UInt8(truncatingIfNeeded: v), UInt8(truncatingIfNeeded: v >> 8), UInt8(truncatingIfNeeded: v >> 16), UInt8(truncatingIfNeeded: v >> 24)]
    }

    static func littleEndian(_ v: UInt16) -> [UInt8] {
        [UInt8(truncatingIfNeeded: v), UInt8(truncatingIfNeeded: v >> 8)]
    }
}
