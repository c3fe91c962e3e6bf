import DoorbellCore

/// Plays the controller and an iPhone (the central, a GATT server with ANCS) against HCIHost, byte
/// for byte: HCI events and ACL packets in, the host's packets out. The controller has `buffers`
/// LE ACL buffers and records the most ever in flight; the phone answers ATT requests from a GATT
/// database the way iOS lays it out (GAP, GATT with Service Changed, ANCS).
struct PhoneLinkRig {
    struct Attribute { var handle: UInt16; var type: GATTUUID; var value: [UInt8] }

    var host: HCIHost
    var now: Int64 = 0
    let handle: UInt16 = 0x0040
    let buffers: Int
    /// ACL data length both ways (the phone's fragments too).
    let aclLength: Int
    var inFlight = 0
    var maxInFlight = 0
    /// Withhold Number Of Completed Packets (the controller is slow) when false.
    var completing = true
    var phoneReassembler = L2CAPReassembler(maxPDU: 600)
    var phoneMTU = 185
    var encrypted = false
    var requireEncryptionForCCCD = true
    var database: [Attribute]
    /// Every ATT PDU the host sent to the phone, and every action besides packets it returned.
    var attSent: [[UInt8]] = []
    var events: [HCIHost.Action] = []
    /// Write Requests the phone accepted: handle → value.
    var written: [UInt16: [UInt8]] = [:]
    /// SMP PDUs the host sent to the phone, and HCI commands (H4) it sent to the controller.
    var smpSent: [[UInt8]] = []
    var commands: [[UInt8]] = []

    static let ns: UInt16 = 0x0032, cp: UInt16 = 0x0035, ds: UInt16 = 0x0038

    static func settings(stallSeconds: Int = 0) -> BLERadioSettings {
        HCIHostTests.settings { $0.ancsLink = true; $0.stallSeconds = stallSeconds }
    }

    init(buffers: Int = 2, aclLength: Int = 27, extended: Bool = false, stallSeconds: Int = 0) {
        self.buffers = buffers
        self.aclLength = aclLength
        host = HCIHost(settings: Self.settings(stallSeconds: stallSeconds), transportName: "hci0")
        database = Self.iPhoneDatabase()
        var actions = host.start(at: 0)
        for _ in 0..<30 {
            guard let op = HCIHostTests.sent(actions).first else { break }
            let rest: [UInt8] = switch op {
            case 0x1001: HCIHostTests.version
            case 0x1002: HCIHostTests.supported(extended: extended)
            case 0x1009: HCIHostTests.bdAddr
            case 0x2060, 0x2002: [UInt8(aclLength & 0xFF), UInt8(aclLength >> 8), UInt8(buffers), 0, 0, 0]
            default: []
            }
            actions = host.received(HCIHostTests.complete(op, rest), at: 0)
        }
    }

    /// iOS's database, shortened: GAP, GATT (Service Changed, Client Supported Features, Database
    /// Hash), a vendor service, ANCS (Notification Source, Control Point, Data Source).
    static func iPhoneDatabase() -> [Attribute] {
        func service(_ h: UInt16, _ u: GATTUUID) -> Attribute { Attribute(handle: h, type: .primaryService, value: u.air) }
        func characteristic(_ h: UInt16, _ props: UInt8, _ u: GATTUUID) -> [Attribute] {
            [Attribute(handle: h, type: .characteristic, value: [props, UInt8((h + 1) & 0xFF), UInt8((h + 1) >> 8)] + u.air),
             Attribute(handle: h + 1, type: u, value: [])]
        }
        func cccd(_ h: UInt16) -> Attribute { Attribute(handle: h, type: .clientConfiguration, value: [0, 0]) }
        var db: [Attribute] = [service(0x0001, GATTUUID(0x1800))]
        db += characteristic(0x0002, 0x02, GATTUUID(0x2A00)) + characteristic(0x0004, 0x02, GATTUUID(0x2A01))
        db += [service(0x0006, .gattService)] + characteristic(0x0007, 0x20, .serviceChanged) + [cccd(0x0009)]
        db += characteristic(0x000A, 0x0A, GATTUUID(0x2B29)) + characteristic(0x000C, 0x02, GATTUUID(0x2B2A))
        db += [service(0x0010, GATTUUID("D0611E78-BBB4-4591-A5F8-487910AE4366")!)]
        db += characteristic(0x0011, 0x98, GATTUUID("8667556C-9A37-4C91-84ED-54EE27D90049")!) + [cccd(0x0013)]
        db += [service(0x0030, GATTClient.ancsService)]
        db += characteristic(0x0031, 0x10, GATTClient.notificationSource) + [cccd(0x0033)]
        db += characteristic(0x0034, 0x88, GATTClient.controlPoint)
        db += characteristic(0x0037, 0x10, GATTClient.dataSource) + [cccd(0x0039)]
        // GAP's Device Name as an owner sets it (iOS puts a typographic apostrophe).
        if let i = db.firstIndex(where: { $0.type == .deviceName }) { db[i].value = Array(deviceName.utf8) }
        return db
    }

    static let deviceName = "Anna’s iPhone"

    // MARK: The controller

    /// `peer` most significant octet first, as LEConnection holds it; type 1 random.
    mutating func connect(role: UInt8 = 1, peer: [UInt8] = [0x7B, 0x11, 0x22, 0x33, 0x44, 0x5A], peerType: UInt8 = 1) {
        var p: [UInt8] = [0x0A, 0x00, UInt8(handle & 0xFF), UInt8(handle >> 8), role, peerType] + peer.reversed()
        p += [UInt8](repeating: 0, count: 12) + [0x18, 0x00, 0x00, 0x00, 0xF4, 0x01, 0x00]
        feed([0x04, 0x3E, UInt8(p.count)] + p)
    }

    mutating func disconnect(reason: UInt8 = 0x13) {
        feed([0x04, 0x05, 0x04, 0x00, UInt8(handle & 0xFF), UInt8(handle >> 8), reason])
    }

    mutating func encrypt() {
        encrypted = true
        feed([0x04, 0x08, 0x04, 0x00, UInt8(handle & 0xFF), UInt8(handle >> 8), 0x01])
    }

    /// Bytes from the controller; the host's answers are played out until nothing moves.
    mutating func feed(_ bytes: [UInt8]) {
        perform(host.received(bytes, at: now))
    }

    mutating func advance(to t: Int64) {
        now = t
        perform(host.tick(at: now))
    }

    mutating func perform(_ actions: [HCIHost.Action]) {
        var replies: [[UInt8]] = []
        var sentACL = 0
        for a in actions {
            guard case let .send(packet) = a else { events.append(a); continue }
            if packet[0] == 0x01, let op = HCIHostTests.opcode(packet) {
                commands.append(packet)
                replies.append(HCIHostTests.complete(op))
                continue
            }
            guard packet[0] == 0x02 else { continue }
            inFlight += 1
            sentACL += 1
            maxInFlight = max(maxInFlight, inFlight)
            let word = UInt16(packet[1]) | UInt16(packet[2]) << 8
            let fed = phoneReassembler.feed(first: word >> 12 != 1, packet[5...])
            if case let .pdu(cid, pdu) = fed, cid == L2CAP.smpCID { smpSent.append(pdu) }
            if case let .pdu(cid, pdu) = fed, cid == L2CAP.attCID {
                attSent.append(pdu)
                if let answer = phone(pdu) { replies.append(contentsOf: Self.acl(L2CAP.frame(cid: cid, answer), handle: handle, size: aclLength)) }
            }
        }
        if completing && inFlight > 0 && sentACL > 0 {
            replies.insert([0x04, 0x13, 0x05, 0x01, UInt8(handle & 0xFF), UInt8(handle >> 8), UInt8(inFlight), 0x00], at: 0)
            inFlight = 0
        }
        for r in replies { feed(r) }
    }

    /// Lets the slow controller report what it sent.
    mutating func complete() {
        let n = inFlight
        inFlight = 0
        feed([0x04, 0x13, 0x05, 0x01, UInt8(handle & 0xFF), UInt8(handle >> 8), UInt8(n), 0x00])
    }

    /// An L2CAP PDU as the controller hands it up, in ACL fragments of `size` (first PB 0b10).
    static func acl(_ pdu: [UInt8], handle: UInt16, size: Int) -> [[UInt8]] {
        stride(from: 0, to: pdu.count, by: size).map { start in
            let chunk = Array(pdu[start..<min(pdu.count, start + size)])
            let word = handle | (start == 0 ? 0b10 : 0b01) << 12
            return [0x02, UInt8(word & 0xFF), UInt8(word >> 8), UInt8(chunk.count & 0xFF), UInt8(chunk.count >> 8)] + chunk
        }
    }

    // MARK: The phone's ATT server

    func range(_ pdu: [UInt8]) -> ClosedRange<UInt16>? {
        let s = UInt16(pdu[1]) | UInt16(pdu[2]) << 8, e = UInt16(pdu[3]) | UInt16(pdu[4]) << 8
        return s <= e ? s...e : nil
    }

    mutating func phone(_ pdu: [UInt8]) -> [UInt8]? {
        let op = pdu[0]
        let notFound = [0x01, op, pdu.count > 2 ? pdu[1] : 0, pdu.count > 2 ? pdu[2] : 0, 0x0A]
        let mtu = min(phoneMTU, ATT.ourMTU)
        switch op {
        case 0x02:
            return [0x03, UInt8(phoneMTU & 0xFF), UInt8(phoneMTU >> 8)]
        case 0x06:
            guard let r = range(pdu) else { return notFound }
            let value = Array(pdu[7...])
            let services = database.filter { $0.type == .primaryService }
            var out: [UInt8] = [0x07]
            for (i, s) in services.enumerated() where r.contains(s.handle) && s.value == value {
                let end = i + 1 < services.count ? services[i + 1].handle - 1 : database.last!.handle
                out += [UInt8(s.handle & 0xFF), UInt8(s.handle >> 8), UInt8(end & 0xFF), UInt8(end >> 8)]
            }
            return out.count > 1 ? out : notFound
        case 0x08:
            guard let r = range(pdu), let type = GATTUUID(air: pdu[5...]) else { return notFound }
            let found = database.filter { r.contains($0.handle) && $0.type == type }
            guard let first = found.first else { return notFound }
            // A longer value is cut to ATT_MTU - 4 (or 253) octets (Vol 3 Part F §3.4.4.2).
            let cut = min(mtu - 4, 253)
            let length = 2 + min(first.value.count, cut)
            var out: [UInt8] = [0x09, UInt8(length)]
            for a in found where a.value.count == first.value.count && out.count + length <= mtu {
                out += [UInt8(a.handle & 0xFF), UInt8(a.handle >> 8)] + a.value.prefix(cut)
            }
            return out
        case 0x04:
            guard let r = range(pdu) else { return notFound }
            let found = database.filter { r.contains($0.handle) }
            guard let first = found.first else { return notFound }
            let size = first.type.air.count
            var out: [UInt8] = [0x05, size == 2 ? 1 : 2]
            for a in found where a.type.air.count == size && out.count + 2 + size <= mtu {
                out += [UInt8(a.handle & 0xFF), UInt8(a.handle >> 8)] + a.type.air
            }
            return out
        case 0x12:
            let h = UInt16(pdu[1]) | UInt16(pdu[2]) << 8
            if requireEncryptionForCCCD && !encrypted && (h == 0x0033 || h == 0x0039) { return [0x01, 0x12, pdu[1], pdu[2], 0x05] }
            // ANCS's Control Point: CommandID 0–2, else "Unknown command" (0xA0).
            if h == Self.cp, let command = pdu.dropFirst(3).first, command > 2 { return [0x01, 0x12, pdu[1], pdu[2], 0xA0] }
            written[h] = Array(pdu[3...])
            return [0x13]
        case 0x1E:
            return nil
        default:
            return [0x01, op, 0, 0, 0x06]
        }
    }

    /// An SMP PDU from the phone.
    mutating func phoneSendsSMP(_ pdu: [UInt8]) {
        for f in Self.acl(L2CAP.frame(cid: L2CAP.smpCID, pdu), handle: handle, size: aclLength) { feed(f) }
    }

    /// The controller's LE Long Term Key Request (the phone starts encryption).
    mutating func longTermKeyRequest(random: [UInt8] = Array(repeating: 0, count: 8), ediv: UInt16 = 0) {
        feed([0x04, 0x3E, 13, 0x05, UInt8(handle & 0xFF), UInt8(handle >> 8)] + random + [UInt8(ediv & 0xFF), UInt8(ediv >> 8)])
    }

    /// Something the phone sends on its own (a request to our server, a notification), in fragments.
    mutating func phoneSends(_ att: [UInt8], size: Int? = nil) {
        for f in Self.acl(L2CAP.frame(cid: L2CAP.attCID, att), handle: handle, size: size ?? aclLength) { feed(f) }
    }

    var gattEvents: [GATTClient.Action] { events.compactMap { if case let .gatt(g) = $0 { g } else { nil } } }
}
