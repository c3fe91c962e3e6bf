// Beacon regions → arrivals and departures. An iBeacon region matches like CLBeaconRegion: UUID,
// UUID + major, or UUID + major + minor; an Eddystone region matches the UID's namespace, or
// namespace + instance. Per region (and per beacon identity inside it), RSSI is
// smoothed (exponential, `smoothing` weight for the new sample); `entered` after `minSamples`
// sightings at or above `enterRSSI`; `exited` after `exitTimeout` without a sighting, or when the
// smoothed RSSI falls `hysteresisDB` below the enter level.
//
// A silent scanner is not everyone leaving. Exit timeouts run on the scanner's *live* clock, not
// on the monotonic one: the gap between two reports (from any advertiser) counts in full up to
// `silenceGraceMicros`, and time beyond it — when the whole radio heard nothing, whatever the
// cause (a controller that stops delivering, a USB hiccup, a stall shorter than `stall_s`) — does
// not count. So a beacon present before and after a stall never leaves because of it, and one that
// really left during it exits once its timeout has elapsed on live time after reports resume.
// No exit while the radio is degraded either, and a timeout exit also needs some advert, from any
// device, received after the beacon's last sighting. Pure: time comes in with every call.

/// What a region can match: both kinds enter and leave by the same rules.
public enum Beacon: Sendable, Equatable {
    case iBeacon(IBeacon)
    case eddystone(EddystoneUID)

    /// Expected RSSI at 1 m, for proximity. Eddystone sends its power at 0 m; its spec puts the
    /// loss over the first metre at 41 dB.
    public var measuredPowerAt1m: Int8 {
        switch self {
        case let .iBeacon(b): b.measuredPower
        case let .eddystone(u): Int8(clamping: Int(u.txPower) - 41)
        }
    }
}

public struct BeaconRegion: Sendable, Equatable {
    public enum Selector: Sendable, Equatable {
        case iBeacon(uuid: [UInt8], major: UInt16?, minor: UInt16?)
        case eddystone(namespace: [UInt8], instance: [UInt8]?)
    }

    public var id: String
    public var name: String
    public var selector: Selector
    public var enterRSSI: Int = -80
    public var minSamples: Int = 3
    public var exitTimeoutMicros: Int64 = 30_000_000
    public var hysteresisDB: Int = 10
    public init(id: String, name: String, uuid: [UInt8], major: UInt16? = nil, minor: UInt16? = nil) {
        self.id = id
        self.name = name
        selector = .iBeacon(uuid: uuid, major: major, minor: minor)
    }

    public init(id: String, name: String, namespace: [UInt8], instance: [UInt8]? = nil) {
        self.id = id
        self.name = name
        selector = .eddystone(namespace: namespace, instance: instance)
    }

    /// The iBeacon selector's parts (empty / nil for an Eddystone region).
    public var uuid: [UInt8] { if case let .iBeacon(u, _, _) = selector { u } else { [] } }
    public var major: UInt16? { if case let .iBeacon(_, m, _) = selector { m } else { nil } }
    public var minor: UInt16? { if case let .iBeacon(_, _, m) = selector { m } else { nil } }

    /// "iBeacon" or "Eddystone", as people name the formats.
    public var format: String { if case .eddystone = selector { "Eddystone" } else { "iBeacon" } }

    public func matches(_ b: IBeacon) -> Bool { matches(.iBeacon(b)) }

    public func matches(_ beacon: Beacon) -> Bool {
        // One switch at a time: a tuple of the two enums would copy both on every sighting.
        switch selector {
        case let .iBeacon(uuid, major, minor):
            guard case let .iBeacon(b) = beacon else { return false }
            return b.uuid == uuid && (major.map { $0 == b.major } ?? true) && (minor.map { $0 == b.minor } ?? true)
        case let .eddystone(namespace, instance):
            guard case let .eddystone(u) = beacon else { return false }
            return u.namespace == namespace && (instance.map { $0 == u.instance } ?? true)
        }
    }
}

public enum Proximity: String, Sendable, Equatable {
    case immediate, near, far, unknown

    /// From RSSI against the beacon's measured power at 1 m (log-distance, path-loss exponent 2):
    /// < 0.5 m immediate, < 3 m near, else far, as iOS buckets them.
    public static func classify(rssi: Double, measuredPower: Int8) -> Proximity {
        guard measuredPower < 0, rssi < 0 else { return .unknown }
        var meters = 1.0
        var exponent = (Double(measuredPower) - rssi) / 20
        // 10^x without Foundation: repeated multiplication by 10^(1/8) is exact enough here.
        let step = 1.333_521_432_163_324 // 10^(1/8)
        if exponent >= 0 { while exponent >= 0.125 { meters *= step; exponent -= 0.125 } } else { while exponent <= -0.125 { meters /= step; exponent += 0.125 } }
        if meters < 0.5 { return .immediate }
        if meters < 3 { return .near }
        return .far
    }
}

public struct PresenceTracker: Sendable {
    public enum Output: Sendable, Equatable {
        case entered(region: String, beacon: Beacon, rssi: Double, proximity: Proximity)
        case exited(region: String, beacon: Beacon, rssi: Double, dwellMicros: Int64, reason: String)
    }

    struct Visit {
        var beacon: Beacon
        var smoothed: Double
        var samples = 0
        var inside = false
        var enteredAt: Int64 = 0
        /// On the live clock.
        var lastSeen: Int64
        /// `reportsHeard` at the last sighting: later reports are the evidence that the air is heard.
        var lastSeenReport: Int
    }

    public let regions: [BeaconRegion]
    public var smoothing = 0.3
    private var visits: [String: Visit] = [:]
    /// The latest advert of any kind the scanner delivered (monotonic), nil before the first.
    private var lastAnyReport: Int64?
    /// The live clock at `lastAnyReport`.
    private var liveAtLastReport: Int64 = 0
    private var reportsHeard = 0

    /// How much of a gap between two reports still counts as live time. Adverts in a home arrive
    /// many times a second (phones, TVs, the beacons themselves); several seconds of nothing at
    /// all is a radio that does not hear, not an empty room.
    public static let silenceGraceMicros: Int64 = 5_000_000

    public init(regions: [BeaconRegion]) { self.regions = regions }

    public var inside: [String] { visits.filter { $0.value.inside }.map(\.key).sorted() }

    /// The scanner's live clock at `now`: frozen once no report has come for `silenceGraceMicros`.
    public func liveMicros(at now: Int64) -> Int64 {
        guard let last = lastAnyReport else { return 0 }
        return liveAtLastReport + min(max(now - last, 0), Self.silenceGraceMicros)
    }

    /// How long the whole radio has heard nothing (0 before the first report).
    public func silenceMicros(at now: Int64) -> Int64 { lastAnyReport.map { max(now - $0, 0) } ?? 0 }

    /// Why departures are on hold at `now` (nil when they are not): shown in `agentctl status`.
    public func exitsOnHold(at now: Int64, radioHealthy: Bool) -> String? {
        if !radioHealthy { return "the BLE radio is degraded: no departures until it delivers reports again" }
        let silent = silenceMicros(at: now)
        guard silent > Self.silenceGraceMicros else { return nil }
        return "the scanner has heard no advert at all for \(silent / 1_000_000) s: exit timeouts are paused until reports resume"
    }

    /// Any advertising report at all (proof the scanner works): advances the live clock.
    public mutating func heardSomething(at now: Int64) {
        liveAtLastReport = liveMicros(at: now)
        lastAnyReport = max(lastAnyReport ?? now, now)
        reportsHeard += 1
    }

    public mutating func observe(_ beacon: IBeacon, rssi: Int8, at now: Int64) -> [Output] { observe(.iBeacon(beacon), rssi: rssi, at: now) }

    public mutating func observe(_ beacon: Beacon, rssi: Int8, at now: Int64) -> [Output] {
        heardSomething(at: now)
        let live = liveMicros(at: now)
        var out: [Output] = []
        for r in regions where r.matches(beacon) {
            var v = visits[r.id] ?? Visit(beacon: beacon, smoothed: Double(rssi), lastSeen: live, lastSeenReport: reportsHeard)
            v.smoothed = v.samples == 0 ? Double(rssi) : (1 - smoothing) * v.smoothed + smoothing * Double(rssi)
            v.lastSeen = live
            v.lastSeenReport = reportsHeard
            v.beacon = beacon
            if !v.inside {
                v.samples = Int(rssi) >= r.enterRSSI ? v.samples + 1 : 0
                if v.samples >= r.minSamples {
                    v.inside = true
                    v.enteredAt = live
                    out.append(.entered(region: r.id, beacon: beacon, rssi: v.smoothed,
                                        proximity: Proximity.classify(rssi: v.smoothed, measuredPower: beacon.measuredPowerAt1m)))
                }
            } else {
                v.samples += 1
                if v.smoothed < Double(r.enterRSSI - r.hysteresisDB) {
                    v.inside = false
                    v.samples = 0
                    out.append(.exited(region: r.id, beacon: beacon, rssi: v.smoothed, dwellMicros: live - v.enteredAt, reason: "weak_signal"))
                }
            }
            visits[r.id] = v
        }
        return out
    }

    /// Call periodically (and with every report): regions not seen for their exit timeout (on the
    /// live clock) are left. `radioHealthy == false` holds every exit until the radio recovers.
    public mutating func tick(at now: Int64, radioHealthy: Bool) -> [Output] {
        guard radioHealthy else { return [] }
        let live = liveMicros(at: now)
        var out: [Output] = []
        for r in regions {
            guard let v = visits[r.id], live - v.lastSeen >= r.exitTimeoutMicros, reportsHeard > v.lastSeenReport else { continue }
            if v.inside {
                out.append(.exited(region: r.id, beacon: v.beacon, rssi: v.smoothed, dwellMicros: v.lastSeen - v.enteredAt, reason: "timeout"))
            }
            visits[r.id] = nil
        }
        return out
    }

    /// After a radio outage (a controller reset, a transport restart), sightings resume from now:
    /// nothing heard before the outage counts against a beacon.
    public mutating func radioRecovered(at now: Int64) {
        let live = liveMicros(at: now)
        for (k, var v) in visits { v.lastSeen = max(v.lastSeen, live); visits[k] = v }
    }
}
