import DoorbellCore
import PropertyBased
import Testing

/// Issue #26.5: the base station's name in the connectable advertisement's scan response, next to
/// the iBeacon and the ANCS solicitation, within the 31 octets of every legacy PDU.
@Suite struct AdvertisedNameTests {
    static let own = OwnBeacon(beacon: IBeacon(uuid: [UInt8](repeating: 0xE2, count: 16), major: 1, minor: 2, measuredPower: -59))
    static let solicitation: [UInt8] = [17, 0x15, 0xD0, 0x00, 0x2D, 0x12, 0x1E, 0x4B, 0x0F, 0xA4, 0x99, 0x4E, 0xCE, 0xB5, 0x31, 0xF4, 0x05, 0x79]

    /// The parameters of each command with this opcode the bring-up sent.
    static func params(_ name: String?, beacon: OwnBeacon?, extended: Bool, _ opcode: UInt16) -> [[UInt8]] {
        var host = HCIHost(settings: HCIHostTests.settings { $0.ancsLink = true; $0.beacon = beacon; $0.ancsName = name }, transportName: "hci0")
        return HCIHostTests.bringUp(&host, extended: extended).actions.compactMap {
            if case let .send(p) = $0, HCIHostTests.opcode(p) == opcode { Array(p[4...]) } else { nil }
        }
    }

    /// The AD structures of a legacy data command's parameters (length octet, 31 octets padded).
    static func legacy(_ p: [UInt8]?) -> [UInt8]? { p.map { Array($0[1..<(1 + Int($0[0]))]) } }

    @Test func theNameGoesIntoTheScanResponseAndTheBeaconAndSolicitationStay() {
        let beaconData = LEAdvertising.beaconData(Self.own.beacon, connectable: true)
        // Legacy with a beacon: data = the beacon (30 octets), scan response = solicitation + name (11 octets of room).
        #expect(Self.legacy(Self.params("Front", beacon: Self.own, extended: false, 0x2008).first) == beaconData)
        #expect(Self.legacy(Self.params("Front", beacon: Self.own, extended: false, 0x2009).first) == Self.solicitation + [6, 0x09] + Array("Front".utf8))
        #expect(Self.legacy(Self.params("Haustür Süd-West", beacon: Self.own, extended: false, 0x2009).first)
                == Self.solicitation + [11, 0x08] + Array("Haustür S".utf8), "shortened, never half a character")
        // Legacy without a beacon: data = flags + solicitation, scan response = the name.
        #expect(Self.legacy(Self.params("gw-0001", beacon: nil, extended: false, 0x2008).first) == [0x02, 0x01, 0x06] + Self.solicitation)
        #expect(Self.legacy(Self.params("gw-0001", beacon: nil, extended: false, 0x2009).first) == [8, 0x09] + Array("gw-0001".utf8))
        // Extended: set 1's scan response (LE Set Extended Scan Response Data), the beacon set as it was.
        let response = Self.params("gw-0001", beacon: Self.own, extended: true, 0x2038)
        #expect(response == [[0x01, 0x03, 0x01, 9, 8, 0x09] + Array("gw-0001".utf8)])
        #expect(Self.params("gw-0001", beacon: Self.own, extended: true, 0x2037).map { $0[0] } == [0, 1])
        // No name: the advertising as before.
        #expect(Self.params(nil, beacon: nil, extended: false, 0x2009).isEmpty && Self.params(nil, beacon: nil, extended: true, 0x2038).isEmpty)
    }

    /// Any name, any room: the AD structure fits, is the whole name (0x09) or a prefix of whole
    /// characters of it (0x08), and its length octet is right.
    @Test func theLocalNameAlwaysFitsAndCutsOnCharacters() async {
        let chars: [Character] = ["a", "Z", "-", " ", "ü", "’", "🔔", "東"]
        await propertyCheck(input: Gen.int(in: 0...(chars.count - 1)).array(of: 0...40), Gen.int(in: 0...31)) { picks, room in
            let name = String(picks.map { chars[$0] })
            let ad = LEAdvertising.localName(name, room: room)
            #expect(ad.count <= room)
            guard !ad.isEmpty else { return }
            #expect(Int(ad[0]) == ad.count - 1)
            let text = String(decoding: ad[2...], as: UTF8.self)
            #expect(Array(text.utf8) == Array(ad[2...]), "valid UTF-8")
            #expect(ad[1] == 0x09 ? text == name : ad[1] == 0x08 && name.hasPrefix(text) && !text.isEmpty)
        }
    }
}
