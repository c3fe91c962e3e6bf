// The Attribute Protocol on the LE fixed channel (Core spec Vol 3 Part F): PDU layouts, error
// codes, which PDUs belong to the client side and which to the server side of the bearer, and the
// base station's minimal ATT server. Hand-written with the rest of the host (see HCIHost).
//
// The base station is a GATT client of the phone (ANCS) and has no attributes of its own to offer.
// The phone still discovers the peripheral it connected to; an unanswered request would hold its
// bearer for the 30 s transaction timeout and iOS then drops the link, so every request is answered:
// MTU exchange with our MTU, discovery with "Attribute Not Found", reads and writes of any handle
// with "Invalid Handle", anything else with "Request Not Supported". Commands (opcode bit 6) are
// never answered, as the spec wants.

public enum ATT {
    public static let errorResponse: UInt8 = 0x01
    public static let exchangeMTURequest: UInt8 = 0x02
    public static let exchangeMTUResponse: UInt8 = 0x03
    public static let findInformationRequest: UInt8 = 0x04
    public static let findInformationResponse: UInt8 = 0x05
    public static let findByTypeValueRequest: UInt8 = 0x06
    public static let findByTypeValueResponse: UInt8 = 0x07
    public static let readByTypeRequest: UInt8 = 0x08
    public static let readByTypeResponse: UInt8 = 0x09
    public static let writeRequest: UInt8 = 0x12
    public static let writeResponse: UInt8 = 0x13
    public static let notification: UInt8 = 0x1B
    public static let indication: UInt8 = 0x1D
    public static let confirmation: UInt8 = 0x1E

    /// ATT_MTU before an exchange, and the one the base station offers (an LE data PDU of 251).
    public static let defaultMTU = 23
    public static let ourMTU = 247

    public static let invalidHandle: UInt8 = 0x01
    public static let insufficientAuthentication: UInt8 = 0x05
    public static let requestNotSupported: UInt8 = 0x06
    public static let insufficientEncryptionKeySize: UInt8 = 0x0C
    public static let invalidAttributeValueLength: UInt8 = 0x0D
    public static let attributeNotFound: UInt8 = 0x0A
    public static let insufficientEncryption: UInt8 = 0x0F

    /// The errors that a bonded, encrypted link cures: the link is asked to encrypt (or pair) and the
    /// request goes again.
    public static func needsSecurity(_ code: UInt8) -> Bool {
        code == insufficientAuthentication || code == insufficientEncryption || code == insufficientEncryptionKeySize
    }

    public static func errorName(_ code: UInt8) -> String {
        switch code {
        case 0x01: "Invalid Handle"
        case 0x02: "Read Not Permitted"
        case 0x03: "Write Not Permitted"
        case 0x05: "Insufficient Authentication"
        case 0x06: "Request Not Supported"
        case 0x0A: "Attribute Not Found"
        case 0x0C: "Insufficient Encryption Key Size"
        case 0x0D: "Invalid Attribute Value Length"
        case 0x0F: "Insufficient Encryption"
        case 0xA0: "ANCS Unknown Command"
        case 0xA1: "ANCS Invalid Command"
        case 0xA2: "ANCS Invalid Parameter"
        case 0xA3: "ANCS Action Failed"
        default: "ATT error 0x" + String(code, radix: 16)
        }
    }

    static func le16(_ v: UInt16) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8)] }
    static func u16(_ p: [UInt8], _ i: Int) -> UInt16 { UInt16(p[i]) | UInt16(p[i + 1]) << 8 }

    public static func error(request: UInt8, handle: UInt16, _ code: UInt8) -> [UInt8] {
        [errorResponse, request] + le16(handle) + [code]
    }

    /// PDUs a server sends (responses, notifications, indications) go to the client side; the rest
    /// (requests, commands, confirmations) to the server side.
    public static func isForClient(_ opcode: UInt8) -> Bool {
        switch opcode {
        case 0x01, 0x03, 0x05, 0x07, 0x09, 0x0B, 0x0D, 0x0F, 0x11, 0x13, 0x17, 0x19, 0x1B, 0x1D, 0x21, 0x23: true
        default: false
        }
    }

    /// The server side's answer to a PDU from the phone, and the phone's MTU when it offered one.
    public static func serverAnswer(_ pdu: [UInt8]) -> (answer: [UInt8]?, peerMTU: Int?) {
        guard let opcode = pdu.first else { return (nil, nil) }
        if opcode & 0x40 != 0 || opcode == confirmation { return (nil, nil) }
        let handle = pdu.count >= 3 ? u16(pdu, 1) : 0
        switch opcode {
        case exchangeMTURequest:
            guard pdu.count == 3 else { return (error(request: opcode, handle: 0, requestNotSupported), nil) }
            return ([exchangeMTUResponse] + le16(UInt16(ourMTU)), Int(u16(pdu, 1)))
        case findInformationRequest, findByTypeValueRequest, readByTypeRequest, 0x10:
            let end = pdu.count >= 5 ? u16(pdu, 3) : 0
            let valid = handle != 0 && handle <= end
            return (error(request: opcode, handle: handle, valid ? attributeNotFound : invalidHandle), nil)
        case 0x0A, 0x0C, 0x0E, writeRequest, 0x16, 0x20:
            return (error(request: opcode, handle: handle, invalidHandle), nil)
        default:
            return (error(request: opcode, handle: 0, requestNotSupported), nil)
        }
    }
}

/// A 128-bit UUID as it goes on the air (least significant byte first); 16-bit UUIDs widen
/// through the Bluetooth base UUID so that both forms compare equal.
public struct GATTUUID: Sendable, Hashable, CustomStringConvertible {
    public let littleEndian: [UInt8]

    static let base: [UInt8] = [0xFB, 0x34, 0x9B, 0x5F, 0x80, 0x00, 0x00, 0x80, 0x00, 0x10, 0x00, 0x00, 0, 0, 0x00, 0x00]

    public init(_ short: UInt16) {
        var b = Self.base
        b[12] = UInt8(short & 0xFF)
        b[13] = UInt8(short >> 8)
        self.init(littleEndian: b)
    }

    /// From the air: 2 or 16 bytes, little-endian.
    public init?(air bytes: ArraySlice<UInt8>) {
        switch bytes.count {
        case 2: self.init(UInt16(bytes[bytes.startIndex]) | UInt16(bytes[bytes.startIndex + 1]) << 8)
        case 16: self.init(littleEndian: Array(bytes))
        default: return nil
        }
    }

    /// "7905F431-B5CE-4E99-A40F-4B1E122D00D0", as printed.
    public init?(_ text: String) {
        guard let bytes = Hex.decode(text.filter { $0 != "-" }, count: 16) else { return nil }
        self.init(littleEndian: bytes.reversed())
    }

    init(littleEndian: [UInt8]) { self.littleEndian = littleEndian }

    /// The 2 bytes to put on the air when this is a base UUID, else the 16.
    public var air: [UInt8] {
        littleEndian[0..<12] == Self.base[0..<12] && littleEndian[14...] == Self.base[14...] ? Array(littleEndian[12..<14]) : littleEndian
    }

    public var description: String {
        Hex.encode(littleEndian.reversed(), uppercase: true, separator: UInt8(ascii: "-"), groups: [4, 6, 8, 10])
    }

    public static let primaryService = GATTUUID(0x2800)
    public static let characteristic = GATTUUID(0x2803)
    public static let clientConfiguration = GATTUUID(0x2902)
    public static let gattService = GATTUUID(0x1801)
    public static let serviceChanged = GATTUUID(0x2A05)
    /// GAP's Device Name: what the owner called the phone ("Anna’s iPhone").
    public static let deviceName = GATTUUID(0x2A00)
}
