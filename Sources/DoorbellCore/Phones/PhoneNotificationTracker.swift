// What the base station makes of the notifications it reads off the owner's iPhones (ANCS):
// delivery receipts for the presses it forwarded, phone notifications as local triggers, and
// the notification to dismiss when the door is answered. A value: the GATT/ANCS layer hands it
// complete notifications (attributes already fetched) and connection changes with the time;
// it returns the events to store and the ANCS actions to perform.
//
// Receipts: the cloud puts a reference ("#K3QF7", per push) in the subtitle of the doorbell
// app's alert. A notification from that app is `push.displayed` with the reference it shows and
// the press it most likely belongs to (the newest forwarded press whose doorbell's name is the
// title, within the window); the cloud places it exactly by the reference. A phone that stayed
// connected for the whole window after a press and showed nothing from the app is
// `push.not_displayed` for that press. A phone that left during the window says nothing either way.
// A push is reported displayed once per phone, ever: the session marks a notification whose
// reference the bond already reported (`receiptReported`), and such a one is no receipt again.
//
// Local triggers: a new notification of a chosen category or app is `phone.notification`; the
// same notification (its UID on that phone) modified or removed afterwards is
// `phone.notification_modified` / `phone.notification_removed` (a call answered or declined, a
// message read), remembered for the last `maximumShown` triggers per phone.

public struct PhoneNotification: Sendable, Equatable {
    public enum Change: Sendable, Equatable { case added, modified, removed }
    public var phoneID: String
    public var uid: UInt32
    public var change: Change
    /// ANCS CategoryID (0 Other, 1 IncomingCall, 2 MissedCall, … 11 Entertainment).
    public var category: Int
    /// The Notification Source's EventFlags.
    public var flags: ANCSEventFlags
    public var preExisting: Bool {
        get { flags.contains(.preExisting) }
        set { if newValue { flags.insert(.preExisting) } else { flags.remove(.preExisting) } }
    }
    public var hasNegativeAction: Bool {
        get { flags.contains(.negativeAction) }
        set { if newValue { flags.insert(.negativeAction) } else { flags.remove(.negativeAction) } }
    }
    public var appID: String
    public var title: String
    public var subtitle: String
    public var message: String
    /// The phone's own time of the notification (ANCS Date attribute) as an instant, Unix
    /// microseconds: nil when not sent or not plausible (see `PhoneSession`'s `localTime`).
    public var postedAtMicros: Int64?
    /// The Date attribute as the phone wrote it (its local time, no zone).
    public var phoneDate: ANCSDate?
    /// Its push was already reported displayed by this phone (on an earlier link).
    public var receiptReported = false

    public init(phoneID: String, uid: UInt32, change: Change = .added, category: Int = 0, preExisting: Bool = false,
                hasNegativeAction: Bool = false, appID: String, title: String = "", subtitle: String = "", message: String = "",
                postedAtMicros: Int64? = nil, flags: ANCSEventFlags = []) {
        self.phoneID = phoneID
        self.uid = uid
        self.change = change
        self.category = category
        self.flags = flags.union(preExisting ? .preExisting : []).union(hasNegativeAction ? .negativeAction : [])
        self.appID = appID
        self.title = title
        self.subtitle = subtitle
        self.message = message
        self.postedAtMicros = postedAtMicros
    }

    public static let categoryNames = ["other", "incoming_call", "missed_call", "voicemail", "social", "schedule", "email", "news",
                                       "health_and_fitness", "business_and_finance", "location", "entertainment"]
    public var categoryName: String { category >= 0 && category < Self.categoryNames.count ? Self.categoryNames[category] : "unknown_\(category)" }
}

/// A doorbell notification to dismiss on a phone when the door is answered.
public struct PhoneDismissal: Sendable, Equatable {
    public var phoneID: String
    public var uid: UInt32
    /// The notification's title (the doorbell's name): what the log says was dismissed.
    public var title: String
    public init(phoneID: String, uid: UInt32, title: String) {
        self.phoneID = phoneID
        self.uid = uid
        self.title = title
    }
}

public struct PhoneNotificationTracker: Sendable {
    public struct Settings: Sendable, Equatable {
        /// The doorbell app's bundle id: its notifications are the pushes of our presses.
        public var doorbellAppID: String
        /// How long after a press a connected phone has to show it.
        public var receiptWindowMicros: Int64 = 120_000_000
        /// Categories (names as in `PhoneNotification.categoryNames`) that become `phone.notification` events.
        public var triggerCategories: Set<String> = ["incoming_call"]
        /// Apps whose every notification becomes a `phone.notification` event.
        public var triggerApps: Set<String> = []
        /// Titles and messages leave the base station only when this is set.
        public var includeText = false
        public init(doorbellAppID: String) { self.doorbellAppID = doorbellAppID }
    }

    public enum Output: Sendable, Equatable {
        /// An event to store (type, and its `data`).
        case event(type: String, data: JSONValue)
    }

    struct Press: Sendable {
        let eventID: String
        let doorbellName: String
        let at: Int64
        /// Phones connected when the press was forwarded, not yet heard from.
        var waiting: Set<String>
        /// Phones that showed it: one receipt per phone and press.
        var shownOn: Set<String> = []
    }

    public let settings: Settings
    /// Connected phones by id, with their names.
    public private(set) var connected: [String: String] = [:]
    private var presses: [Press] = []
    /// The doorbell app's newest notification per phone (what "answer" dismisses).
    private var ringing: [String: PhoneDismissal] = [:]
    /// The notifications reported as `phone.notification` per phone, oldest first: their later
    /// changes are reported too. Kept across the phone's link drops (UIDs stay valid on the phone).
    private var shown: [String: [(uid: UInt32, category: String, appID: String)]] = [:]
    static let maximumShown = 64
    /// Kept presses: a bound whatever the press rate (older ones get no receipt, nothing else).
    static let maximumPresses = 64

    public init(settings: Settings) { self.settings = settings }

    public mutating func phoneConnected(_ id: String, name: String) { connected[id] = name }

    public mutating func phoneDisconnected(_ id: String) {
        connected[id] = nil
        ringing[id] = nil
        for i in presses.indices { presses[i].waiting.remove(id) }
    }

    /// A press the agent forwarded (it will be pushed to the phones).
    public mutating func pressForwarded(eventID: String, doorbellName: String, at now: Int64) -> [Output] {
        let out = expire(at: now)
        guard !settings.doorbellAppID.isEmpty else { return out } // no receipts without the app
        presses.append(Press(eventID: eventID, doorbellName: doorbellName, at: now, waiting: Set(connected.keys)))
        if presses.count > Self.maximumPresses { presses.removeFirst(presses.count - Self.maximumPresses) }
        return out
    }

    public mutating func notification(_ n: PhoneNotification, at now: PhoneTime) -> [Output] {
        var out = expire(at: now.monotonic)
        let name = connected[n.phoneID]
        var phone: [(String, JSONValue)] = [("id", .string(n.phoneID))]
        if let name { phone.append(("name", .string(name))) }
        guard n.change != .removed else {
            if ringing[n.phoneID]?.uid == n.uid { ringing[n.phoneID] = nil }
            if let i = shown[n.phoneID]?.firstIndex(where: { $0.uid == n.uid }), let gone = shown[n.phoneID]?.remove(at: i) {
                out.append(.event(type: "phone.notification_removed", data: .object([
                    ("uid", .number(Double(n.uid))), ("category", .string(gone.category)), ("app_id", .string(gone.appID)),
                    ("phone", .object(phone))])))
            }
            return out
        }
        // No doorbell app configured (`ancs_app` empty): no receipts, even for a notification
        // whose app id could not be read.
        if !settings.doorbellAppID.isEmpty, n.appID == settings.doorbellAppID {
            if n.hasNegativeAction { ringing[n.phoneID] = PhoneDismissal(phoneID: n.phoneID, uid: n.uid, title: n.title) }
            guard n.change == .added, !n.receiptReported, let reference = Self.reference(in: n.subtitle) else { return out }
            // The newest press of the doorbell the title names that this phone has not shown yet
            // (one it was waited for first). None: the cloud places it by the reference alone.
            let candidates = presses.indices.filter { presses[$0].doorbellName == n.title && !presses[$0].shownOn.contains(n.phoneID) }
            let press = candidates.last { presses[$0].waiting.contains(n.phoneID) } ?? candidates.last
            if let press {
                presses[press].waiting.remove(n.phoneID)
                presses[press].shownOn.insert(n.phoneID)
            }
            var data: [(String, JSONValue)] = [("reference", .string(reference))]
            if let press { data.append(("press_event_id", .string(presses[press].eventID))) }
            // The phone's Date when it reads as an instant; else when the base station read it.
            data += [("uid", .number(Double(n.uid))), ("phone", .object(phone)),
                     ("displayed_at", .string(RFC3339.format(micros: n.postedAtMicros ?? now.wall))),
                     ("displayed_at_source", .string(n.postedAtMicros == nil ? "read" : "phone"))]
            if let d = n.phoneDate { data.append(("phone_time", .string(d.description))) }
            data.append(("pre_existing", .bool(n.preExisting)))
            out.append(.event(type: "push.displayed", data: .object(data)))
            return out
        }
        let known = shown[n.phoneID]?.contains { $0.uid == n.uid } ?? false
        let type: String
        if n.change == .modified && known {
            type = "phone.notification_modified"
        } else {
            // A modification of one not reported (it was there before the link) is no new notification.
            guard n.change == .added, !n.preExisting, !known,
                  settings.triggerApps.contains(n.appID) || settings.triggerCategories.contains(n.categoryName) else { return out }
            type = "phone.notification"
            shown[n.phoneID, default: []].append((n.uid, n.categoryName, n.appID))
            if let count = shown[n.phoneID]?.count, count > Self.maximumShown { shown[n.phoneID]?.removeFirst(count - Self.maximumShown) }
        }
        var data: [(String, JSONValue)] = [("uid", .number(Double(n.uid))), ("category", .string(n.categoryName)), ("app_id", .string(n.appID)),
                                           ("phone", .object(phone)), ("flags", .array(n.flags.names.map { .string($0) }))]
        if let at = n.postedAtMicros { data.append(("posted_at", .string(RFC3339.format(micros: at)))) }
        if settings.includeText { data += [("title", .string(n.title)), ("subtitle", .string(n.subtitle)), ("message", .string(n.message))] }
        out.append(.event(type: type, data: .object(data)))
        return out
    }

    /// The door was answered: the ringing doorbell notification to dismiss on each connected phone
    /// (the negative action).
    public mutating func answered() -> [PhoneDismissal] {
        let out = ringing.filter { connected[$0.key] != nil }.sorted { $0.key < $1.key }.map(\.value)
        ringing = [:]
        return out
    }

    /// Presses whose window ended: each phone that stayed connected and showed nothing is a
    /// `push.not_displayed`. Call on every input and on a timer (`nextDeadline`).
    public mutating func expire(at now: Int64) -> [Output] {
        var out: [Output] = []
        while let first = presses.first, now - first.at >= settings.receiptWindowMicros {
            presses.removeFirst()
            for phone in first.waiting.sorted() where connected[phone] != nil {
                var p: [(String, JSONValue)] = [("id", .string(phone))]
                if let name = connected[phone] { p.append(("name", .string(name))) }
                out.append(.event(type: "push.not_displayed", data: .object([("press_event_id", .string(first.eventID)), ("phone", .object(p))])))
            }
        }
        return out
    }

    /// When `expire` next has something to do.
    public var nextDeadline: Int64? { presses.first.map { $0.at + settings.receiptWindowMicros } }

    /// "#K3QF7" in a subtitle, as the cloud writes it (Crockford base32, five characters).
    static func reference(in text: String) -> String? {
        let chars = Array(text.uppercased())
        let alphabet = Set("0123456789ABCDEFGHJKMNPQRSTVWXYZ")
        for (i, c) in chars.enumerated() where c == "#" && i + 5 < chars.count {
            let candidate = chars[(i + 1)...(i + 5)]
            let after = i + 6
            if candidate.allSatisfy(alphabet.contains), after == chars.count || !(chars[after].isLetter || chars[after].isNumber) {
                return String(candidate)
            }
        }
        return nil
    }
}
