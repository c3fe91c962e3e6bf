// ANCS Control Point (69D1D8F3-45E1-49A8-9821-9BBDFDAAD9D9): the commands the base station
// writes (with response) to ask for a notification's attributes, an app's name, or to perform a
// notification's positive/negative action; and the four ATT error codes the iPhone answers
// with when it refuses one. Hand-written from Apple's "ANCS Specification" (2013): a few
// byte layouts, all little-endian, strings UTF-8.
//
//   GetNotificationAttributes  00 | UID (4) | AttributeID [MaxLength (2) for Title/Subtitle/Message] …
//   GetAppAttributes           01 | AppIdentifier, NUL-terminated | AttributeID …
//   PerformNotificationAction  02 | UID (4) | ActionID (00 positive, 01 negative)

public enum ANCSNotificationAttribute: Hashable, Sendable, CustomStringConvertible {
    case appIdentifier
    case title(maxLength: UInt16)
    case subtitle(maxLength: UInt16)
    case message(maxLength: UInt16)
    case messageSize
    case date
    case positiveActionLabel
    case negativeActionLabel

    public var id: UInt8 {
        switch self {
        case .appIdentifier: 0
        case .title: 1
        case .subtitle: 2
        case .message: 3
        case .messageSize: 4
        case .date: 5
        case .positiveActionLabel: 6
        case .negativeActionLabel: 7
        }
    }

    /// The length the iPhone truncates the value to, when the command carries one.
    public var maxLength: UInt16? {
        switch self {
        case let .title(n), let .subtitle(n), let .message(n): n
        default: nil
        }
    }

    static let names = ["app-identifier", "title", "subtitle", "message", "message-size", "date",
                        "positive-action-label", "negative-action-label"]

    public var description: String { Self.names[Int(id)] }

    var encoded: [UInt8] { [id] + (maxLength.map { ANCSBytes.littleEndian($0) } ?? []) }
}

public enum ANCSAppAttribute: UInt8, Hashable, Sendable, CustomStringConvertible {
    case displayName = 0

    public var id: UInt8 { rawValue }
    public var description: String { "display-name" }
}

public enum ANCSAction: UInt8, Hashable, Sendable {
    /// "Accept" for a call; what the notification's positive button does.
    case positive = 0
    /// "Decline"/"Clear": what dismissing the ringing call from the door uses.
    case negative = 1
}

public enum ANCSCommand: Hashable, Sendable, CustomStringConvertible {
    case getNotificationAttributes(uid: UInt32, attributes: [ANCSNotificationAttribute])
    case getAppAttributes(appIdentifier: String, attributes: [ANCSAppAttribute])
    case performNotificationAction(uid: UInt32, action: ANCSAction)

    public var id: UInt8 {
        switch self {
        case .getNotificationAttributes: 0
        case .getAppAttributes: 1
        case .performNotificationAction: 2
        }
    }

    /// The bytes to write to the Control Point. An app identifier with a NUL in it cannot be
    /// sent (the NUL ends it on the wire); identifiers come from the phone, so this is a typed error.
    public func encoded() throws(ANCSError) -> [UInt8] {
        switch self {
        case let .getNotificationAttributes(uid, attributes):
            return [id] + ANCSBytes.littleEndian(uid) + attributes.flatMap(\.encoded)
        case let .getAppAttributes(app, attributes):
            let name = Array(app.utf8)
            guard !name.contains(0) else { throw .appIdentifierContainsNul }
            return [id] + name + [0] + attributes.map(\.id)
        case let .performNotificationAction(uid, action):
            return [id] + ANCSBytes.littleEndian(uid) + [action.rawValue]
        }
    }

    /// Whether the iPhone answers on the Data Source (the action command has no response there).
    public var hasDataSourceResponse: Bool {
        if case .performNotificationAction = self { return false }
        return true
    }

    public var description: String {
        switch self {
        case let .getNotificationAttributes(uid, a): "get-notification-attributes uid=\(uid) [\(a.map(\.description).joined(separator: ","))]"
        case let .getAppAttributes(app, a): "get-app-attributes app=\(app) [\(a.map(\.description).joined(separator: ","))]"
        case let .performNotificationAction(uid, action): "perform-notification-action uid=\(uid) \(action == .positive ? "positive" : "negative")"
        }
    }
}

/// The ATT error codes the iPhone returns to a Control Point write.
public enum ANCSControlPointError: UInt8, Error, Sendable, CaseIterable, CustomStringConvertible {
    case unknownCommand = 0xA0
    case invalidCommand = 0xA1
    case invalidParameter = 0xA2
    case actionFailed = 0xA3

    /// The ANCS meaning of an ATT Error Response code, or nil when it is a plain ATT error.
    public init?(attErrorCode: UInt8) { self.init(rawValue: attErrorCode) }

    public var description: String {
        switch self {
        case .unknownCommand:
            "ANCS 0xA0 unknown command: this iOS does not know the command id. Nothing to retry; report it with the iOS version."
        case .invalidCommand:
            "ANCS 0xA1 invalid command: the iPhone found the command malformed (length or attribute list). This is an agent bug; report it with the bytes from the log."
        case .invalidParameter:
            "ANCS 0xA2 invalid parameter: the notification UID or app identifier no longer exists (the notification was removed). Nothing to do; the request is dropped."
        case .actionFailed:
            "ANCS 0xA3 action failed: the iPhone could not perform the action (the notification was already dismissed, or the app has no such action). Nothing to retry."
        }
    }
}

public enum ANCSError: Error, Sendable, Equatable, CustomStringConvertible {
    case notificationSourceLength(Int)
    case appIdentifierContainsNul
    case commandOutstanding(ANCSCommand)
    case noDataSourceResponse(ANCSCommand)
    case timedOut(ANCSCommand, receivedBytes: Int)
    case linkDropped(ANCSCommand, receivedBytes: Int)
    case responseTooLarge(ANCSCommand, limit: Int)

    public var description: String {
        switch self {
        case let .notificationSourceLength(n):
            "ANCS Notification Source packet of \(n) bytes (always 8): ignored; the phone or the link is corrupting data"
        case .appIdentifierContainsNul:
            "ANCS app identifier contains a NUL byte and cannot be sent to the iPhone"
        case let .commandOutstanding(c):
            "ANCS \(c) is still waiting for its Data Source response: send the next command after it completes or times out"
        case let .noDataSourceResponse(c):
            "ANCS \(c) has no Data Source response; do not wait for one"
        case let .timedOut(c, n):
            "ANCS \(c): the iPhone stopped answering after \(n) bytes; the notification is reported without those attributes"
        case let .linkDropped(c, n):
            "ANCS \(c): the link dropped after \(n) bytes of the response; it is asked again after reconnecting"
        case let .responseTooLarge(c, limit):
            "ANCS \(c): response larger than \(limit) bytes, abandoned; lower the attribute max lengths in the request"
        }
    }
}
