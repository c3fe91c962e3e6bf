import DoorbellCore
import PropertyBased
import Testing

/// The replies the agent encodes are the replies agentctl decodes, field for field; their wire
/// form and what agentctl prints for people are pinned by golden files (reviewed as a diff).
@Suite struct ControlResponseTests {
    static let queue = QueueListReply(depth: 3, dead: 1, events: [
        QueueListReply.Entry(id: "evt_01HZX8K2M4", sequence: 41, type: "doorbell.pressed", ageSeconds: 95, attempts: 4, dead: false,
                             lastError: "HTTP 503 from https://hooks.example.net/doorbell"),
        QueueListReply.Entry(id: "evt_01HZX8K9Q0", sequence: 42, type: "device.battery_low", ageSeconds: 3, attempts: 0, dead: false, lastError: nil),
    ])
    static let phones = PhonesReply(phones: [
        PhonesReply.Phone(id: "C4:11:22:33:44:07", name: "Anna's iPhone", bondedAt: "2026-11-20T18:02:11Z", lastSeen: "2026-11-27T07:45:00Z",
                          connected: true, readingNotifications: true),
        PhonesReply.Phone(id: "D2:55:66:77:88:09", name: "", bondedAt: "2026-11-21T09:00:00Z", lastSeen: nil, connected: false, readingNotifications: false),
    ], pairingUntil: "2026-11-27T08:00:00Z", connected: 1, notificationsRead: 12, lastError: "encryption failed: PIN or key missing")
    static let scan = ScanReply(transmitters: [
        ScanReply.Transmitter(radio: "rtl433", identity: "model=Generic-Remote,id=4711", model: "Generic-Remote", frames: 12, rssiDB: -7.26,
                              lastSeen: "2026-11-27T07:59:58Z", device: nil, match: #"{ model = "Generic-Remote", id = 4711 }"#),
        ScanReply.Transmitter(radio: "ble", identity: "bthome:A4:C1:38:00:00:01", model: "BTHome button", frames: 3, rssiDB: nil,
                              lastSeen: "2026-11-27T07:59:00Z", device: nil, match: "[[device]]\nid = \"ble-a4c138000001\"\nradio = \"ble\""),
        ScanReply.Transmitter(radio: "ook", identity: "ev1527:0xA5F3C", model: "EV1527", frames: 40, rssiDB: -12,
                              lastSeen: "2026-11-27T07:58:00Z", device: "front-door", match: #"{ code = "A5F3C" }"#),
    ])

    /// Every reply agentctl reads, once each, as the agent sends it.
    static var samples: [(String, JSONValue)] {
        [("status", StatusReply(status: .object([("health", .string("ok"))])).json),
         ("pubkey", PubkeyReply(publicKey: "MCowBQYDK2VwAyEA", keyID: "1f2e3d4c5b6a7980").json),
         ("version", VersionReply(version: "1.9.0").json),
         ("events", EventsReply(events: [.object([("type", .string("doorbell.pressed"))])]).json),
         ("inject", InjectReply(eventIDs: ["evt_01HZX8K2M4"]).json),
         ("queue", queue.json), ("queue retry", QueueRetryReply(requeued: 2).json), ("queue purge", QueuePurgeReply(purged: 5).json),
         ("scan", scan.json), ("pair", PairReply(pairingUntil: nil).json), ("phones", phones.json),
         ("forget", ForgetReply(forgotten: "C4:11:22:33:44:07").json), ("answer", AnswerReply(dismissing: 2).json),
         ("failure", ControlResponse.failure("no device \"back-door\" in the config; configured: front-door"))]
    }

    func roundTrip<R: ControlReplyBody>(_ reply: R) throws -> R? {
        let wire = try JSONReader.parse(JSONWriter.string(reply.json))
        guard case let .ok(back) = try ControlResponse.decode(wire, as: R.self) else { return nil }
        return back
    }

    @Test func everyReplySurvivesItsWireForm() throws {
        #expect(try roundTrip(Self.queue) == Self.queue)
        #expect(try roundTrip(Self.phones) == Self.phones)
        #expect(try roundTrip(Self.scan) == Self.scan)
        #expect(try roundTrip(PubkeyReply(publicKey: "k", keyID: "i")) == PubkeyReply(publicKey: "k", keyID: "i"))
        #expect(try roundTrip(VersionReply(version: "1.9.0")) == VersionReply(version: "1.9.0"))
        #expect(try roundTrip(InjectReply(eventIDs: ["a", "b"])) == InjectReply(eventIDs: ["a", "b"]))
        #expect(try roundTrip(QueueRetryReply(requeued: 2)) == QueueRetryReply(requeued: 2))
        #expect(try roundTrip(QueuePurgeReply(purged: 0)) == QueuePurgeReply(purged: 0))
        #expect(try roundTrip(PairReply(pairingUntil: "2026-11-27T08:00:00Z")) == PairReply(pairingUntil: "2026-11-27T08:00:00Z"))
        #expect(try roundTrip(PairReply(pairingUntil: nil)) == PairReply(pairingUntil: nil))
        #expect(try roundTrip(ForgetReply(forgotten: "x")) == ForgetReply(forgotten: "x"))
        #expect(try roundTrip(AnswerReply(dismissing: 0)) == AnswerReply(dismissing: 0))
        let events = EventsReply(events: [.object([("id", .string("evt_1")), ("sequence", .number(7))])])
        #expect(try roundTrip(events) == events)
        let status = StatusReply(status: .object([("health", .string("degraded")), ("problems", .array([.string("uplink: HTTP 503")]))]))
        #expect(try roundTrip(status) == status)
    }

    @Test func queueListsOfAnyShapeSurviveTheirWireForm() async {
        let entry = Gen.int(in: 0...1_000_000).array(of: 4...4).map { n in
            QueueListReply.Entry(id: "evt_\(n[0])", sequence: n[1], type: n[2] % 2 == 0 ? "doorbell.pressed" : "gateway.clock_corrected",
                                 ageSeconds: n[3], attempts: n[0] % 50, dead: n[1] % 3 == 0, lastError: n[2] % 4 == 0 ? nil : "HTTP \(n[2] % 600) \"quoted\"\n")
        }
        await propertyCheck(input: entry.array(of: 0...20), Gen.int(in: 0...100_000)) { entries, depth in
            let reply = QueueListReply(depth: depth, dead: entries.filter(\.dead).count, events: entries)
            #expect((try? roundTrip(reply)) == reply)
        }
    }

    @Test func aRefusalIsTheAgentsMessageAndAnotherShapeSaysWhatToCheck() throws {
        let refused = try ControlResponse.decode(ControlResponse.failure("the phone link is off"), as: PhonesReply.self)
        #expect(refused == .refused("the phone link is off"))
        #expect(throws: ControlReplyError.self) { try ControlResponse.decode(.object([("status", .null)]), as: StatusReply.self) }
        do {
            _ = try ControlResponse.decode(.object([("ok", .bool(true)), ("depth", .string("3"))]), as: QueueListReply.self)
            Issue.record("a depth that is text was taken")
        } catch {
            #expect(error.description.contains("queue \"depth\" is not a whole number"))
            #expect(error.description.contains("agentctl version"))
        }
    }

    /// A newer agent's extra fields (phones gain fields in parallel work) are ignored, not refused.
    @Test func membersAnOlderAgentctlDoesNotKnowAreIgnored() throws {
        guard case var .object(members) = Self.phones.json, case var .array(list) = Self.phones.json["phones"],
              case var .object(first) = list[0] else { Issue.record("not an object"); return }
        first.append(("battery_percent", .number(80)))
        list[0] = .object(first)
        members = members.map { $0.0 == "phones" ? ("phones", .array(list)) : $0 }
        members.append(("answer_button", .string("hall-button")))
        #expect(try ControlResponse.decode(.object(members), as: PhonesReply.self) == .ok(Self.phones))
    }

    @Test func streamLinesAndCaptureRecordsSurviveTheirWireForm() {
        let lines: [ControlStreamLine] = [.following, .capturing, .heartbeat, .dropped(17),
                                          .capture(.rtl433(line: #"{"model":"Generic-Remote","id":4711}"#)),
                                          .capture(.ookPulse(Pulse(high: 412, low: 1_240))),
                                          .capture(.ble(h4: [0x04, 0x0E, 0x04, 0x01, 0x03, 0x0C, 0x00], received: false, wallMicros: 1_795_766_400_123_456))]
        for line in lines {
            #expect(ControlStreamLine(json: line.json, capturing: true) == line, "\(JSONWriter.string(line.json))")
        }
        let event = JSONValue.object([("type", .string("doorbell.pressed")), ("radio", .string("rtl433"))])
        #expect(ControlStreamLine(json: event, capturing: false) == .event(event), "an event that names its radio is still an event")
    }

    /// The wire form (what scripts read) and agentctl's text (what people read).
    @Test func theWireFormAndAgentctlsTextAreTheGoldenOnes() throws {
        try Golden.check(Self.samples.map { "\($0.0): \(JSONWriter.string($0.1))" }.joined(separator: "\n") + "\n", against: "control-replies.golden.txt")
        var text: [String] = []
        text += ["$ agentctl pubkey"] + ControlReplyText.pubkey(PubkeyReply(publicKey: "MCowBQYDK2VwAyEA", keyID: "1f2e3d4c5b6a7980"))
        text += ["$ agentctl queue"] + ControlReplyText.queue(Self.queue)
        text += ["$ agentctl queue retry", ControlReplyText.requeued(QueueRetryReply(requeued: 2))]
        text += ["$ agentctl queue purge --dead", ControlReplyText.purged(QueuePurgeReply(purged: 5))]
        text += ["$ agentctl inject press --device front-door", ControlReplyText.injected(InjectReply(eventIDs: ["evt_01HZX8K2M4"]), device: "front-door")]
        text += ["$ agentctl scan --seconds 10"]
        for (t, rate) in zip(Self.scan.transmitters, [1.25, nil, 0.04]) { text += ControlReplyText.transmitter(t, framesPerSecond: rate) }
        text += ["$ agentctl pair", ControlReplyText.pairing(PairReply(pairingUntil: "2026-11-27T08:00:00Z")),
                 ControlReplyText.pairing(PairReply(pairingUntil: nil))]
        text += ["$ agentctl phones"] + ControlReplyText.phones(Self.phones)
        text += ControlReplyText.phones(PhonesReply(phones: [], pairingUntil: nil, connected: 0, notificationsRead: 0, lastError: nil))
        text += ["$ agentctl forget C4:11:22:33:44:07", ControlReplyText.forgot(ForgetReply(forgotten: "C4:11:22:33:44:07"))]
        text += ["$ agentctl answer", ControlReplyText.answered(AnswerReply(dismissing: 2))]
        text += ["$ agentctl events", ControlReplyText.event(.object([
            ("id", .string("evt_01HZX8K2M4")), ("sequence", .number(41)), ("type", .string("doorbell.pressed")),
            ("occurred_at", .string("2026-11-27T07:59:58.120Z")), ("device", .object([("id", .string("front-door"))])),
            ("data", .object([("code", .string("A5F3C"))])), ("test", .bool(true))]))]
        try Golden.check(text.joined(separator: "\n") + "\n", against: "agentctl-replies.golden.txt")
    }
}
