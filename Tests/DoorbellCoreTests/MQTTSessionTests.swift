import DoorbellCore
import PropertyBased
import Testing

/// The MQTT sink's policy without a broker or a clock: the test plays libmosquitto and moves time.
@Suite struct MQTTSessionTests {
    static let topics = MQTTTopics(prefix: "doorbell", gatewayID: "gw")
    static func settings(maxInFlight: Int = 3, discovery: Bool = true, homeAssistantWaitMicros: Int64 = 0) -> MQTTSession.Settings {
        MQTTSession.Settings(maxInFlight: maxInFlight, backoff: FullJitterBackoff(initialMillis: 1_000, capMillis: 8_000),
                             discovery: discovery, discoveryPrefix: "homeassistant", topics: topics, homeAssistantWaitMicros: homeAssistantWaitMicros)
    }

    static func at(_ mono: Int64) -> MQTTSession.Time { MQTTSession.Time(monoMicros: mono, wallMicros: 1_800_000_000_000_000 + mono) }

    /// A press (two messages: the event and Home Assistant's event entity) or a body that is not
    /// one of ours (one message, the bytes as they are).
    static func row(_ sequence: Int64, press: Bool = false) -> MQTTOutboxRow {
        let body = press
            ? #"{"id":"e\#(sequence)","type":"doorbell.pressed","sequence":\#(sequence),"device":{"id":"front-door"},"data":{}}"#
            : "raw \(sequence)"
        return MQTTOutboxRow(id: "e\(sequence)", sequence: sequence, body: Array(body.utf8))
    }

    /// Connected at `now`, past the announcement, subscription, discovery and diagnostics; returns
    /// the action after them (the first read of the outbox).
    @discardableResult
    static func connected(_ s: inout MQTTSession, at now: Int64, random: inout SeededRandom) -> MQTTSession.Action? {
        guard case .connect = s.next(at: at(now), random: &random) else { Issue.record("not connecting: \(s.connection)"); return nil }
        s.connectSent(at: at(now))
        s.connackReceived(code: 0, reason: "Connection Accepted.", at: at(now))
        while true {
            switch s.next(at: at(now), random: &random) {
            case .publish, .subscribe, .publishDiagnostics: continue
            case .publishDiscovery: s.discoveryPublished(mids: [], at: at(now))
            case let other: return other
            }
        }
    }

    @Test func availabilityAndDiscoveryGoFirstThenTheOutbox() {
        var s = MQTTSession(settings: Self.settings(), broker: "mqtt://h:1883")
        var rng = SeededRandom(seed: 1)
        #expect(s.next(at: Self.at(0), random: &rng) == .connect(reconnect: false))
        s.connectSent(at: Self.at(0))
        #expect(s.next(at: Self.at(1), random: &rng) == .service)
        s.connackReceived(code: 0, reason: "Connection Accepted.", at: Self.at(2))
        #expect(s.status.connected && s.status.connects == 1)
        let actions = (0..<5).map { _ in s.next(at: Self.at(3), random: &rng) }
        #expect(actions == [.publish(MQTTMessage(topic: "doorbell/gw/status", text: "online", retain: true)), .subscribe("homeassistant/status"),
                            .publishDiscovery, .publishDiagnostics, .readOutbox(after: 0, limit: 3)])
    }

    @Test func withoutDiscoveryNothingIsSubscribedOrAnnounced() {
        var s = MQTTSession(settings: Self.settings(discovery: false), broker: "b")
        var rng = SeededRandom(seed: 1)
        _ = s.next(at: Self.at(0), random: &rng)
        s.connectSent(at: Self.at(0))
        s.connackReceived(code: 0, reason: "", at: Self.at(0))
        let actions = (0..<3).map { _ in s.next(at: Self.at(0), random: &rng) }
        #expect(actions == [.publish(s.announcement), .publishDiagnostics, .readOutbox(after: 0, limit: 3)])
    }

    @Test func eventsGoInOrderWithAtMostTheWindowUnacknowledged() {
        var s = MQTTSession(settings: Self.settings(), broker: "b")
        var rng = SeededRandom(seed: 2)
        Self.connected(&s, at: 0, random: &rng)
        s.rowsRead((1...3).map { Self.row($0) })
        var mid: Int32 = 0
        for sequence in 1...3 as ClosedRange<Int64> {
            guard case let .publishEvent(event) = s.next(at: Self.at(0), random: &rng) else { Issue.record("no event"); return }
            #expect(event.sequence == sequence)
            #expect(event.messages == [MQTTMessage(topic: "doorbell/gw/events", payload: Self.row(sequence).body, retain: false)])
            mid += 1
            s.eventPublished(event, mids: [mid])
        }
        // The window is full: no read until the broker acknowledges, however long it takes.
        #expect(s.next(at: Self.at(5_000_000), random: &rng) == .service)
        s.acknowledgedByBroker(mid: 2)
        #expect(s.next(at: Self.at(5_000_001), random: &rng) == .acknowledge([2]))
        // A full read means more may be waiting: read again at once, after the last one sent.
        #expect(s.next(at: Self.at(5_000_002), random: &rng) == .readOutbox(after: 3, limit: 1))
        s.acknowledgedByBroker(mid: 2) // a duplicate PUBACK changes nothing
        s.acknowledgementsStored(1, at: Self.at(5_000_003))
        #expect(s.status.acknowledged == 1 && s.status.lastAckWallMicros == Self.at(5_000_003).wallMicros)
    }

    @Test func anEventIsAcknowledgedOnlyOnceAllItsMessagesAre() {
        var s = MQTTSession(settings: Self.settings(), broker: "b")
        var rng = SeededRandom(seed: 3)
        Self.connected(&s, at: 0, random: &rng)
        s.rowsRead([Self.row(1, press: true)])
        guard case let .publishEvent(event) = s.next(at: Self.at(0), random: &rng) else { Issue.record("no event"); return }
        #expect(event.messages.map(\.topic) == ["doorbell/gw/events", "doorbell/gw/front-door/event"])
        s.eventPublished(event, mids: [7, 8])
        s.acknowledgedByBroker(mid: 8)
        #expect(s.next(at: Self.at(1), random: &rng) == .service)
        s.acknowledgedByBroker(mid: 7)
        #expect(s.next(at: Self.at(2), random: &rng) == .acknowledge([1]))
    }

    @Test func anEventCutShortIsReadAgainAndNothingAfterItOvertakesIt() {
        var s = MQTTSession(settings: Self.settings(), broker: "b")
        var rng = SeededRandom(seed: 4)
        Self.connected(&s, at: 0, random: &rng)
        s.rowsRead([Self.row(1, press: true), Self.row(2)])
        guard case let .publishEvent(event) = s.next(at: Self.at(0), random: &rng) else { Issue.record("no event"); return }
        s.eventPublished(event, mids: [1]) // the second message was refused
        #expect(s.cursor == 0)
        #expect(s.next(at: Self.at(1), random: &rng) == .service, "event 2 must not go ahead of event 1")
        #expect(s.next(at: Self.at(1_000_000), random: &rng) == .readOutbox(after: 0, limit: 3))
    }

    @Test func aFailedConnectBacksOffAndNothingIsTriedBeforeItEnds() {
        var s = MQTTSession(settings: Self.settings(), broker: "b")
        var rng = SeededRandom(seed: 5)
        _ = s.next(at: Self.at(0), random: &rng)
        s.connectFailed("cannot reach the broker", at: Self.at(0), random: &rng)
        #expect(s.status.lastError == "cannot reach the broker" && s.takeNews() == ["cannot reach the broker"])
        guard case let .sleep(until) = s.next(at: Self.at(0), random: &rng) else { Issue.record("\(s.connection)"); return }
        #expect((100_000...1_000_000).contains(until), "between the floor and the first ceiling")
        #expect(s.next(at: Self.at(until - 1), random: &rng) == .sleep(untilMonoMicros: until))
        #expect(s.next(at: Self.at(until), random: &rng) == .connect(reconnect: false))
        // The same failure again is not news; the ceiling doubles.
        s.connectFailed("cannot reach the broker", at: Self.at(until), random: &rng)
        #expect(s.takeNews().isEmpty && s.attempt == 2)
    }

    @Test func aBrokerThatNeverAnswersConnectIsGivenUpOn() {
        var s = MQTTSession(settings: Self.settings(), broker: "b")
        var rng = SeededRandom(seed: 6)
        _ = s.next(at: Self.at(0), random: &rng)
        s.connectSent(at: Self.at(0))
        #expect(s.next(at: Self.at(MQTTSession.connackTimeoutMicros), random: &rng) == .service)
        #expect(s.next(at: Self.at(MQTTSession.connackTimeoutMicros + 1), random: &rng) == .disconnect)
        #expect(s.status.lastError?.contains("never answered CONNECT") == true)
        guard case .backingOff = s.connection else { Issue.record("\(s.connection)"); return }
        // The next attempt reuses the session: reconnect.
        guard case let .sleep(until) = s.next(at: Self.at(MQTTSession.connackTimeoutMicros + 2), random: &rng) else { Issue.record("no backoff"); return }
        #expect(s.next(at: Self.at(until), random: &rng) == .connect(reconnect: true))
    }

    @Test func aRefusedLoginSaysWhatToCheckAndTheDisconnectAfterItIsNotTheError() {
        var s = MQTTSession(settings: Self.settings(), broker: "b")
        var rng = SeededRandom(seed: 7)
        _ = s.next(at: Self.at(0), random: &rng)
        s.connectSent(at: Self.at(0))
        s.connackReceived(code: 5, reason: "Connection Refused: not authorised.", at: Self.at(1))
        let refusal = "the broker refused the connection: Connection Refused: not authorised.: check mqtt.username and password_file against the broker's users"
        #expect(s.status.lastError == refusal)
        s.disconnected(code: 7, reason: "The connection was lost.", at: Self.at(2))
        #expect(s.status.lastError == refusal && !s.status.connected)
        #expect(s.serviceFailed(at: Self.at(3), random: &rng) == false)
        guard case .backingOff = s.connection else { Issue.record("\(s.connection)"); return }
        // A refusal for another reason has no hint about users.
        s.connackReceived(code: 3, reason: "Connection Refused: broker unavailable.", at: Self.at(4))
        #expect(s.status.lastError == "the broker refused the connection: Connection Refused: broker unavailable.")
    }

    @Test func aHandshakeThatFailsAfterTheConnectIsTheLastError() {
        var s = MQTTSession(settings: Self.settings(), broker: "b")
        var rng = SeededRandom(seed: 9)
        _ = s.next(at: Self.at(0), random: &rng)
        s.connectSent(at: Self.at(0))
        let tls = "TLS with the broker at b:8883 failed: check mqtt.ca_file and that the broker's certificate is for b"
        #expect(s.serviceFailed(tls, at: Self.at(1), random: &rng) == false, "never connected: nothing was lost")
        #expect(s.status.lastError == tls && !s.status.connected)
        guard case .backingOff = s.connection else { Issue.record("\(s.connection)"); return }
        // A failure while backing off (no CONNECT out) says nothing new.
        #expect(s.serviceFailed("again", at: Self.at(2), random: &rng) == false)
        #expect(s.status.lastError == tls)
    }

    @Test func aLostConnectionKeepsItsEventsInFlightForTheSameSession() {
        var s = MQTTSession(settings: Self.settings(), broker: "b")
        var rng = SeededRandom(seed: 8)
        Self.connected(&s, at: 0, random: &rng)
        s.rowsRead([Self.row(1), Self.row(2)])
        for mid: Int32 in [1, 2] {
            guard case let .publishEvent(event) = s.next(at: Self.at(0), random: &rng) else { Issue.record("no event"); return }
            s.eventPublished(event, mids: [mid])
        }
        s.disconnected(code: 7, reason: "The connection was lost.", at: Self.at(1))
        #expect(s.status.lastError == "disconnected from the broker: The connection was lost.")
        #expect(s.serviceFailed(at: Self.at(1), random: &rng) == false, "already told by the disconnect")
        guard case let .sleep(until) = s.next(at: Self.at(1), random: &rng) else { Issue.record("no backoff"); return }
        #expect(s.next(at: Self.at(until), random: &rng) == .connect(reconnect: true))
        s.connectSent(at: Self.at(until))
        s.connackReceived(code: 0, reason: "", at: Self.at(until))
        #expect(s.status.lastError == nil && s.status.connects == 2)
        // libmosquitto sent them again with the same ids; their PUBACKs complete them.
        s.acknowledgedByBroker(mid: 1)
        #expect(s.next(at: Self.at(until), random: &rng) == .acknowledge([1]))
        // New events follow the ones in flight.
        s.outboxChanged()
        var rest: [MQTTSession.Action] = []
        while rest.count < 6, rest.last != .service { rest.append(s.next(at: Self.at(until), random: &rng)) }
        #expect(rest.contains(.readOutbox(after: 2, limit: 2)))
    }

    @Test func aConnectionThatSurvivesARoundStartsTheBackoffAgain() {
        var s = MQTTSession(settings: Self.settings(), broker: "b")
        var rng = SeededRandom(seed: 9)
        _ = s.next(at: Self.at(0), random: &rng)
        s.connectFailed("down", at: Self.at(0), random: &rng)
        s.connectFailed("down", at: Self.at(0), random: &rng)
        s.connackReceived(code: 0, reason: "", at: Self.at(0))
        #expect(s.attempt == 2, "accepted, then dropped at once: still backing off")
        s.serviced()
        #expect(s.attempt == 0)
    }

    @Test func homeAssistantsBirthRepublishesDiscoveryAndOtherMessagesAreCountedByReason() {
        var s = MQTTSession(settings: Self.settings(), broker: "b")
        var rng = SeededRandom(seed: 10)
        Self.connected(&s, at: 0, random: &rng)
        #expect(s.messageArrived(topic: "homeassistant/status", payload: Array("offline".utf8), at: Self.at(0)) == .homeAssistantOffline)
        #expect(s.next(at: Self.at(0), random: &rng) == .service)
        #expect(s.messageArrived(topic: "homeassistant/status", payload: Array("online".utf8), at: Self.at(0)) == .homeAssistantOnline)
        #expect(s.next(at: Self.at(0), random: &rng) == .publishDiscovery)
        #expect(s.messageArrived(topic: "homeassistant/status", payload: Array("hello".utf8), at: Self.at(0)) == .ignored(reason: "unexpected_payload"))
        #expect(s.messageArrived(topic: "homeassistant/status", payload: [UInt8](repeating: 0x6F, count: 65), at: Self.at(0)) == .ignored(reason: "oversized_payload"))
        #expect(s.messageArrived(topic: "elsewhere", payload: Array("online".utf8), at: Self.at(0)) == .ignored(reason: "unknown_topic"))
        #expect(s.messageArrived(topic: "elsewhere", payload: [], at: Self.at(0)) == .ignored(reason: "unknown_topic"))
        #expect(s.status.ignored == ["unexpected_payload": 1, "oversized_payload": 1, "unknown_topic": 2])
    }

    @Test func aReloadRepublishesDiscoveryAndDiagnosticsGoOutEveryThirtySeconds() {
        var s = MQTTSession(settings: Self.settings(), broker: "b")
        var rng = SeededRandom(seed: 11)
        Self.connected(&s, at: 0, random: &rng)
        s.discoveryChanged()
        #expect(s.next(at: Self.at(1), random: &rng) == .publishDiscovery)
        s.discoveryPublished(mids: [1, 2, 3, 4], at: Self.at(1))
        #expect(s.status.discoveryMessages == 4)
        #expect(s.next(at: Self.at(MQTTSession.diagnosticsEveryMicros - 1), random: &rng) == .readOutbox(after: 0, limit: 3))
        #expect(s.next(at: Self.at(MQTTSession.diagnosticsEveryMicros), random: &rng) == .publishDiagnostics)
        #expect(s.next(at: Self.at(MQTTSession.diagnosticsEveryMicros), random: &rng) == .service)
    }

    @Test func theOutboxIsReadWhenWokenOrOnceASecond() {
        var s = MQTTSession(settings: Self.settings(), broker: "b")
        var rng = SeededRandom(seed: 12)
        #expect(Self.connected(&s, at: 0, random: &rng) == .readOutbox(after: 0, limit: 3))
        s.rowsRead([])
        #expect(s.next(at: Self.at(10), random: &rng) == .service)
        s.outboxChanged()
        #expect(s.next(at: Self.at(20), random: &rng) == .readOutbox(after: 0, limit: 3))
        s.rowsRead([])
        #expect(s.next(at: Self.at(MQTTSession.outboxPollMicros + 19), random: &rng) == .service)
        #expect(s.next(at: Self.at(MQTTSession.outboxPollMicros + 20), random: &rng) == .readOutbox(after: 0, limit: 3))
    }

    @Test func discoveryRemovesEntitiesThatLeftTheConfig() {
        let current = [MQTTMessage(topic: "homeassistant/event/a/config", text: "{}", retain: true)]
        let out = MQTTSession.discoveryMessages(current: current, previouslyPublished: ["homeassistant/event/a/config", "homeassistant/event/gone/config"])
        #expect(out == [MQTTMessage(topic: "homeassistant/event/gone/config", payload: [], retain: true)] + current)
    }

    /// A broker that refuses, drops, stays silent and acknowledges late, as a script of choices;
    /// once the script ends it behaves. Whatever it does: every event reaches it, first published
    /// in sequence order; none is published again once its acknowledgement is stored; nothing is
    /// published unless connected, no connect comes before the backoff ends, and no more than the
    /// window is unacknowledged.
    @Test func everyEventArrivesInOrderAndNothingAcknowledgedIsSentAgain() async {
        await propertyCheck(input: Gen.int(in: 1...12), Gen.int(in: 1...4), Gen.int(in: 0...6).array(of: 0...200)) { count, window, script in
            var s = MQTTSession(settings: Self.settings(maxInFlight: window), broker: "b")
            var rng = SeededRandom(seed: UInt64(script.count + 1))
            var choices = script[...]
            func choice() -> Int { choices.popFirst() ?? 0 }
            let rows = (1...Int64(count)).map { Self.row($0, press: $0 % 3 == 0) }
            var stored = Set<Int64>()
            var firstPublished: [Int64] = []
            var library: [Int32: String] = [:] // messages libmosquitto holds until their PUBACK
            var nextMid: Int32 = 1
            var libraryConnected = false
            var connackDue = false
            var now: Int64 = 1_000_000
            var backoffEnd: Int64 = 0
            for _ in 0..<20_000 where stored.count < count {
                if case let .backingOff(until) = s.connection { backoffEnd = until }
                let action = s.next(at: Self.at(now), random: &rng)
                switch action {
                case .connect:
                    #expect(now >= backoffEnd, "connect before the backoff ended")
                    if choice() == 1 { s.connectFailed("down", at: Self.at(now), random: &rng) } else {
                        s.connectSent(at: Self.at(now))
                        connackDue = true
                    }
                case let .sleep(until):
                    #expect(until > now)
                    now = until
                case .disconnect:
                    connackDue = false
                case .service:
                    now += 500_000
                    if connackDue {
                        connackDue = false
                        switch choice() {
                        case 2:
                            s.connackReceived(code: 5, reason: "not authorised", at: Self.at(now))
                            _ = s.serviceFailed(at: Self.at(now), random: &rng)
                        case 3:
                            connackDue = true // silent; the session gives up after its timeout
                        default:
                            libraryConnected = true
                            s.connackReceived(code: 0, reason: "", at: Self.at(now))
                        }
                    } else if libraryConnected && choice() == 4 {
                        libraryConnected = false
                        s.disconnected(code: 7, reason: "lost", at: Self.at(now))
                        _ = s.serviceFailed(at: Self.at(now), random: &rng)
                    } else if libraryConnected {
                        for mid in library.keys.sorted().prefix(choice() == 5 ? 0 : 2) {
                            library[mid] = nil
                            s.acknowledgedByBroker(mid: mid)
                        }
                        s.serviced()
                    }
                case let .acknowledge(ids):
                    for id in ids { #expect(stored.insert(id).inserted, "\(id) acknowledged twice") }
                    s.acknowledgementsStored(ids.count, at: Self.at(now))
                case .publish, .subscribe, .publishDiagnostics:
                    #expect(s.connection == .connected && libraryConnected)
                case .publishDiscovery:
                    #expect(s.connection == .connected && libraryConnected)
                    s.discoveryPublished(mids: [], at: Self.at(now))
                case let .readOutbox(after, limit):
                    #expect(limit > 0)
                    s.rowsRead(Array(rows.filter { $0.sequence > after && !stored.contains($0.sequence) }.prefix(limit)))
                case let .publishEvent(event):
                    #expect(s.connection == .connected && libraryConnected, "published while not connected")
                    #expect(!stored.contains(event.sequence), "\(event.id) published again after its acknowledgement was stored")
                    if !firstPublished.contains(event.sequence) { firstPublished.append(event.sequence) }
                    // The connection can drop between two messages of one event.
                    let cut = event.messages.count > 1 && choice() == 6
                    let mids = (0..<(cut ? 1 : event.messages.count)).map { _ -> Int32 in
                        defer { nextMid += 1 }
                        library[nextMid] = event.id
                        return nextMid
                    }
                    s.eventPublished(event, mids: mids)
                    #expect(s.outstanding.count <= window)
                }
            }
            #expect(stored.count == count, "every event acknowledged")
            #expect(firstPublished == firstPublished.sorted(), "first published in sequence order")
        }
    }
}
