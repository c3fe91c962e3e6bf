import DoorbellCore
import PropertyBased
import Testing

/// The event encoder writes straight into a reused buffer. It must give the bytes of the tree
/// path (`JSONWriter.encode(event.json(...))`) for every event, and its pieces the bytes of the
/// simple reference encoders below (the writer's code before it was made fast), whatever the input.
@Suite struct EventWriterTests {
    /// The string escaping as it was: byte by byte.
    static func referenceString(_ s: String) -> [UInt8] {
        var bytes: [UInt8] = [0x22]
        for b in s.utf8 {
            switch b {
            case 0x22: bytes += [0x5C, 0x22]
            case 0x5C: bytes += [0x5C, 0x5C]
            case 0x0A: bytes += [0x5C, UInt8(ascii: "n")]
            case 0x0D: bytes += [0x5C, UInt8(ascii: "r")]
            case 0x09: bytes += [0x5C, UInt8(ascii: "t")]
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                bytes += [0x5C, UInt8(ascii: "u"), 0x30, 0x30, hex[Int(b >> 4)], hex[Int(b & 0xF)]]
            default: bytes.append(b)
            }
        }
        return bytes + [0x22]
    }

    /// RFC 3339 as it was: string interpolation of padded Strings.
    static func referenceRFC3339(_ micros: Int64) -> String {
        func pad(_ v: Int64, _ width: Int) -> String {
            let s = String(v)
            return s.count >= width ? s : String(repeating: "0", count: width - s.count) + s
        }
        let secondsTotal = micros >= 0 ? micros / 1_000_000 : (micros - 999_999) / 1_000_000
        let frac = micros - secondsTotal * 1_000_000
        let days = secondsTotal >= 0 ? secondsTotal / 86_400 : (secondsTotal - 86_399) / 86_400
        let secOfDay = secondsTotal - days * 86_400
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yoe + era * 400 + (month <= 2 ? 1 : 0)
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(secOfDay / 3600, 2)):\(pad(secOfDay / 60 % 60, 2)):\(pad(secOfDay % 60, 2)).\(pad(frac, 6))Z"
    }

    /// UUIDv7 as it was: a 16-byte array, then hex.
    static func referenceUUID(unixMillis: Int64, random: inout some RandomNumberGenerator) -> String {
        var b = [UInt8](repeating: 0, count: 16)
        let ms = UInt64(max(0, unixMillis)) & 0xFFFF_FFFF_FFFF
        for i in 0..<6 { b[i] = UInt8(truncatingIfNeeded: ms >> (40 - 8 * UInt64(i))) }
        let r1 = random.next() as UInt64
        let r2 = random.next() as UInt64
        for i in 6..<8 { b[i] = UInt8(truncatingIfNeeded: r1 >> (8 * UInt64(i))) }
        for i in 8..<16 { b[i] = UInt8(truncatingIfNeeded: r2 >> (8 * UInt64(i - 8))) }
        b[6] = 0x70 | (b[6] & 0x0F)
        b[8] = 0x80 | (b[8] & 0x3F)
        let hex = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        for (i, byte) in b.enumerated() {
            if i == 4 || i == 6 || i == 8 || i == 10 { out.append(UInt8(ascii: "-")) }
            out += [hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]]
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Any text a device name or id can hold: arbitrary bytes (control characters, quotes,
    /// backslashes, invalid UTF-8 repaired to U+FFFD as the readers do) and arbitrary scalars
    /// (non-ASCII up to U+10FFFF; Swift strings hold no lone surrogates, so there are none to escape).
    static let text = Gen.uint8(in: 0...255).array(of: 0...24)
        .map { String(decoding: $0, as: UTF8.self) }
    static let scalars = Gen.uint32(in: 0...0x10FFFF).array(of: 0...8)
        .map { String(String.UnicodeScalarView($0.map { Unicode.Scalar($0) ?? "\u{FFFD}" })) }

    @Test func stringsAreEscapedAsTheReferenceDoesForAnyText() async {
        await propertyCheck(input: Self.text, Self.scalars) { bytes, scalars in
            for s in [bytes, scalars, bytes + scalars] {
                var out: [UInt8] = [0x7B]
                JSONWriter.appendString(s, to: &out)
                #expect(out == [0x7B] + Self.referenceString(s), "\(Array(s.utf8))")
            }
        }
    }

    @Test func integersAreTheirDecimalText() async {
        await propertyCheck(input: Gen.int64()) { v in
            var out: [UInt8] = []
            JSONWriter.appendInteger(v, to: &out)
            #expect(out == Array(String(v).utf8))
        }
        for v in [Int64.min, Int64.max, 0, -1, 9, 10] {
            var out: [UInt8] = []
            JSONWriter.appendInteger(v, to: &out)
            #expect(out == Array(String(v).utf8))
        }
    }

    @Test func timesAreFormattedAsTheReferenceDoes() async {
        // Year -9999 to 9999 and beyond: every branch of the civil conversion and of the padding.
        await propertyCheck(input: Gen.int64(in: -400_000_000_000_000_000...400_000_000_000_000_000)) { micros in
            #expect(RFC3339.format(micros: micros) == Self.referenceRFC3339(micros))
        }
    }

    @Test func uuidsAreLaidOutAsTheReferenceDoes() async {
        await propertyCheck(input: Gen.int64(in: -1...(1 << 49)), Gen.uint64()) { millis, seed in
            var a = SeededRandom(seed: seed), b = SeededRandom(seed: seed)
            #expect(UUIDv7.make(unixMillis: millis, random: &a) == Self.referenceUUID(unixMillis: millis, random: &b))
        }
    }

    static let data = Gen.oneOf(
        Gen.int64(in: -1_000_000...1_000_000).map { JSONValue.number(Double($0)) }.eraseToAnySequence(),
        Gen.int64(in: -1_000_000...1_000_000).map { JSONValue.number(Double($0) / 8) }.eraseToAnySequence(),
        Self.text.map { JSONValue.string($0) }.eraseToAnySequence(),
        Gen.bool().map { JSONValue.bool($0) }.eraseToAnySequence()
    ).array(of: 0...4)

    /// The encoder and the tree path agree for any event: every type, text, time, flag and data.
    @Test func theWriterGivesTheBytesOfTheTreeForAnyEvent() async {
        await propertyCheck(input: Gen.int(in: 0...(EventType.allCases.count - 1)).map { EventType.allCases[$0] }, Self.text, Self.scalars, Gen.int64(), Gen.int64(in: .min ... .max).optional(),
                            Self.text.optional(), Gen.uint8(in: 0...3), Self.data) { type, name, id, micros, mono, boot, flags, values in
            var e = AgentEvent(type: type, device: DeviceRef(id: id, name: name, radio: "ble"),
                               occurredAtMicros: micros / 64, clockSynced: flags & 1 == 1, test: flags & 2 == 2,
                               data: .object(values.enumerated().map { ("k\($0.offset)\(name)", $0.element) }))
            e.monotonicMicros = mono
            e.bootID = boot
            let sequence = mono ?? micros
            var out: [UInt8] = Array("x".utf8)
            e.write(into: &out, id: name + id, sequence: sequence, gatewayID: id, agentVersion: name)
            let tree = JSONWriter.encode(e.json(id: name + id, sequence: sequence, gatewayID: id, agentVersion: name))
            #expect(out == Array("x".utf8) + tree, "\(String(decoding: tree, as: UTF8.self))")
            #expect(e.body(id: name + id, sequence: sequence, gatewayID: id, agentVersion: name) == tree)
        }
    }
}
