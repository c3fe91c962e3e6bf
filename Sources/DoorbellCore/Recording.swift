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
        var reader = BLECaptureReader(fileName: fileName)
        reader.feed(bytes[...])
        var inputs: [Input] = []
        while let e = try reader.next() { inputs.append(.ble(e.reports, atMicros: e.atMicros, unixMicros: e.unixMicros)) }
        try reader.finish()
        return Recording(kind: .ble, inputs: inputs, durationMicros: reader.durationMicros)
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
        defer { ended(durationMicros: recording.durationMicros) }
        return next
    }

    /// Where the next recording starts, for one read as it plays (its length known at its end).
    public var start: Int64 { next }

    /// The recording at `start` ended after `durationMicros`.
    public mutating func ended(durationMicros: Int64) { next += durationMicros + Self.gapMicros }
}

/// A btsnoop capture as `.ble` inputs, read as its bytes come: replay holds one chunk and one
/// HCI event, whatever the capture's length (a day's capture replays on a 512 MB board).
/// `Recording.read` makes its inputs through this too, so both ways give the same inputs.
public struct BLECaptureReader: Sendable {
    public let fileName: String
    private var snoop = BTSnoopReader()
    /// The first record's time (of any direction): inputs count from it.
    private var origin: Int64?
    /// Where the last input is (the recording's `durationMicros` once read to the end).
    public private(set) var durationMicros: Int64 = 0

    public init(fileName: String) { self.fileName = fileName }

    static let maxOffsetMicros: Int64 = 1 << 53

    /// Bytes held that no input has taken yet.
    public var bufferedBytes: Int { snoop.bufferedBytes }

    public mutating func feed(_ bytes: ArraySlice<UInt8>) { snoop.feed(bytes) }

    /// The advertising reports of one received HCI event, with the capture's own clock (what
    /// `Recording.Input.ble` holds, without the enum's copies on the way).
    public struct Reports: Sendable {
        /// The reports one at a time, in place: valid until the next `feed` (which would
        /// otherwise copy the buffer the reports' data still views).
        public var cursor: AdvertisingReportCursor
        public var reports: [BLEAdvertisingReport] {
            var c = cursor, out: [BLEAdvertisingReport] = []
            while let r = c.next() { out.append(r) }
            return out
        }
        /// From the capture's first record.
        public var atMicros: Int64
        public var unixMicros: Int64
    }

    /// The next advertising reports, or nil until more bytes are fed.
    public mutating func next() throws(Recording.Error) -> Reports? {
        while true {
            let record: BTSnoopReader.Packet
            do {
                guard let r = try snoop.nextPacket() else { return nil }
                record = r
            } catch {
                throw Recording.Error(description: "\(fileName): \(error.description)")
            }
            let origin = self.origin ?? record.timeMicros
            self.origin = origin
            // Only LE Meta events can hold advertising reports: the rest is skipped uncopied.
            guard record.received, record.type == 0x04, let reports = AdvertisingReportCursor(record.body) else { continue }
            // A capture's clock is outside input: offsets beyond ±285 years are clamped there,
            // so the sums replay makes of them (start + offset, durations) never overflow.
            let (offset, overflow) = record.timeMicros.subtractingReportingOverflow(origin)
            let at = overflow ? (origin > 0 ? -Self.maxOffsetMicros : Self.maxOffsetMicros) : min(max(offset, -Self.maxOffsetMicros), Self.maxOffsetMicros)
            durationMicros = max(durationMicros, at)
            return Reports(cursor: reports, atMicros: at, unixMicros: record.timeMicros)
        }
    }

    /// The reports of the next event to `body`, read in place; false until more bytes are fed.
    /// Replay's loop: the optionals of `next()` and of the cursor stay in this module, where they
    /// are released directly instead of through their runtime metadata (twice per advert).
    /// Not inlined into the caller (another module), which destroyed them through metadata.
    @inline(never)
    public mutating func nextReports(_ body: (BLEAdvertisingReport, _ atMicros: Int64, _ unixMicros: Int64) -> Void) throws(Recording.Error) -> Bool {
        guard var e = try next() else { return false }
        while let r = e.cursor.next() { body(r, e.atMicros, e.unixMicros) }   // bounded: at most 255 reports
        return true
    }

    /// The capture ended: an error naming the file when it ended inside a record.
    public func finish() throws(Recording.Error) {
        do { try snoop.finish() } catch { throw Recording.Error(description: "\(fileName): \(error.description)") }
    }
}
