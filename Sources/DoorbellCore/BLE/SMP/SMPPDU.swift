// Security Manager Protocol PDUs (Bluetooth Core Vol 3 Part H §3.5–3.6), on L2CAP's fixed
// channel 0x0006. Hand-written from the specification: the agent's own host has no BlueZ
// daemon beneath it, and the PDUs are a code octet and fixed-size fields.
//
// Every multi-octet value on the air is least significant octet first. The cases here hold
// them in the specification's order (most significant first), the order SMPCrypto computes in:
// this file is the one place that reverses them. Addresses likewise (as BLEAdvertisingReport).

/// Pairing Request / Pairing Response fields.
public struct SMPPairingParameters: Equatable, Hashable, Sendable {
    public static let noInputNoOutput: UInt8 = 0x03
    /// AuthReq bits.
    public static let bonding: UInt8 = 0x01, mitm: UInt8 = 0x04, secureConnections: UInt8 = 0x08, ct2: UInt8 = 0x20
    /// Key distribution bits.
    public static let encryptionKey: UInt8 = 0x01, identityKey: UInt8 = 0x02, signingKey: UInt8 = 0x04

    public var ioCapability: UInt8
    public var oobDataFlag: UInt8
    public var authReq: UInt8
    public var maxKeySize: UInt8
    public var initiatorKeys: UInt8
    public var responderKeys: UInt8

    public init(ioCapability: UInt8, oobDataFlag: UInt8, authReq: UInt8, maxKeySize: UInt8, initiatorKeys: UInt8, responderKeys: UInt8) {
        self.ioCapability = ioCapability
        self.oobDataFlag = oobDataFlag
        self.authReq = authReq
        self.maxKeySize = maxKeySize
        self.initiatorKeys = initiatorKeys
        self.responderKeys = responderKeys
    }

    /// f6's IOcap: AuthReq ‖ OOB data flag ‖ IO capability (most significant first).
    public var ioCapField: [UInt8] { [authReq, oobDataFlag, ioCapability] }
    var bytes: [UInt8] { [ioCapability, oobDataFlag, authReq, maxKeySize, initiatorKeys, responderKeys] }
}

public struct SMPFailureReason: RawRepresentable, Equatable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let passkeyEntryFailed = SMPFailureReason(rawValue: 0x01)
    public static let oobNotAvailable = SMPFailureReason(rawValue: 0x02)
    public static let authenticationRequirements = SMPFailureReason(rawValue: 0x03)
    public static let confirmValueFailed = SMPFailureReason(rawValue: 0x04)
    public static let pairingNotSupported = SMPFailureReason(rawValue: 0x05)
    public static let encryptionKeySize = SMPFailureReason(rawValue: 0x06)
    public static let commandNotSupported = SMPFailureReason(rawValue: 0x07)
    public static let unspecifiedReason = SMPFailureReason(rawValue: 0x08)
    public static let repeatedAttempts = SMPFailureReason(rawValue: 0x09)
    public static let invalidParameters = SMPFailureReason(rawValue: 0x0A)
    public static let dhKeyCheckFailed = SMPFailureReason(rawValue: 0x0B)
    public static let numericComparisonFailed = SMPFailureReason(rawValue: 0x0C)

    static let names = ["passkey entry failed", "OOB not available", "authentication requirements", "confirm value failed",
                        "pairing not supported", "encryption key size", "command not supported", "unspecified reason",
                        "repeated attempts", "invalid parameters", "DHKey check failed", "numeric comparison failed",
                        "BR/EDR pairing in progress", "cross-transport key derivation not allowed", "key rejected"]

    public var description: String {
        let i = Int(rawValue) - 1
        let name = Self.names.indices.contains(i) ? Self.names[i] : "reason 0x\(String(rawValue, radix: 16))"
        return "\(name) (0x\(rawValue < 16 ? "0" : "")\(String(rawValue, radix: 16)))"
    }
}

public enum SMPPDU: Equatable, Hashable, Sendable {
    case pairingRequest(SMPPairingParameters)
    case pairingResponse(SMPPairingParameters)
    case pairingConfirm([UInt8])
    case pairingRandom([UInt8])
    case pairingFailed(SMPFailureReason)
    case encryptionInformation(ltk: [UInt8])
    case centralIdentification(ediv: UInt16, rand: [UInt8])
    case identityInformation(irk: [UInt8])
    case identityAddressInformation(BLEIdentityAddress)
    case signingInformation(csrk: [UInt8])
    case securityRequest(authReq: UInt8)
    /// X and Y, 32 octets each.
    case pairingPublicKey(x: [UInt8], y: [UInt8])
    case pairingDHKeyCheck([UInt8])
    case keypressNotification(UInt8)

    /// One PDU from the channel: a code this host does not know, or a length that is not the
    /// code's, answers Pairing Failed with the reason thrown.
    public init(parsing bytes: [UInt8]) throws(SMPFailureReason) {
        guard let code = bytes.first else { throw .invalidParameters }
        let body = Array(bytes.dropFirst())
        let lengths: [UInt8: Int] = [0x01: 6, 0x02: 6, 0x03: 16, 0x04: 16, 0x05: 1, 0x06: 16, 0x07: 10, 0x08: 16,
                                     0x09: 7, 0x0A: 16, 0x0B: 1, 0x0C: 64, 0x0D: 16, 0x0E: 1]
        guard let length = lengths[code] else { throw .commandNotSupported }
        guard body.count == length else { throw .invalidParameters }
        func value(_ r: Range<Int>) -> [UInt8] { body[r].reversed() }
        func parameters() -> SMPPairingParameters {
            SMPPairingParameters(ioCapability: body[0], oobDataFlag: body[1], authReq: body[2], maxKeySize: body[3], initiatorKeys: body[4], responderKeys: body[5])
        }
        switch code {
        case 0x01: self = .pairingRequest(parameters())
        case 0x02: self = .pairingResponse(parameters())
        case 0x03: self = .pairingConfirm(value(0..<16))
        case 0x04: self = .pairingRandom(value(0..<16))
        case 0x05: self = .pairingFailed(SMPFailureReason(rawValue: body[0]))
        case 0x06: self = .encryptionInformation(ltk: value(0..<16))
        case 0x07: self = .centralIdentification(ediv: UInt16(body[0]) | UInt16(body[1]) << 8, rand: value(2..<10))
        case 0x08: self = .identityInformation(irk: value(0..<16))
        case 0x09: self = .identityAddressInformation(BLEIdentityAddress(type: body[0], address: value(1..<7)))
        case 0x0A: self = .signingInformation(csrk: value(0..<16))
        case 0x0B: self = .securityRequest(authReq: body[0])
        case 0x0C: self = .pairingPublicKey(x: value(0..<32), y: value(32..<64))
        case 0x0D: self = .pairingDHKeyCheck(value(0..<16))
        default: self = .keypressNotification(body[0])
        }
    }

    /// The PDU as sent: fields reversed to the air's order.
    public var bytes: [UInt8] {
        switch self {
        case let .pairingRequest(p): [0x01] + p.bytes
        case let .pairingResponse(p): [0x02] + p.bytes
        case let .pairingConfirm(v): [0x03] + v.reversed()
        case let .pairingRandom(v): [0x04] + v.reversed()
        case let .pairingFailed(r): [0x05, r.rawValue]
        case let .encryptionInformation(ltk): [0x06] + ltk.reversed()
        case let .centralIdentification(ediv, rand): [0x07, UInt8(truncatingIfNeeded: ediv), UInt8(ediv >> 8)] + rand.reversed()
        case let .identityInformation(irk): [0x08] + irk.reversed()
        case let .identityAddressInformation(a): [0x09, a.type] + a.address.reversed()
        case let .signingInformation(csrk): [0x0A] + csrk.reversed()
        case let .securityRequest(authReq): [0x0B, authReq]
        case let .pairingPublicKey(x, y): [0x0C] + x.reversed() + y.reversed()
        case let .pairingDHKeyCheck(v): [0x0D] + v.reversed()
        case let .keypressNotification(n): [0x0E, n]
        }
    }
}

/// An LE address with its type (0 public, 1 random), most significant octet first.
public struct BLEIdentityAddress: Equatable, Hashable, Sendable, CustomStringConvertible {
    public var type: UInt8
    public var address: [UInt8]

    public init(type: UInt8, address: [UInt8]) {
        self.type = type
        self.address = address
    }

    /// f5/f6's 56-bit field.
    public var field: [UInt8] { SMPCrypto.addressField(type: type, address: address) }

    public var description: String {
        Hex.encode(address, uppercase: true, separator: UInt8(ascii: ":")) + (type == 0 ? " (public)" : " (random)")
    }
}

extension SMPFailureReason: Error {}
