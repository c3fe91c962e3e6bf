// btsnoop (RFC 1761-style, as BlueZ's btmon and Wireshark read it): "btsnoop\0", version 1, and
// datalink 1002 (HCI UART/H4: every packet keeps its H4 type byte). Records: original and
// included length, flags (bit 0: received by the host; bit 1: command/event), cumulative drops,
// and a timestamp in microseconds since year 0 (big-endian throughout).

public struct BTSnoopRecord: Sendable, Equatable {
    /// Unix microseconds.
    public var timeMicros: Int64
    /// Controller → host.
    public var received: Bool
    /// H4 packet with its type byte.
    public var packet: [UInt8]
    public init(timeMicros: Int64, received: Bool, packet: [UInt8]) {
        self.timeMicros = timeMicros
        self.received = received
        self.packet = packet
    }
}

public enum BTSnoop {
    public static let magic: [UInt8] = Array("btsnoop".utf8) + [0]
    public static let datalinkH4: UInt32 = 1002
    /// Microseconds from 0000-01-01 to 1970-01-01, as btsnoop counts.
    static let epochOffset: Int64 = 0x00DC_DDB3_0F2F_8000

    public struct Error: Swift.Error, Sendable, CustomStringConvertible {
        public var description: String
    }

    public static var header: [UInt8] { magic + be32(1) + be32(datalinkH4) }

    public static func record(_ r: BTSnoopRecord) -> [UInt8] {
        let type = r.packet.first ?? 0
        let flags: UInt32 = (r.received ? 1 : 0) | (type == 0x01 || type == 0x04 ? 2 : 0)
        return be32(UInt32(r.packet.count)) + be32(UInt32(r.packet.count)) + be32(flags) + be32(0)
            + be64(UInt64(bitPattern: r.timeMicros + epochOffset)) + r.packet
    }

    public static func file(_ records: [BTSnoopRecord]) -> [UInt8] {
        header + records.flatMap(record)
    }

    /// A whole capture in memory (tests, the fuzzer, `agentctl capture`'s round trip); replay
    /// streams it through `BTSnoopReader` instead.
    public static func read(_ bytes: [UInt8]) throws(Error) -> [BTSnoopRecord] {
        var reader = BTSnoopReader()
        reader.feed(bytes[...])
        var out: [BTSnoopRecord] = []
        while let r = try reader.next() { out.append(r) }
        try reader.finish()
        return out
    }

    static func be32(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
    static func be64(_ v: UInt64) -> [UInt8] { be32(UInt32(v >> 32)) + be32(UInt32(v & 0xFFFF_FFFF)) }
    static func u32(_ b: [UInt8], _ i: Int) -> UInt32 {
        UInt32(b[i]) << 24 | UInt32(b[i + 1]) << 16 | UInt32(b[i + 2]) << 8 | UInt32(b[i + 3])
    }
}

/// A btsnoop capture read as its bytes come, a record at a time: it holds the unread rest of the
/// chunks fed so far (at most one record plus one chunk), never the capture, so replaying a day's
/// capture costs the memory of one chunk. Total on any bytes.
public struct BTSnoopReader: Sendable {
    private var buffer: [UInt8] = []
    /// First unread byte of `buffer`.
    private var position = 0
    /// Bytes of the file before `buffer[0]`, so errors name the record's place in the file.
    private var dropped = 0
    private var datalink: UInt32?

    public init() {}

    /// Bytes held that no record has taken yet (what the tests bound).
    public var bufferedBytes: Int { buffer.count - position }

    /// The next bytes of the file, in chunks of any size.
    public mutating func feed(_ bytes: ArraySlice<UInt8>) {
        if position > 0 {
            // What was read goes before the buffer grows: it stays one record plus one chunk.
            dropped += position
            buffer.removeFirst(position)
            position = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// One record as a view into the reader's buffer (valid until the next `feed`): the H4 type
    /// (nil for an empty packet) and the packet after it. A named struct, not a tuple: a tuple
    /// with an optional inside is destroyed through its runtime metadata, once per record.
    public struct Packet: Sendable {
        public var timeMicros: Int64
        public var received: Bool
        public var type: UInt8?
        public var body: ArraySlice<UInt8>
    }

    /// The next whole record, or nil until more bytes are fed.
    public mutating func next() throws(BTSnoop.Error) -> BTSnoopRecord? {
        guard let p = try nextPacket() else { return nil }
        var packet: [UInt8] = []
        packet.reserveCapacity(p.body.count + 1)
        if let type = p.type { packet.append(type) }
        packet.append(contentsOf: p.body)
        return BTSnoopRecord(timeMicros: p.timeMicros, received: p.received, packet: packet)
    }

    /// The next record as a view into the reader's buffer. Replay looks at it without copying.
    public mutating func nextPacket() throws(BTSnoop.Error) -> Packet? {
        if datalink == nil {
            if buffer.count >= 8, !buffer[0..<8].elementsEqual(BTSnoop.magic) { throw BTSnoop.Error(description: "not a btsnoop file (no \"btsnoop\" header)") }
            guard buffer.count >= 16 else { return nil }
            let link = BTSnoop.u32(buffer, 12)
            guard link == 1002 || link == 1001 else {
                throw BTSnoop.Error(description: "btsnoop datalink \(link) is not supported (1001 HCI or 1002 H4; btmon's monitor format 2001 is not)")
            }
            datalink = link
            position = 16
        }
        let i = position
        guard i + 24 <= buffer.count else { return nil }
        let included = Int(BTSnoop.u32(buffer, i + 4))
        guard included <= 65_535 + 5 else {
            throw BTSnoop.Error(description: "record at byte \(dropped + i) claims \(included) bytes, more than the file holds")
        }
        guard i + 24 + included <= buffer.count else { return nil }
        let flags = BTSnoop.u32(buffer, i + 8)
        let ts = Int64(bitPattern: UInt64(BTSnoop.u32(buffer, i + 16)) << 32 | UInt64(BTSnoop.u32(buffer, i + 20)))
        position = i + 24 + included
        let received = flags & 1 == 1
        // A capture's clock is outside input: wrapping, never a trap.
        let time = ts &- BTSnoop.epochOffset
        if datalink == 1001 {
            // Unencapsulated HCI: the type comes from the flags (events are the only
            // controller→host command/event packets).
            let type: UInt8 = flags & 2 == 2 ? (received ? 0x04 : 0x01) : 0x02
            return Packet(timeMicros: time, received: received, type: type, body: buffer[i + 24..<i + 24 + included])
        }
        guard included > 0 else { return Packet(timeMicros: time, received: received, type: nil, body: buffer[i + 24..<i + 24]) }
        return Packet(timeMicros: time, received: received, type: buffer[i + 24], body: buffer[i + 25..<i + 24 + included])
    }

    /// The file ended: an error when it ended inside the header or a record.
    public func finish() throws(BTSnoop.Error) {
        guard datalink != nil else { throw BTSnoop.Error(description: "not a btsnoop file (no \"btsnoop\" header)") }
        let rest = buffer.count - position
        guard rest == 0 else {
            let at = dropped + position
            if rest < 24 { throw BTSnoop.Error(description: "record at byte \(at) is cut off (the capture was interrupted?)") }
            throw BTSnoop.Error(description: "record at byte \(at) claims \(BTSnoop.u32(buffer, position + 4)) bytes, more than the file holds")
        }
    }
}
