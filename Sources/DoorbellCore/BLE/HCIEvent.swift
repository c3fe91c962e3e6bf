// HCI over H4 (UART framing, Core Spec Vol 4 Part A): a packet-type byte (0x01 command,
// 0x02 ACL, 0x03 SCO, 0x04 event, 0x05 ISO) then the packet. Events: code, length, parameters.
// The agent reads Command Complete/Status (flow control and bring-up), LE Meta events with
// advertising reports, legacy (subevent 0x02) and extended (0x0D), and what a peripheral's link
// needs: (Enhanced) Connection Complete, Disconnection Complete, Number Of Completed Packets,
// Encryption Change / Key Refresh and LE Long Term Key Request. Total on any bytes.

public struct BLEAdvertisingReport: Sendable, Equatable {
    /// The 48-bit address, most significant byte in the high bits ("C0:11:22:33:44:02" is
    /// 0xC01122334402): what the pipeline's tables are keyed by, no array per report.
    public var addressKey: UInt64
    /// Most significant byte first, as printed; the air has it reversed.
    public var address: [UInt8] {
        get { (0..<6).map { UInt8(truncatingIfNeeded: addressKey >> (8 * (5 - $0))) } }
        set { addressKey = Self.key(newValue) }
    }
    public var addressType: UInt8
    /// Legacy: 0 ADV_IND … 4 SCAN_RSP; extended: the 16-bit event-type bit field.
    public var eventType: UInt16
    public var rssi: Int8?
    /// The advertising data, a view into the event's bytes (read in place: no copy per report);
    /// index from `data.startIndex`.
    public var data: ArraySlice<UInt8>
    public var extended: Bool

    public init(address: [UInt8], addressType: UInt8 = 1, eventType: UInt16 = 3, rssi: Int8?, data: [UInt8], extended: Bool = false) {
        self.init(addressKey: Self.key(address), addressType: addressType, eventType: eventType, rssi: rssi, data: data[...], extended: extended)
    }

    public init(addressKey: UInt64, addressType: UInt8, eventType: UInt16, rssi: Int8?, data: [UInt8], extended: Bool) {
        self.init(addressKey: addressKey, addressType: addressType, eventType: eventType, rssi: rssi, data: data[...], extended: extended)
    }

    public init(addressKey: UInt64, addressType: UInt8, eventType: UInt16, rssi: Int8?, data: ArraySlice<UInt8>, extended: Bool) {
        self.addressKey = addressKey
        self.addressType = addressType
        self.eventType = eventType
        self.rssi = rssi
        self.data = data
        self.extended = extended
    }

    public var addressString: String { Hex.address(addressKey) }

    /// The last 6 bytes, most significant first (an address has 6).
    public static func key(_ address: [UInt8]) -> UInt64 { address.suffix(6).reduce(0) { $0 << 8 | UInt64($1) } }

    public static func parse(address text: String) -> [UInt8]? {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 6, parts.allSatisfy({ $0.utf8.count == 2 }) else { return nil }
        return Hex.decode(parts.joined())
    }
}

/// One LE connection as the controller reported it.
public struct LEConnection: Sendable, Equatable {
    public enum Role: Sendable, Equatable { case central, peripheral }
    public var handle: UInt16
    public var role: Role
    /// Most significant byte first, as printed; for a phone usually a resolvable private address.
    public var peerAddress: [UInt8]
    /// 0 public, 1 random, 2/3 resolved by the controller (public/random identity).
    public var peerAddressType: UInt8
    /// Connection interval in 1.25 ms units.
    public var intervalUnits: UInt16
    public init(handle: UInt16, role: Role, peerAddress: [UInt8], peerAddressType: UInt8, intervalUnits: UInt16) {
        self.handle = handle
        self.role = role
        self.peerAddress = peerAddress
        self.peerAddressType = peerAddressType
        self.intervalUnits = intervalUnits
    }
}

public enum HCIEvent: Sendable, Equatable {
    case commandComplete(opcode: UInt16, numCommands: UInt8, returnParameters: [UInt8])
    case commandStatus(status: UInt8, numCommands: UInt8, opcode: UInt16)
    case advertisingReports([BLEAdvertisingReport])
    case hardwareError(UInt8)
    case connectionComplete(status: UInt8, LEConnection)
    case disconnectionComplete(status: UInt8, handle: UInt16, reason: UInt8)
    /// Per connection handle, how many ACL packets the controller sent (its buffers are free again).
    case completedPackets([UInt16: Int])
    case encryptionChange(status: UInt8, handle: UInt16, enabled: Bool)
    case keyRefreshComplete(status: UInt8, handle: UInt16)
    case longTermKeyRequest(handle: UInt16, random: [UInt8], ediv: UInt16)
    /// An advertising set stopped (status 0: a central connected to it).
    case advertisingSetTerminated(status: UInt8, set: UInt8, handle: UInt16)
    case other(code: UInt8)

    public static let commandCompleteCode: UInt8 = 0x0E
    public static let commandStatusCode: UInt8 = 0x0F
    public static let leMetaCode: UInt8 = 0x3E

    /// One event packet without the H4 type byte: `code len params`. nil when malformed.
    public static func parse(_ p: [UInt8]) -> HCIEvent? {
        guard p.count >= 2, Int(p[1]) == p.count - 2 else { return nil }
        // Advertising reports, most of what a scanner hears, are read in place (no copies).
        if let reports = advertisingReports(p[...]) { return .advertisingReports(reports) }
        if p[0] == leMetaCode, p.count >= 3, p[2] == 0x02 || p[2] == 0x0D { return nil }
        let params = Array(p.dropFirst(2))
        switch p[0] {
        case commandCompleteCode:
            guard params.count >= 3 else { return nil }
            return .commandComplete(opcode: UInt16(params[1]) | UInt16(params[2]) << 8, numCommands: params[0], returnParameters: Array(params.dropFirst(3)))
        case commandStatusCode:
            guard params.count == 4 else { return nil }
            return .commandStatus(status: params[0], numCommands: params[1], opcode: UInt16(params[2]) | UInt16(params[3]) << 8)
        case 0x10:
            guard params.count == 1 else { return nil }
            return .hardwareError(params[0])
        case leMetaCode:
            guard let sub = params.first else { return nil }
            switch sub {
            case 0x01, 0x0A: return connection(Array(params.dropFirst()), enhanced: sub == 0x0A)
            case 0x12:
                guard params.count == 6 else { return nil }
                return .advertisingSetTerminated(status: params[1], set: params[2], handle: u16(params, 3) & 0x0FFF)
            case 0x05:
                guard params.count == 13 else { return nil }
                return .longTermKeyRequest(handle: u16(params, 1) & 0x0FFF, random: Array(params[3..<11]), ediv: u16(params, 11))
            default: return .other(code: p[0])
            }
        case 0x05:
            guard params.count == 4 else { return nil }
            return .disconnectionComplete(status: params[0], handle: u16(params, 1) & 0x0FFF, reason: params[3])
        case 0x08:
            guard params.count == 4 else { return nil }
            return .encryptionChange(status: params[0], handle: u16(params, 1) & 0x0FFF, enabled: params[3] != 0)
        case 0x30:
            guard params.count == 3 else { return nil }
            return .keyRefreshComplete(status: params[0], handle: u16(params, 1) & 0x0FFF)
        case 0x13:
            // Num_Handles, then (handle, count) pairs one after another, as controllers send them.
            guard let n = params.first, params.count == 1 + Int(n) * 4 else { return nil }
            var counts: [UInt16: Int] = [:]
            for k in 0..<Int(n) { counts[u16(params, 1 + k * 4) & 0x0FFF, default: 0] += Int(u16(params, 3 + k * 4)) }
            return .completedPackets(counts)
        default:
            return .other(code: p[0])
        }
    }

    static func u16(_ p: [UInt8], _ i: Int) -> UInt16 { UInt16(p[i]) | UInt16(p[i + 1]) << 8 }

    /// Status, handle (2), role, peer address type, peer address (6), [enhanced: local and peer
    /// resolvable private addresses (12)], interval (2), latency (2), supervision timeout (2), clock accuracy.
    static func connection(_ p: [UInt8], enhanced: Bool) -> HCIEvent? {
        guard p.count == (enhanced ? 30 : 18) else { return nil }
        let i = enhanced ? 23 : 11
        return .connectionComplete(status: p[0], LEConnection(handle: u16(p, 1) & 0x0FFF, role: p[3] == 1 ? .peripheral : .central,
                                                              peerAddress: address(p, at: 5), peerAddressType: p[4], intervalUnits: u16(p, i)))
    }

    static func address(_ p: [UInt8], at i: Int) -> [UInt8] { Array(p[i..<i + 6].reversed()) }

    /// The reports of an LE advertising report event (`code len params`, legacy or extended), read
    /// in place; nil for any other event or a malformed one.
    public static func advertisingReports(_ p: ArraySlice<UInt8>) -> [BLEAdvertisingReport]? {
        guard var cursor = AdvertisingReportCursor(p) else { return nil }
        var out: [BLEAdvertisingReport] = []
        out.reserveCapacity(cursor.remaining)
        while let r = cursor.next() { out.append(r) }
        return out
    }

    /// The air's little-endian address as the 48-bit key (most significant byte high).
    static func addressKey(_ p: ArraySlice<UInt8>, at i: Int) -> UInt64 {
        var key: UInt64 = 0
        for j in (i..<i + 6).reversed() { key = key << 8 | UInt64(p[j]) }
        return key
    }
}

/// The reports of one LE advertising report event, taken one at a time where they lie: replay
/// and the radio's hot path make no array of reports and copy no advertising data (each report's
/// `data` is a view into the event's bytes). The event is checked whole first, so a malformed one
/// yields nothing, as `HCIEvent.advertisingReports` returns nil for it.
public struct AdvertisingReportCursor: Sendable {
    private let bytes: ArraySlice<UInt8>
    private let extended: Bool
    /// The next report's first byte.
    private var position: Int
    /// Reports not taken yet.
    public private(set) var remaining: Int

    /// nil for any other event or a malformed one (`code len params`).
    public init?(_ p: ArraySlice<UInt8>) {
        let b = p.startIndex
        guard p.count >= 3, p[b] == HCIEvent.leMetaCode, Int(p[b + 1]) == p.count - 2 else { return nil }
        let extended: Bool
        switch p[b + 2] {
        case 0x02: extended = false
        case 0x0D: extended = true
        default: return nil
        }
        let start = b + 3
        guard start < p.endIndex, case let n = Int(p[start]), n >= 1 else { return nil }
        // Walk the lengths once: every report must lie inside the event and end exactly at its end.
        var i = start + 1
        for _ in 0..<n {
            guard let next = Self.end(ofReportAt: i, in: p, extended: extended) else { return nil }
            i = next
        }
        guard i == p.endIndex else { return nil }
        (bytes, self.extended, position, remaining) = (p, extended, start + 1, n)
    }

    /// Where the report at `i` ends; nil when it runs past the event (or, legacy, holds more
    /// than 31 bytes of data).
    /// Legacy: event type, address type, address (6), data length, data, RSSI. Core 5.x lays the
    /// reports out one after another (the pre-4.2 arrays-of-fields layout is only ever used with
    /// one report, where both are the same).
    /// Extended: event type (2), address type, address (6), primary/secondary PHY, SID, TX power,
    /// RSSI, periodic interval (2), direct address type and address (7), data length, data.
    private static func end(ofReportAt i: Int, in p: ArraySlice<UInt8>, extended: Bool) -> Int? {
        if extended {
            guard i + 24 <= p.endIndex else { return nil }
            let length = Int(p[i + 23])
            guard i + 24 + length <= p.endIndex else { return nil }
            return i + 24 + length
        }
        guard i + 9 <= p.endIndex else { return nil }
        let length = Int(p[i + 8])
        guard i + 9 + length + 1 <= p.endIndex, length <= 31 else { return nil }
        return i + 10 + length
    }

    public mutating func next() -> BLEAdvertisingReport? {
        guard remaining > 0 else { return nil }
        remaining -= 1
        let p = bytes, i = position
        if extended {
            let length = Int(p[i + 23])
            let rssi = Int8(bitPattern: p[i + 13])
            position = i + 24 + length
            return BLEAdvertisingReport(addressKey: HCIEvent.addressKey(p, at: i + 3), addressType: p[i + 2], eventType: UInt16(p[i]) | UInt16(p[i + 1]) << 8,
                                        rssi: rssi == 127 ? nil : rssi, data: p[i + 24..<i + 24 + length], extended: true)
        }
        let length = Int(p[i + 8])
        let rssi = Int8(bitPattern: p[i + 9 + length])
        position = i + 10 + length
        return BLEAdvertisingReport(addressKey: HCIEvent.addressKey(p, at: i + 2), addressType: p[i + 1], eventType: UInt16(p[i]),
                                    rssi: rssi == 127 ? nil : rssi, data: p[i + 9..<i + 9 + length], extended: false)
    }
}

/// Splits an H4 byte stream into packets. A byte that starts no known packet type is skipped
/// (counted): after line noise the framer finds the next event.
public struct H4Framer: Sendable {
    public enum Packet: Sendable, Equatable {
        case event([UInt8])
        case acl([UInt8])
        case other(type: UInt8, [UInt8])
    }

    private var buffer: [UInt8] = []
    public private(set) var skippedBytes = 0

    public init() {}

    public mutating func feed(_ bytes: some Sequence<UInt8>) -> [Packet] {
        buffer.append(contentsOf: bytes)
        var out: [Packet] = []
        var i = 0
        while i < buffer.count {
            let type = buffer[i]
            let header: Int
            switch type {
            case 0x04: header = 2
            case 0x02, 0x05: header = 4
            case 0x03: header = 3
            case 0x01: header = 3
            default:
                skippedBytes += 1
                i += 1
                continue
            }
            guard i + 1 + header <= buffer.count else { break }
            let length: Int
            switch type {
            case 0x04: length = Int(buffer[i + 2])
            case 0x03, 0x01: length = Int(buffer[i + 3])
            default: length = Int(buffer[i + 3]) | Int(buffer[i + 4] & (type == 0x05 ? 0x3F : 0xFF)) << 8
            }
            let total = 1 + header + length
            guard i + total <= buffer.count else { break }
            let packet = Array(buffer[i + 1..<i + total])
            switch type {
            case 0x04: out.append(.event(packet))
            case 0x02: out.append(.acl(packet))
            default: out.append(.other(type: type, packet))
            }
            i += total
        }
        buffer.removeFirst(i)
        if buffer.count > 70_000 { skippedBytes += buffer.count; buffer.removeAll() }
        return out
    }

    /// An HCI command packet with its H4 type byte.
    public static func command(_ opcode: UInt16, _ params: [UInt8] = []) -> [UInt8] {
        [0x01, UInt8(opcode & 0xFF), UInt8(opcode >> 8), UInt8(params.count)] + params
    }
}
