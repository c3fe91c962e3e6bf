import DoorbellCore
import PropertyBased
import Testing

/// Events wait for Home Assistant to listen (#26): after every connect, for its birth message and
/// the discovery's acknowledgement, or until the wait runs out; and again after its `offline`.
/// The broker acknowledges an event whether anyone is subscribed or not, so what went out before
/// Home Assistant re-subscribed is gone from the outbox and lost to it.
@Suite struct MQTTSessionHomeAssistantTests {
    typealias T = MQTTSessionTests
    static let wait: Int64 = 20_000_000 // apart from the diagnostics' 30 s
    static let birth = Array("online".utf8)

    /// Connects at `now` and runs the session's first actions (announcement, subscription,
    /// discovery with message ids `discoveryMids`, diagnostics); returns the action after them.
    static func connect(_ s: inout MQTTSession, at now: Int64, discoveryMids: [Int32], random: inout SeededRandom) -> MQTTSession.Action {
        if case .connect = s.next(at: T.at(now), random: &random) {} else { Issue.record("not connecting: \(s.connection)") }
        s.connectSent(at: T.at(now))
        s.connackReceived(code: 0, reason: "", at: T.at(now))
        while true {
            switch s.next(at: T.at(now), random: &random) {
            case .publish, .subscribe, .publishDiagnostics: continue
            case .publishDiscovery: s.discoveryPublished(mids: discoveryMids, at: T.at(now))
            case let other: return other
            }
        }
    }

    @Test func afterEveryConnectEventsWaitForTheBirthAndTheDiscoverysAcknowledgement() {
        var s = MQTTSession(settings: T.settings(homeAssistantWaitMicros: Self.wait), broker: "b")
        var rng = SeededRandom(seed: 1)
        for round in 0..<2 {
            let start = Int64(round) * 100_000_000
            #expect(Self.connect(&s, at: start, discoveryMids: [1, 2], random: &rng) == .service, "no outbox read before the birth")
            #expect(s.status.homeAssistant == "waiting for its birth message")
            s.acknowledgedByBroker(mid: 1)
            s.acknowledgedByBroker(mid: 2)
            #expect(s.next(at: T.at(start + Self.wait - 1), random: &rng) == .service, "the discovery alone does not open")
            #expect(s.messageArrived(topic: "homeassistant/status", payload: Self.birth, at: T.at(start + 5_000_000)) == .homeAssistantOnline)
            #expect(s.next(at: T.at(start + 5_000_000), random: &rng) == .publishDiscovery)
            s.discoveryPublished(mids: [3, 4], at: T.at(start + 5_000_000))
            s.acknowledgedByBroker(mid: 3)
            #expect(s.next(at: T.at(start + 6_000_000), random: &rng) == .service, "one discovery message unacknowledged")
            s.acknowledgedByBroker(mid: 4)
            #expect(s.next(at: T.at(start + 6_000_000), random: &rng) == .service, "Home Assistant subscribes a moment after the config")
            #expect(s.next(at: T.at(start + 6_000_000 + MQTTSession.discoverySettleMicros - 1), random: &rng) == .service)
            #expect(s.next(at: T.at(start + 6_000_000 + MQTTSession.discoverySettleMicros), random: &rng) == .readOutbox(after: 0, limit: 3))
            #expect(s.status.homeAssistant == "online")
            // The broker goes away; the next connect waits again, whatever was heard before.
            s.disconnected(code: 7, reason: "lost", at: T.at(start + 10_000_000))
        }
    }

    /// A retained `online` (Home Assistant set to retain its birth; a broker with persistence keeps
    /// it across its restart) was true once, before this connect: it does not open the gate.
    @Test func aRetainedBirthIsNotABirth() {
        var s = MQTTSession(settings: T.settings(homeAssistantWaitMicros: Self.wait), broker: "b")
        var rng = SeededRandom(seed: 5)
        #expect(Self.connect(&s, at: 0, discoveryMids: [], random: &rng) == .service)
        #expect(s.messageArrived(topic: "homeassistant/status", payload: Self.birth, retained: true, at: T.at(1)) == .homeAssistantOnline)
        #expect(s.next(at: T.at(1), random: &rng) == .publishDiscovery, "the discovery goes again all the same")
        s.discoveryPublished(mids: [], at: T.at(1))
        #expect(s.next(at: T.at(5_000_000), random: &rng) == .service)
        #expect(s.homeAssistant == .awaitingBirth(sinceMonoMicros: 0))
    }

    @Test func withoutABirthWithinTheWaitEventsGoOutAnyway() {
        var s = MQTTSession(settings: T.settings(homeAssistantWaitMicros: Self.wait), broker: "b")
        var rng = SeededRandom(seed: 2)
        #expect(Self.connect(&s, at: 0, discoveryMids: [1], random: &rng) == .service)
        s.acknowledgedByBroker(mid: 1)
        #expect(s.next(at: T.at(Self.wait - 1), random: &rng) == .service)
        #expect(s.next(at: T.at(Self.wait), random: &rng) == .readOutbox(after: 0, limit: 3))
        #expect(s.status.homeAssistant == "not heard since the connect: publishing without waiting")
        // A birth later brings the discovery again; events pause until it is acknowledged.
        #expect(s.messageArrived(topic: "homeassistant/status", payload: Self.birth, at: T.at(Self.wait + 1)) == .homeAssistantOnline)
        #expect(s.next(at: T.at(Self.wait + 1), random: &rng) == .publishDiscovery)
        s.discoveryPublished(mids: [9], at: T.at(Self.wait + 1))
        s.rowsRead([T.row(1, press: true)])
        #expect(s.next(at: T.at(Self.wait + 2), random: &rng) == .service)
        s.acknowledgedByBroker(mid: 9)
        #expect(s.next(at: T.at(Self.wait + 2), random: &rng) == .service, "acknowledged: settling")
        guard case .publishEvent = s.next(at: T.at(Self.wait + 2 + MQTTSession.discoverySettleMicros), random: &rng) else {
            Issue.record("the event waited after the discovery settled")
            return
        }
    }

    @Test func homeAssistantsOfflineHoldsEventsUntilItIsBack() {
        var s = MQTTSession(settings: T.settings(homeAssistantWaitMicros: Self.wait), broker: "b")
        var rng = SeededRandom(seed: 3)
        _ = Self.connect(&s, at: 0, discoveryMids: [], random: &rng)
        _ = s.messageArrived(topic: "homeassistant/status", payload: Self.birth, at: T.at(1))
        #expect(s.next(at: T.at(1), random: &rng) == .publishDiscovery)
        s.discoveryPublished(mids: [], at: T.at(1))
        #expect(s.next(at: T.at(1), random: &rng) == .service, "acknowledged: settling")
        #expect(s.next(at: T.at(1 + MQTTSession.discoverySettleMicros), random: &rng) == .readOutbox(after: 0, limit: 3))
        s.rowsRead([T.row(1, press: true)])
        _ = s.messageArrived(topic: "homeassistant/status", payload: Array("offline".utf8), at: T.at(2_000_000))
        #expect(s.next(at: T.at(2_000_000), random: &rng) == .service, "read before the offline, held after it")
        #expect(s.next(at: T.at(2_000_000 + Self.wait - 1), random: &rng) == .service)
        guard case let .publishEvent(event) = s.next(at: T.at(2_000_000 + Self.wait), random: &rng) else {
            Issue.record("the wait ran out: the event goes to whoever listens")
            return
        }
        #expect(event.sequence == 1)
    }

    @Test func withoutWaitingOrWithoutDiscoveryEventsGoAtConnect() {
        for settings in [T.settings(homeAssistantWaitMicros: 0), T.settings(discovery: false, homeAssistantWaitMicros: Self.wait)] {
            var s = MQTTSession(settings: settings, broker: "b")
            var rng = SeededRandom(seed: 4)
            #expect(Self.connect(&s, at: 0, discoveryMids: [1], random: &rng) == .readOutbox(after: 0, limit: 3))
            #expect(s.status.homeAssistant == nil)
        }
    }

    /// A house where the broker restarts and Home Assistant re-subscribes on its own timer (before
    /// or after the agent is back, sending its birth once subscribed) and sometimes stops
    /// (`offline`), each time for less than the wait. However the script goes: the session
    /// publishes no event while Home Assistant is not subscribed, and every event reaches the
    /// broker. (What libmosquitto re-sends by itself at a reconnect — the messages in flight when
    /// the broker went — is its own, and goes at once: the README says so.)
    @Test func noEventIsPublishedWhileHomeAssistantIsNotSubscribed() async {
        await propertyCheck(input: Gen.int(in: 1...8), Gen.int(in: 0...5).array(of: 0...120)) { count, script in
            let wait: Int64 = 10_000_000
            var s = MQTTSession(settings: T.settings(homeAssistantWaitMicros: wait), broker: "b")
            var rng = SeededRandom(seed: UInt64(script.count + 1))
            var choices = script[...]
            func choice() -> Int { choices.popFirst() ?? 0 }
            let rows = (1...Int64(count)).map { T.row($0, press: true) }
            var stored = Set<Int64>()
            var library: [Int32: String] = [:]
            var nextMid: Int32 = 1
            var agentConnected = false
            var agentSubscribed = false
            var haSubscribed = true
            var haLeftAt: Int64 = 0
            var now: Int64 = 0
            func haReturns() {
                haSubscribed = true
                if agentSubscribed { _ = s.messageArrived(topic: "homeassistant/status", payload: Self.birth, at: T.at(now)) }
            }
            for _ in 0..<5_000 where stored.count < count {
                switch s.next(at: T.at(now), random: &rng) {
                case .connect:
                    s.connectSent(at: T.at(now))
                    s.connackReceived(code: 0, reason: "", at: T.at(now))
                    agentConnected = true
                case let .sleep(until): now = until
                case .disconnect: agentConnected = false
                case .subscribe: agentSubscribed = true
                case .service:
                    now += 200_000
                    switch choice() {
                    case 1 where agentConnected: // the broker restarts, empty: everyone is out
                        agentConnected = false
                        agentSubscribed = false
                        if haSubscribed { haLeftAt = now }
                        haSubscribed = false
                        s.disconnected(code: 7, reason: "lost", at: T.at(now))
                        _ = s.serviceFailed(at: T.at(now), random: &rng)
                    case 2 where !haSubscribed: // Home Assistant is back: it subscribes, then its birth
                        haReturns()
                    case 3 where haSubscribed && agentSubscribed: // Home Assistant stops
                        _ = s.messageArrived(topic: "homeassistant/status", payload: Array("offline".utf8), at: T.at(now))
                        haSubscribed = false
                        haLeftAt = now
                    default:
                        // Away for less than the wait (or the script is over): it comes back.
                        if !haSubscribed && (choices.isEmpty || now - haLeftAt >= wait / 2) { haReturns() }
                        for mid in library.keys.sorted() where agentConnected {
                            library[mid] = nil
                            s.acknowledgedByBroker(mid: mid)
                        }
                        s.serviced()
                    }
                case let .acknowledge(ids):
                    for id in ids { stored.insert(id) }
                    s.acknowledgementsStored(ids.count, at: T.at(now))
                case .publish, .publishDiagnostics: break
                case .publishDiscovery:
                    let mids = [nextMid]
                    library[nextMid] = "discovery"
                    nextMid += 1
                    s.discoveryPublished(mids: mids, at: T.at(now))
                case let .readOutbox(after, limit):
                    s.rowsRead(Array(rows.filter { $0.sequence > after && !stored.contains($0.sequence) }.prefix(limit)))
                case let .publishEvent(event):
                    #expect(haSubscribed, "\(event.id) published while Home Assistant was not subscribed")
                    let mids = event.messages.map { _ -> Int32 in
                        defer { nextMid += 1 }
                        library[nextMid] = event.id
                        return nextMid
                    }
                    s.eventPublished(event, mids: mids)
                }
            }
            #expect(stored.count == count, "every event acknowledged")
        }
    }
}
