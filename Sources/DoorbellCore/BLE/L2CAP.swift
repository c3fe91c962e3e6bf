// HCI ACL data and L2CAP basic frames on the LE fixed channels (Core spec Vol 4 Part E §5.4.2,
// Vol 3 Part A §3.1, §4): what a peripheral needs to carry ATT (CID 4) and SMP (CID 6) and to
// answer LE signalling (CID 5). Hand-written because the agent is its own host (see HCIHost): no
// credit-based channels, no retransmission modes — the LE fixed channels need none.
//
// An ACL packet: handle (12 bits) | PB flag (2) | BC flag (2), length (2), data. The first
// fragment of an L2CAP PDU has PB 0b00 (host → controller) or 0b10 (controller → host), the rest
// 0b01. Reassembly is bounded: a PDU longer than `maxPDU`, a continuation without a first or one
// running past the declared length is counted and dropped, never trusted.

public enum L2CAP {
    public static let attCID: UInt16 = 0x0004
    public static let signallingCID: UInt16 = 0x0005
    public static let smpCID: UInt16 = 0x0006

    /// A basic frame: length, channel, payload.
    public static func frame(cid: UInt16, _ payload: [UInt8]) -> [UInt8] {
        [UInt8(payload.count & 0xFF), UInt8(payload.count >> 8), UInt8(cid & 0xFF), UInt8(cid >> 8)] + payload
    }

    /// The H4 ACL packets (type byte included) carrying `pdu`, each at most `maxLength` data bytes.
    public static func fragments(of pdu: [UInt8], handle: UInt16, maxLength: Int) -> [[UInt8]] {
        let size = max(1, maxLength)
        return stride(from: 0, to: max(pdu.count, 1), by: size).map { start in
            let chunk = pdu[start..<min(pdu.count, start + size)]
            let pb: UInt16 = start == 0 ? 0b00 : 0b01
            let word = handle & 0x0FFF | pb << 12
            return [0x02, UInt8(word & 0xFF), UInt8(word >> 8), UInt8(chunk.count & 0xFF), UInt8(chunk.count >> 8)] + chunk
        }
    }

    /// The answer to an LE signalling command the peripheral does not serve, or nil when none is due
    /// (responses, Command Reject, flow-control credits). Command Reject "not understood" (0x0000)
    /// for every other request; an LE credit-based connection is refused as "LE_PSM not supported".
    public static func signallingAnswer(_ payload: [UInt8]) -> [UInt8]? {
        guard payload.count >= 4 else { return nil }
        let code = payload[0], identifier = payload[1]
        switch code {
        case 0x01, 0x07, 0x13, 0x15, 0x16, 0x18, 0x1A: return nil
        case 0x14:
            // LE Credit Based Connection Response: DCID, MTU, MPS, credits 0, result 0x0002.
            return [0x15, identifier, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, 0x00]
        default:
            return [0x01, identifier, 2, 0, 0x00, 0x00]
        }
    }
}

/// One connection's incoming ACL fragments, put back together into L2CAP PDUs.
public struct L2CAPReassembler: Sendable {
    public enum Result: Sendable, Equatable {
        /// A whole basic frame: its channel and payload.
        case pdu(cid: UInt16, [UInt8])
        /// More fragments are due.
        case incomplete
        /// This fragment (and the PDU it belonged to) is dropped, with the reason.
        case dropped(String)
    }

    /// The largest basic frame accepted (header included).
    public let maxPDU: Int
    /// Unfinished PDUs given up because a new first fragment came (the peer or controller lost some).
    public private(set) var abandoned = 0
    private var buffer: [UInt8] = []
    private var assembling = false

    public init(maxPDU: Int) { self.maxPDU = maxPDU }

    /// An ACL packet's data: `first` for PB 0b00/0b10, otherwise a continuation.
    public mutating func feed(first: Bool, _ data: ArraySlice<UInt8>) -> Result {
        if first {
            if assembling { abandoned += 1 }
            buffer = Array(data)
            assembling = true
            return check()
        }
        guard assembling else { return .dropped("a continuation fragment without a first") }
        buffer += data
        return check()
    }

    private mutating func check() -> Result {
        guard buffer.count >= 4 else {
            if buffer.count > maxPDU { return reset("a PDU longer than \(maxPDU) bytes") }
            return .incomplete
        }
        let length = Int(buffer[0]) | Int(buffer[1]) << 8
        if length + 4 > maxPDU { return reset("a PDU of \(length) bytes, over the \(maxPDU - 4) accepted") }
        if buffer.count > length + 4 { return reset("fragments longer than their PDU's \(length) bytes") }
        guard buffer.count == length + 4 else { return .incomplete }
        let cid = UInt16(buffer[2]) | UInt16(buffer[3]) << 8
        let payload = Array(buffer[4...])
        buffer.removeAll()
        assembling = false
        return .pdu(cid: cid, payload)
    }

    private mutating func reset(_ reason: String) -> Result {
        buffer.removeAll()
        assembling = false
        return .dropped(reason)
    }
}
