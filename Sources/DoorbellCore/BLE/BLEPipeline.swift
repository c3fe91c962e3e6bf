// HCI advertising reports → events: AD walk, the decoders of BLEDecoderRegistry (first
// observation wins; every other answer counted per decoder), configured devices (BTHome buttons by
// address, with their bindkeys) and beacon regions (iBeacon, Eddystone-UID), then the trackers. A new
// BTHome packet id is one press; it then goes through the same ButtonTracker cooldown as RF
// presses (`[tracker.button] cooldown_ms`), per button of a device.
// Pure: every call carries its receive time and whether the radio is healthy.

/// What `agentctl scan` lists. Raw bytes are kept and the text is made when asked: with
/// rotating random addresses, a busy street is a new advertiser every few reports.
public struct HeardAdvertiser: Sendable, Equatable {
    /// The 48-bit address, most significant byte first in the high bits.
    public var addressKey: UInt64
    public var addressBytes: [UInt8] { (0..<6).map { UInt8(truncatingIfNeeded: addressKey >> (8 * (5 - $0))) } }
    public var address: String { Hex.address(addressKey) }
    /// "ibeacon", "bthome" or "eddystone".
    public var kind: String
    /// The iBeacon it announces (kind "ibeacon").
    public var beacon: IBeacon?
    /// The Eddystone-UID it announces, and its last telemetry (kind "eddystone"; an EID or URL
    /// beacon has neither UID nor telemetry).
    public var eddystone: EddystoneUID?
    public var telemetry: EddystoneTelemetry?
    public var adverts = 0
    public var rssi: Int8?
    public var lastSeenWallMicros: Int64
    /// A configured device or region, or nil.
    var configuredID: String?
    /// A BTHome advertiser learned by replay without a config: its id is its address, made when asked.
    var learned = false
    public var deviceID: String? { learned ? address : configuredID }

    /// "uuid/major/minor" for an iBeacon, "namespace/instance" for an Eddystone-UID, the address otherwise.
    public var identity: String {
        if let b = beacon { return "\(b.uuidString)/\(b.major)/\(b.minor)" }
        if let u = eddystone { return "\(u.namespaceHex)/\(u.instanceHex)" }
        return address
    }
    /// A ready-to-paste TOML snippet selecting it.
    public var snippet: String {
        if let b = beacon { return "[[region]]\nid = \"...\"\nuuid = \"\(b.uuidString)\"\nmajor = \(b.major)\nminor = \(b.minor)" }
        if let u = eddystone { return "[[region]]\nid = \"...\"\nnamespace = \"\(u.namespaceHex)\"\ninstance = \"\(u.instanceHex)\"" }
        if kind == "eddystone" {
            return "# Eddystone without a UID frame (EID, URL or telemetry only): no region can match it; give the beacon a UID slot"
        }
        return "[[device]]\nid = \"...\"\nradio = \"ble\"\nmatch = { address = \"\(address)\" }"
    }
}

public struct BLEPipeline: Sendable {
    public struct Counters: Sendable, Equatable {
        public var reports = 0
        /// Per decoder of BLEDecoderRegistry.all, in its order.
        public var decoders = [BLEDecoderCounts](repeating: BLEDecoderCounts(), count: BLEDecoderRegistry.all.count)
        /// Observations by BLEObservationKind.
        public var observations = [Int](repeating: 0, count: BLEObservationKind.allCases.count)
        public var ibeacons: Int { observations[BLEObservationKind.iBeacon.rawValue] }
        public var bthome: Int { observations[BLEObservationKind.bthome.rawValue] }
        public var truncatedAD = 0
        public var decryptFailures = 0
        public var replaysRefused = 0
        public var downgradesRefused = 0
        public var encryptedWithoutKey = 0

        public func decoder(_ name: String) -> BLEDecoderCounts {
            BLEDecoderRegistry.names.firstIndex(of: name).map { decoders[$0] } ?? BLEDecoderCounts()
        }

        /// `decoders` object of the BLE radio in `agentctl status`: name → seen / corrupt / implausible,
        /// and the observations by kind.
        public var decodersJSON: JSONValue {
            .object(zip(BLEDecoderRegistry.names, decoders).map { name, c in
                (name, .object([("seen", .number(Double(c.seen))), ("corrupt", .number(Double(c.corrupt))),
                                ("implausible", .number(Double(c.implausible)))]))
            } + [("observations", .object(BLEObservationKind.allCases.map { ($0.name, .number(Double(observations[$0.rawValue]))) }))])
        }

        /// The rows of `doorbell_ble_decoder_adverts_total{decoder, verdict}`.
        public var decoderRows: [(decoder: String, verdict: String, count: Int)] {
            zip(BLEDecoderRegistry.names, decoders).flatMap { name, c in
                [(name, "seen", c.seen), (name, "corrupt", c.corrupt), (name, "implausible", c.implausible)]
            }
        }
    }

    public let devices: [DeviceConfig]
    public private(set) var presence: PresenceTracker
    public private(set) var buttons: BTHomeButtonTracker
    /// The cooldown, shared rule with RF (suppressed presses are counted, not forwarded).
    public private(set) var tracker: ButtonTracker
    public private(set) var counters = Counters()
    /// Keyed by the 48-bit address: a report costs no string until something new is heard.
    public var heard: [UInt64: HeardAdvertiser] {
        Dictionary(uniqueKeysWithValues: heardSlot.map { ($0.key, heardList[$0.value]) })
    }
    /// `heard` as a flat array found through `heardSlot`: the eviction reads times from the
    /// array without copying the advertisers (which the sort of a dictionary's pairs did); a
    /// forgotten advertiser leaves a hole that the next new one fills, nothing moves.
    private var heardList: [HeardAdvertiser] = []
    private var heardSlot: [UInt64: Int] = [:]
    private var heardFree: [Int] = []
    /// Per slot, beside `heardList`: the address (`noAddress` for a hole) and the last-seen time,
    /// all the eviction reads (plain integers: nothing retained or copied).
    private var heardKeys: [UInt64] = []
    private var heardSeen: [Int64] = []
    private static let noAddress = UInt64.max
    /// Reused by the eviction: last-seen times.
    private var heardAges: [Int64] = []
    private var deviceByAddress: [UInt64: DeviceConfig] = [:]
    /// The last problem of a configured (or learned) device, as text: made when asked, as a busy
    /// street's keyless encrypted advertiser refuses every advert it sends.
    public var lastProblem: String? {
        switch problem {
        case nil: nil
        case let .text(text)?: text
        case let .button(id, address, error)?: "\(id ?? Hex.address(address)): \(error.description)"
        }
    }
    private enum Problem: Sendable {
        case text(String)
        /// A configured device's id (nil: learned, named by its address) and why its packet was refused.
        case button(id: String?, address: UInt64, BTHomeError)
    }
    private var problem: Problem?
    /// The last advert a decoder refused, "decoder: reason (address)": what to look at when the
    /// corrupt or implausible counts grow.
    public private(set) var lastRefused: String?
    /// The last Eddystone telemetry per beacon namespace+instance (pairing by address, as the
    /// spec interleaves them), for the presence events. Bounded like `heard`.
    private var telemetryByUID: [[UInt8]: EddystoneTelemetry] = [:]
    public static let maxHeard = 128

    public init(devices: [DeviceConfig], regions: [BeaconRegion], memory: [String: BTHomeButtonTracker.DeviceMemory] = [:],
                button: ButtonTracker.Settings = ButtonTracker.Settings()) {
        tracker = ButtonTracker(settings: button)
        self.devices = devices.filter { $0.radio == "ble" }
        for d in self.devices {
            for case let ("address", .text(text)) in d.match.fields {
                if let bytes = BLEAdvertisingReport.parse(address: text) { deviceByAddress[Self.key(bytes)] = d }
            }
        }
        presence = PresenceTracker(regions: regions)
        buttons = BTHomeButtonTracker(memory: memory)
    }

    /// The BTHome packet ids and counters that changed since the last call: the caller stores
    /// them in the transaction that stores the events of the same reports.
    public mutating func takeButtonMemoryChanges() -> [String: BTHomeButtonTracker.DeviceMemory] { buttons.takeChanges() }

    /// Replay without a config: every BTHome advertiser counts as a button of its own.
    public var learnAll = false

    static func key(_ address: [UInt8]) -> UInt64 { BLEAdvertisingReport.key(address) }


    public mutating func handle(report: BLEAdvertisingReport, at time: ReceiveTime, radioHealthy: Bool = true) -> [AgentEvent] {
        counters.reports += 1
        let (structures, truncated) = ADWalker.walk(report.data)
        if truncated { counters.truncatedAD += 1 }
        let key = report.addressKey
        let rssi = report.rssi ?? -127
        var events: [AgentEvent] = []

        var observation: BLEObservation?
        for (i, decoder) in BLEDecoderRegistry.all.enumerated() {
            switch decoder.verdict(structures) {
            case .notMine: continue
            case let .corrupt(reason):
                counters.decoders[i].corrupt += 1
                refused(decoder.descriptor.name, reason, key: key, report: report)
            case let .implausible(reason):
                counters.decoders[i].implausible += 1
                refused(decoder.descriptor.name, reason, key: key, report: report)
            case let .observation(o):
                counters.decoders[i].seen += 1
                counters.observations[o.kind.rawValue] += 1
                observation = o
            }
            if observation != nil { break }
        }

        switch observation {
        case let .iBeacon(beacon)?:
            let region = presence.regions.first { $0.matches(beacon) }?.id
            note(key, report: report, kind: "ibeacon", beacon: beacon, time: time, deviceID: region)
            // A sighting is also proof that the scanner hears the air (observe counts it).
            for o in presence.observe(beacon, rssi: rssi, at: time.monoMicros) { events.append(presenceEvent(o, time: time)) }
        case let .eddystone(.uid(uid))?:
            let region = presence.regions.first { $0.matches(.eddystone(uid)) }?.id
            note(key, report: report, kind: "eddystone", eddystone: uid, time: time, deviceID: region)
            if let i = heardSlot[key], let t = heardList[i].telemetry { remember(t, of: uid) } // telemetry heard before the first UID
            for o in presence.observe(.eddystone(uid), rssi: rssi, at: time.monoMicros) { events.append(presenceEvent(o, time: time)) }
        case let .eddystone(frame)?:
            presence.heardSomething(at: time.monoMicros)
            var telemetry: EddystoneTelemetry?
            if case let .telemetry(t) = frame { telemetry = t }
            note(key, report: report, kind: "eddystone", telemetry: telemetry, time: time, deviceID: nil)
            if let telemetry, let i = heardSlot[key], let uid = heardList[i].eddystone { remember(telemetry, of: uid) }
        case let .bthome(serviceData)?:
            presence.heardSomething(at: time.monoMicros)
            if let config = deviceByAddress[key] {
                note(key, report: report, kind: "bthome", time: time, deviceID: config.id)
                // The configured address text is the tracker's key (and the outbox's button_memory row).
                let address = config.match.fields.lazy.compactMap { f -> String? in if case let .text(t) = f.1, f.0 == "address" { return t }; return nil }.first
                events = button(serviceData, report: report, device: config, trackerAddress: address, time: time)
            } else if learnAll {
                // Replay without a config: the advertiser is a button of its own, named when it presses.
                note(key, report: report, kind: "bthome", time: time, deviceID: nil, learned: true)
                events = button(serviceData, report: report, device: nil, trackerAddress: nil, time: time)
            } else {
                note(key, report: report, kind: "bthome", time: time, deviceID: nil)
            }
        case nil:
            presence.heardSomething(at: time.monoMicros)
        }
        // Departures are rare: nothing appended (or allocated) for an advert without one.
        let departures = presence.tick(at: time.monoMicros, radioHealthy: radioHealthy)
        if !departures.isEmpty { events += departures.map { presenceEvent($0, time: time) } }
        return events
    }

    /// Periodic: departures by timeout (held while the radio is degraded).
    public mutating func tick(at time: ReceiveTime, radioHealthy: Bool) -> [AgentEvent] {
        presence.tick(at: time.monoMicros, radioHealthy: radioHealthy).map { presenceEvent($0, time: time) }
    }

    public mutating func radioRecovered(at time: ReceiveTime) { presence.radioRecovered(at: time.monoMicros) }

    /// A synthetic press of a configured BLE device (installer check): the same cooldown, marked test.
    public mutating func inject(device config: DeviceConfig, at time: ReceiveTime) -> [AgentEvent] {
        guard case let .pressed(_, _, suppressed)? = tracker.observeDiscrete(device: config.id, at: time.monoMicros) else { return [] }
        var e = AgentEvent(type: .doorbellPressed, device: DeviceRef(id: config.id, name: config.name, radio: "ble"),
                           occurredAtMicros: time.wallMicros, clockSynced: time.clockSynced, test: true,
                           data: .object([("injected", .bool(true)), ("suppressed", .number(Double(suppressed)))]))
        e.monotonicMicros = time.monoMicros
        return [e]
    }

    /// The tracker's key for one button of a device: the device id for the first (most buttons
    /// have one), `id#N` for the others, so two buttons of one remote never share a cooldown.
    static func trackerKey(_ deviceID: String, button index: Int) -> String { index == 0 ? deviceID : "\(deviceID)#\(index)" }

    /// `device` nil: a learned advertiser (replay without a config), id `trackerAddress`.
    /// `trackerAddress` nil: the report's address, as printed (made only when needed).
    mutating func button(_ serviceData: ArraySlice<UInt8>, report: BLEAdvertisingReport, device config: DeviceConfig?, trackerAddress: String?,
                         time: ReceiveTime) -> [AgentEvent] {
        var address: String { trackerAddress ?? report.addressString }
        let packet: BTHomePacket
        do {
            packet = try BTHomeDecoder.decode(view: serviceData, address: report.address, bindkey: config?.bindkey)
        } catch {
            switch error {
            case .decryptionFailed: counters.decryptFailures += 1
            case .plaintextFromKeyedDevice: counters.downgradesRefused += 1
            case .encryptedWithoutKey: counters.encryptedWithoutKey += 1
            default: break
            }
            problem = .button(id: config?.id, address: report.addressKey, error)
            return []
        }
        switch buttons.observe(address: report.addressKey, name: address, packet: packet) {
        case let .press(list):
            let printed = report.addressString  // made once: the learned name and the data's address
            let trackerName = trackerAddress ?? printed, id = self.id(config, trackerName)
            let ref = DeviceRef(id: id, name: config?.name ?? "BTHome " + trackerName, radio: "ble")
            return list.compactMap { b in
                guard let eventType = b.event.eventType else { return nil }
                // A learned button is found by its address (no text hashed); a configured one by its id,
                // the key its injected presses use too.
                let key: ButtonTracker.Key = config.map { .name(Self.trackerKey($0.id, button: b.index)) } ?? .address(report.addressKey, button: b.index)
                let type: EventType
                var suppressed: Int?
                switch tracker.observeDiscrete(key: key, at: time.monoMicros, continuation: b.event == .holdPress) {
                case nil: return nil // within the cooldown: counted, not forwarded
                case .held?: type = .doorbellHeld
                case let .pressed(_, n)?: (type, suppressed) = (eventType, n)
                }
                var data: [(String, JSONValue)] = [("button", .number(Double(b.index))), ("event", .string(b.event.name)),
                                                   ("address", .string(printed))]
                data.reserveCapacity(8)  // all it may hold: grown once, not twice
                if let id = packet.packetID { data.append(("packet_id", .number(Double(id)))) }
                if let battery = packet.battery { data.append(("battery_pct", .number(Double(battery)))) }
                if let rssi = report.rssi { data.append(("rssi_db", .number(Double(rssi)))) }
                data.append(("encrypted", .bool(packet.encrypted)))
                if let suppressed { data.append(("suppressed", .number(Double(suppressed)))) }
                var e = AgentEvent(type: type, device: ref, occurredAtMicros: time.wallMicros, clockSynced: time.clockSynced, data: .object(data))
                e.monotonicMicros = time.monoMicros
                return e
            }
        case let .replay(last):
            counters.replaysRefused += 1
            problem = .text("\(id(config, address)): replayed BTHome packet refused (counter \(packet.counter ?? 0) ≤ \(last))")
            return []
        case .repeated, .noEvent:
            return []
        }
    }

    /// A button's device id: the configured one, else (learned) its address.
    func id(_ config: DeviceConfig?, _ address: String) -> String { config?.id ?? address }

    /// A decoder recognised the advert and refused it: counted by the caller; a configured device's
    /// refusal is also its last problem.
    mutating func refused(_ decoder: String, _ reason: String, key: UInt64, report: BLEAdvertisingReport) {
        lastRefused = "\(decoder): \(reason) (\(report.addressString))"
        if let d = deviceByAddress[key] { problem = .text("\(d.id): \(reason)") }
    }

    mutating func remember(_ telemetry: EddystoneTelemetry, of uid: EddystoneUID) {
        let id = uid.namespace + uid.instance
        if telemetryByUID[id] == nil && telemetryByUID.count >= Self.maxHeard { telemetryByUID.removeAll(keepingCapacity: true) }
        telemetryByUID[id] = telemetry
    }

    /// The identity fields of a presence event.
    func beaconData(_ beacon: Beacon) -> [(String, JSONValue)] {
        switch beacon {
        case let .iBeacon(b):
            return [("uuid", .string(b.uuidString)), ("major", .number(Double(b.major))), ("minor", .number(Double(b.minor)))]
        case let .eddystone(u):
            var data: [(String, JSONValue)] = [("namespace", .string(u.namespaceHex)), ("instance", .string(u.instanceHex))]
            if let t = telemetryByUID[u.namespace + u.instance] {
                if let mv = t.battery { data.append(("battery_mv", .number(Double(mv)))) }
                if let c = t.temperature { data.append(("temperature_c", .number(c))) }
            }
            return data
        }
    }

    func presenceEvent(_ o: PresenceTracker.Output, time: ReceiveTime) -> AgentEvent {
        let (type, regionID, beacon, rssi, extra): (EventType, String, Beacon, Double, [(String, JSONValue)])
        switch o {
        case let .entered(region, b, r, proximity):
            (type, regionID, beacon, rssi, extra) = (.beaconEntered, region, b, r, [("proximity", .string(proximity.rawValue))])
        case let .exited(region, b, r, dwell, reason):
            (type, regionID, beacon, rssi, extra) = (.beaconExited, region, b, r,
                                                     [("dwell_s", .number(Double(dwell / 1_000_000))), ("reason", .string(reason))])
        }
        let region = presence.regions.first { $0.id == regionID }
        var e = AgentEvent(type: type, device: DeviceRef(id: regionID, name: region?.name ?? regionID, radio: "ble"),
                           occurredAtMicros: time.wallMicros, clockSynced: time.clockSynced,
                           data: .object(beaconData(beacon) + [("rssi_db", .number((rssi * 10).rounded() / 10))] + extra))
        e.monotonicMicros = time.monoMicros
        return e
    }

    /// Counts an advert; no text is made here (see HeardAdvertiser).
    mutating func note(_ key: UInt64, report: BLEAdvertisingReport, kind: String, beacon: IBeacon? = nil, eddystone: EddystoneUID? = nil,
                       telemetry: EddystoneTelemetry? = nil, time: ReceiveTime, deviceID: String?, learned: Bool = false) {
        if let i = heardSlot[key] {
            // One lookup, updated in place.
            heardList[i].adverts += 1
            if let rssi = report.rssi { heardList[i].rssi = rssi }
            heardList[i].lastSeenWallMicros = time.wallMicros
            heardSeen[i] = time.wallMicros
            // Eddystone interleaves UID and TLM frames from one address: keep both.
            if let eddystone { heardList[i].eddystone = eddystone; heardList[i].configuredID = deviceID }
            if let telemetry { heardList[i].telemetry = telemetry }
            return
        }
        if heardSlot.count >= Self.maxHeard { forgetLeastRecentlyHeard() }
        let h = HeardAdvertiser(addressKey: key, kind: kind, beacon: beacon, eddystone: eddystone, telemetry: telemetry,
                                adverts: 1, rssi: report.rssi, lastSeenWallMicros: time.wallMicros, configuredID: deviceID, learned: learned)
        if let slot = heardFree.popLast() {
            heardSlot[key] = slot
            heardList[slot] = h
            heardKeys[slot] = key
            heardSeen[slot] = time.wallMicros
        } else {
            heardSlot[key] = heardList.count
            heardList.append(h)
            heardKeys.append(key)
            heardSeen.append(time.wallMicros)
        }
    }

    /// The `k`-th smallest (from 0) of `values`, which it reorders (Hoare's selection, middle
    /// pivot; bounded: the range shrinks by at least one every pass).
    static func select(_ k: Int, in values: inout [Int64]) -> Int64 {
        var lo = 0, hi = values.count - 1
        while lo < hi {
            let pivot = values[lo + (hi - lo) / 2]
            var i = lo, j = hi
            while i <= j {
                while values[i] < pivot { i += 1 }
                while values[j] > pivot { j -= 1 }
                if i <= j { values.swapAt(i, j); i += 1; j -= 1 }
            }
            if k <= j { hi = j } else if k >= i { lo = i } else { break }
        }
        return values[k]
    }

    /// The least recently heard quarter goes at once: one sort per maxHeard/4 new advertisers
    /// instead of a scan for each. Equal times go in slot order (the dictionary before had no
    /// defined order either).
    private mutating func forgetLeastRecentlyHeard() {
        heardAges.removeAll(keepingCapacity: true)
        for i in heardKeys.indices where heardKeys[i] != Self.noAddress { heardAges.append(heardSeen[i]) }
        // The quarter's newest time (selected, not sorted): everything older goes, then that
        // time's first ones in slot order.
        let count = Self.maxHeard / 4
        let threshold = Self.select(count - 1, in: &heardAges)
        var atThreshold = count - heardAges.lazy.filter { $0 < threshold }.count
        for slot in heardKeys.indices {
            let key = heardKeys[slot], at = heardSeen[slot]
            guard key != Self.noAddress, at <= threshold else { continue }
            if at == threshold {
                guard atThreshold > 0 else { continue }
                atThreshold -= 1
            }
            // The advertiser stays in its slot until a new one takes it (its Strings: at most maxHeard/4).
            heardSlot[key] = nil
            heardKeys[slot] = Self.noAddress
            heardFree.append(slot)
        }
    }
}
