// The OOK receiver's core: edges → pulses (glitch filter) → fixed-code words → the same device
// matching and ButtonTracker as rtl_433 frames. Pure: every call carries its receive time.

public struct OOKPipeline: Sendable {
    public private(set) var edges: EdgePulseAssembler
    public private(set) var decoder: OOKDecoder
    public private(set) var rf: RFPipeline
    /// While set, every pulse is kept in `recorded` for `agentctl capture` (drained by the caller).
    public var recordPulses = false
    public var recorded: [Pulse] = []
    /// The latest time the tracker saw; a replay runs ahead of the real clock.
    private var lastMonoMicros: Int64 = .min

    public init(radio: String = "ook", directory: DeviceDirectory?, button: ButtonTracker.Settings,
                decoder: OOKDecoder.Settings = OOKDecoder.Settings(), glitchMicros: Int64 = 80) {
        edges = EdgePulseAssembler(glitchMicros: glitchMicros, idleMicros: decoder.lineIdleMicros)
        self.decoder = OOKDecoder(settings: decoder)
        // A slow time unit spaces the frames of one press further apart than bells do.
        var button = button
        button.repeatGapMicros = max(button.repeatGapMicros, decoder.minRepeatGapMicros)
        rf = RFPipeline(radio: radio, directory: directory, settings: button)
    }

    /// A level change on the receiver's pin (GPIO, or a recording's timeline).
    public mutating func edge(high: Bool, atMicros: Int64, time: ReceiveTime) -> [AgentEvent] {
        lastMonoMicros = max(lastMonoMicros, time.monoMicros)
        var events: [AgentEvent] = []
        // A silence nobody flushed (a replay, a late poll wakeup): the burst's last pulse ended
        // when the line had been quiet for idleMicros, not at this edge, and is stamped so.
        if let quietAt = edges.quietDeadline, atMicros >= quietAt, let last = edges.flush(atMicros: atMicros) {
            let back = atMicros - quietAt
            events = handle(pulse: last, time: ReceiveTime(monoMicros: time.monoMicros - back, wallMicros: time.wallMicros - back,
                                                           clockSynced: time.clockSynced))
        }
        guard let pulse = edges.edge(high: high, atMicros: atMicros) else { return events }
        return events + handle(pulse: pulse, time: time)
    }

    /// The line has been quiet: ends the last pulse of a burst.
    public mutating func idle(atMicros: Int64, time: ReceiveTime) -> [AgentEvent] {
        lastMonoMicros = max(lastMonoMicros, time.monoMicros)
        guard let pulse = edges.flush(atMicros: atMicros) else { return [] }
        return handle(pulse: pulse, time: time)
    }

    /// A pulse from a source that demodulates itself (rtl_433's pulse output).
    public mutating func handle(pulse: Pulse, time: ReceiveTime, rssi: Double? = nil) -> [AgentEvent] {
        lastMonoMicros = max(lastMonoMicros, time.monoMicros)
        if recordPulses && recorded.count < 1_000_000 { recorded.append(pulse) }
        guard let code = decoder.feed(pulse) else { return [] }
        return rf.handle(frame: Self.frame(code, rssi: rssi), at: time)
    }

    public mutating func inject(device: DeviceConfig, at time: ReceiveTime) -> [AgentEvent] {
        var t = time
        t.monoMicros = max(time.monoMicros, lastMonoMicros)
        lastMonoMicros = t.monoMicros
        return rf.inject(device: device, at: t)
    }

    /// The frame the shared matcher sees: `code` as a number, so `match = { code = "0x91568F" }`
    /// finds the same bell whether rtl_433's flex decoder or this decoder heard it.
    public static func frame(_ c: OOKCode, rssi: Double? = nil) -> RFFrame {
        var fields: [String: JSONValue] = [
            "code": .number(Double(c.code)),
            "model": .string(c.protocolName),
            "protocol": .string(c.protocolName),
            "bits": .number(Double(c.bits)),
        ]
        if let t = c.tristate { fields["tristate"] = .string(t) }
        var details: [(String, JSONValue)] = [("protocol", .string(c.protocolName)), ("time_unit_us", .number(Double(c.timeUnitMicros))),
                                              ("bits", .number(Double(c.bits)))]
        if let t = c.tristate { details.append(("tristate", .string(t))) }
        var frame = RFFrame(model: c.protocolName, identity: "code=" + c.hex, code: c.hex, rssi: rssi, timeMicros: nil, fields: fields)
        frame.details = details
        return frame
    }
}

/// A recorded timeline (`.vcd` edges or `.ook` pulses) as edges, for replay through the same path.
public enum PulseRecording {
    public struct Error: Swift.Error, Sendable, CustomStringConvertible {
        public var description: String
    }

    /// Silence before and after a recording, so its first and last levels are complete.
    public static let leadInMicros: Int64 = 100_000

    public static func edges(fileName: String, text: String) throws(Error) -> [VCDEdge] {
        let lower = fileName.lowercased()
        if lower.hasSuffix(".vcd") {
            do { return try VCDTimeline.edges(text: text) } catch { throw Error(description: "\(fileName): \(error.description)") }
        }
        guard lower.hasSuffix(".ook") else {
            throw Error(description: "\(fileName): unknown recording type; expected .ook (rtl_433 pulse data) or .vcd (value change dump)")
        }
        let (pulses, problem) = OOKPulseTextReader.pulses(text: text)
        if let problem { throw Error(description: "\(fileName): \(problem)") }
        guard !pulses.isEmpty else { throw Error(description: "\(fileName): no OOK pulses in the file") }
        return edges(pulses: pulses)
    }

    public static func edges(pulses: [Pulse]) -> [VCDEdge] {
        var out: [VCDEdge] = [VCDEdge(micros: 0, high: false)]
        out.reserveCapacity(pulses.count * 2 + 2)
        var t = leadInMicros
        for p in pulses {
            out.append(VCDEdge(micros: t, high: true))
            t += Int64(p.highMicros)
            out.append(VCDEdge(micros: t, high: false))
            t += Int64(p.lowMicros)
        }
        return out
    }
}
