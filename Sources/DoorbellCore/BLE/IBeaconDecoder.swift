// iBeacon, strictly: manufacturer data of Apple (company 0x004C, little-endian on the air), then
// type 0x02 and length 0x15, a 16-byte proximity UUID, major and minor (big-endian) and the
// measured power at 1 m (int8). Anything else, including Apple's other formats (Nearby Info 0x10,
// AirDrop, Find My) and a right prefix with the wrong length, is not an iBeacon.

public struct IBeacon: Sendable, Equatable, Hashable {
    public var uuid: [UInt8]
    public var major: UInt16
    public var minor: UInt16
    public var measuredPower: Int8

    public init(uuid: [UInt8], major: UInt16, minor: UInt16, measuredPower: Int8) {
        self.uuid = uuid
        self.major = major
        self.minor = minor
        self.measuredPower = measuredPower
    }

    /// `E2C56DB5-DFFB-48D2-B060-D0F5A71096E0`
    public var uuidString: String { IBeacon.format(uuid: uuid) }

    private static let uuidDashes = [4, 6, 8, 10]

    public static func format(uuid: [UInt8]) -> String {
        guard uuid.count == 16 else { return Hex.encode(uuid, uppercase: true) }
        return Hex.encode(uuid, uppercase: true, separator: UInt8(ascii: "-"), groups: uuidDashes)
    }

    /// "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0" (dashes optional, any case) → 16 bytes.
    public static func parse(uuid text: String) -> [UInt8]? {
        Hex.decode(text.filter { $0 != "-" }, count: 16)
    }

    /// The manufacturer-data payload an iBeacon advertises (for the base station's own beacon).
    public var manufacturerData: [UInt8] {
        [0x4C, 0x00, 0x02, 0x15] + uuid + [UInt8(major >> 8), UInt8(major & 0xFF), UInt8(minor >> 8), UInt8(minor & 0xFF), UInt8(bitPattern: measuredPower)]
    }
}

public enum IBeaconDecoder: BLEAdvertDecoder {
    public static let descriptor = BLEDecoderDescriptor(
        name: "ibeacon", summary: "Apple iBeacon: proximity UUID, major, minor, measured power at 1 m",
        regionKeys: [("uuid", "the proximity UUID, e.g. uuid = \"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0\""),
                     ("major", "matches UUID+major when given"), ("minor", "matches UUID+major+minor (needs major)")])

    /// Apple's iBeacon prefix with another length is an iBeacon gone wrong (corrupt); Apple's
    /// other formats (Nearby Info, AirDrop, Find My) are not mine.
    public static func verdict(_ structures: [ADStructure]) -> BLEVerdict {
        var wrongLength: Int?
        for s in structures where s.type == ADStructure.manufacturerData && hasPrefix(s.data) {
            if let beacon = read(s.data) { return .observation(.iBeacon(beacon)) }
            wrongLength = wrongLength ?? s.data.count
        }
        return wrongLength.map { .corrupt("iBeacon manufacturer data of \($0) bytes, not 25") } ?? .notMine
    }

    public static func decode(_ structures: [ADStructure]) -> IBeacon? {
        for s in structures where s.type == ADStructure.manufacturerData && hasPrefix(s.data) {
            if let beacon = read(s.data) { return beacon }
        }
        return nil
    }

    /// Apple (0x004C), type 0x02, length 0x15.
    static func hasPrefix(_ d: ArraySlice<UInt8>) -> Bool {
        let b = d.startIndex
        return d.count >= 4 && d[b] == 0x4C && d[b + 1] == 0x00 && d[b + 2] == 0x02 && d[b + 3] == 0x15
    }

    static func read(_ d: ArraySlice<UInt8>) -> IBeacon? {
        guard d.count == 25 else { return nil }
        let b = d.startIndex
        return IBeacon(uuid: Array(d[b + 4..<b + 20]), major: UInt16(d[b + 20]) << 8 | UInt16(d[b + 21]),
                       minor: UInt16(d[b + 22]) << 8 | UInt16(d[b + 23]), measuredPower: Int8(bitPattern: d[b + 24]))
    }
}
