// rtl_433 lines → events: decode, match a configured device, track presses.
// Pure: the caller passes receive times and clock state with every line.

public struct ReceiveTime: Sendable, Equatable {
    /// Monotonic microseconds: what the tracker measures gaps with.
    public var monoMicros: Int64
    /// Wall-clock Unix microseconds: what the event reports.
    public var wallMicros: Int64
    public var clockSynced: Bool
    public init(monoMicros: Int64, wallMicros: Int64, clockSynced: Bool) {
        self.monoMicros = monoMicros
        self.wallMicros = wallMicros
        self.clockSynced = clockSynced
    }
}

/// A transmitter the radio heard, configured or not: what `agentctl scan` shows.
public struct HeardTransmitter: Sendable, Equatable {
    public var identity: String
    public var model: String
    public var frames: Int
    public var lastSeenWallMicros: Int64
    public var rssi: Double?
    /// The configured device it matched, nil for strangers.
    public var deviceID: String?
    /// A `match = { ... }` value that would select it, for a ready-to-paste [[device]].
    public var match: String

    public init(identity: String, model: String, frames: Int, lastSeenWallMicros: Int64, rssi: Double?, deviceID: String?, match: String) {
        self.identity = identity
        self.model = model
        self.frames = frames
        self.lastSeenWallMicros = lastSeenWallMicros
        self.rssi = rssi
        self.deviceID = deviceID
        self.match = match
    }
}

public struct RFPipeline: Sendable {
    public struct Counters: Sendable, Equatable {
        public var lines = 0
        public var frames = 0
        public var malformed = 0
        public var notMessages = 0
        public var unmatchedFrames = 0
    }

    public let radio: String
    /// nil: every decoded transmitter counts as a device (replay without a config, learning).
    public let directory: DeviceDirectory?
    public private(set) var tracker: ButtonTracker
    public private(set) var counters = Counters()
    public private(set) var lastMalformed: String?
    public private(set) var heard: [String: HeardTransmitter] = [:]
    public var unknown: [String: HeardTransmitter] { heard.filter { $0.value.deviceID == nil } }
    /// The frame that started the current press of each device, for the event's details.
    private var pressFrames: [String: RFFrame] = [:]

    public static let maxUnknownTracked = 64

    public init(radio: String = "rtl433", directory: DeviceDirectory?, settings: ButtonTracker.Settings) {
        self.radio = radio
        self.directory = directory
        self.tracker = ButtonTracker(settings: settings)
    }

    public mutating func handle(line: some StringProtocol, at time: ReceiveTime) -> [AgentEvent] {
        counters.lines += 1
        switch RTL433Decoder.decode(line: line) {
        case let .malformed(reason):
            counters.malformed += 1
            lastMalformed = reason
            return []
        case .notAMessage:
            counters.notMessages += 1
            return []
        case let .frame(frame):
            return handle(frame: frame, at: time)
        }
    }

    public mutating func handle(frame: RFFrame, at time: ReceiveTime) -> [AgentEvent] {
        counters.frames += 1
        let device: DeviceRef
        if let directory {
            guard let config = directory.match(frame, radio: radio) else {
                counters.unmatchedFrames += 1
                note(frame, device: nil, at: time)
                return []
            }
            note(frame, device: config.id, at: time)
            device = DeviceRef(id: config.id, name: config.name, radio: radio)
        } else {
            device = DeviceRef(id: frame.identity, name: frame.model, radio: radio)
        }
        return track(device: device, frame: frame, at: time)
    }

    /// A synthetic press of a configured device (installer check): same tracker, marked test.
    public mutating func inject(device config: DeviceConfig, at time: ReceiveTime) -> [AgentEvent] {
        let device = DeviceRef(id: config.id, name: config.name, radio: config.radio)
        guard case let .pressed(_, _, suppressed)? = tracker.observe(device: device.id, at: time.monoMicros) else { return [] }
        var event = AgentEvent(type: .doorbellPressed, device: device, occurredAtMicros: time.wallMicros, clockSynced: time.clockSynced,
                               test: true, data: .object([("injected", .bool(true)), ("suppressed", .number(Double(suppressed)))]))
        event.monotonicMicros = time.monoMicros
        return [event]
    }

    private mutating func track(device: DeviceRef, frame: RFFrame, at time: ReceiveTime) -> [AgentEvent] {
        trackedEvents(device: device, frame: frame, at: time).map { e in
            var e = e
            e.monotonicMicros = time.monoMicros
            return e
        }
    }

    private mutating func trackedEvents(device: DeviceRef, frame: RFFrame, at time: ReceiveTime) -> [AgentEvent] {
        guard let output = tracker.observe(device: device.id, at: time.monoMicros) else { return [] }
        switch output {
        case let .pressed(_, _, suppressed):
            if pressFrames.count >= ButtonTracker.maxTrackedDevices { pressFrames.removeAll(keepingCapacity: true) }
            pressFrames[device.id] = frame
            return [AgentEvent(type: .doorbellPressed, device: device, occurredAtMicros: time.wallMicros,
                               clockSynced: time.clockSynced, data: details(frame, extra: [("suppressed", .number(Double(suppressed)))]))]
        case let .held(_, at, startedAt):
            let first = pressFrames[device.id] ?? frame
            return [AgentEvent(type: .doorbellHeld, device: device, occurredAtMicros: time.wallMicros,
                               clockSynced: time.clockSynced,
                               data: details(first, extra: [("held_ms", .number(Double((at - startedAt) / 1000)))]))]
        }
    }

    private func details(_ frame: RFFrame, extra: [(String, JSONValue)]) -> JSONValue {
        var members: [(String, JSONValue)] = []
        if let code = frame.code { members.append(("code", .string(code))) }
        members.append(("identity", .string(frame.identity)))
        members.append(("model", .string(frame.model)))
        if let rssi = frame.rssi { members.append(("rssi_db", .number(rssi))) }
        return .object(members + frame.details + extra)
    }

    private mutating func note(_ frame: RFFrame, device: String?, at time: ReceiveTime) {
        if var h = heard[frame.identity] {
            h.frames += 1
            h.lastSeenWallMicros = time.wallMicros
            h.rssi = frame.rssi ?? h.rssi
            h.deviceID = device
            heard[frame.identity] = h
            return
        }
        if heard.count >= Self.maxUnknownTracked,
           let oldest = heard.min(by: { $0.value.lastSeenWallMicros < $1.value.lastSeenWallMicros })?.key {
            heard.removeValue(forKey: oldest)
        }
        heard[frame.identity] = HeardTransmitter(identity: frame.identity, model: frame.model, frames: 1,
                                                 lastSeenWallMicros: time.wallMicros, rssi: frame.rssi, deviceID: device,
                                                 match: Self.matchSnippet(frame))
    }

    /// `{ code = "0x91568F" }`, or the identity fields for decoders that print no code.
    static func matchSnippet(_ frame: RFFrame) -> String {
        if let code = frame.code { return "{ code = \"0x\(code.uppercased())\" }" }
        var parts: [String] = []
        if frame.identity.hasPrefix("data="), frame.fields["model"] != nil { parts.append("model = \"\(frame.model)\"") }
        for key in RTL433Decoder.identityFields {
            guard let v = frame.fields[key] else { continue }
            if let i = v.intValue { parts.append("\(key) = \(i)") } else if let t = RTL433Decoder.scalarText(v) { parts.append("\(key) = \"\(t)\"") }
        }
        return "{ " + parts.joined(separator: ", ") + " }"
    }
}
