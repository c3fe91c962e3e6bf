// The MQTT sink's policy as a value: when to connect and how long to back off, what to publish
// next (availability, Home Assistant discovery, diagnostics, then the outbox in sequence order
// with at most `maxInFlight` events unacknowledged), which PUBACKs complete an event, and what a
// message on our subscriptions means.
//
// Events wait for Home Assistant to listen. A broker takes an event (PUBACK) whether or not
// Home Assistant is subscribed, and the outbox then lets it go: a press published while Home
// Assistant is away, or before it re-subscribed after a broker restart, is lost to it. So, with
// discovery on, after every connect (and after Home Assistant says `offline`) events wait for
// its birth message (`<discovery_prefix>/status` = `online`, sent once it has subscribed again),
// then for the broker to acknowledge the discovery published in answer and a moment for Home
// Assistant to subscribe to new entities. A house without Home Assistant (Node-RED), or one that
// was already running when the agent connected (it announces itself only when it connects), is
// not waited for beyond `homeAssistantWaitMicros`: events then go out all the same.
//
// The shell (DoorbellRuntime's MQTTSink) makes libmosquitto's calls, reads and writes the outbox
// and the discovery file, tells the session what happened with the time, and does what `next`
// asks; so tests drive every decision without a broker or a clock.

public struct MQTTSession: Sendable {
    public struct Settings: Sendable, Equatable {
        public var maxInFlight: Int
        public var backoff: FullJitterBackoff
        /// Home Assistant discovery on: subscribe to its status and publish the entities.
        public var discovery: Bool
        public var discoveryPrefix: String
        public var topics: MQTTTopics
        /// With discovery: how long events wait for Home Assistant's birth message after a connect
        /// or its `offline` before going out anyway; 0 publishes them at once (no waiting).
        public var homeAssistantWaitMicros: Int64
        public init(maxInFlight: Int, backoff: FullJitterBackoff, discovery: Bool, discoveryPrefix: String, topics: MQTTTopics,
                    homeAssistantWaitMicros: Int64 = 0) {
            self.maxInFlight = maxInFlight
            self.backoff = backoff
            self.discovery = discovery
            self.discoveryPrefix = discoveryPrefix
            self.topics = topics
            self.homeAssistantWaitMicros = homeAssistantWaitMicros
        }
    }

    /// The time of an input: monotonic for the decisions, wall for what status shows.
    public struct Time: Sendable, Equatable {
        public var monoMicros: Int64
        public var wallMicros: Int64
        public init(monoMicros: Int64, wallMicros: Int64) {
            self.monoMicros = monoMicros
            self.wallMicros = wallMicros
        }
    }

    public enum Connection: Sendable, Equatable {
        /// Nothing open: connect next.
        case idle
        /// CONNECT went out at this monotonic time; no CONNACK yet.
        case connecting(sinceMonoMicros: Int64)
        case connected
        /// No connection attempt before this monotonic time.
        case backingOff(untilMonoMicros: Int64)
    }

    public enum Action: Sendable, Equatable {
        /// Open the connection: CONNECT the first time, reconnect (same session) after that.
        case connect(reconnect: Bool)
        /// Backing off: nothing to do before this monotonic time.
        case sleep(untilMonoMicros: Int64)
        /// Drop a connection whose CONNACK never came.
        case disconnect
        /// Run the network loop for a slice; its callbacks tell the session what arrived.
        case service
        /// Record these events (their sequences, the outbox's keys) as acknowledged by the broker
        /// (the outbox's MQTT mark).
        case acknowledge([Int64])
        /// Not tied to an event (availability): published, never tracked.
        case publish(MQTTMessage)
        case subscribe(String)
        /// Publish Home Assistant discovery (`discoveryMessages` builds it), then `discoveryPublished`.
        case publishDiscovery
        /// Publish the gateway's health, retained, on `topics.diagnostics`.
        case publishDiagnostics
        /// Read the outbox's events after this sequence, then `rowsRead`.
        case readOutbox(after: Int64, limit: Int)
        /// Publish these messages in order, then `eventPublished` with the message ids.
        case publishEvent(MQTTEventPublication)
    }

    /// What a message on our subscriptions was.
    public enum Heard: Sendable, Equatable {
        /// Home Assistant's birth message: discovery goes out again.
        case homeAssistantOnline
        case homeAssistantOffline
        case ignored(reason: String)
    }

    /// A broker that takes the TCP connection but never answers CONNECT (not MQTT, TLS on a
    /// plain port) is given up on after this.
    public static let connackTimeoutMicros: Int64 = 10_000_000
    public static let diagnosticsEveryMicros: Int64 = 30_000_000
    /// Without a wake the outbox is still read this often (events stored before the start, a
    /// window that filled up).
    public static let outboxPollMicros: Int64 = 1_000_000
    /// No reconnect sooner than this, whatever the jitter drew.
    public static let backoffFloorMillis = 100
    /// Home Assistant's status is `online` or `offline`; anything longer is not it.
    public static let maxStatusPayload = 64
    /// After the broker acknowledged the discovery, events wait this long more: Home Assistant
    /// subscribes to a new entity's topic a moment after it received its config.
    public static let discoverySettleMicros: Int64 = 1_000_000

    public let settings: Settings
    public private(set) var connection: Connection = .idle
    public private(set) var status: MQTTSinkStatus
    /// The last event handed to the broker in full; the next read starts after it.
    public private(set) var cursor: Int64 = 0
    /// Message id → its event's sequence. Kept across reconnects: libmosquitto sends
    /// unacknowledged messages again with the same ids.
    public private(set) var inFlight: [Int32: Int64] = [:]
    /// Event (by sequence) → its messages not yet acknowledged.
    public private(set) var outstanding: [Int64: Int] = [:]
    /// Failures to log, oldest first; `takeNews` empties it.
    public private(set) var news: [String] = []
    private var acked: [Int64] = []
    private var everConnected = false
    /// The broker refused the last CONNECT: its reason stays the error, not the disconnect after it.
    private var refused = false
    private var stopping = false
    /// Failed connections since the last healthy one: the backoff's exponent.
    public private(set) var attempt = 0
    private var announceDue = false
    private var subscribeDue = false
    private var discoveryDue = true
    private var lastDiagnostics: Int64?
    private var readDue = false
    private var lastRead: Int64?
    private var readLimit: Int?
    private var queue: [MQTTEventPublication] = []
    public private(set) var homeAssistant = HomeAssistant.notWaitedFor
    /// The discovery's messages the broker has not acknowledged yet (message ids).
    private var discoveryUnacknowledged: Set<Int32> = []
    /// The last discovery went out; events wait for its acknowledgement, then until `settledAt`.
    private var discoveryAwaited = false
    private var discoverySettledAt: Int64?

    public init(settings: Settings, broker: String) {
        self.settings = settings
        status = MQTTSinkStatus(broker: broker)
    }

    /// Availability while connected; the last will says `offline`, and so does a clean goodbye.
    public var announcement: MQTTMessage { MQTTMessage(topic: settings.topics.status, text: "online", retain: true) }
    public var goodbye: MQTTMessage { MQTTMessage(topic: settings.topics.status, text: "offline", retain: true) }
    public var homeAssistantStatusTopic: String { settings.discoveryPrefix + "/status" }

    // MARK: - What to do

    public mutating func next(at now: Time, random: inout some RandomNumberGenerator) -> Action {
        if !acked.isEmpty {
            defer { acked.removeAll() }
            return .acknowledge(acked)
        }
        switch connection {
        case .idle:
            return .connect(reconnect: everConnected)
        case let .backingOff(until):
            guard now.monoMicros >= until else { return .sleep(untilMonoMicros: until) }
            connection = .idle
            return .connect(reconnect: everConnected)
        case let .connecting(since):
            guard now.monoMicros - since > Self.connackTimeoutMicros else { return .service }
            fail("the broker accepted the connection but never answered CONNECT (is it an MQTT broker? TLS on a plain port?)", at: now)
            leaveConnected()
            backOff(at: now, random: &random)
            return .disconnect
        case .connected:
            return nextWhileConnected(at: now)
        }
    }

    private mutating func nextWhileConnected(at now: Time) -> Action {
        if announceDue {
            announceDue = false
            return .publish(announcement)
        }
        if subscribeDue {
            subscribeDue = false
            return .subscribe(homeAssistantStatusTopic)
        }
        if discoveryDue {
            discoveryDue = false
            if settings.discovery { return .publishDiscovery }
        }
        if lastDiagnostics.map({ now.monoMicros - $0 >= Self.diagnosticsEveryMicros }) ?? true {
            lastDiagnostics = now.monoMicros
            return .publishDiagnostics
        }
        guard homeAssistantListens(at: now) else { return .service }
        if !queue.isEmpty { return .publishEvent(queue.removeFirst()) }
        let room = settings.maxInFlight - outstanding.count
        if room > 0, readDue || lastRead.map({ now.monoMicros - $0 >= Self.outboxPollMicros }) ?? true {
            readDue = false
            lastRead = now.monoMicros
            readLimit = room
            return .readOutbox(after: cursor, limit: room)
        }
        return .service
    }

    /// Whether events may go out now: Home Assistant announced itself (or the wait ran out) and,
    /// after its birth, has had the discovery (acknowledged by the broker, then a moment).
    private mutating func homeAssistantListens(at now: Time) -> Bool {
        switch homeAssistant {
        case .notWaitedFor: return true
        case let .awaitingBirth(since):
            guard now.monoMicros - since >= settings.homeAssistantWaitMicros else { return false }
            setHomeAssistant(.notHeard)
        case .online, .notHeard: break
        }
        guard homeAssistant == .online else { return true }
        if discoveryAwaited {
            guard discoveryUnacknowledged.isEmpty, !discoveryDue else { return false }
            discoveryAwaited = false
            discoverySettledAt = now.monoMicros + Self.discoverySettleMicros
        }
        return discoverySettledAt.map { now.monoMicros >= $0 } ?? !discoveryDue
    }

    private mutating func setHomeAssistant(_ state: HomeAssistant) {
        homeAssistant = state
        status.homeAssistant = state.text
    }

    /// The failures since the last call, to log (each once: the same failure again is not news).
    public mutating func takeNews() -> [String] {
        defer { news.removeAll() }
        return news
    }

    // MARK: - Inputs from the shell

    /// New events in the outbox.
    public mutating func outboxChanged() { readDue = true }

    /// The config's devices or regions changed (reload): discovery goes out again.
    public mutating func discoveryChanged() { discoveryDue = true }

    /// The sink is stopping: a disconnect now is not a failure.
    public mutating func stop() { stopping = true }

    /// Something failed; it becomes the error in status and, when it differs from the last, news.
    public mutating func fail(_ message: String, at now: Time) {
        if status.lastError != message { news.append(message) }
        status.lastError = message
        status.lastErrorWallMicros = now.wallMicros
    }

    public mutating func connectSent(at now: Time) {
        everConnected = true
        connection = .connecting(sinceMonoMicros: now.monoMicros)
    }

    public mutating func connectFailed(_ message: String, at now: Time, random: inout some RandomNumberGenerator) {
        fail(message, at: now)
        backOff(at: now, random: &random)
    }

    /// The broker's CONNACK: 0 accepts, anything else refuses (`reason` is libmosquitto's text).
    public mutating func connackReceived(code: Int, reason: String, at now: Time) {
        refused = code != 0
        guard code == 0 else {
            leaveConnected()
            connection = .idle
            let hint = [4, 5, 134, 135].contains(code) ? ": check mqtt.username and password_file against the broker's users" : ""
            fail("the broker refused the connection: \(reason)\(hint)", at: now)
            return
        }
        connection = .connected
        status.connected = true
        status.connects += 1
        status.lastError = nil
        announceDue = true
        if settings.discovery {
            subscribeDue = true
            discoveryDue = true
        }
        discoveryUnacknowledged = []
        discoveryAwaited = false
        discoverySettledAt = nil
        if settings.discovery && settings.homeAssistantWaitMicros > 0 {
            setHomeAssistant(.awaitingBirth(sinceMonoMicros: now.monoMicros)) // whatever was heard before
        }
        lastDiagnostics = nil
        // Whatever the broker had not acknowledged, libmosquitto sends again; new events follow.
    }

    /// The connection closed (`code` 0: we asked for it).
    public mutating func disconnected(code: Int, reason: String, at now: Time) {
        leaveConnected()
        if case .backingOff = connection {} else { connection = .idle }
        if code != 0 && !stopping && !refused { fail("disconnected from the broker: \(reason)", at: now) }
    }

    /// The network loop ran without error: a connection that survives a round resets the backoff.
    public mutating func serviced() {
        if connection == .connected { attempt = 0 }
    }

    /// The network loop failed (the connection is gone); returns whether it was connected, which
    /// is worth a warning of its own.
    /// `error`, the transport's words, becomes the last error when the connection failed before the
    /// broker answered the CONNECT (a TLS handshake refused by a wrong ca_file happens here, after
    /// connect returned): otherwise status would say nothing about why it never connected.
    public mutating func serviceFailed(_ error: String? = nil, at now: Time, random: inout some RandomNumberGenerator) -> Bool {
        let wasConnected = connection == .connected
        if case .connecting = connection, let error { fail(error, at: now) }
        leaveConnected()
        backOff(at: now, random: &random)
        return wasConnected
    }

    /// The broker's PUBACK for message `mid`.
    public mutating func acknowledgedByBroker(mid: Int32) {
        if discoveryUnacknowledged.remove(mid) != nil { return }
        guard let sequence = inFlight.removeValue(forKey: mid) else { return }
        let left = (outstanding[sequence] ?? 1) - 1
        if left <= 0 {
            outstanding[sequence] = nil
            acked.append(sequence)
        } else {
            outstanding[sequence] = left
        }
    }

    /// The outbox recorded `count` events as acknowledged.
    public mutating func acknowledgementsStored(_ count: Int, at now: Time) {
        status.acknowledged += count
        status.lastAckWallMicros = now.wallMicros
    }

    /// The rows `readOutbox` asked for, in sequence order.
    public mutating func rowsRead(_ rows: [MQTTOutboxRow]) {
        if let limit = readLimit, rows.count >= limit { readDue = true }
        readLimit = nil
        guard connection == .connected else { return }
        queue = rows.map { row in
            let messages = MQTTPublications.forEvent(body: row.body, topics: settings.topics)
                ?? [MQTTMessage(topic: settings.topics.events, payload: row.body, retain: false)]
            return MQTTEventPublication(id: row.id, sequence: row.sequence, messages: messages)
        }
    }

    /// The message ids libmosquitto gave the event's messages, in order; fewer than its messages
    /// when one was refused (the connection dropped): the rest comes after the reconnect.
    public mutating func eventPublished(_ event: MQTTEventPublication, mids: [Int32]) {
        guard mids.count == event.messages.count else {
            queue.removeAll()
            return
        }
        for mid in mids { inFlight[mid] = event.sequence }
        outstanding[event.sequence] = mids.count
        cursor = event.sequence
    }

    /// The discovery went out: `mids` are the message ids of the messages libmosquitto took.
    public mutating func discoveryPublished(mids: [Int32], at now: Time) {
        status.discoveryMessages = mids.count
        status.discoveryPublishedWallMicros = now.wallMicros
        discoveryUnacknowledged.formUnion(mids)
        discoveryAwaited = true
        discoverySettledAt = nil
    }

    /// A message on one of our subscriptions.
    /// `retained`: the broker kept it from before (a retained birth, if Home Assistant is set to
    /// retain it); it says Home Assistant was up once, not that it subscribed since this connect.
    public mutating func messageArrived(topic: String, payload: some Collection<UInt8>, retained: Bool = false, at now: Time) -> Heard {
        let heard = Self.classify(topic: topic, payload: payload, statusTopic: homeAssistantStatusTopic)
        switch heard {
        case .homeAssistantOnline:
            discoveryDue = true
            if homeAssistant != .notWaitedFor && !retained { setHomeAssistant(.online) }
        case .homeAssistantOffline:
            // It stopped (or the broker lost it): what is published now would be lost to it.
            if homeAssistant != .notWaitedFor { setHomeAssistant(.awaitingBirth(sinceMonoMicros: now.monoMicros)) }
        case let .ignored(reason): status.ignored[reason, default: 0] += 1
        }
        return heard
    }

    // MARK: - Private

    /// What only makes sense on an open connection is dropped; the events in flight are kept.
    private mutating func leaveConnected() {
        status.connected = false
        queue.removeAll()
        announceDue = false
        subscribeDue = false
    }

    private mutating func backOff(at now: Time, random: inout some RandomNumberGenerator) {
        let millis = max(settings.backoff.delay(attempt: attempt, random: &random), Self.backoffFloorMillis)
        attempt += 1
        connection = .backingOff(untilMonoMicros: now.monoMicros + Int64(millis) * 1000)
    }
}
