// BTHome v2 (service data, UUID 0xFCD2; object table as of bthome.io and bthome-ble 3.25): a device-info byte (bit 0 encrypted, bit 2
// trigger-based, bits 5–7 version), then objects `id value` in ascending id order. Objects this
// agent uses are read (packet id 0x00, battery 0x01, button events 0x3A — several 0x3A objects are
// several buttons, in order); every other known id is skipped by its length; an unknown id ends
// the packet (its length cannot be known), keeping what came before.
//
// Encrypted packets: payload ‖ counter (4 bytes, LE) ‖ MIC (4 bytes), AES-CCM with the device's
// 16-byte bindkey and nonce = MAC (as written, most significant byte first) ‖ D2 FC ‖ device-info
// ‖ counter.

public enum BTHomeButtonEvent: UInt8, Sendable, Equatable, CaseIterable {
    case none = 0x00
    case press = 0x01
    case doublePress = 0x02
    case triplePress = 0x03
    case longPress = 0x04
    case longDoublePress = 0x05
    case longTriplePress = 0x06
    case holdPress = 0x80

    public var name: String {
        switch self {
        case .none: "none"
        case .press: "press"
        case .doublePress: "double_press"
        case .triplePress: "triple_press"
        case .longPress: "long_press"
        case .longDoublePress: "long_double_press"
        case .longTriplePress: "long_triple_press"
        case .holdPress: "hold_press"
        }
    }

    /// The agent's event type for it (`none` is "no event for this button" and makes none).
    public var eventType: EventType? {
        switch self {
        case .none: nil
        case .press: .doorbellPressed
        case .doublePress: .doorbellDoublePressed
        case .triplePress: .doorbellTriplePressed
        case .longPress: .doorbellLongPressed
        case .longDoublePress: .doorbellLongDoublePressed
        case .longTriplePress: .doorbellLongTriplePressed
        case .holdPress: .doorbellHeld
        }
    }
}

public struct BTHomePacket: Sendable, Equatable {
    public var encrypted: Bool
    public var triggerBased: Bool
    public var packetID: UInt8?
    public var battery: UInt8?
    /// One entry per 0x3A object, in order: index 0 is the first button.
    public var buttons: [BTHomeButtonEvent]
    /// The encryption counter (encrypted packets only).
    public var counter: UInt32?
    /// Objects read (including skipped ones).
    public var objects: Int
    /// An unknown object id or a short value ended the packet early.
    public var truncated: Bool

    public init(encrypted: Bool, triggerBased: Bool, packetID: UInt8?, battery: UInt8?, buttons: [BTHomeButtonEvent],
                counter: UInt32?, objects: Int, truncated: Bool) {
        self.encrypted = encrypted
        self.triggerBased = triggerBased
        self.packetID = packetID
        self.battery = battery
        self.buttons = buttons
        self.counter = counter
        self.objects = objects
        self.truncated = truncated
    }
}

public enum BTHomeError: Error, Sendable, Equatable, CustomStringConvertible {
    case empty
    case unsupportedVersion(Int)
    case encryptedWithoutKey
    case plaintextFromKeyedDevice
    case tooShortForEncryption
    case decryptionFailed

    public var description: String {
        switch self {
        case .empty: "empty BTHome service data"
        case let .unsupportedVersion(v): "BTHome version \(v) (only v2 is supported)"
        case .encryptedWithoutKey: "encrypted BTHome packet and no bindkey configured for this device"
        case .plaintextFromKeyedDevice: "plaintext BTHome packet from a device with a bindkey (refused: downgrade)"
        case .tooShortForEncryption: "encrypted BTHome packet shorter than counter and MIC"
        case .decryptionFailed: "BTHome MIC does not match: wrong bindkey or a forged packet"
        }
    }
}

public enum BTHomeDecoder: BLEAdvertDecoder {
    public static let uuid16: UInt16 = 0xFCD2

    public static let descriptor = BLEDecoderDescriptor(name: "bthome", summary: "BTHome v2 buttons (service data 0xFCD2), plain or AES-CCM")

    /// What can be judged without the device's bindkey; the objects are read by `decode` once
    /// the pipeline knows which configured device sent them.
    public static func verdict(_ structures: [ADStructure]) -> BLEVerdict {
        guard let serviceData = ADWalker.serviceDataView(structures, uuid16: uuid16) else { return .notMine }
        guard let info = serviceData.first else { return .corrupt(BTHomeError.empty.description) }
        let version = Int(info >> 5)
        guard version == 2 else { return .implausible(BTHomeError.unsupportedVersion(version).description) }
        if info & 0x01 != 0 && serviceData.count < 9 { return .corrupt(BTHomeError.tooShortForEncryption.description) }
        return .observation(.bthome(serviceData: serviceData))
    }

    /// Value length of each known object id (0 = variable: the first value byte is the length;
    /// -1 unknown), indexed by the id: no hashing per object.
    static let lengths: [Int8] = {
        var t = [Int8](repeating: -1, count: 256)
        for id: UInt8 in [0x00, 0x01, 0x09, 0x0F, 0x10, 0x11, 0x2E, 0x2F, 0x3A, 0x46, 0x57, 0x58, 0x59, 0x60, 0x64, 0x65] { t[Int(id)] = 1 }
        for id: UInt8 in 0x15...0x2D { t[Int(id)] = 1 }
        for id: UInt8 in [0x02, 0x03, 0x06, 0x07, 0x08, 0x0C, 0x0D, 0x0E, 0x12, 0x13, 0x14, 0x3C, 0x3D, 0x3F, 0x40, 0x41, 0x43, 0x44,
                          0x45, 0x47, 0x48, 0x49, 0x4A, 0x51, 0x52, 0x56, 0x5A, 0x5D, 0x5E, 0x5F, 0x61, 0xF0] { t[Int(id)] = 2 }
        for id: UInt8 in [0x04, 0x05, 0x0A, 0x0B, 0x42, 0x4B, 0xF2] { t[Int(id)] = 3 }
        for id: UInt8 in [0x3E, 0x4C, 0x4D, 0x4E, 0x4F, 0x50, 0x55, 0x5B, 0x5C, 0x62, 0x63, 0xF1] { t[Int(id)] = 4 }
        t[0x53] = 0 // text
        t[0x54] = 0 // raw
        return t
    }()

    /// `serviceData` without the UUID; `address` most significant byte first (as printed).
    public static func decode(_ serviceData: [UInt8], address: [UInt8], bindkey: [UInt8]?) throws(BTHomeError) -> BTHomePacket {
        try decode(view: serviceData[...], address: address, bindkey: bindkey)
    }

    /// The same on a view into the advert's bytes: a plaintext packet is read in place, the
    /// address made only for an encrypted one's nonce.
    public static func decode(view serviceData: ArraySlice<UInt8>, address: @autoclosure () -> [UInt8],
                              bindkey: [UInt8]?) throws(BTHomeError) -> BTHomePacket {
        guard let info = serviceData.first else { throw .empty }
        let version = Int(info >> 5)
        guard version == 2 else { throw .unsupportedVersion(version) }
        let encrypted = info & 0x01 != 0
        var payload = serviceData.dropFirst()
        var counter: UInt32?
        if encrypted {
            guard let bindkey else { throw .encryptedWithoutKey }
            guard payload.count >= 8 else { throw .tooShortForEncryption }
            let counterBytes = Array(payload[payload.endIndex - 8..<payload.endIndex - 4])
            let mic = Array(payload.suffix(4))
            let ciphertext = Array(payload.prefix(payload.count - 8))
            let nonce = address() + [0xD2, 0xFC, info] + counterBytes
            do {
                payload = try AESCCM.decrypt(ciphertext + mic, key: bindkey, nonce: nonce, tagLength: 4)[...]
            } catch {
                throw .decryptionFailed
            }
            counter = counterBytes.enumerated().reduce(UInt32(0)) { $0 | UInt32($1.element) << (8 * UInt32($1.offset)) }
        } else if bindkey != nil {
            throw .plaintextFromKeyedDevice
        }
        var packet = BTHomePacket(encrypted: encrypted, triggerBased: info & 0x04 != 0, packetID: nil, battery: nil,
                                  buttons: [], counter: counter, objects: 0, truncated: false)
        var i = payload.startIndex
        while i < payload.endIndex {
            let id = payload[i]
            var length = Int(lengths[Int(id)])
            guard length >= 0 else { packet.truncated = true; break }
            var valueStart = i + 1
            if length == 0 {
                guard valueStart < payload.endIndex else { packet.truncated = true; break }
                length = Int(payload[valueStart])
                valueStart += 1
            }
            guard valueStart + length <= payload.endIndex else { packet.truncated = true; break }
            // An empty text or raw object has no value byte (found by the bthome fuzz target).
            if length >= 1 {
                let value = payload[valueStart]
                switch id {
                // A repeated object is a second sensor of that kind; the first is the device's own.
                case 0x00: packet.packetID = packet.packetID ?? value
                case 0x01: packet.battery = packet.battery ?? value
                case 0x3A: packet.buttons.append(BTHomeButtonEvent(rawValue: value) ?? .none)
                default: break
                }
            }
            packet.objects += 1
            i = valueStart + length
        }
        return packet
    }

    /// Builds the service data of a packet (tests, and the fuzz/bench corpus): objects as given.
    public static func encode(objects: [UInt8], triggerBased: Bool, address: [UInt8], bindkey: [UInt8]?, counter: UInt32 = 0) -> [UInt8] {
        var info: UInt8 = 0x40 | (triggerBased ? 0x04 : 0)
        guard let bindkey else { return [info] + objects }
        info |= 0x01
        let c = [UInt8(counter & 0xFF), UInt8(counter >> 8 & 0xFF), UInt8(counter >> 16 & 0xFF), UInt8(counter >> 24)]
        let sealed = (try? AESCCM.encrypt(objects, key: bindkey, nonce: address + [0xD2, 0xFC, info] + c, tagLength: 4)) ?? []
        return [info] + sealed.dropLast(4) + c + sealed.suffix(4)
    }
}
