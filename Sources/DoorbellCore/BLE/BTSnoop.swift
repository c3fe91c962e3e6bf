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

    public static func read(_ bytes: [UInt8]) throws(Error) -> [BTSnoopRecord] {
        guard bytes.count >= 16, Array(bytes[0..<8]) == magic else { throw Error(description: "not a btsnoop file (no \"btsnoop\" header)") }
        let datalink = u32(bytes, 12)
        guard datalink == 1002 || datalink == 1001 else {
            throw Error(description: "btsnoop datalink \(datalink) is not supported (1001 HCI or 1002 H4; btmon's monitor format 2001 is not)")
        }
        var out: [BTSnoopRecord] = []
        var i = 16
        while i < bytes.count {
            guard i + 24 <= bytes.count else { throw Error(description: "record at byte \(i) is cut off (the capture was interrupted?)") }
            let included = Int(u32(bytes, i + 4))
            let flags = u32(bytes, i + 8)
            let ts = Int64(bitPattern: UInt64(u32(bytes, i + 16)) << 32 | UInt64(u32(bytes, i + 20)))
            guard included <= 65_535 + 5, i + 24 + included <= bytes.count else {
                throw Error(description: "record at byte \(i) claims \(included) bytes, more than the file holds")
            }
            var packet = Array(bytes[i + 24..<i + 24 + included])
            if datalink == 1001 {
                // Unencapsulated HCI: the type comes from the flags (events are the only
                // controller→host command/event packets).
                let received = flags & 1 == 1, control = flags & 2 == 2
                packet = [control ? (received ? 0x04 : 0x01) : 0x02] + packet
            }
            out.append(BTSnoopRecord(timeMicros: ts - epochOffset, received: flags & 1 == 1, packet: packet))
            i += 24 + included
        }
        return out
    }

    static func be32(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
    static func be64(_ v: UInt64) -> [UInt8] { be32(UInt32(v >> 32)) + be32(UInt32(v & 0xFFFF_FFFF)) }
    static func u32(_ b: [UInt8], _ i: Int) -> UInt32 {
        UInt32(b[i]) << 24 | UInt32(b[i + 1]) << 16 | UInt32(b[i + 2]) << 8 | UInt32(b[i + 3])
    }
}
