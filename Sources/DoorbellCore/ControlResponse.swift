// The control socket's replies as types (the requests are ControlRequest): the agent encodes
// them, agentctl decodes them, so neither side reads the other's JSON by hand. Every reply is one
// object, `"ok": true` and the reply's members, or `"ok": false` and an `error` (docs/control.md).
// Decoding ignores members it does not know: an older agentctl reads a newer agent's replies.

public struct ControlReplyError: Error, Sendable, Equatable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// A successful reply's members, after `"ok": true`.
public protocol ControlReplyBody: Sendable, Equatable {
    var members: [(String, JSONValue)] { get }
    init(reply: JSONValue) throws(ControlReplyError)
}

extension ControlReplyBody {
    public var json: JSONValue {
        var all: [(String, JSONValue)] = [("ok", .bool(true))]
        all.append(contentsOf: members)
        return .object(all)
    }
}

public enum ControlResponse {
    /// `{"ok":false,"error":...}`: what was wrong and what to do.
    public static func failure(_ message: String) -> JSONValue {
        .object([("ok", .bool(false)), ("error", .string(message))])
    }

    public enum Decoded<Body: ControlReplyBody>: Sendable, Equatable {
        case ok(Body)
        /// The agent refused the request and said why.
        case refused(String)
    }

    /// A reply read as `Body`; throws when it is neither that nor a refusal (another version).
    public static func decode<Body: ControlReplyBody>(_ json: JSONValue, as _: Body.Type) throws(ControlReplyError) -> Decoded<Body> {
        guard case .object = json, let ok = json["ok"]?.boolValue else {
            throw ControlReplyError("the agent's answer has no \"ok\"; is agentctl from another version than the agent? (`agentctl version` tells)")
        }
        guard ok else { return .refused(json["error"]?.stringValue ?? "the agent refused the request") }
        do {
            return .ok(try Body(reply: json))
        } catch {
            throw ControlReplyError("the agent's answer is not what agentctl expects: \(error.description); is agentctl from another version than the agent? (`agentctl version` tells)")
        }
    }
}

/// Reads a reply's members, naming the one that is missing or of the wrong kind.
struct ReplyFields {
    let json: JSONValue
    let what: String

    init(_ json: JSONValue, _ what: String) {
        self.json = json
        self.what = what
    }

    func fail(_ key: String, _ kind: String) -> ControlReplyError { ControlReplyError("\(what) \"\(key)\" is not \(kind)") }

    func string(_ key: String) throws(ControlReplyError) -> String {
        guard let s = json[key]?.stringValue else { throw fail(key, "a string") }
        return s
    }

    /// Absent or null: nil.
    func optionalString(_ key: String) throws(ControlReplyError) -> String? {
        guard let v = json[key], v != .null else { return nil }
        guard let s = v.stringValue else { throw fail(key, "a string or null") }
        return s
    }

    func int(_ key: String) throws(ControlReplyError) -> Int {
        guard let n = json[key]?.intValue, let i = Int(exactly: n) else { throw fail(key, "a whole number") }
        return i
    }

    func optionalDouble(_ key: String) throws(ControlReplyError) -> Double? {
        guard let v = json[key], v != .null else { return nil }
        guard let d = v.doubleValue else { throw fail(key, "a number or null") }
        return d
    }

    func bool(_ key: String) throws(ControlReplyError) -> Bool {
        guard let b = json[key]?.boolValue else { throw fail(key, "true or false") }
        return b
    }

    func array(_ key: String) throws(ControlReplyError) -> [JSONValue] {
        guard let a = json[key]?.arrayValues else { throw fail(key, "a list") }
        return a
    }
}

private func optional(_ s: String?) -> JSONValue { s.map(JSONValue.string) ?? .null }
private func number(_ i: Int) -> JSONValue { .number(Double(i)) }

// MARK: - The replies, one per request

/// `status`: the report, kept as sent (AgentStatusReport reads it; `--json` prints it unchanged).
public struct StatusReply: ControlReplyBody {
    public var status: JSONValue
    public init(status: JSONValue) { self.status = status }
    public var members: [(String, JSONValue)] { [("status", status)] }
    public init(reply: JSONValue) throws(ControlReplyError) {
        guard let s = reply["status"], case .object = s else { throw ControlReplyError("status \"status\" is not an object") }
        status = s
    }
    public var report: AgentStatusReport? { AgentStatusReport(json: status) }
}

public struct PubkeyReply: ControlReplyBody {
    public var publicKey: String
    public var keyID: String
    public var algorithm: String
    public init(publicKey: String, keyID: String, algorithm: String = "ed25519") {
        self.publicKey = publicKey
        self.keyID = keyID
        self.algorithm = algorithm
    }
    public var members: [(String, JSONValue)] { [("public_key", .string(publicKey)), ("key_id", .string(keyID)), ("algorithm", .string(algorithm))] }
    public init(reply: JSONValue) throws(ControlReplyError) {
        let f = ReplyFields(reply, "pubkey")
        publicKey = try f.string("public_key")
        keyID = try f.string("key_id")
        algorithm = try f.string("algorithm")
    }
}

public struct VersionReply: ControlReplyBody {
    public var version: String
    public init(version: String) { self.version = version }
    public var members: [(String, JSONValue)] { [("version", .string(version))] }
    public init(reply: JSONValue) throws(ControlReplyError) { version = try ReplyFields(reply, "version").string("version") }
}

/// `events`: the recent event bodies, exactly as sent to the cloud (their schema is the cloud's).
public struct EventsReply: ControlReplyBody {
    public var events: [JSONValue]
    public init(events: [JSONValue]) { self.events = events }
    public var members: [(String, JSONValue)] { [("events", .array(events))] }
    public init(reply: JSONValue) throws(ControlReplyError) { events = try ReplyFields(reply, "events").array("events") }
}

public struct InjectReply: ControlReplyBody {
    public var eventIDs: [String]
    public init(eventIDs: [String]) { self.eventIDs = eventIDs }
    public var members: [(String, JSONValue)] { [("event_ids", .array(eventIDs.map(JSONValue.string)))] }
    public init(reply: JSONValue) throws(ControlReplyError) {
        let f = ReplyFields(reply, "inject")
        var ids: [String] = []
        for v in try f.array("event_ids") {
            guard let s = v.stringValue else { throw f.fail("event_ids", "a list of strings") }
            ids.append(s)
        }
        eventIDs = ids
    }
}

public struct QueueListReply: ControlReplyBody {
    public struct Entry: Sendable, Equatable {
        public var id: String
        public var sequence: Int
        public var type: String
        public var ageSeconds: Int
        public var attempts: Int
        public var dead: Bool
        public var lastError: String?
        public init(id: String, sequence: Int, type: String, ageSeconds: Int, attempts: Int, dead: Bool, lastError: String?) {
            self.id = id
            self.sequence = sequence
            self.type = type
            self.ageSeconds = ageSeconds
            self.attempts = attempts
            self.dead = dead
            self.lastError = lastError
        }
        var json: JSONValue {
            .object([("id", .string(id)), ("sequence", number(sequence)), ("type", .string(type)), ("age_s", number(ageSeconds)),
                     ("attempts", number(attempts)), ("dead", .bool(dead)), ("last_error", optional(lastError))])
        }
        init(json: JSONValue) throws(ControlReplyError) {
            let f = ReplyFields(json, "queue event")
            id = try f.string("id")
            sequence = try f.int("sequence")
            type = try f.string("type")
            ageSeconds = try f.int("age_s")
            attempts = try f.int("attempts")
            dead = try f.bool("dead")
            lastError = try f.optionalString("last_error")
        }
    }
    public var depth: Int
    public var dead: Int
    public var events: [Entry]
    public init(depth: Int, dead: Int, events: [Entry]) {
        self.depth = depth
        self.dead = dead
        self.events = events
    }
    public var members: [(String, JSONValue)] { [("depth", number(depth)), ("dead", number(dead)), ("events", .array(events.map(\.json)))] }
    public init(reply: JSONValue) throws(ControlReplyError) {
        let f = ReplyFields(reply, "queue")
        depth = try f.int("depth")
        dead = try f.int("dead")
        var entries: [Entry] = []
        for e in try f.array("events") { entries.append(try Entry(json: e)) }
        events = entries
    }
}

public struct QueueRetryReply: ControlReplyBody {
    public var requeued: Int
    public init(requeued: Int) { self.requeued = requeued }
    public var members: [(String, JSONValue)] { [("requeued", number(requeued))] }
    public init(reply: JSONValue) throws(ControlReplyError) { requeued = try ReplyFields(reply, "queue retry").int("requeued") }
}

public struct QueuePurgeReply: ControlReplyBody {
    public var purged: Int
    public init(purged: Int) { self.purged = purged }
    public var members: [(String, JSONValue)] { [("purged", number(purged))] }
    public init(reply: JSONValue) throws(ControlReplyError) { purged = try ReplyFields(reply, "queue purge").int("purged") }
}

public struct ScanReply: ControlReplyBody {
    public struct Transmitter: Sendable, Equatable {
        public var radio: String
        public var identity: String
        public var model: String
        public var frames: Int
        public var rssiDB: Double?
        public var lastSeen: String
        /// The configured device it matches; nil for a stranger.
        public var device: String?
        /// A TOML `match` value selecting it (BLE: the whole snippet).
        public var match: String
        public init(radio: String, identity: String, model: String, frames: Int, rssiDB: Double?, lastSeen: String, device: String?, match: String) {
            self.radio = radio
            self.identity = identity
            self.model = model
            self.frames = frames
            self.rssiDB = rssiDB
            self.lastSeen = lastSeen
            self.device = device
            self.match = match
        }
        /// `radio/identity`: one transmitter across two scans.
        public var key: String { radio + "/" + identity }
        public var json: JSONValue {
            .object([("radio", .string(radio)), ("identity", .string(identity)), ("model", .string(model)), ("frames", number(frames)),
                     ("rssi_db", rssiDB.map(JSONValue.number) ?? .null), ("last_seen", .string(lastSeen)),
                     ("device", optional(device)), ("match", .string(match))])
        }
        init(json: JSONValue) throws(ControlReplyError) {
            let f = ReplyFields(json, "scan transmitter")
            radio = try f.string("radio")
            identity = try f.string("identity")
            model = try f.string("model")
            frames = try f.int("frames")
            rssiDB = try f.optionalDouble("rssi_db")
            lastSeen = try f.string("last_seen")
            device = try f.optionalString("device")
            match = try f.string("match")
        }
    }
    public var transmitters: [Transmitter]
    public init(transmitters: [Transmitter]) { self.transmitters = transmitters }
    public var members: [(String, JSONValue)] { [("transmitters", .array(transmitters.map(\.json)))] }
    public init(reply: JSONValue) throws(ControlReplyError) {
        var list: [Transmitter] = []
        for t in try ReplyFields(reply, "scan").array("transmitters") { list.append(try Transmitter(json: t)) }
        transmitters = list
    }
}

public struct PairReply: ControlReplyBody {
    /// RFC 3339; nil: the window is closed.
    public var pairingUntil: String?
    public init(pairingUntil: String?) { self.pairingUntil = pairingUntil }
    public var members: [(String, JSONValue)] { [("pairing_until", optional(pairingUntil))] }
    public init(reply: JSONValue) throws(ControlReplyError) { pairingUntil = try ReplyFields(reply, "pair").optionalString("pairing_until") }
}

public struct PhonesReply: ControlReplyBody {
    public struct Phone: Sendable, Equatable {
        public var id: String
        public var name: String
        public var bondedAt: String
        public var lastSeen: String?
        public var connected: Bool
        public var readingNotifications: Bool
        public init(id: String, name: String, bondedAt: String, lastSeen: String?, connected: Bool, readingNotifications: Bool) {
            self.id = id
            self.name = name
            self.bondedAt = bondedAt
            self.lastSeen = lastSeen
            self.connected = connected
            self.readingNotifications = readingNotifications
        }
        var json: JSONValue {
            .object([("id", .string(id)), ("name", .string(name)), ("bonded_at", .string(bondedAt)), ("last_seen", optional(lastSeen)),
                     ("connected", .bool(connected)), ("reading_notifications", .bool(readingNotifications))])
        }
        init(json: JSONValue) throws(ControlReplyError) {
            let f = ReplyFields(json, "phone")
            id = try f.string("id")
            name = try f.string("name")
            bondedAt = try f.string("bonded_at")
            lastSeen = try f.optionalString("last_seen")
            connected = try f.bool("connected")
            readingNotifications = try f.bool("reading_notifications")
        }
    }
    public var phones: [Phone]
    public var pairingUntil: String?
    public var connected: Int
    public var notificationsRead: Int
    public var lastError: String?
    public init(phones: [Phone], pairingUntil: String?, connected: Int, notificationsRead: Int, lastError: String?) {
        self.phones = phones
        self.pairingUntil = pairingUntil
        self.connected = connected
        self.notificationsRead = notificationsRead
        self.lastError = lastError
    }
    public var members: [(String, JSONValue)] {
        [("phones", .array(phones.map(\.json))), ("pairing_until", optional(pairingUntil)), ("connected", number(connected)),
         ("notifications_read", number(notificationsRead)), ("last_error", optional(lastError))]
    }
    public init(reply: JSONValue) throws(ControlReplyError) {
        let f = ReplyFields(reply, "phones")
        var list: [Phone] = []
        for p in try f.array("phones") { list.append(try Phone(json: p)) }
        phones = list
        pairingUntil = try f.optionalString("pairing_until")
        connected = try f.int("connected")
        notificationsRead = try f.int("notifications_read")
        lastError = try f.optionalString("last_error")
    }
}

public struct ForgetReply: ControlReplyBody {
    public var forgotten: String
    public init(forgotten: String) { self.forgotten = forgotten }
    public var members: [(String, JSONValue)] { [("forgotten", .string(forgotten))] }
    public init(reply: JSONValue) throws(ControlReplyError) { forgotten = try ReplyFields(reply, "forget").string("forgotten") }
}

public struct AnswerReply: ControlReplyBody {
    /// Phones connected when the door was answered: each dismisses the ringing notification.
    public var dismissing: Int
    public init(dismissing: Int) { self.dismissing = dismissing }
    public var members: [(String, JSONValue)] { [("dismissing", number(dismissing))] }
    public init(reply: JSONValue) throws(ControlReplyError) { dismissing = try ReplyFields(reply, "answer").int("dismissing") }
}

// MARK: - Streams (events --follow, capture)

/// One line of a stream after its first: a record, or the stream's own bookkeeping.
public enum ControlStreamLine: Sendable, Equatable {
    /// The stream's first line: `{"ok":true,"following":true}` or `…"capturing":true`.
    case started(String)
    /// Sent every 10 s when idle: how a client that went away is noticed.
    case heartbeat
    /// This many records were skipped: the client read too slowly.
    case dropped(Int)
    case event(JSONValue)
    case capture(CaptureRecord)

    public static let following = ControlStreamLine.started("following")
    public static let capturing = ControlStreamLine.started("capturing")

    public var json: JSONValue {
        switch self {
        case let .started(what): .object([("ok", .bool(true)), (what, .bool(true))])
        case .heartbeat: .object([("heartbeat", .bool(true))])
        case let .dropped(n): .object([("dropped", number(n))])
        case let .event(body): body
        case let .capture(record): record.json
        }
    }

    /// `capture` streams carry records, `events` streams event bodies.
    public init(json: JSONValue, capturing: Bool) {
        if json["ok"]?.boolValue == true, case let .object(m) = json, let what = m.first(where: { $0.0 != "ok" })?.0 {
            self = .started(what)
        } else if json["heartbeat"]?.boolValue == true {
            self = .heartbeat
        } else if let n = json["dropped"]?.intValue, let dropped = Int(exactly: n) {
            self = .dropped(dropped)
        } else if capturing, let record = CaptureRecord(json: json) {
            self = .capture(record)
        } else {
            self = .event(json)
        }
    }
}

/// What the radios deliver, for `agentctl capture`.
public enum CaptureRecord: Sendable, Equatable {
    /// One rtl_433 JSON line, as printed.
    case rtl433(line: String)
    /// One OOK pulse after the glitch filter.
    case ookPulse(Pulse)
    /// One HCI packet in H4 framing; `received` false: a command the agent sent.
    case ble(h4: [UInt8], received: Bool, wallMicros: Int64)

    public var json: JSONValue {
        switch self {
        case let .rtl433(line): .object([("radio", .string("rtl433")), ("line", .string(line))])
        case let .ookPulse(p): .object([("radio", .string("ook")), ("pulse", .array([number(p.highMicros), number(p.lowMicros)]))])
        case let .ble(h4, received, t):
            .object([("radio", .string("ble")), ("h4", .string(Hex.encode(h4))), ("rx", .bool(received)), ("t", .number(Double(t)))])
        }
    }

    public init?(json: JSONValue) {
        switch json["radio"]?.stringValue {
        case "rtl433":
            guard let line = json["line"]?.stringValue else { return nil }
            self = .rtl433(line: line)
        case "ook":
            guard case let .array(p)? = json["pulse"], p.count == 2, let h = p[0].intValue, let l = p[1].intValue,
                  let high = Int(exactly: h), let low = Int(exactly: l) else { return nil }
            self = .ookPulse(Pulse(high: high, low: low))
        case "ble":
            guard let hex = json["h4"]?.stringValue, let bytes = Hex.decode(hex), let t = json["t"]?.intValue else { return nil }
            self = .ble(h4: bytes, received: json["rx"]?.boolValue ?? true, wallMicros: t)
        default:
            return nil
        }
    }
}
