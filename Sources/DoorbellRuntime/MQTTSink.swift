import CMosquitto
import DoorbellCore
import Glibc

// The MQTT sink: the same durable outbox as the cloud uplink, read with its own cursor and
// acknowledged by the broker's PUBACK (QoS 1), so the house's broker and the cloud can each be
// down for hours without losing anything. libmosquitto does the protocol (3.1.1 or 5, TLS,
// keep-alive, retransmission of unacknowledged messages on reconnect); `MQTTSession` decides
// what to publish and when (events in sequence order, at most `max_in_flight` unacknowledged;
// availability, retained `online` and the last will `offline`; Home Assistant discovery at
// connect, at its birth message and on reload, with entities that left the config removed; the
// gateway's diagnostics; events held after a connect until Home Assistant listens). This loop
// makes the calls it asks for. After a crash the events not yet
// acknowledged are published again: at least once, each carrying its event id to de-duplicate.

public final class MQTTSink: @unchecked Sendable {
    let settings: MQTTSettings
    let outbox: Outbox
    let log: Logger
    let topics: MQTTTopics
    /// The gateway's health for the diagnostics entities; asked from this thread.
    let diagnostics: @Sendable () -> JSONValue
    let discoveryStatePath: String
    public let status: Locked<MQTTSinkStatus>
    private let discovery: Locked<[MQTTMessage]>
    private let discoveryDue = Locked(false)
    private let stopSignal = PollableStop()
    private let done = WakeSignal()
    private let wake = Locked(false)

    // Owned by the sink's thread (libmosquitto calls back on it, inside mosquitto_loop).
    private var mosq: OpaquePointer?
    /// Every decision (connect, backoff, what to publish next, which PUBACK completes an event) is the session's.
    private var session: MQTTSession
    private var loggedHomeAssistant = MQTTSession.HomeAssistant.notWaitedFor

    /// libmosquitto's connect blocks (DNS, then TCP: the kernel gives up on an unanswered SYN
    /// after about 127 s); everything else returns within 100 ms.
    public static let heartbeatPeriodMicros: Int64 = 150_000_000
    public let heartbeat: Heartbeat

    public init(settings: MQTTSettings, discovery: [MQTTMessage], topics: MQTTTopics, outbox: Outbox, stateDir: String, log: Logger,
                heartbeat: Heartbeat? = nil, diagnostics: @escaping @Sendable () -> JSONValue) {
        self.heartbeat = heartbeat ?? .unmonitored("mqtt", periodMicros: Self.heartbeatPeriodMicros)
        self.settings = settings
        self.outbox = outbox
        self.log = log
        self.topics = topics
        self.diagnostics = diagnostics
        self.discovery = Locked(discovery)
        discoveryStatePath = stateDir + "/mqtt-discovery.json"
        let broker = "\(settings.caFile == nil ? "mqtt" : "mqtts")://\(settings.host):\(settings.port)"
        session = MQTTSession(settings: MQTTSession.Settings(
            maxInFlight: settings.maxInFlight, backoff: FullJitterBackoff(initialMillis: settings.retryInitialMs, capMillis: settings.retryMaxMs),
            discovery: settings.discovery, discoveryPrefix: settings.discoveryPrefix, topics: topics,
            homeAssistantWaitMicros: Int64(settings.waitForHomeAssistantSeconds) * 1_000_000), broker: broker)
        status = Locked(MQTTSinkStatus(broker: broker))
    }

    public func start() throws(ThreadStartError) {
        try startLoop(heartbeat, thread: "mqtt") { [self] in
            run()
            // It ends on stop, or at once on a client it cannot configure (the status says why;
            // a restart would not mend the config).
            heartbeat.stopped()
            done.signal()
        }
    }

    /// New events in the outbox.
    public func notify() { wake.withLock { $0 = true } }

    /// The config's devices or regions changed (reload): publish the new discovery.
    public func updateDiscovery(_ messages: [MQTTMessage]) {
        discovery.withLock { $0 = messages }
        discoveryDue.withLock { $0 = true }
    }

    /// Says `offline` and disconnects cleanly within `graceMicros`; unacknowledged events stay in
    /// the outbox and go out after the restart.
    public func stop(graceMicros: Int64 = 3_000_000) {
        heartbeat.stopped()
        stopSignal.set()
        if !done.wait(timeoutMicros: graceMicros) { log.warning("mqtt.stop_timeout", [("grace_ms", String(graceMicros / 1000))]) }
    }

    // MARK: - The loop

    private var now: MQTTSession.Time { MQTTSession.Time(monoMicros: Clocks.monotonicMicros(), wallMicros: Clocks.wallMicros()) }

    private func run() {
        defer {
            session.disconnected(code: 0, reason: "", at: now)
            publishStatus()
        }
        mosquitto_lib_init()
        // clean_session = false: a persistent session (subscriptions and QoS 1 state survive).
        guard let m = mosquitto_new(settings.clientID, false, Unmanaged.passUnretained(self).toOpaque()) else {
            fail("cannot create the MQTT client: \(errnoText())")
            return
        }
        mosq = m
        defer {
            mosquitto_destroy(m)
            mosq = nil
        }
        do throws(MQTTSinkError) { try configure(m) } catch {
            fail(error.description)
            return
        }
        var rng = SystemRandomNumberGenerator()
        while !stopSignal.isSet {
            heartbeat.beat()
            if wake.withLock({ w -> Bool in defer { w = false }; return w }) { session.outboxChanged() }
            if discoveryDue.withLock({ d -> Bool in defer { d = false }; return d }) { session.discoveryChanged() }
            let stopped = perform(session.next(at: now, random: &rng), m, rng: &rng)
            publishStatus()
            if stopped { break }
        }
        session.stop()
        guard session.connection == .connected else { return }
        // A clean goodbye: the will is not sent on a normal disconnect.
        _ = publish(m, session.goodbye)
        for _ in 0..<10 { _ = mosquitto_loop(m, 50, 1) }
        if case let .acknowledge(ids) = session.next(at: now, random: &rng) { acknowledge(ids) }
        mosquitto_disconnect(m)
    }

    /// Does what the session asked; true when a pause was cut short by `stop`.
    private func perform(_ action: MQTTSession.Action, _ m: OpaquePointer, rng: inout SystemRandomNumberGenerator) -> Bool {
        switch action {
        case let .connect(reconnect):
            let rc = reconnect ? mosquitto_reconnect(m) : connect(m)
            if rc == MOSQ_ERR_SUCCESS.rawValue {
                session.connectSent(at: now) // CONNACK arrives inside mosquitto_loop (onConnect)
            } else {
                session.connectFailed(Self.describe(rc, host: settings.host, port: settings.port), at: now, random: &rng)
            }
        case let .sleep(until):
            return heartbeat.pause(stopSignal, micros: until - Clocks.monotonicMicros())
        case .disconnect:
            mosquitto_disconnect(m)
        case .service:
            let rc = mosquitto_loop(m, 100, 1)
            if rc == MOSQ_ERR_SUCCESS.rawValue {
                session.serviced()
            } else {
                let error = Self.describe(rc, host: settings.host, port: settings.port)
                if session.serviceFailed(error, at: now, random: &rng) {
                    log.warning("mqtt.connection_lost", [("broker", session.status.broker), ("error", error)])
                }
            }
        case let .acknowledge(sequences):
            acknowledge(sequences)
        case let .publish(message):
            _ = publish(m, message)
        case let .subscribe(topic):
            mosquitto_subscribe(m, nil, topic, 1)
        case .publishDiscovery:
            publishDiscovery(m)
        case .publishDiagnostics:
            _ = publish(m, MQTTMessage(topic: topics.diagnostics, json: diagnostics(), retain: true))
        case let .readOutbox(after, limit):
            do {
                session.rowsRead(try outbox.pendingForMQTT(after: after, limit: limit).map { MQTTOutboxRow(id: $0.id, sequence: $0.sequence, body: $0.body) })
            } catch {
                fail("cannot read the outbox: \(error.description)")
            }
        case let .publishEvent(event):
            var mids: [Int32] = []
            for message in event.messages {
                guard let mid = publish(m, message) else { break }
                mids.append(mid)
            }
            session.eventPublished(event, mids: mids)
        }
        return false
    }

    private func acknowledge(_ sequences: [Int64]) {
        do {
            try outbox.acknowledgeMQTT(sequences)
            session.acknowledgementsStored(sequences.count, at: now)
        } catch {
            // They stay in the outbox and are published again after a restart: at least once.
            fail("cannot record the broker's acknowledgement: \(error.description)")
        }
    }

    /// The session's status for readers on other threads, and its failures to the journal.
    private func publishStatus() {
        for message in session.takeNews() { log.error("mqtt.failed", [("broker", session.status.broker), ("error", message)]) }
        if session.homeAssistant != loggedHomeAssistant {
            loggedHomeAssistant = session.homeAssistant
            if let text = session.status.homeAssistant { log.info("mqtt.home_assistant", [("state", text)]) }
        }
        let snapshot = session.status
        status.withLock { $0 = snapshot }
    }

    private func configure(_ m: OpaquePointer) throws(MQTTSinkError) {
        mosquitto_int_option(m, MOSQ_OPT_PROTOCOL_VERSION, settings.protocolVersion == .v5 ? MQTT_PROTOCOL_V5 : MQTT_PROTOCOL_V311)
        mosquitto_max_inflight_messages_set(m, UInt32(settings.maxInFlight))
        if let user = settings.username {
            var password: String?
            if let file = settings.passwordFile {
                guard let bytes = readFile(file, maxBytes: 4096) else {
                    throw MQTTSinkError(description: "cannot read mqtt.password_file \(file): \(errnoText()); it must be readable by the doorbell-agent user")
                }
                password = String(decoding: bytes, as: UTF8.self).split(whereSeparator: \.isNewline).first.map(String.init) ?? ""
            }
            guard mosquitto_username_pw_set(m, user, password) == MOSQ_ERR_SUCCESS.rawValue else {
                throw MQTTSinkError(description: "mqtt.username or the password is not valid UTF-8")
            }
        }
        if let ca = settings.caFile {
            let rc = mosquitto_tls_set(m, ca, nil, settings.certFile, settings.keyFile, nil)
            guard rc == MOSQ_ERR_SUCCESS.rawValue else {
                throw MQTTSinkError(description: "TLS setup failed (\(String(cString: mosquitto_strerror(rc)))): check mqtt.ca_file, cert_file and key_file are PEM files")
            }
        }
        let offline = Array("offline".utf8)
        mosquitto_will_set(m, topics.status, Int32(offline.count), offline, 1, true)
        mosquitto_connect_callback_set(m) { _, obj, rc in
            guard let obj else { return }
            Unmanaged<MQTTSink>.fromOpaque(obj).takeUnretainedValue().onConnect(Int32(rc))
        }
        mosquitto_disconnect_callback_set(m) { _, obj, rc in
            guard let obj else { return }
            Unmanaged<MQTTSink>.fromOpaque(obj).takeUnretainedValue().onDisconnect(Int32(rc))
        }
        mosquitto_publish_callback_set(m) { _, obj, mid in
            guard let obj else { return }
            Unmanaged<MQTTSink>.fromOpaque(obj).takeUnretainedValue().onPublished(mid)
        }
        mosquitto_message_callback_set(m) { _, obj, message in
            guard let obj, let message else { return }
            Unmanaged<MQTTSink>.fromOpaque(obj).takeUnretainedValue().onMessage(message.pointee)
        }
    }

    private func connect(_ m: OpaquePointer) -> Int32 {
        guard settings.protocolVersion == .v5 else { return mosquitto_connect(m, settings.host, Int32(settings.port), Int32(settings.keepaliveSeconds)) }
        // MQTT 5: the session outlives the connection only with a session expiry interval.
        var props: OpaquePointer?
        mosquitto_property_add_int32(&props, Int32(MQTT_PROP_SESSION_EXPIRY_INTERVAL.rawValue), 86_400)
        defer { mosquitto_property_free_all(&props) }
        return mosquitto_connect_bind_v5(m, settings.host, Int32(settings.port), Int32(settings.keepaliveSeconds), nil, props)
    }

    // MARK: - Callbacks (on this thread, inside mosquitto_loop)

    private func onConnect(_ rc: Int32) {
        session.connackReceived(code: Int(rc), reason: String(cString: mosquitto_connack_string(rc)), at: now)
        if rc == 0 { log.notice("mqtt.connected", [("broker", session.status.broker), ("client_id", settings.clientID)]) }
    }

    private func onDisconnect(_ rc: Int32) {
        session.disconnected(code: Int(rc), reason: String(cString: mosquitto_strerror(rc)), at: now)
    }

    private func onPublished(_ mid: Int32) { session.acknowledgedByBroker(mid: mid) }

    private func onMessage(_ message: mosquitto_message) {
        let topic = message.topic.map { String(cString: $0) } ?? ""
        let payload = UnsafeRawBufferPointer(start: message.payload, count: message.payload == nil ? 0 : Int(max(message.payloadlen, 0)))
        if session.messageArrived(topic: topic, payload: payload, retained: message.retain, at: now) == .homeAssistantOnline {
            log.info("mqtt.home_assistant_online", [("hint", "publishing discovery again")])
        }
    }

    // MARK: - Publishing

    /// QoS 1; returns the message id, nil when libmosquitto refused it.
    private func publish(_ m: OpaquePointer, _ message: MQTTMessage) -> Int32? {
        var mid: Int32 = 0
        let rc = message.payload.withUnsafeBytes { buffer in
            mosquitto_publish(m, &mid, message.topic, Int32(buffer.count), buffer.baseAddress, 1, message.retain)
        }
        guard rc == MOSQ_ERR_SUCCESS.rawValue else {
            if rc != MOSQ_ERR_NO_CONN.rawValue { fail("cannot publish to \(message.topic): \(String(cString: mosquitto_strerror(rc)))") }
            return nil
        }
        return mid
    }

    private func publishDiscovery(_ m: OpaquePointer) {
        let current = discovery.snapshot
        let messages = MQTTSession.discoveryMessages(current: current, previouslyPublished: loadPublishedDiscovery())
        let mids = messages.compactMap { publish(m, $0) }
        savePublishedDiscovery(Set(current.map(\.topic)).sorted())
        session.discoveryPublished(mids: mids, at: now)
        log.info("mqtt.discovery_published", [("messages", String(mids.count)), ("prefix", settings.discoveryPrefix)])
    }

    private func loadPublishedDiscovery() -> [String] {
        guard let bytes = readFile(discoveryStatePath, maxBytes: 4 << 20), let json = try? JSONReader.parse(bytes: bytes),
              case let .array(items) = json else { return [] }
        return items.compactMap(\.stringValue)
    }

    private func savePublishedDiscovery(_ topics: [String]) {
        let tmp = discoveryStatePath + ".tmp"
        do throws(SpawnError) {
            try writeSmallFile(tmp, JSONWriter.string(.array(topics.map(JSONValue.string))) + "\n")
            if rename(tmp, discoveryStatePath) != 0 { throw SpawnError(program: discoveryStatePath, code: errno) }
        } catch {
            log.warning("mqtt.discovery_state_not_saved", [("file", discoveryStatePath), ("error", error.description)])
        }
    }

    private func fail(_ message: String) { session.fail(message, at: now) }

    static func describe(_ rc: Int32, host: String, port: Int) -> String {
        let text = String(cString: mosquitto_strerror(rc))
        if rc == MOSQ_ERR_ERRNO.rawValue {
            return "cannot reach the broker at \(host):\(port): \(errnoText()) (is it running, and is the port right?)"
        }
        if rc == MOSQ_ERR_TLS.rawValue {
            return "TLS with the broker at \(host):\(port) failed: check mqtt.ca_file and that the broker's certificate is for \(host)"
        }
        if rc == MOSQ_ERR_EAI.rawValue { return "cannot resolve the broker's name \(host): check mqtt.host" }
        return "broker \(host):\(port): \(text)"
    }
}

public struct MQTTSinkError: Error, Sendable, CustomStringConvertible {
    public var description: String
}
