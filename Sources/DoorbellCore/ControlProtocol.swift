// The control socket's requests as types, shared by the agent (which parses them) and agentctl
// (which builds them), so the two cannot drift: one JSON object per line, `command` names the
// request, and a request the agent cannot take gets an error that says what it would take.

public enum ControlRequest: Sendable, Equatable {
    case status
    case pubkey
    case version
    /// The recent events, or (follow) every new one as it is created.
    case events(follow: Bool)
    /// A synthetic press of a configured device, marked test.
    case inject(device: String)
    case queue(QueueAction)
    case scan
    /// Raw radio packets as they arrive, until the client hangs up.
    case capture
    /// Open the phone pairing window for this many seconds (0 closes it).
    case pair(seconds: Int)
    /// The bonded phones, and which is connected.
    case phones
    /// Remove a phone's bond (by its address or name).
    case forget(phone: String)
    /// The door was answered: dismiss the ringing doorbell notification on the connected phones.
    case answer

    public enum QueueAction: Sendable, Equatable {
        /// Waiting events (or dead letters), oldest first, at most `limit` (0: counts only).
        case list(dead: Bool, limit: Int)
        /// Dead letters back into the queue.
        case retry
        case purgeDead
    }

    public static let commands = ["status", "pubkey", "version", "events", "inject", "queue", "scan", "capture", "pair", "phones", "forget", "answer"]
    public static let maxListLimit = 10_000
    public static let maxPairingSeconds = 600

    public var command: String {
        switch self {
        case .status: "status"
        case .pubkey: "pubkey"
        case .version: "version"
        case .events: "events"
        case .inject: "inject"
        case .queue: "queue"
        case .scan: "scan"
        case .capture: "capture"
        case .pair: "pair"
        case .phones: "phones"
        case .forget: "forget"
        case .answer: "answer"
        }
    }

    public var json: JSONValue {
        var members: [(String, JSONValue)] = [("command", .string(command))]
        switch self {
        case let .events(follow) where follow: members.append(("follow", .bool(true)))
        case let .inject(device): members.append(("device", .string(device)))
        case let .queue(.list(dead, limit)):
            members += [("action", .string("list")), ("dead", .bool(dead)), ("limit", .number(Double(limit)))]
        case .queue(.retry): members.append(("action", .string("retry")))
        case .queue(.purgeDead): members.append(("action", .string("purge-dead")))
        case let .pair(seconds): members.append(("seconds", .number(Double(seconds))))
        case let .forget(phone): members.append(("phone", .string(phone)))
        default: break
        }
        return .object(members)
    }

    public init(json: JSONValue) throws(ControlRequestError) {
        guard case .object = json else { throw ControlRequestError("a request is a JSON object with a \"command\"") }
        switch json["command"]?.stringValue {
        case "status": self = .status
        case "pubkey": self = .pubkey
        case "version": self = .version
        case "scan": self = .scan
        case "capture": self = .capture
        case "phones": self = .phones
        case "answer": self = .answer
        case "pair":
            let seconds = json["seconds"]?.intValue ?? 120
            guard (0...Int64(Self.maxPairingSeconds)).contains(seconds) else {
                throw ControlRequestError("pair \"seconds\" must be 0–\(Self.maxPairingSeconds) (0 closes the window), not \(seconds)")
            }
            self = .pair(seconds: Int(seconds))
        case "forget":
            guard let phone = json["phone"]?.stringValue, !phone.isEmpty else {
                throw ControlRequestError("forget needs \"phone\": a bonded phone's address or name (agentctl phones lists them)")
            }
            self = .forget(phone: phone)
        case "events": self = .events(follow: json["follow"]?.boolValue == true)
        case "inject":
            guard let device = json["device"]?.stringValue, !device.isEmpty else {
                throw ControlRequestError("inject needs \"device\": the id of a configured [[device]]")
            }
            self = .inject(device: device)
        case "queue":
            switch json["action"]?.stringValue ?? "list" {
            case "list":
                let limit = json["limit"]?.intValue ?? 100
                guard (0...Int64(Self.maxListLimit)).contains(limit) else {
                    throw ControlRequestError("queue list \"limit\" must be 0–\(Self.maxListLimit), not \(limit)")
                }
                self = .queue(.list(dead: json["dead"]?.boolValue == true, limit: Int(limit)))
            case "retry": self = .queue(.retry)
            case "purge-dead": self = .queue(.purgeDead)
            case let other: throw ControlRequestError("unknown queue action \"\(other)\"; use list, retry or purge-dead")
            }
        case let other:
            throw ControlRequestError("unknown command \(other.map { "\"\($0)\"" } ?? "(none)"); known: \(Self.commands.joined(separator: ", "))")
        }
    }
}

public struct ControlRequestError: Error, Sendable, Equatable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
