// The base station as GATT client of the phone (Core spec Vol 3 Part G), as a value: ATT PDUs and
// the time in, ATT PDUs to send and what was found out. Hand-written with the rest of the host (see
// HCIHost); it does what ANCS needs and no more.
//
// On connection: MTU exchange, then the GATT service's Service Changed characteristic (Apple: ANCS
// may be published and withdrawn at any time, so the accessory subscribes to Service Changed), then
// the ANCS service by UUID, its characteristics and the CCCDs of Notification Source and Data
// Source. One request at a time (ATT allows one outstanding request per bearer); a request without
// an answer for 30 s ends the bearer (Vol 3 Part F §3.3.3), the link must be dropped. A request
// refused for want of security is held, the link asked to encrypt, and it goes again once encrypted.
// Last, once per connection, the phone's Device Name (GAP), so `agentctl phones` can say whose it is.

public struct GATTClient: Sendable {
    public enum Action: Sendable, Equatable {
        /// An ATT PDU for the phone.
        case send([UInt8])
        /// ANCS was found: the value handles of its three characteristics.
        case discoveredANCS(notificationSource: UInt16, controlPoint: UInt16, dataSource: UInt16)
        /// The phone publishes no ANCS (now): it may after a Service Changed indication.
        case ancsAbsent
        /// The phone's database changed: handles found before are stale, discovery runs again.
        case servicesChanged
        /// A notification or indication (already confirmed) from the phone.
        case notification(handle: UInt16, [UInt8])
        /// A write (or subscription, by its characteristic's value handle) was accepted.
        case written(handle: UInt16)
        /// A write was refused; ANCS's Control Point answers 0xA0–0xA3 this way.
        case writeFailed(handle: UInt16, error: UInt8)
        /// The phone wants an encrypted (bonded) link first; the request waits for `encrypted()`.
        case securityRequired(error: UInt8)
        /// No answer within the ATT transaction timeout: the bearer is dead, drop the link.
        case timedOut
        /// The phone's Device Name, as the owner set it (printable, at most `maxNameLength` characters).
        case deviceName(String)
    }

    struct Characteristic: Sendable {
        var declaration: UInt16
        var properties: UInt8
        var value: UInt16
        var uuid: GATTUUID
    }

    /// One service looked for by UUID, and the characteristics whose CCCD is wanted.
    struct ServiceSearch: Sendable {
        let uuid: GATTUUID
        let subscribable: Set<GATTUUID>
        var range: (start: UInt16, end: UInt16)?
        var asked = false
        var cursor: UInt16 = 1
        var characteristicsDone = false
        var characteristics: [Characteristic] = []

        init(_ uuid: GATTUUID, subscribable: Set<GATTUUID>) { self.uuid = uuid; self.subscribable = subscribable }
    }

    enum Purpose: Sendable, Equatable {
        case mtu, findService(Int), characteristics(Int), descriptors(value: UInt16, end: UInt16)
        case serviceChangedSubscription, write(UInt16), deviceName
    }

    struct Request: Sendable {
        var pdu: [UInt8]
        var purpose: Purpose
        /// Discovery answers of an earlier generation (before a Service Changed) are ignored.
        var generation: Int
    }

    public static let transactionTimeoutMicros: Int64 = 30_000_000
    /// Longer names are cut: a name is for a table row and a log line.
    public static let maxNameLength = 64
    public static let ancsService = GATTUUID("7905F431-B5CE-4E99-A40F-4B1E122D00D0")!
    public static let notificationSource = GATTUUID("9FBF120D-6301-42D9-8C58-25E699A21DBD")!
    public static let controlPoint = GATTUUID("69D1D8F3-45E1-49A8-9821-9BBDFDAAD9D9")!
    public static let dataSource = GATTUUID("22EAC6E9-24D6-4BB5-BE44-B36ACE7C7BFB")!

    public internal(set) var mtu = ATT.defaultMTU
    public private(set) var isEncrypted = false
    /// PDUs from the phone that were short, unknown or answered nothing asked.
    public internal(set) var malformed = 0

    var peerOffer: Int?
    var outstanding: (request: Request, deadline: Int64)?
    var held: Request?
    var retry: Request?
    var queue: [Request] = []
    var dead = false
    var mtuAsked = false
    var generation = 0
    var searches: [ServiceSearch] = []
    var cccd: [UInt16: UInt16] = [:]
    var descriptorsSearched: Set<UInt16> = []
    var descriptorCursor: [UInt16: UInt16] = [:]
    var serviceChangedSubscribed = false
    var reported = false
    /// The Device Name is read once per connection, whatever Service Changed does meanwhile.
    var nameAsked = false

    public init() { resetDiscovery() }

    public var nextDeadline: Int64? { dead ? nil : outstanding?.deadline }

    mutating func resetDiscovery() {
        searches = [ServiceSearch(.gattService, subscribable: [.serviceChanged]),
                    ServiceSearch(Self.ancsService, subscribable: [Self.notificationSource, Self.dataSource])]
        cccd = [:]
        descriptorsSearched = []
        descriptorCursor = [:]
        serviceChangedSubscribed = false
        reported = false
        generation += 1
    }

    /// The link is up: the MTU exchange and the discovery start.
    public mutating func start(at now: Int64) -> [Action] { pump(at: now) }

    /// The phone asked for an MTU as client (the server side answered it): the bearer's MTU is the lesser.
    /// The phone's smallest offer counts: it may offer one as client and another as server.
    public mutating func peerMTU(_ theirs: Int) {
        peerOffer = min(peerOffer ?? theirs, theirs)
        mtu = max(ATT.defaultMTU, min(ATT.ourMTU, peerOffer ?? theirs))
    }

    /// The link is now encrypted: a request held for security goes again.
    public mutating func encrypted(at now: Int64) -> [Action] {
        isEncrypted = true
        retry = held
        held = nil
        return pump(at: now)
    }

    /// Writes `value` with a Write Request (answered `.written` or `.writeFailed`).
    public mutating func write(_ handle: UInt16, _ value: [UInt8], at now: Int64) -> [Action] {
        guard value.count <= mtu - 3 else { return [.writeFailed(handle: handle, error: ATT.invalidAttributeValueLength)] }
        queue.append(Request(pdu: [ATT.writeRequest] + ATT.le16(handle) + value, purpose: .write(handle), generation: generation))
        return pump(at: now)
    }

    /// Enables notifications of a discovered characteristic (by value handle) through its CCCD.
    public mutating func subscribe(_ valueHandle: UInt16, at now: Int64) -> [Action] {
        guard let descriptor = cccd[valueHandle] else { return [.writeFailed(handle: valueHandle, error: ATT.invalidHandle)] }
        queue.append(Request(pdu: [ATT.writeRequest] + ATT.le16(descriptor) + [0x01, 0x00], purpose: .write(valueHandle), generation: generation))
        return pump(at: now)
    }

    public mutating func tick(at now: Int64) -> [Action] {
        guard !dead, let o = outstanding, now >= o.deadline else { return [] }
        dead = true
        outstanding = nil
        return [.timedOut]
    }

    /// A PDU for the client side (`ATT.isForClient`).
    public mutating func received(_ pdu: [UInt8], at now: Int64) -> [Action] {
        guard !dead, let opcode = pdu.first else { return [] }
        switch opcode {
        case ATT.notification, ATT.indication:
            guard pdu.count >= 3 else { malformed += 1; return [] }
            let handle = ATT.u16(pdu, 1)
            var out: [Action] = opcode == ATT.indication ? [.send([ATT.confirmation])] : []
            if opcode == ATT.indication, handle == serviceChangedValue {
                resetDiscovery()
                return out + [.servicesChanged] + pump(at: now)
            }
            out.append(.notification(handle: handle, Array(pdu[3...])))
            return out
        default:
            guard let o = outstanding, answers(o.request.pdu[0], opcode, pdu) else { malformed += 1; return [] }
            outstanding = nil
            var out: [Action] = []
            if opcode == ATT.errorResponse, pdu.count == 5, ATT.needsSecurity(pdu[4]), !isEncrypted {
                held = o.request
                out.append(.securityRequired(error: pdu[4]))
            } else if o.request.generation == generation || !o.request.purpose.isDiscovery {
                out += answered(o.request.purpose, opcode == ATT.errorResponse ? nil : pdu, error: pdu.count == 5 ? pdu[4] : ATT.requestNotSupported)
            }
            return out + pump(at: now)
        }
    }

    /// Whether `opcode` answers the request `request`: its response opcode (request + 1), or an
    /// Error Response naming it.
    func answers(_ request: UInt8, _ opcode: UInt8, _ pdu: [UInt8]) -> Bool {
        if opcode == ATT.errorResponse { return pdu.count == 5 && pdu[1] == request }
        return opcode == request + 1
    }

    var serviceChangedValue: UInt16? {
        searches[0].characteristics.first { $0.uuid == .serviceChanged }?.value
    }

    /// Sends the next request when none is outstanding: discovery first, then what was asked.
    mutating func pump(at now: Int64) -> [Action] {
        guard !dead, outstanding == nil, held == nil else { return [] }
        var out: [Action] = []
        var next: Request?
        if let r = retry {
            retry = nil
            next = r
        } else if !mtuAsked {
            mtuAsked = true
            next = Request(pdu: [ATT.exchangeMTURequest] + ATT.le16(UInt16(ATT.ourMTU)), purpose: .mtu, generation: generation)
        } else if let step = discoveryStep(&out) {
            next = Request(pdu: step.pdu, purpose: step.purpose, generation: generation)
        } else if !queue.isEmpty {
            next = queue.removeFirst()
        }
        if let next {
            outstanding = (next, now + Self.transactionTimeoutMicros)
            out.append(.send(next.pdu))
        }
        return out
    }
}

extension GATTClient.Purpose {
    var isDiscovery: Bool {
        switch self {
        case .findService, .characteristics, .descriptors, .serviceChangedSubscription: true
        case .mtu, .write, .deviceName: false
        }
    }
}
