// A recording of what a radio heard, read from a file into timed inputs: rtl_433 JSON lines,
// OOK timelines (.ook rtl_433 pulse data, .vcd value change dumps) and btsnoop HCI captures.
// One reader for the three places that replay (the sim board's OOK and BLE radios and
// `doorbell-agent replay`), and one rule for placing several files on one timeline.

public struct Recording: Sendable {
    public enum Kind: String, Sendable { case rtl433, ook, ble }

    /// Times count from the recording's own start (0).
    public enum Input: Sendable {
        /// One rtl_433 output line; `unixMicros` when the frame carries an absolute time.
        case rtl433(line: String, atMicros: Int64, unixMicros: Int64?)
        case edge(high: Bool, atMicros: Int64)
        /// The line is quiet from here (the end of an OOK timeline): the last pulse is complete.
        case quiet(atMicros: Int64)
        /// The advertising reports of one received HCI event, with the capture's own clock.
        case ble([BLEAdvertisingReport], atMicros: Int64, unixMicros: Int64)
    }

    public struct Error: Swift.Error, Sendable, CustomStringConvertible {
        public let description: String
    }

    public let kind: Kind
    public let inputs: [Input]
    /// Where the last input is (the end of the quiet after an OOK timeline).
    public let durationMicros: Int64

    /// btsnoop by name or by its magic, .ook/.vcd by name, anything else rtl_433 JSON lines.
    public static func read(fileName: String, bytes: [UInt8]) throws(Error) -> Recording {
        let lower = fileName.lowercased()
        if lower.hasSuffix(".btsnoop") || bytes.starts(with: BTSnoop.magic) { return try btsnoop(fileName, bytes) }
        if lower.hasSuffix(".ook") || lower.hasSuffix(".vcd") { return try ook(fileName, bytes) }
        return rtl433(bytes)
    }

    static func btsnoop(_ fileName: String, _ bytes: [UInt8]) throws(Error) -> Recording {
        let records: [BTSnoopRecord]
        do { records = try BTSnoop.read(bytes) } catch { throw Error(description: "\(fileName): \(error.description)") }
        let origin = records.first?.timeMicros ?? 0
        var inputs: [Input] = []
        var last: Int64 = 0
        for r in records where r.received && r.packet.first == 0x04 {
            guard case let .advertisingReports(reports)? = HCIEvent.parse(Array(r.packet.dropFirst())) else { continue }
            last = max(last, r.timeMicros - origin)
            inputs.append(.ble(reports, atMicros: r.timeMicros - origin, unixMicros: r.timeMicros))
        }
        return Recording(kind: .ble, inputs: inputs, durationMicros: last)
    }

    static func ook(_ fileName: String, _ bytes: [UInt8]) throws(Error) -> Recording {
        let edges: [VCDEdge]
        do { edges = try PulseRecording.edges(fileName: fileName, text: String(decoding: bytes, as: UTF8.self)) } catch {
            throw Error(description: error.description)
        }
        let end = (edges.last?.micros ?? 0) + PulseRecording.leadInMicros
        return Recording(kind: .ook, inputs: edges.map { .edge(high: $0.high, atMicros: $0.micros) } + [.quiet(atMicros: end)], durationMicros: end)
    }

    /// Each line's own `time` gives its place (so a recording replays with its real spacing);
    /// lines without one, or whose time is of another kind than the first line's (Unix time vs
    /// offset from the start), stay where the previous line was: time never goes back.
    static func rtl433(_ bytes: [UInt8]) -> Recording {
        var inputs: [Input] = []
        var origin: (micros: Int64, unix: Bool)?
        var last: Int64 = 0
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") {
            var frameTime: Int64?
            if case let .frame(f) = RTL433Decoder.decode(line: line) { frameTime = f.timeMicros }
            // Unix times (rtl_433 -M time:unix:usec) are kept; offsets are not absolute.
            let unix = frameTime.map { $0 > 1_000_000_000_000_000 } ?? false
            if origin == nil, let frameTime { origin = (frameTime, unix) }
            if let t = frameTime, let o = origin, o.unix == unix { last = max(last, t - o.micros) }
            inputs.append(.rtl433(line: String(line), atMicros: last, unixMicros: unix ? frameTime : nil))
        }
        return Recording(kind: .rtl433, inputs: inputs, durationMicros: last)
    }
}

/// Several recordings on one timeline: each starts a minute after the previous one ended, so
/// presses and visits in different files never merge and no cooldown spans two of them.
public struct RecordingTimeline: Sendable {
    public static let gapMicros: Int64 = 60_000_000
    private var next: Int64

    public init(start: Int64) { next = start }

    /// Where `recording` starts; the next one starts after it and the gap.
    public mutating func place(_ recording: Recording) -> Int64 {
        defer { next += recording.durationMicros + Self.gapMicros }
        return next
    }
}
