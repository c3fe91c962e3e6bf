// The phone link inside HCIHost: one LE connection in the peripheral role, its ACL data both ways
// within the controller's LE buffers, L2CAP's fixed channels, the ATT server's answers and the
// GATT client. Outgoing ACL packets never outnumber the controller's free buffers (Number Of
// Completed Packets gives them back; a disconnection frees those of its handle, Vol 4 Part E
// §4.3). Incoming bytes are bounded and counted (`linkCounters`), never trusted.

public struct LinkCounters: Sendable, Equatable {
    /// ACL fragments or L2CAP PDUs dropped (malformed, oversized, for another handle).
    public var droppedACL = 0
    /// Basic frames on a channel other than ATT, signalling or SMP.
    public var unknownChannel = 0
    /// LE signalling requests answered with a refusal.
    public var signallingRefused = 0
    public var lastDropReason: String?
}

struct LELink: Sendable {
    var connection: LEConnection?
    var extendedAdvertising = false
    /// Extended advertising sets the controller stopped for a connection: enabled again after it.
    var stoppedSets: [UInt8] = []
    /// LE ACL data packet length and count (LE Read Buffer Size); the spec's minimum until read.
    var aclLength = 27
    var aclBuffers = 1
    var inFlight = 0
    /// H4 ACL packets waiting for a free controller buffer, in order.
    var outgoing: [[UInt8]] = []
    var reassembler = L2CAPReassembler(maxPDU: ATT.ourMTU + 4)
    var gatt = GATTClient()
    var counters = LinkCounters()
}

extension HCIHost {
    public var connection: LEConnection? { link.connection }
    public var linkCounters: LinkCounters { link.counters }
    /// ACL packets handed to the controller and not yet reported completed.
    public var aclInFlight: Int { link.inFlight }
    public var attMTU: Int { link.gatt.mtu }

    // MARK: Inputs from the layers above

    /// An SMP PDU for the phone (from the pairing machine).
    public mutating func send(smp pdu: [UInt8], at now: Int64) -> [Action] {
        queue(cid: L2CAP.smpCID, pdu)
        return flush()
    }

    /// The answer to `.longTermKeyRequested`: the bonded phone's LTK, or nil to refuse.
    public mutating func replyLongTermKey(_ key: [UInt8]?, at now: Int64) -> [Action] {
        guard let c = link.connection else { return [] }
        let h = [UInt8(c.handle & 0xFF), UInt8(c.handle >> 8)]
        if let key, key.count == 16 { script.append((0x201A, h + key)) } else { script.append((0x201B, h)) }
        return advance(at: now)
    }

    /// Write Request to a phone's characteristic (the ANCS Control Point).
    public mutating func writeCharacteristic(_ handle: UInt16, _ value: [UInt8], at now: Int64) -> [Action] {
        guard link.connection != nil else { return [] }
        return carry(link.gatt.write(handle, value, at: now))
    }

    /// Enables notifications of a discovered characteristic by its value handle.
    public mutating func subscribeCharacteristic(_ valueHandle: UInt16, at now: Int64) -> [Action] {
        guard link.connection != nil else { return [] }
        return carry(link.gatt.subscribe(valueHandle, at: now))
    }

    /// Ends the connection (an unbonded central, a dead ATT bearer): reason 0x13, remote user terminated.
    public mutating func disconnect(at now: Int64) -> [Action] {
        guard let c = link.connection else { return [] }
        script.append((0x0406, [UInt8(c.handle & 0xFF), UInt8(c.handle >> 8), 0x13]))
        return advance(at: now)
    }

    // MARK: From the controller

    mutating func bufferSize(_ opcode: UInt16, _ ret: [UInt8]) {
        // LE: status, length (2), count (1). Read Buffer Size: status, ACL length (2), SCO length, ACL count (2).
        let (length, count) = opcode == 0x1005 ? (ret.count >= 7 ? (Int(ATT.u16(ret, 1)), Int(ATT.u16(ret, 4))) : (0, 0))
                                               : (ret.count >= 4 ? (Int(ATT.u16(ret, 1)), Int(ret[3])) : (0, 0))
        if length == 0 || count == 0 {
            // Zero: LE shares the BR/EDR buffers, which Read Buffer Size tells.
            if opcode != 0x1005 { script.insert((0x1005, []), at: 0) }
            return
        }
        link.aclLength = max(27, length)
        link.aclBuffers = count
    }

    mutating func linkEvent(_ event: HCIEvent, at now: Int64) -> [Action] {
        switch event {
        case let .connectionComplete(status, c):
            guard status == 0 else { return [] }
            guard link.connection == nil, c.role == .peripheral else {
                // One phone at a time (and never a connection we did not offer): 0x0D limited resources.
                script.append((0x0406, [UInt8(c.handle & 0xFF), UInt8(c.handle >> 8), 0x0D]))
                return []
            }
            link.connection = c
            return [.connected(c)] + carry(link.gatt.start(at: now))
        case let .disconnectionComplete(status, handle, reason):
            guard status == 0, handle == link.connection?.handle else { return [] }
            let out = dropLink(reason: reason)
            if settings.ancsLink { script.append(LEAdvertising.resume(extended: link.extendedAdvertising, sets: link.stoppedSets)) }
            link.stoppedSets.removeAll()
            return out
        case let .completedPackets(counts):
            guard let c = link.connection, let n = counts[c.handle] else { return [] }
            link.inFlight = max(0, link.inFlight - n)
            return flush()
        case let .encryptionChange(status, handle, enabled):
            guard handle == link.connection?.handle else { return [] }
            let on = status == 0 && enabled
            return [.encryptionChanged(handle: handle, enabled: on, status: status)] + (on ? carry(link.gatt.encrypted(at: now)) : [])
        case let .keyRefreshComplete(status, handle):
            guard handle == link.connection?.handle else { return [] }
            return [.encryptionChanged(handle: handle, enabled: status == 0, status: status)]
        case let .advertisingSetTerminated(status, set, _):
            if status == 0, !link.stoppedSets.contains(set) { link.stoppedSets.append(set) }
            return []
        case let .longTermKeyRequest(handle, random, ediv):
            guard handle == link.connection?.handle else { return [] }
            return [.longTermKeyRequested(handle: handle, random: random, ediv: ediv)]
        default:
            return []
        }
    }

    /// One ACL packet without its H4 type byte.
    mutating func acl(_ packet: [UInt8], at now: Int64) -> [Action] {
        guard packet.count >= 4, Int(ATT.u16(packet, 2)) == packet.count - 4 else { return dropped("an ACL packet whose length does not match") }
        let word = ATT.u16(packet, 0)
        guard let c = link.connection, word & 0x0FFF == c.handle else { return dropped("an ACL packet for no connection of ours") }
        let pb = word >> 12 & 0b11
        guard pb != 0b11 else { return dropped("an ACL packet with the reserved PB flag") }
        switch link.reassembler.feed(first: pb != 0b01, packet[4...]) {
        case .incomplete: return []
        case let .dropped(reason): return dropped(reason)
        case let .pdu(cid, payload): return frame(cid: cid, payload, handle: c.handle, at: now)
        }
    }

    mutating func frame(cid: UInt16, _ payload: [UInt8], handle: UInt16, at now: Int64) -> [Action] {
        switch cid {
        case L2CAP.attCID:
            guard let opcode = payload.first else { return dropped("an empty ATT PDU") }
            if ATT.isForClient(opcode) { return carry(link.gatt.received(payload, at: now)) }
            let (answer, peerMTU) = ATT.serverAnswer(payload)
            if let peerMTU { link.gatt.peerMTU(peerMTU) }
            if let answer { queue(cid: L2CAP.attCID, answer) }
            return flush()
        case L2CAP.smpCID:
            return [.smp(handle: handle, payload)]
        case L2CAP.signallingCID:
            guard let answer = L2CAP.signallingAnswer(payload) else { return [] }
            link.counters.signallingRefused += 1
            queue(cid: L2CAP.signallingCID, answer)
            return flush()
        default:
            link.counters.unknownChannel += 1
            return []
        }
    }

    mutating func linkTick(at now: Int64) -> [Action] {
        let out = carry(link.gatt.tick(at: now))
        // A dead ATT bearer cannot recover (Vol 3 Part F §3.3.3): drop the link, the phone reconnects.
        if out.contains(.gatt(.timedOut)) { return out + disconnect(at: now) }
        return out
    }

    // MARK: Helpers

    /// Forgets the connection: its ACL buffers are free again, pending requests abandoned.
    mutating func dropLink(reason: UInt8) -> [Action] {
        guard let c = link.connection else { return [] }
        link.connection = nil
        link.inFlight = 0
        link.outgoing.removeAll()
        link.reassembler = L2CAPReassembler(maxPDU: ATT.ourMTU + 4)
        link.gatt = GATTClient()
        return [.disconnected(handle: c.handle, reason: reason)]
    }

    /// The GATT client's actions: its PDUs go out on the ATT channel, the rest up.
    mutating func carry(_ actions: [GATTClient.Action]) -> [Action] {
        var up: [Action] = []
        for a in actions {
            if case let .send(pdu) = a { queue(cid: L2CAP.attCID, pdu) } else { up.append(.gatt(a)) }
        }
        return up + flush()
    }

    mutating func queue(cid: UInt16, _ payload: [UInt8]) {
        guard let c = link.connection else { return }
        link.outgoing += L2CAP.fragments(of: L2CAP.frame(cid: cid, payload), handle: c.handle, maxLength: link.aclLength)
    }

    /// Sends waiting ACL packets while the controller has free buffers.
    mutating func flush() -> [Action] {
        var out: [Action] = []
        while link.inFlight < link.aclBuffers, !link.outgoing.isEmpty {
            link.inFlight += 1
            out.append(.send(link.outgoing.removeFirst()))
        }
        return out
    }

    mutating func dropped(_ reason: String) -> [Action] {
        link.counters.droppedACL += 1
        link.counters.lastDropReason = reason
        return []
    }
}
