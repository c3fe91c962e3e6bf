// Which event goes when a bound is reached: one rule for the outbox on disk and for the events
// held in memory while storage is full. Events are ranked in tiers; the lowest tier goes first,
// and within a tier the oldest. The outbox stores each row's tier in its `priority` column (an
// index on (priority, sequence) finds the victim without a scan or a sort).

public struct EvictionPolicy: Sendable, Equatable {
    /// Telemetry (phone receipts, notifications, pairing): what is cheapest to lose.
    public static let telemetry = 0
    /// Beacon arrivals and departures: a later one says where the beacon is now.
    public static let presence = 1
    /// The gateway's own reports (gateway.evicted, gateway.dead_letter). They explain gaps, yet
    /// rank below presses: were they kept before presses, a long outage at the bound would fill
    /// the outbox with reports (one per append) and then evict each new press on arrival. The
    /// outbox hands an evicted report's body to the next report, which carries its explanation on.
    public static let report = 2
    /// Someone pressed a button (doorbell.*, door.*): what the product is for.
    public static let press = 3

    public init() {}

    /// The tier of an event type (as stored: the wire name).
    public func tier(ofType type: String) -> Int {
        if type.hasPrefix("gateway.") { return Self.report }
        if type.hasPrefix("doorbell.") || type.hasPrefix("door.") { return Self.press }
        if type.hasPrefix("beacon.") { return Self.presence }
        return Self.telemetry
    }

    /// The index of the event to evict among `types` (oldest first): the first of the lowest tier;
    /// nil when there is nothing.
    public func victim(amongOldestFirst types: some Collection<String>) -> Int? {
        var best: (index: Int, tier: Int)?
        for (i, t) in types.enumerated() {
            let tier = tier(ofType: t)
            if tier < best?.tier ?? Int.max { best = (i, tier) }
            if tier == Self.telemetry { break } // nothing ranks lower
        }
        return best?.index
    }
}

/// What a `gateway.evicted` report says: the events evicted now and, carried on, what the
/// reports evicted with them said — so every gap stays explained by a report in the outbox.
public struct EvictionReport: Sendable, Equatable {
    public var count = 0
    /// Sorted; the body lists at most `maxSequences` of them (`count` is exact).
    public var sequences: [Int64] = []
    public var types: [String: Int] = [:]
    public static let maxSequences = 1_000

    public init() {}

    public mutating func add(sequence: Int64, type: String) {
        count += 1
        sequences.append(sequence)
        types[type, default: 0] += 1
    }

    /// Carries on what an evicted `gateway.evicted` report said (its body as stored); other
    /// bodies add nothing.
    public mutating func carry(reportBody: [UInt8]) {
        guard let json = try? JSONReader.parse(bytes: reportBody), json["type"]?.stringValue == EventType.gatewayEvicted.rawValue,
              let data = json["data"] else { return }
        count += Int(data["count"]?.intValue ?? 0)
        sequences += (data["sequences"]?.arrayValues ?? []).compactMap(\.intValue)
        if case let .object(pairs)? = data["types"] {
            for (type, n) in pairs { types[type, default: 0] += Int(n.intValue ?? 0) }
        }
    }

    public func data(reason: String) -> JSONValue {
        .object([("count", .number(Double(count))),
                 ("sequences", .array(sequences.sorted().prefix(Self.maxSequences).map { .number(Double($0)) })),
                 ("types", .object(types.sorted { $0.key < $1.key }.map { ($0.key, .number(Double($0.value))) })),
                 ("reason", .string(reason))])
    }
}
