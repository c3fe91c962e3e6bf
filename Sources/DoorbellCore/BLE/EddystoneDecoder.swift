// Eddystone, Google's open beacon format (github.com/google/eddystone, protocol-specification.md
// and the per-frame documents): service data for the 16-bit UUID 0xFEAA, whose first byte is the
// frame type, in an advert that also lists 0xFEAA among its 16-bit service UUIDs. Hand-written
// from the published layouts: Debian packages no C library that parses Eddystone frames (BlueZ
// knows the AD types, not what is inside). Multi-byte values are big-endian.
//
//   UID   00 | Tx power at 0 m (int8) | namespace [10] | instance [6] | RFU [2] = 00 00
//         (older beacons omit the RFU bytes: 18 bytes are accepted as well as 20)
//   EID   30 | Tx power at 0 m (int8) | ephemeral id [8]
//   TLM   20 | 00 | battery mV (u16, 0 = none) | temperature °C (s8.8, 0x8000 = none)
//            | adverts since boot (u32) | time since boot (u32, 0.1 s)
//   eTLM  20 | 01 | encrypted telemetry [12] | salt (u16) | MIC (u16)
//   URL   10 | Tx power at 0 m (int8) | scheme (00–03) | URL, compressed [0...17]
//
// Only UID identifies a beacon: it is what a `[[region]]` with `namespace` matches. TLM carries no
// identity; the spec interleaves it with the UID frames of the same device address, so the
// pipeline pairs them by address. EID rotates (every 2^k s) and only the service the beacon was
// registered with can resolve it: here it is "some EID beacon is around", counted and listed by
// `agentctl scan`; to use such a beacon for presence, give it a UID (or iBeacon) slot as well.
// eTLM is AES-EAX under the EID key: recognised and counted, not decoded. URL is a link for
// phones, not a presence signal: recognised and counted.
//
// Answers: not mine without 0xFEAA service data; corrupt on a wrong length for the frame type,
// an unknown TLM version, a bad URL scheme or a reserved URL byte; implausible when the advert
// does not list 0xFEAA, for reserved frame-type bits or an unknown frame type, non-zero RFU
// bytes, or a Tx power outside the spec's −100…+20 dBm.

public struct EddystoneUID: Sendable, Equatable {
    public var namespace: [UInt8]
    public var instance: [UInt8]
    /// Received power at 0 m, dBm.
    public var txPower: Int8

    public init(namespace: [UInt8], instance: [UInt8], txPower: Int8) {
        self.namespace = namespace
        self.instance = instance
        self.txPower = txPower
    }

    /// 20 hex digits, lowercase, as `namespace = "…"` takes it.
    public var namespaceHex: String { Hex.encode(namespace) }
    public var instanceHex: String { Hex.encode(instance) }
}

public struct EddystoneTelemetry: Sendable, Equatable {
    /// 0 when the beacon has no battery (USB powered).
    public var batteryMillivolts: UInt16
    /// Signed 8.8 fixed point, °C; 0x8000 (−128 °C) when the beacon has no sensor.
    public var temperatureRaw: Int16
    public var advertCount: UInt32
    /// Time since boot, 0.1 s steps.
    public var uptimeTenths: UInt32

    public init(batteryMillivolts: UInt16, temperatureRaw: Int16, advertCount: UInt32, uptimeTenths: UInt32) {
        self.batteryMillivolts = batteryMillivolts
        self.temperatureRaw = temperatureRaw
        self.advertCount = advertCount
        self.uptimeTenths = uptimeTenths
    }

    public var battery: UInt16? { batteryMillivolts == 0 ? nil : batteryMillivolts }
    public var temperature: Double? { temperatureRaw == Int16.min ? nil : Double(temperatureRaw) / 256 }
}

public enum EddystoneFrame: Sendable, Equatable {
    case uid(EddystoneUID)
    case eid(ephemeralID: [UInt8], txPower: Int8)
    case telemetry(EddystoneTelemetry)
    case encryptedTelemetry
    /// The scheme byte and the compressed URL as sent; `urlText` expands them.
    case url(scheme: UInt8, compressed: [UInt8], txPower: Int8)

    static let schemes = ["http://www.", "https://www.", "http://", "https://"]
    static let expansions = [".com/", ".org/", ".edu/", ".net/", ".info/", ".biz/", ".gov/", ".com", ".org", ".edu", ".net", ".info", ".biz", ".gov"]

    /// The URL of a URL frame, expanded.
    public var urlText: String? {
        guard case let .url(scheme, compressed, _) = self, Int(scheme) < Self.schemes.count else { return nil }
        var text = Self.schemes[Int(scheme)]
        for b in compressed { text += Int(b) < Self.expansions.count ? Self.expansions[Int(b)] : String(UnicodeScalar(b)) }
        return text
    }

    /// The service data (after the UUID) a beacon would send: tests, fuzz seeds, the bench.
    public var serviceData: [UInt8] {
        func be16(_ v: UInt16) -> [UInt8] { [UInt8(v >> 8), UInt8(v & 0xFF)] }
        func be32(_ v: UInt32) -> [UInt8] { be16(UInt16(v >> 16)) + be16(UInt16(v & 0xFFFF)) }
        switch self {
        case let .uid(u): return [0x00, UInt8(bitPattern: u.txPower)] + u.namespace + u.instance + [0, 0]
        case let .eid(id, tx): return [0x30, UInt8(bitPattern: tx)] + id
        case let .telemetry(t):
            return [0x20, 0x00] + be16(t.batteryMillivolts) + be16(UInt16(bitPattern: t.temperatureRaw)) + be32(t.advertCount) + be32(t.uptimeTenths)
        case .encryptedTelemetry: return [0x20, 0x01] + [UInt8](repeating: 0, count: 16)
        case let .url(scheme, compressed, tx): return [0x10, UInt8(bitPattern: tx), scheme] + compressed
        }
    }

    /// A whole advert: flags, the 0xFEAA service UUID list, the service data.
    public var advertisingData: [UInt8] {
        let sd = serviceData
        return [0x02, 0x01, 0x06, 0x03, 0x03, 0xAA, 0xFE, UInt8(sd.count + 3), 0x16, 0xAA, 0xFE] + sd
    }
}

public enum EddystoneDecoder: BLEAdvertDecoder {
    public static let uuid16: UInt16 = 0xFEAA

    public static let descriptor = BLEDecoderDescriptor(
        name: "eddystone", summary: "Google Eddystone: UID (presence), TLM telemetry, EID and URL (counted)",
        regionKeys: [("namespace", "the Eddystone-UID namespace, 20 hex digits, e.g. namespace = \"edd1ebeac04e5defa017\""),
                     ("instance", "matches namespace+instance when given: 12 hex digits, e.g. instance = \"0123456789ab\"")])

    static let txPowerRange: ClosedRange<Int8> = -100...20

    public static func verdict(_ structures: [ADStructure]) -> BLEVerdict {
        guard let sd = ADWalker.serviceData(structures, uuid16: uuid16) else { return .notMine }
        guard let type = sd.first else { return .corrupt("empty Eddystone service data") }
        if !listsService(structures) { return .implausible("Eddystone service data without 0xFEAA in the advert's service UUID list") }
        if type & 0x0F != 0 { return .implausible("Eddystone frame type 0x\(Hex.encode([type])) has reserved bits set") }
        let tx = sd.count > 1 ? Int8(bitPattern: sd[1]) : 0
        switch type {
        case 0x00:
            guard sd.count == 18 || sd.count == 20 else { return .corrupt("Eddystone-UID of \(sd.count) bytes, not 20 (or 18 without RFU)") }
            if sd.count == 20 && (sd[18] != 0 || sd[19] != 0) { return .implausible("Eddystone-UID with non-zero RFU bytes") }
            guard txPowerRange.contains(tx) else { return .implausible("Eddystone-UID Tx power \(tx) dBm outside -100...20") }
            return .observation(.eddystone(.uid(EddystoneUID(namespace: Array(sd[2..<12]), instance: Array(sd[12..<18]), txPower: tx))))
        case 0x30:
            guard sd.count == 10 else { return .corrupt("Eddystone-EID of \(sd.count) bytes, not 10") }
            guard txPowerRange.contains(tx) else { return .implausible("Eddystone-EID Tx power \(tx) dBm outside -100...20") }
            return .observation(.eddystone(.eid(ephemeralID: Array(sd[2..<10]), txPower: tx)))
        case 0x20:
            switch sd.count > 1 ? sd[1] : nil {
            case 0x00?:
                guard sd.count == 14 else { return .corrupt("Eddystone-TLM of \(sd.count) bytes, not 14") }
                let t = EddystoneTelemetry(batteryMillivolts: be(sd, 2, 2).map(UInt16.init) ?? 0, temperatureRaw: Int16(bitPattern: UInt16(be(sd, 4, 2) ?? 0)),
                                           advertCount: UInt32(be(sd, 6, 4) ?? 0), uptimeTenths: UInt32(be(sd, 10, 4) ?? 0))
                return .observation(.eddystone(.telemetry(t)))
            case 0x01?:
                guard sd.count == 18 else { return .corrupt("encrypted Eddystone-TLM of \(sd.count) bytes, not 18") }
                return .observation(.eddystone(.encryptedTelemetry))
            case let v?: return .corrupt("Eddystone-TLM version \(v) (0 plain and 1 encrypted exist)")
            case nil: return .corrupt("Eddystone-TLM without a version byte")
            }
        case 0x10:
            guard (3...20).contains(sd.count) else { return .corrupt("Eddystone-URL of \(sd.count) bytes, not 3 to 20") }
            guard sd[2] < 4 else { return .corrupt("Eddystone-URL scheme \(sd[2]) (0 to 3 exist)") }
            // 0x0E-0x20 and 0x7F-0xFF are reserved by the URL encoding.
            if let bad = sd[3...].first(where: { (0x0E...0x20).contains($0) || $0 >= 0x7F }) {
                return .corrupt("Eddystone-URL with reserved byte 0x\(Hex.encode([bad]))")
            }
            guard txPowerRange.contains(tx) else { return .implausible("Eddystone-URL Tx power \(tx) dBm outside -100...20") }
            return .observation(.eddystone(.url(scheme: sd[2], compressed: Array(sd[3...]), txPower: tx)))
        default:
            return .implausible("unknown Eddystone frame type 0x\(Hex.encode([type]))")
        }
    }

    /// 0xFEAA in a complete (0x03) or incomplete (0x02) list of 16-bit service UUIDs.
    static func listsService(_ structures: [ADStructure]) -> Bool {
        structures.contains { s in
            guard s.type == 0x02 || s.type == 0x03 else { return false }
            var i = s.data.startIndex
            while i + 1 < s.data.endIndex {
                if UInt16(s.data[i]) | UInt16(s.data[i + 1]) << 8 == uuid16 { return true }
                i += 2
            }
            return false
        }
    }

    /// Big-endian unsigned of `count` bytes at `offset` (callers checked the length).
    static func be(_ b: [UInt8], _ offset: Int, _ count: Int) -> UInt32? {
        guard offset + count <= b.count else { return nil }
        return b[offset..<offset + count].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
    }
}
