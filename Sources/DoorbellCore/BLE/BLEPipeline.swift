// HCI advertising reports → events: AD walk, iBeacon and BTHome decoders, configured devices
// (BTHome buttons by address, with their bindkeys) and beacon regions, then the trackers.
// Pure: every call carries its receive time and whether the radio is healthy.

public struct HeardAdvertiser: Sendable, Equatable {
    public var address: String
    /// "ibeacon uuid/major/minor", "bthome", or "other".
    public var kind: String
    public var identity: String
    public var adverts = 0
    public var rssi: Int8?
    public var lastSeenWallMicros: Int64
    public var deviceID: String?
    /// A ready-to-paste TOML snippet selecting it.
    public var snippet: String
}

public struct BLEPipeline: Sendable {
    public struct Counters: Sendable, Equatable {
        public var reports = 0
        public var ibeacons = 0
        public var bthome = 0
        public var truncatedAD = 0
        public var decryptFailures = 0
        public var replaysRefused = 0
        public var downgradesRefused = 0
        public var encryptedWithoutKey = 0
    }

    public let devices: [DeviceConfig]
    public private(set) var presence: PresenceTracker
    public private(set) var buttons: BTHomeButtonTracker
    public private(set) var counters = Counters()
    public private(set) var heard: [String: HeardAdvertiser] = [:]
    public private(set) var lastProblem: String?
    public static let maxHeard = 128

    public init(devices: [DeviceConfig], regions: [BeaconRegion], memory: [String: BTHomeButtonTracker.DeviceMemory] = [:]) {
        self.devices = devices.filter { $0.radio == "ble" }
        presence = PresenceTracker(regions: regions)
        buttons = BTHomeButtonTracker(memory: memory)
    }

    public var buttonMemoryChanged: Bool { buttons.changed }
    public mutating func buttonMemorySaved() { buttons.markSaved() }

    /// Replay without a config: every BTHome advertiser counts as a button of its own.
    public var learnAll = false

    func device(address: String) -> DeviceConfig? {
        if let d = devices.first(where: { d in d.match.fields.contains { $0.0 == "address" && $0.1 == .text(address) } }) { return d }
        guard learnAll else { return nil }
        return DeviceConfig(id: address, name: "BTHome " + address, radio: "ble", match: RTL433Match(fields: [("address", .text(address))]))
    }

    public mutating func handle(report: BLEAdvertisingReport, at time: ReceiveTime, radioHealthy: Bool = true) -> [AgentEvent] {
        counters.reports += 1
        presence.heardSomething(at: time.monoMicros)
        let (structures, truncated) = ADWalker.walk(report.data)
        if truncated { counters.truncatedAD += 1 }
        let address = report.addressString
        let rssi = report.rssi ?? -127
        var events: [AgentEvent] = []

        if let beacon = IBeaconDecoder.decode(structures) {
            counters.ibeacons += 1
            let regionIDs = presence.regions.filter { $0.matches(beacon) }.map(\.id)
            note(address: address, kind: "ibeacon", identity: "\(beacon.uuidString)/\(beacon.major)/\(beacon.minor)", rssi: report.rssi,
                 time: time, deviceID: regionIDs.first,
                 snippet: "[[region]]\nid = \"...\"\nuuid = \"\(beacon.uuidString)\"\nmajor = \(beacon.major)\nminor = \(beacon.minor)")
            for o in presence.observe(beacon, rssi: rssi, at: time.monoMicros) { events.append(presenceEvent(o, time: time)) }
        } else if let serviceData = ADWalker.serviceData(structures, uuid16: BTHomeDecoder.uuid16) {
            counters.bthome += 1
            let config = device(address: address)
            note(address: address, kind: "bthome", identity: address, rssi: report.rssi, time: time, deviceID: config?.id,
                 snippet: "[[device]]\nid = \"...\"\nradio = \"ble\"\nmatch = { address = \"\(address)\" }")
            if let config { events += button(serviceData, report: report, config: config, time: time) }
        }
        events += presence.tick(at: time.monoMicros, radioHealthy: radioHealthy).map { presenceEvent($0, time: time) }
        return events
    }

    /// Periodic: departures by timeout (held while the radio is degraded).
    public mutating func tick(at time: ReceiveTime, radioHealthy: Bool) -> [AgentEvent] {
        presence.tick(at: time.monoMicros, radioHealthy: radioHealthy).map { presenceEvent($0, time: time) }
    }

    public mutating func radioRecovered(at time: ReceiveTime) { presence.radioRecovered(at: time.monoMicros) }

    mutating func button(_ serviceData: [UInt8], report: BLEAdvertisingReport, config: DeviceConfig, time: ReceiveTime) -> [AgentEvent] {
        let packet: BTHomePacket
        do {
            packet = try BTHomeDecoder.decode(serviceData, address: report.address, bindkey: config.bindkey)
        } catch {
            switch error {
            case .decryptionFailed: counters.decryptFailures += 1
            case .plaintextFromKeyedDevice: counters.downgradesRefused += 1
            case .encryptedWithoutKey: counters.encryptedWithoutKey += 1
            default: break
            }
            lastProblem = "\(config.id): \(error.description)"
            return []
        }
        let ref = DeviceRef(id: config.id, name: config.name, radio: "ble")
        switch buttons.observe(device: report.addressString, packet: packet) {
        case let .press(list):
            return list.compactMap { b in
                guard let type = b.event.eventType else { return nil }
                var data: [(String, JSONValue)] = [("button", .number(Double(b.index))), ("event", .string(b.event.name)),
                                                   ("address", .string(report.addressString))]
                if let id = packet.packetID { data.append(("packet_id", .number(Double(id)))) }
                if let battery = packet.battery { data.append(("battery_pct", .number(Double(battery)))) }
                if let rssi = report.rssi { data.append(("rssi_db", .number(Double(rssi)))) }
                data.append(("encrypted", .bool(packet.encrypted)))
                var e = AgentEvent(type: type, device: ref, occurredAtMicros: time.wallMicros, clockSynced: time.clockSynced, data: .object(data))
                e.monotonicMicros = time.monoMicros
                return e
            }
        case let .replay(last):
            counters.replaysRefused += 1
            lastProblem = "\(config.id): replayed BTHome packet refused (counter \(packet.counter ?? 0) ≤ \(last))"
            return []
        case .repeated, .noEvent:
            return []
        }
    }

    func presenceEvent(_ o: PresenceTracker.Output, time: ReceiveTime) -> AgentEvent {
        let (type, regionID, beacon, rssi, extra): (EventType, String, IBeacon, Double, [(String, JSONValue)])
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
                           data: .object([("uuid", .string(beacon.uuidString)), ("major", .number(Double(beacon.major))),
                                          ("minor", .number(Double(beacon.minor))), ("rssi_db", .number((rssi * 10).rounded() / 10))] + extra))
        e.monotonicMicros = time.monoMicros
        return e
    }

    mutating func note(address: String, kind: String, identity: String, rssi: Int8?, time: ReceiveTime, deviceID: String?, snippet: String) {
        if var h = heard[address] {
            h.adverts += 1
            h.rssi = rssi ?? h.rssi
            h.lastSeenWallMicros = time.wallMicros
            heard[address] = h
            return
        }
        if heard.count >= Self.maxHeard, let oldest = heard.min(by: { $0.value.lastSeenWallMicros < $1.value.lastSeenWallMicros })?.key {
            heard[oldest] = nil
        }
        heard[address] = HeardAdvertiser(address: address, kind: kind, identity: identity, adverts: 1, rssi: rssi,
                                         lastSeenWallMicros: time.wallMicros, deviceID: deviceID, snippet: snippet)
    }
}
