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

    public enum QueueAction: Sendable, Equatable {
        /// Waiting events (or dead letters), oldest first, at most `limit` (0: counts only).
        case list(dead: Bool, limit: Int)
        /// Dead letters back into the queue.
        case retry
        case purgeDead
    }

    public static let commands = ["status", "pubkey", "version", "events", "inject", "queue", "scan", "capture"]
    public static let maxListLimit = 10_000

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
