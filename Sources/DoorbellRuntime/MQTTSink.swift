import CMosquitto
import DoorbellCore
import Glibc

// The MQTT sink: the same durable outbox as the cloud uplink, read with its own cursor and
// acknowledged by the broker's PUBACK (QoS 1), so the house's broker and the cloud can each be
// down for hours without losing anything. libmosquitto does the protocol (3.1.1 or 5, TLS,
// keep-alive, retransmission of unacknowledged messages on reconnect); this loop decides what to
// publish: events in sequence order, at most `max_in_flight` unacknowledged; availability
// (retained `online`, the last will `offline`); Home Assistant discovery at connect, when Home
// Assistant announces itself (its birth message), and on reload — with entities that left the
// config removed; and the gateway's diagnostics. After a crash the events not yet acknowledged
// are published again: at least once, each carrying its event id to de-duplicate.

public struct MQTTSinkStatus: Sendable, Equatable {
    public var broker: String
    public var connected = false
    /// Events the broker acknowledged.
    public var acknowledged = 0
    public var connects = 0
    public var lastAckWallMicros: Int64?
    public var lastError: String?
    public var lastErrorWallMicros: Int64?
    public var discoveryMessages = 0
    public var discoveryPublishedWallMicros: Int64?
    /// Messages on our subscriptions that were not Home Assistant's status, by reason.
    public var ignored: [String: Int] = [:]
    public init(broker: String) { self.broker = broker }
}

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
    private let discoveryDue = Locked(true)
    private let stopSignal = PollableStop()
    private let done = WakeSignal()
    private let wake = Locked(false)

    // Owned by the sink's thread (libmosquitto calls back on it, inside mosquitto_loop).
    private var mosq: OpaquePointer?
    private var connected = false
    /// Monotonic time the last CONNECT went out while no CONNACK has come; nil otherwise.
    private var connectingSince: Int64?
    private var lastRead: Int64 = 0
    /// The broker refused the last CONNECT: its reason stays the error, not the disconnect after it.
    private var refused = false
    static let connackTimeoutMicros: Int64 = 10_000_000
    private var cursor: Int64 = 0
    /// Message id → the event it belongs to; an event is acknowledged when all its messages are.
    private var inFlight: [Int32: String] = [:]
    private var outstanding: [String: Int] = [:]
    private var acked: [String] = []
    private var lastDiagnostics: Int64 = 0
    static let diagnosticsEveryMicros: Int64 = 30_000_000

    public init(settings: MQTTSettings, discovery: [MQTTMessage], topics: MQTTTopics, outbox: Outbox, stateDir: String, log: Logger,
                diagnostics: @escaping @Sendable () -> JSONValue) {
        self.settings = settings
        self.outbox = outbox
        self.log = log
        self.topics = topics
        self.diagnostics = diagnostics
        self.discovery = Locked(discovery)
        discoveryStatePath = stateDir + "/mqtt-discovery.json"
        status = Locked(MQTTSinkStatus(broker: "\(settings.caFile == nil ? "mqtt" : "mqtts")://\(settings.host):\(settings.port)"))
    }

    public func start() {
        startThread(name: "mqtt") { [self] in
            run()
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
        stopSignal.set()
        if !done.wait(timeoutMicros: graceMicros) { log.warning("mqtt.stop_timeout", [("grace_ms", String(graceMicros / 1000))]) }
    }

    // MARK: - The loop

    private func run() {
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
        let backoff = FullJitterBackoff(initialMillis: settings.retryInitialMs, capMillis: settings.retryMaxMs)
        var rng = SystemRandomNumberGenerator()
        var attempt = 0
        var everConnected = false
        func pause() -> Bool {
            defer { attempt += 1 }
            return stopSignal.pause(micros: Int64(max(backoff.delay(attempt: attempt, random: &rng), 100)) * 1000)
        }
        while !stopSignal.isSet {
            if !connected && connectingSince == nil {
                let rc = everConnected ? mosquitto_reconnect(m) : connect(m)
                if rc != MOSQ_ERR_SUCCESS.rawValue {
                    fail(Self.describe(rc, host: settings.host, port: settings.port))
                    if pause() { break }
                    continue
                }
                everConnected = true
                connectingSince = Clocks.monotonicMicros() // CONNACK arrives inside mosquitto_loop (onConnect)
            }
            let rc = mosquitto_loop(m, 100, 1)
            if rc != MOSQ_ERR_SUCCESS.rawValue {
                if connected { log.warning("mqtt.connection_lost", [("broker", status.snapshot.broker), ("error", Self.describe(rc, host: settings.host, port: settings.port))]) }
                connected = false
                connectingSince = nil
                status.withLock { $0.connected = false }
                if pause() { break }
                continue
            }
            if let since = connectingSince, Clocks.monotonicMicros() - since > Self.connackTimeoutMicros {
                fail("the broker at \(settings.host):\(settings.port) accepted the connection but never answered CONNECT (is it an MQTT broker? TLS on a plain port?)")
                mosquitto_disconnect(m)
                connectingSince = nil
                if pause() { break }
                continue
            }
            settleAcknowledged()
            guard connected else { continue }
            attempt = 0
            if discoveryDue.snapshot { publishDiscovery(m) }
            let now = Clocks.monotonicMicros()
            if now - lastDiagnostics >= Self.diagnosticsEveryMicros {
                lastDiagnostics = now
                _ = publish(m, MQTTMessage(topic: topics.diagnostics, json: diagnostics(), retain: true))
            }
            publishPending(m)
        }
        if connected {
            // A clean goodbye: the will is not sent on a normal disconnect.
            _ = publish(m, MQTTMessage(topic: topics.status, text: "offline", retain: true))
            for _ in 0..<10 { _ = mosquitto_loop(m, 50, 1) }
            settleAcknowledged()
            mosquitto_disconnect(m)
        }
        status.withLock { $0.connected = false }
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
        connectingSince = nil
        refused = rc != 0
        guard rc == 0 else {
            connected = false
            let reason = String(cString: mosquitto_connack_string(rc))
            let hint = rc == 4 || rc == 5 || rc == 134 || rc == 135 ? ": check mqtt.username and password_file against the broker's users" : ""
            fail("the broker refused the connection: \(reason)\(hint)")
            return
        }
        connected = true
        status.withLock { $0.connected = true; $0.connects += 1; $0.lastError = nil }
        log.notice("mqtt.connected", [("broker", status.snapshot.broker), ("client_id", settings.clientID)])
        guard let m = mosq else { return }
        _ = publish(m, MQTTMessage(topic: topics.status, text: "online", retain: true))
        if settings.discovery {
            mosquitto_subscribe(m, nil, settings.discoveryPrefix + "/status", 1)
            discoveryDue.withLock { $0 = true }
        }
        lastDiagnostics = 0
        // Whatever the broker had not acknowledged, libmosquitto sends again; new events follow.
    }

    private func onDisconnect(_ rc: Int32) {
        connected = false
        status.withLock { $0.connected = false }
        if rc != 0 && !stopSignal.isSet && !refused { fail("disconnected from the broker: \(String(cString: mosquitto_strerror(rc)))") }
    }

    private func onPublished(_ mid: Int32) {
        guard let id = inFlight.removeValue(forKey: mid) else { return }
        let left = (outstanding[id] ?? 1) - 1
        if left <= 0 { outstanding[id] = nil; acked.append(id) } else { outstanding[id] = left }
    }

    private func onMessage(_ message: mosquitto_message) {
        let topic = message.topic.map { String(cString: $0) } ?? ""
        guard topic == settings.discoveryPrefix + "/status" else { ignore("unknown_topic"); return }
        guard message.payloadlen >= 0, message.payloadlen <= 64, let p = message.payload else { ignore("oversized_payload"); return }
        let payload = String(decoding: UnsafeRawBufferPointer(start: p, count: Int(message.payloadlen)), as: UTF8.self)
        switch payload {
        case "online":
            log.info("mqtt.home_assistant_online", [("hint", "publishing discovery again")])
            discoveryDue.withLock { $0 = true }
        case "offline": break
        default: ignore("unexpected_payload")
        }
    }

    private func ignore(_ reason: String) {
        status.withLock { $0.ignored[reason, default: 0] += 1 }
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

    private func publishPending(_ m: OpaquePointer) {
        let room = settings.maxInFlight - outstanding.count
        guard room > 0 else { return }
        let hadWake = wake.withLock { w -> Bool in defer { w = false }; return w }
        // Without a wake the outbox is still read once a second (events stored before the start,
        // a window that filled up).
        let now = Clocks.monotonicMicros()
        guard hadWake || now - lastRead >= 1_000_000 else { return }
        lastRead = now
        let entries: [OutboxEntry]
        do { entries = try outbox.pendingForMQTT(after: cursor, limit: room) } catch {
            fail("cannot read the outbox: \(error.description)")
            return
        }
        for entry in entries {
            let messages = MQTTPublications.forEvent(body: entry.body, topics: topics)
                ?? [MQTTMessage(topic: topics.events, payload: entry.body, retain: false)]
            var sent = 0
            for message in messages {
                guard let mid = publish(m, message) else { break }
                inFlight[mid] = entry.id
                sent += 1
            }
            guard sent == messages.count else {
                // Not all of it went out (the connection dropped): the rest comes after the reconnect.
                for (mid, id) in inFlight where id == entry.id { inFlight[mid] = nil }
                return
            }
            outstanding[entry.id] = sent
            cursor = entry.sequence
        }
        if entries.count == room { wake.withLock { $0 = true } }
    }

    private func settleAcknowledged() {
        guard !acked.isEmpty else { return }
        let ids = acked
        acked.removeAll()
        do {
            try outbox.acknowledgeMQTT(ids)
            status.withLock { $0.acknowledged += ids.count; $0.lastAckWallMicros = Clocks.wallMicros() }
        } catch {
            // They stay in the outbox and are published again after a restart: at least once.
            fail("cannot record the broker's acknowledgement: \(error.description)")
        }
    }

    private func publishDiscovery(_ m: OpaquePointer) {
        discoveryDue.withLock { $0 = false }
        guard settings.discovery else { return }
        let messages = discovery.snapshot
        let topicsNow = Set(messages.map(\.topic))
        var published = 0
        // Entities that left the config: an empty retained config removes them from Home Assistant.
        for old in loadPublishedDiscovery() where !topicsNow.contains(old) {
            if publish(m, MQTTMessage(topic: old, payload: [], retain: true)) != nil { published += 1 }
        }
        for message in messages where publish(m, message) != nil { published += 1 }
        savePublishedDiscovery(topicsNow.sorted())
        status.withLock { $0.discoveryMessages = published; $0.discoveryPublishedWallMicros = Clocks.wallMicros() }
        log.info("mqtt.discovery_published", [("messages", String(published)), ("prefix", settings.discoveryPrefix)])
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

    private func fail(_ message: String) {
        let changed = status.withLock { s -> Bool in
            defer { s.lastError = message; s.lastErrorWallMicros = Clocks.wallMicros() }
            return s.lastError != message
        }
        if changed { log.error("mqtt.failed", [("broker", status.snapshot.broker), ("error", message)]) }
    }

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
