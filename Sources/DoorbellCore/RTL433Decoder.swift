// rtl_433 JSON line → RF frame.
//
// rtl_433 prints one JSON object per decoded message (`-F json`). Lines that are not device
// messages (its own status/statistics) and broken lines are counted apart, never fatal.
// Identity comes from the raw fields (`code`, else `id` plus sub-address fields), never from
// `model` alone: rtl_433's default decoders mislabel plain EV1527 doorbells.

public struct RFFrame: Sendable, Equatable {
    /// The decoder that printed it (informative only).
    public var model: String
    /// Stable identity of the transmitter and button, e.g. "code=91568f" or "id=2900,unit=9".
    public var identity: String
    /// The raw code as lower-case hex when the message has a `code` field.
    public var code: String?
    public var rssi: Double?
    /// When rtl_433 says the message was received, in microseconds: Unix time for live input
    /// (`-M time:unix:usec`), offset from the start for recordings ("@0.257012s").
    public var timeMicros: Int64?
    /// All scalar fields, for matching against the config.
    public var fields: [String: JSONValue]
    /// What the decoder adds to the event's data (protocol, time unit, ...), in order.
    public var details: [(String, JSONValue)] = []

    public init(model: String, identity: String, code: String?, rssi: Double?, timeMicros: Int64?, fields: [String: JSONValue]) {
        self.model = model
        self.identity = identity
        self.code = code
        self.rssi = rssi
        self.timeMicros = timeMicros
        self.fields = fields
    }

    public static func == (a: RFFrame, b: RFFrame) -> Bool {
        a.model == b.model && a.identity == b.identity && a.code == b.code && a.rssi == b.rssi && a.timeMicros == b.timeMicros
            && a.fields == b.fields && a.details.map(\.0) == b.details.map(\.0) && a.details.map(\.1) == b.details.map(\.1)
    }
}

public enum RTL433LineResult: Sendable, Equatable {
    case frame(RFFrame)
    /// Valid JSON but not a device message (rtl_433 status, stats): counted, not an error.
    case notAMessage
    case malformed(String)
}

public enum RTL433Decoder {
    /// Fields that address a transmitter or its button, in the order they appear in the identity.
    static let identityFields = ["id", "channel", "unit", "button", "cmd", "subtype", "data"]

    public static func decode(line: some StringProtocol) -> RTL433LineResult {
        let json: JSONValue
        do { json = try JSONReader.parse(bytes: Array(line.utf8)) } catch { return .malformed(error.description) }
        return decode(message: json)
    }

    public static func decode(message json: JSONValue) -> RTL433LineResult {
        guard case let .object(members) = json else { return .malformed("expected a JSON object per line") }
        guard let model = json["model"]?.stringValue, !model.isEmpty else { return .notAMessage }
        var fields: [String: JSONValue] = [:]
        for (k, v) in members {
            switch v {
            case .string, .number, .bool: fields[k] = v
            default: break
            }
        }
        let code = fields["code"].flatMap(codeHex)
        var identity: String
        if let code {
            identity = "code=" + code
        } else {
            let parts = identityFields.compactMap { key in fields[key].flatMap(scalarText).map { "\(key)=\($0)" } }
            guard !parts.isEmpty else { return .notAMessage }
            identity = parts.joined(separator: ",")
        }
        identity = identity.lowercased()
        let rssi = fields["rssi"]?.doubleValue
        let time = fields["time"]?.stringValue.flatMap(parseTime)
        return .frame(RFFrame(model: model, identity: identity, code: code, rssi: rssi, timeMicros: time, fields: fields))
    }

    /// rtl_433 prints codes as integers (flex `get=`) or hex strings ("f16a89"); both become hex.
    static func codeHex(_ v: JSONValue) -> String? {
        switch v {
        case let .number(n):
            guard n >= 0, n.rounded() == n, n < 9.007_199_254_740_992e15 else { return nil }
            return hex(Int64(n))
        case let .string(s):
            var t = Substring(s.lowercased())
            if t.hasPrefix("0x") { t = t.dropFirst(2) }
            guard !t.isEmpty, let v = Int64(t, radix: 16) else { return nil }
            return hex(v)
        default: return nil
        }
    }

    /// At least six digits: most fixed-code remotes send 24-bit words, and "04cdf8" is how
    /// installers read them off the label or a Flipper.
    static func hex(_ v: Int64) -> String {
        let s = String(v, radix: 16)
        return s.count >= 6 ? s : String(repeating: "0", count: 6 - s.count) + s
    }

    static func scalarText(_ v: JSONValue) -> String? {
        switch v {
        case let .string(s): return s
        case let .number(n): return n.rounded() == n && abs(n) < 1e15 ? String(Int64(n)) : String(n)
        case let .bool(b): return String(b)
        default: return nil
        }
    }

    /// "@0.257012s" (offset), "1795355235.181475" (unix, -M time:unix:usec). Other formats
    /// (local date strings) are ignored: the caller then uses its own receive time.
    static func parseTime(_ s: String) -> Int64? {
        var t = Substring(s)
        if t.hasPrefix("@") { t = t.dropFirst() }
        if t.hasSuffix("s") { t = t.dropLast() }
        let parts = t.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count <= 2, let whole = Int64(parts[0]), whole >= 0, whole < 1 << 40 else { return nil }
        var micros: Int64 = 0
        if parts.count == 2 {
            let frac = parts[1].prefix(6)
            guard !frac.isEmpty, let f = Int64(frac), f >= 0 else { return nil }
            micros = f
            for _ in frac.count..<6 { micros *= 10 }
        }
        return whole * 1_000_000 + micros
    }
}

/// Which configured device, if any, a frame belongs to.
public struct DeviceDirectory: Sendable {
    public let devices: [DeviceConfig]
    public init(devices: [DeviceConfig]) { self.devices = devices }

    public func match(_ frame: RFFrame, radio: String) -> DeviceConfig? {
        devices.first { $0.radio == radio && Self.matches($0.match, frame) }
    }

    static func matches(_ m: RTL433Match, _ frame: RFFrame) -> Bool {
        m.fields.allSatisfy { key, expected in
            guard let actual = frame.fields[key] else { return false }
            switch expected {
            case let .integer(want):
                if key == "code" {
                    guard let hex = RTL433Decoder.codeHex(actual), let have = Int64(hex, radix: 16) else { return false }
                    return have == want
                }
                if let have = actual.intValue { return have == want }
                if let s = actual.stringValue { return s == String(want) }
                return false
            case let .text(want):
                guard let have = RTL433Decoder.scalarText(actual) else { return false }
                return have.lowercased() == want.lowercased()
            }
        }
    }
}
