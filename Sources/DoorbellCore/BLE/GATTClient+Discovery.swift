// The discovery half of GATTClient: which request comes next and what each answer teaches.
// Every loop over the phone's answers moves a cursor strictly forward and stays inside the range it
// asked for, so a phone answering nonsense ends discovery instead of looping.

extension GATTClient {
    /// The next discovery request, or nil when discovery is complete (then its result is reported once).
    mutating func discoveryStep(_ out: inout [Action]) -> (pdu: [UInt8], purpose: Purpose)? {
        for i in searches.indices {
            let s = searches[i]
            if !s.asked {
                return ([ATT.findByTypeValueRequest] + ATT.le16(1) + ATT.le16(0xFFFF) + ATT.le16(0x2800) + s.uuid.air, .findService(i))
            }
            guard let range = s.range else { continue }
            if !s.characteristicsDone {
                return ([ATT.readByTypeRequest] + ATT.le16(s.cursor) + ATT.le16(range.end) + ATT.le16(0x2803), .characteristics(i))
            }
            for (k, c) in s.characteristics.enumerated() where s.subscribable.contains(c.uuid) && cccd[c.value] == nil && !descriptorsSearched.contains(c.value) {
                let end = k + 1 < s.characteristics.count ? s.characteristics[k + 1].declaration - 1 : range.end
                let start = descriptorCursor[c.value] ?? c.value &+ 1
                guard c.value < end, start <= end, start > c.value else { descriptorsSearched.insert(c.value); continue }
                return ([ATT.findInformationRequest] + ATT.le16(start) + ATT.le16(end), .descriptors(value: c.value, end: end))
            }
        }
        if !reported {
            reported = true
            let found = searches[1].characteristics
            func value(_ uuid: GATTUUID) -> UInt16? { found.first { $0.uuid == uuid }?.value }
            if let ns = value(Self.notificationSource), let cp = value(Self.controlPoint), let ds = value(Self.dataSource) {
                out.append(.discoveredANCS(notificationSource: ns, controlPoint: cp, dataSource: ds))
            } else {
                out.append(.ancsAbsent)
            }
        }
        // After the report: a phone that wants encryption for this CCCD holds it, not the discovery.
        if let sc = serviceChangedValue, let d = cccd[sc], !serviceChangedSubscribed {
            serviceChangedSubscribed = true
            return ([ATT.writeRequest] + ATT.le16(d) + [0x02, 0x00], .serviceChangedSubscription)
        }
        if !nameAsked {
            nameAsked = true
            return ([ATT.readByTypeRequest] + ATT.le16(1) + ATT.le16(0xFFFF) + GATTUUID.deviceName.air, .deviceName)
        }
        return nil
    }

    /// What an answer (nil for an Error Response with `error`) means for the request it answers.
    mutating func answered(_ purpose: Purpose, _ pdu: [UInt8]?, error: UInt8) -> [Action] {
        switch purpose {
        case .mtu:
            if let pdu, pdu.count == 3 { peerMTU(Int(ATT.u16(pdu, 1))) }
        case let .findService(i):
            searches[i].asked = true
            guard let pdu else { break }
            // Found Attribute Handle, Group End Handle pairs: the first is the service.
            guard pdu.count >= 5, (pdu.count - 1) % 4 == 0, ATT.u16(pdu, 1) != 0, ATT.u16(pdu, 1) <= ATT.u16(pdu, 3) else { malformed += 1; break }
            searches[i].range = (ATT.u16(pdu, 1), ATT.u16(pdu, 3))
            searches[i].cursor = ATT.u16(pdu, 1)
        case let .characteristics(i):
            guard let pdu else { searches[i].characteristicsDone = true; break }
            characteristics(pdu, search: i)
        case let .descriptors(value, end):
            guard let pdu else { descriptorsSearched.insert(value); break }
            descriptors(pdu, of: value, end: end)
        case .serviceChangedSubscription:
            break
        case let .write(handle):
            return [pdu == nil ? .writeFailed(handle: handle, error: error) : .written(handle: handle)]
        case .deviceName:
            // Not there, or refused even when encrypted: the phone stays known by its address.
            guard let pdu else { break }
            guard let name = Self.deviceName(pdu) else { malformed += 1; break }
            return name.isEmpty ? [] : [.deviceName(name)]
        }
        return []
    }

    /// Read By Type Response for the Device Name: length, then the first (handle, value) entry.
    /// The name is UTF-8 (invalid sequences replaced), control characters dropped, cut to
    /// `maxNameLength` characters. Nil when the PDU is not such a response.
    static func deviceName(_ pdu: [UInt8]) -> String? {
        guard pdu.count >= 4, pdu[1] >= 2, pdu.count >= 2 + Int(pdu[1]) else { return nil }
        let value = pdu[4..<(2 + Int(pdu[1]))]
        var kept = String.UnicodeScalarView()
        for scalar in String(decoding: value, as: UTF8.self).unicodeScalars {
            switch scalar.properties.generalCategory {
            case .control, .lineSeparator, .paragraphSeparator, .unassigned, .privateUse: continue
            case .format where scalar != "\u{200D}": continue  // bidi overrides and the like; ZWJ joins emoji
            default: kept.append(scalar)
            }
        }
        return String(String(kept).trimmingCharacters(in: " ").prefix(maxNameLength))
    }

    /// Read By Type Response of characteristic declarations: length, then (handle, properties,
    /// value handle, UUID of 2 or 16 bytes) entries.
    mutating func characteristics(_ pdu: [UInt8], search i: Int) {
        guard let range = searches[i].range, pdu.count >= 2 else { return }
        let length = Int(pdu[1])
        guard length == 7 || length == 21, pdu.count > 2, (pdu.count - 2) % length == 0 else {
            malformed += 1
            searches[i].characteristicsDone = true
            return
        }
        var last = searches[i].cursor
        for j in stride(from: 2, to: pdu.count, by: length) {
            let declaration = ATT.u16(pdu, j)
            guard declaration >= searches[i].cursor, declaration <= range.end, let uuid = GATTUUID(air: pdu[(j + 5)..<(j + length)]) else {
                malformed += 1
                searches[i].characteristicsDone = true
                return
            }
            searches[i].characteristics.append(Characteristic(declaration: declaration, properties: pdu[j + 2], value: ATT.u16(pdu, j + 3), uuid: uuid))
            last = declaration
        }
        if last >= range.end { searches[i].characteristicsDone = true } else { searches[i].cursor = last + 1 }
    }

    /// Find Information Response: format (1: 16-bit UUIDs, 2: 128-bit), then (handle, UUID) entries.
    mutating func descriptors(_ pdu: [UInt8], of value: UInt16, end: UInt16) {
        let size = pdu.count >= 2 ? (pdu[1] == 1 ? 4 : pdu[1] == 2 ? 18 : 0) : 0
        guard size > 0, pdu.count > 2, (pdu.count - 2) % size == 0 else {
            malformed += 1
            descriptorsSearched.insert(value)
            return
        }
        let start = descriptorCursor[value] ?? value &+ 1
        var last = start
        for j in stride(from: 2, to: pdu.count, by: size) {
            let handle = ATT.u16(pdu, j)
            guard handle >= start, handle <= end else { malformed += 1; descriptorsSearched.insert(value); return }
            if GATTUUID(air: pdu[(j + 2)..<(j + size)]) == .clientConfiguration { cccd[value] = handle }
            last = handle
        }
        if cccd[value] != nil || last >= end { descriptorsSearched.insert(value) } else { descriptorCursor[value] = last + 1 }
    }
}
