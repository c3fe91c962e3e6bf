import DoorbellCore
import PropertyBased
import Testing

/// One status model, three renderings: the socket's JSON (and agentctl reading it back), the
/// `agentctl status` table and the Prometheus file, plus the problems rule they all show.
@Suite struct AgentStatusReportTests {
    static let t0: Int64 = 1_795_000_000_123_456

    /// A gateway with every part configured and a little of everything going on.
    static func busyGateway() -> AgentStatusReport {
        var r = AgentStatusReport(version: "1.4.0", gatewayID: "gw-17", pid: 4242, uptimeSeconds: 3600,
                                  clock: .init(synchronized: true, reason: "kernel NTP synchronized", requireSync: true, deliveryHeld: false,
                                               bootID: "0f5c", nowWallMicros: t0),
                                  outbox: .init(stateDir: "/var/lib/doorbell-agent"))
        var rtl = AgentStatusReport.Radio(name: "rtl433", state: "running")
        rtl.counters = [.init("lines", 120), .init("frames", 100), .init("malformed", 2), .init("unmatched_frames", 30)]
        rtl.restarts = 1
        var ook = AgentStatusReport.Radio(name: "ook", state: "running")
        ook.counters = [.init("pulses", 5000), .init("glitches", 7), .init("words", 40), .init("frames", 20), .init("unmatched_frames", 5),
                        .init("lines", 0), .init("rejected", 3)]
        ook.source = "gpio"
        ook.gpio = "pinctrl-bcm2835:17"
        var ble = AgentStatusReport.Radio(name: "ble", state: "running")
        ble.counters = [.init("reports", 900), .init("bthome", 12), .init("ibeacons", 800), .init("replays_refused", 1),
                        .init("decrypt_failures", 0), .init("downgrades_refused", 0), .init("lines", 900)]
        var b = AgentStatusReport.BLEDetails()
        b.inside = ["keys-anna"]
        b.decoders = [.init(decoder: "ibeacon", seen: 800, corrupt: 0, implausible: 1), .init(decoder: "bthome", seen: 12, corrupt: 2, implausible: 0)]
        b.observations = [.init("ibeacon", 800), .init("bthome_button", 12)]
        b.silentSeconds = 2
        b.controller = BLEControllerInfo(hciVersion: 12, manufacturer: 93, extendedScan: true)
        ble.ble = b
        r.radios = [rtl, ook, ble]
        r.eventsByType = [.init("doorbell.pressed", 3), .init("presence.entered", 1)]
        r.pressesForwarded = 3
        r.pressesSuppressed = 9
        r.unknownTransmitters = [.init(identity: "Acurite-609TXC/23", model: "Acurite-609TXC", frames: 30, lastSeenWallMicros: t0 - 5_000_000)]
        r.outbox.stats = .init(depth: 2, dead: 0, lastSequence: 77, evicted: 0, bytes: 1024, oldestAgeSeconds: 4, mqttPending: 1)
        var up = AgentStatusReport.Uplink(url: "https://cloud.example/v1/events")
        up.delivered = 75
        up.failedAttempts = 4
        up.lastSuccessWallMicros = t0 - 1_000_000
        up.lastError = "connect: connection refused"
        up.lastErrorWallMicros = t0 - 60_000_000
        up.failuresByReason = [.init("connect", 3), .init("http_5xx", 1)]
        up.deliveredLatency.observe(0.2)
        up.deliveredLatency.observe(1.5)
        up.last2xxWallMicros = t0 - 500_000
        up.cloudReachedSinceStart = true
        up.heartbeatsAccepted = 3
        up.heartbeatsFailed = 1
        r.uplink = up
        var q = AgentStatusReport.MQTT(broker: "127.0.0.1:1883")
        q.connected = true
        q.acknowledged = 74
        q.lastAckWallMicros = t0 - 2_000_000
        q.connects = 2
        q.discoveryMessages = 9
        q.homeAssistant = "waiting for its birth message"
        q.ignored = [.init("not_json", 1)]
        r.mqtt = q
        r.configReload = .object([("ok", .bool(true)), ("at", .string(RFC3339.format(micros: t0 - 100_000_000)))])
        var chime = AgentStatusReport.Action(name: "chime")
        chime.runs = 3
        r.actions = [chime]
        var phones = AgentStatusReport.Phones()
        phones.bonded = 2
        phones.connected = 1
        phones.connectedPhone = "C4:11:22:33:44:07"
        phones.readingNotifications = true
        phones.notificationsRead = 14
        r.phones = phones
        r.loops = ["control", "spill", "uplink", "radio rtl433", "radio ook", "radio ble", "mqtt", "metrics"].map {
            LoopHeartbeats.State(name: $0, health: .running, silentSeconds: 1, periodSeconds: 5)
        }
        return r
    }

    @Test func aHealthyGatewayHasNoProblems() {
        let r = Self.busyGateway()
        #expect(r.problems == [])
        #expect(r.health == "ok")
        #expect(r.summaryLine == "rtl433 running, ook running, ble running, presses 3, outbox 2, delivered 75, ok")
    }

    @Test func whatAgentctlReadsBackIsWhatTheAgentMeant() throws {
        let r = Self.busyGateway()
        let text = JSONWriter.string(r.json)
        let back = try #require(AgentStatusReport(json: try JSONReader.parse(text)))
        #expect(back == r)
        #expect(JSONWriter.string(back.json) == text)
    }

    @Test func everyConditionAnInstallerMustActOnIsAProblemThatSaysWhatToDo() {
        func problems(_ change: (inout AgentStatusReport) -> Void) -> [String] {
            var r = Self.busyGateway()
            change(&r)
            // The rule holds on the agentctl side too: the problems are derived from the JSON.
            #expect(AgentStatusReport(json: r.json)?.problems == r.problems)
            return r.problems
        }
        #expect(problems { $0.radios[0].state = "missing"; $0.radios[0].lastError = "rtl_433 not found in PATH" }
                == ["radio rtl433 missing: rtl_433 not found in PATH"])
        #expect(problems { $0.radios[2].state = "degraded" } == ["radio ble degraded: "])
        #expect(problems { $0.radios[2].ble?.exitsOnHold = "no advert for 95 s" } == ["presence: no advert for 95 s"])
        #expect(problems { $0.outbox.stats?.dead = 2 } == ["outbox: 2 event(s) parked as dead letters (refused by the receiver, or failing while it took others); see agentctl queue list --dead, then agentctl queue retry"])
        #expect(problems { $0.outbox.stats = nil; $0.outbox.readError = "database is locked" } == ["outbox: database is locked"])
        #expect(problems { $0.outbox.heldInMemory = 3 }
                == ["storage: full — 3 event(s) held in memory until space returns; free space in /var/lib/doorbell-agent"])
        #expect(problems { $0.outbox.movedAside = "/x.broken" }.first?.contains("moved to /x.broken") == true)
        #expect(problems { $0.uplink?.endpointGone = true }.first?.contains("410 Gone") == true)
        #expect(problems { $0.uplink?.lastErrorWallMicros = Self.t0 } == ["uplink: connect: connection refused"])
        // A failed heartbeat is reported the same way, until the cloud answers 2xx again (a
        // heartbeat or an event): no event needs to go for the problem to clear.
        #expect(problems { $0.uplink?.lastErrorWallMicros = Self.t0 - 400_000 } == ["uplink: connect: connection refused"])
        #expect(problems { $0.uplink?.lastErrorWallMicros = Self.t0 - 400_000; $0.uplink?.last2xxWallMicros = Self.t0 } == [])
        #expect(problems { $0.mqtt?.connected = false; $0.mqtt?.lastError = "broker refused: not authorised" } == ["mqtt: broker refused: not authorised"])
        #expect(problems { $0.mqtt?.connected = false } == [], "a broker not yet reached without an error is not a problem")
        #expect(problems { $0.actions[0].lastError = "exit 1" } == ["action chime: exit 1"])
        #expect(problems { $0.configProblem = "line 3: unknown key" } == ["config: line 3: unknown key"])
        #expect(problems { $0.phoneProblem = "phones.json was damaged" } == ["phones: phones.json was damaged"])
        #expect(problems { $0.threadStartFailures = 1 }.first?.hasPrefix("threads: 1 could not be started") == true)
        #expect(problems { $0.loops[1] = .init(name: "spill", health: .stuck, silentSeconds: 95, periodSeconds: 30) }
                == ["loop spill: no heartbeat for 95 s (it wakes at least every 30 s): stuck; the watchdog ping is withheld, so systemd restarts the agent (WatchdogSec= in the unit; without it, restart it yourself)"])
        #expect(problems { $0.loops[7] = .init(name: "metrics", health: .ended, silentSeconds: 0, periodSeconds: 30, reason: "its thread could not start (EAGAIN)") }
                .first?.hasPrefix("loop metrics: the loop ended: its thread could not start (EAGAIN); the watchdog ping is withheld") == true)
        #expect(problems { $0.clock.deliveryHeld = true; $0.clock.reason = "no NTP" }.first?.contains("(no NTP); delivery is held") == true)
    }

    @Test func theTableShowsEveryPartAndTheProblemsFirst() throws {
        var r = Self.busyGateway()
        r.radios[0].state = "restarting"
        r.radios[0].lastError = "rtl_433 exited with status 3"
        try Golden.check(StatusTable.render(r) + "\n", against: "status-table.golden.txt")
        let lines = StatusTable.render(r).split(separator: "\n")
        #expect(lines[0].hasPrefix("health ") && lines[0].hasSuffix(" degraded"))
        #expect(lines[1].hasPrefix("  problem ") && lines[1].hasSuffix(" radio rtl433 restarting: rtl_433 exited with status 3"))
    }

    @Test func theMetricsKeepTheirNamesAndEveryFamilyIsOneGroup() throws {
        let text = Self.busyGateway().prometheusText
        try Golden.check(text, against: "status-metrics.golden.prom")
        // The exposition format wants one HELP/TYPE per family and its samples together.
        var seen: [String] = []
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            var family = String(line.prefix { $0 != "{" && $0 != " " })
            for suffix in ["_bucket", "_sum", "_count"] where family.hasSuffix(suffix) && family.hasPrefix("doorbell_press_to_delivered") {
                family = String(family.dropLast(suffix.count))
            }
            if seen.last != family {
                #expect(!seen.contains(family), "\(family) appears in two groups")
                seen.append(family)
            }
        }
        #expect(text.contains("doorbell_radio_lines_total{radio=\"rtl433\"} 120\ndoorbell_radio_lines_total{radio=\"ook\"} 0"))
        #expect(text.contains("doorbell_observations_total 85\n"), "RF frames from configured devices: 100-30 + 20-5")
        #expect(text.contains("doorbell_ble_decoder_adverts_total{radio=\"ble\",decoder=\"bthome\",verdict=\"corrupt\"} 2"))
    }

    @Test func aRadioThisAgentctlDoesNotKnowStillShowsItsCounters() throws {
        let answer = try JSONReader.parse(#"{"version":"9","gateway_id":"g","radios":[{"name":"zigbee","state":"running","frames":4,"restarts":0,"last_error":null}]}"#)
        let r = try #require(AgentStatusReport(json: answer))
        #expect(StatusTable.render(r).contains("radio zigbee  running: 4 frames, 0 restarts"))
        #expect(AgentStatusReport(json: .array([])) == nil)
    }

    @Test func timesReadBackAsWritten() async {
        await propertyCheck(input: Gen.int(in: -2_000_000_000...7_000_000_000), Gen.int(in: 0...999_999)) { seconds, micros in
            let t = Int64(seconds) * 1_000_000 + Int64(micros)
            #expect(RFC3339.parse(RFC3339.format(micros: t)) == t)
        }
        #expect(RFC3339.parse("2026-11-26T16:05:00Z") == 1_795_709_100_000_000)
        #expect(RFC3339.parse("2026-11-26T16:05:00.5Z") == 1_795_709_100_500_000)
        for bad in ["", "2026-11-26 16:05:00Z", "2026-13-26T16:05:00Z", "2026-11-26T16:05:00.Z", "2026-11-26T16:05:00.1234567Z", "2026-11-26T16:05:00+01:00"] {
            #expect(RFC3339.parse(bad) == nil, "\(bad)")
        }
    }
}
