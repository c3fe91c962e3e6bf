// What the base station advertises: its own iBeacon (optional) and, when the phone link is on, a
// connectable advertisement soliciting ANCS (Service Solicitation, AD type 0x15, the 128-bit UUID
// little-endian) so that the owner's iPhone offers and makes the connection (Apple ANCS spec).
//
// Two ways, chosen from the controller's supported commands:
// - Extended advertising (octet 36 bits 2, 3, 5): two sets, both with legacy PDUs so every phone
//   hears them. Set 0 the iBeacon, ADV_NONCONN_IND at its own interval; set 1 the solicitation,
//   ADV_IND at 211.25 ms (one of Apple's recommended intervals). Costs 5 commands at bring-up and
//   one enable after each disconnection; the beacon never pauses, a connection ends only set 1.
//   The controller then forbids the legacy scan commands, so the scan is extended too.
// - Legacy, one set (no extended commands): ADV_IND with the iBeacon as advertising data and the
//   solicitation as scan response (30 + 18 bytes do not fit the 31 of one PDU); without a beacon the
//   solicitation is the advertising data. Costs: the beacon becomes connectable and scannable
//   (every active scanner's request is answered: a little more airtime), the solicitation is only
//   seen by active scanners (iOS scans actively while the Bluetooth settings or an app looks), and
//   the beacon pauses while the phone is connected — a controller need not advertise while in a
//   peripheral connection, and a refused command would cost the transport. Alternating two legacy
//   configurations instead would take four commands per switch from the host, gaps between them,
//   and still pause during a connection, so it is not done.
//
// The base station's name (`ancs_name`) goes into the scan response of the connectable
// advertisement, where nothing else competes for room: the iBeacon (30 of 31 octets) and the
// solicitation (flags 3 + 18 = 21 octets) stay as they were. Budgets, all legacy PDUs of 31 octets:
// extended, set 1's scan response holds the name alone (up to 29 octets of UTF-8); legacy without a
// beacon, the same; legacy with a beacon, the scan response is the solicitation (18) and the name
// (up to 11 octets). A name longer than its room is cut on a character boundary and sent as the
// Shortened Local Name (AD 0x08), else as the Complete Local Name (0x09).

public enum LEAdvertising {
    /// Interval of the connectable solicitation, 211.25 ms in 0.625 ms units.
    static let solicitationUnits: UInt32 = 338

    public static func supportsExtended(_ supported: [UInt8]) -> Bool {
        supported.count > 37 && supported[1 + 36] & 0x2C == 0x2C
    }

    /// The Service Solicitation AD structure for the given 128-bit service.
    public static func solicitation(_ service: GATTUUID) -> [UInt8] {
        [17, 0x15] + service.littleEndian
    }

    /// Flags (LE General Discoverable when connectable; BR/EDR not supported) and the iBeacon.
    public static func beaconData(_ b: IBeacon, connectable: Bool) -> [UInt8] {
        let m = b.manufacturerData
        return [0x02, 0x01, connectable ? 0x06 : 0x04, UInt8(m.count + 1), 0xFF] + m
    }

    /// The Local Name AD structure within `room` octets: complete when it fits, else shortened on a
    /// UTF-8 character boundary; empty when there is no name or no room for a character.
    public static func localName(_ name: String, room: Int) -> [UInt8] {
        let bytes = Array(name.utf8)
        guard room >= 3, !bytes.isEmpty else { return [] }
        if bytes.count + 2 <= room { return [UInt8(bytes.count + 1), 0x09] + bytes }
        // Cut before the character the first dropped octet belongs to (not a continuation octet).
        var n = room - 2
        while n > 0, bytes[n] & 0xC0 == 0x80 { n -= 1 }
        return n == 0 ? [] : [UInt8(n + 1), 0x08] + Array(bytes[..<n])
    }

    /// The commands that start advertising; empty when there is nothing to advertise. `name`: the
    /// base station's name for the connectable advertisement's scan response (empty: none).
    static func setup(beacon: OwnBeacon?, solicit: Bool, name: String = "", extended: Bool) -> [(opcode: UInt16, params: [UInt8])] {
        let sol = solicitation(GATTClient.ancsService)
        if solicit && extended {
            var out: [(opcode: UInt16, params: [UInt8])] = []
            var sets: [UInt8] = []
            if let beacon {
                out.append((0x2036, extendedParameters(set: 0, properties: 0x0010, units: units(beacon.intervalMs))))
                out.append((0x2037, extendedData(set: 0, beaconData(beacon.beacon, connectable: false))))
                sets.append(0)
            }
            out.append((0x2036, extendedParameters(set: 1, properties: 0x0013, units: solicitationUnits)))
            out.append((0x2037, extendedData(set: 1, [0x02, 0x01, 0x06] + sol)))
            let response = localName(name, room: 31)
            if !response.isEmpty { out.append((0x2038, extendedData(set: 1, response))) }
            sets.append(1)
            out.append((0x2039, [0x01, UInt8(sets.count)] + sets.flatMap { [$0, 0, 0, 0] }))
            return out
        }
        guard beacon != nil || solicit else { return [] }
        let u = UInt16(beacon.map { units($0.intervalMs) } ?? solicitationUnits)
        let type: UInt8 = solicit ? 0x00 : 0x03
        var out: [(opcode: UInt16, params: [UInt8])] = [(0x2006, [UInt8(u & 0xFF), UInt8(u >> 8), UInt8(u & 0xFF), UInt8(u >> 8), type, 0x00, 0x00,
                                                                    0, 0, 0, 0, 0, 0, 0x07, 0x00])]
        let ad = beacon.map { beaconData($0.beacon, connectable: solicit) } ?? [0x02, 0x01, 0x06] + sol
        out.append((0x2008, padded(ad)))
        if solicit {
            let response = beacon != nil ? sol + localName(name, room: 31 - sol.count) : localName(name, room: 31)
            if !response.isEmpty { out.append((0x2009, padded(response))) }
        }
        out.append((0x200A, [0x01]))
        return out
    }

    /// After a disconnection: the advertising the controller stopped for the connection again —
    /// the sets it said it terminated, else the connectable set 1.
    static func resume(extended: Bool, sets: [UInt8]) -> (opcode: UInt16, params: [UInt8]) {
        let s = sets.isEmpty ? [1] : sets
        return extended ? (0x2039, [0x01, UInt8(s.count)] + s.flatMap { [$0, 0, 0, 0] }) : (0x200A, [0x01])
    }

    static func units(_ ms: Int) -> UInt32 { UInt32(min(max(Double(ms) / 0.625, 32), 16_384)) }

    static func padded(_ data: [UInt8]) -> [UInt8] {
        [UInt8(data.count)] + data + [UInt8](repeating: 0, count: max(0, 31 - data.count))
    }

    /// LE Set Extended Advertising Parameters [v1]: handle, properties (2), interval min/max (3 each),
    /// channels, own address public, no peer, no filter, no TX preference, 1M/1M PHYs, SID, no
    /// scan request notifications.
    static func extendedParameters(set: UInt8, properties: UInt16, units: UInt32) -> [UInt8] {
        let i = [UInt8(units & 0xFF), UInt8(units >> 8 & 0xFF), UInt8(units >> 16)]
        return [set, UInt8(properties & 0xFF), UInt8(properties >> 8)] + i + i + [0x07, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0x00, 0x7F, 0x01, 0x00, 0x01, set, 0x00]
    }

    /// LE Set Extended Advertising Data: handle, operation "complete", no fragmenting preference.
    static func extendedData(set: UInt8, _ data: [UInt8]) -> [UInt8] {
        [set, 0x03, 0x01, UInt8(data.count)] + data
    }
}
