import DoorbellCore
import Foundation
import XCTest

/// A real Mosquitto broker (Debian's `mosquitto`) on loopback, restarted on the same port.
final class MosquittoBroker {
    let dir: TempDir
    let port: Int
    let conf: String
    private(set) var child: Child?
    private var runs = 0

    init(_ dir: TempDir, conf extra: String = "allow_anonymous true\n") throws {
        self.dir = dir
        port = try freeLoopbackPort()
        conf = try dir.write("mosquitto.conf", "listener \(port) 127.0.0.1\npersistence false\n" + extra)
    }

    func start() throws {
        runs += 1
        child = try Child("/usr/sbin/mosquitto", ["-c", conf], dir: dir, name: "mosquitto-\(runs)")
        eventually(15, "mosquitto listens on \(port)") { canConnect(port: port) }
    }

    func stop() { child?.signal(SIGKILL); child?.wait(seconds: 5); child = nil }

    /// Starts the broker again, empty, with `TopicRecorder` subscribed before the agent can get in.
    /// A plain restart races: the agent (retrying every ≤ 1 s) can reconnect and drain its waiting
    /// events before a new subscriber's SUBSCRIBE lands, and those events are never seen. So the
    /// broker first admits only the recorder's login; once a probe published through the broker has
    /// come back to the recorder, anonymous clients (the agent) are admitted by a reload (SIGHUP).
    func restartWithRecorderFirst(name: String) throws -> TopicRecorder {
        let passwords = dir.file("recorder.passwd")
        let made = try runCommand("/usr/bin/mosquitto_passwd", ["-b", "-c", passwords, "recorder", "recorder-secret"])
        XCTAssertEqual(made.status, 0, "mosquitto_passwd: \(made.stderr)")
        chmod(passwords, 0o644) // read after mosquitto drops to its own user
        let gated = try dir.write("mosquitto-gated.conf", "listener \(port) 127.0.0.1\npersistence false\nallow_anonymous false\npassword_file \(passwords)\n")
        runs += 1
        child = try Child("/usr/sbin/mosquitto", ["-c", gated], dir: dir, name: "mosquitto-\(runs)")
        eventually(15, "mosquitto listens on \(port)") { canConnect(port: port) }
        let login = ["-u", "recorder", "-P", "recorder-secret"]
        let recorder = try TopicRecorder(dir, port: port, name: name, extra: login)
        eventually(15, "the recorder is subscribed (its probe came back)") {
            _ = try? runCommand("/usr/bin/mosquitto_pub", ["-h", "127.0.0.1", "-p", String(port), "-q", "1", "-t", "probe/ready", "-m", "x"] + login)
            return recorder.messages.contains { $0.topic == "probe/ready" }
        }
        _ = try dir.write("mosquitto-gated.conf", "listener \(port) 127.0.0.1\npersistence false\nallow_anonymous true\npassword_file \(passwords)\n")
        child?.signal(SIGHUP)
        return recorder
    }
}

/// `mosquitto_sub` on every topic: one line per message, `retained<TAB>topic<TAB>payload`.
final class TopicRecorder {
    let child: Child
    init(_ dir: TempDir, port: Int, name: String = "sub", extra: [String] = []) throws {
        child = try Child("/usr/bin/mosquitto_sub", ["-h", "127.0.0.1", "-p", String(port), "-t", "#", "-q", "1", "-F", "%r\t%t\t%p"] + extra,
                          dir: dir, name: name)
    }
    var messages: [(retained: Bool, topic: String, payload: String)] {
        child.stdout.split(separator: "\n").compactMap { line in
            let parts = line.split(separator: "\t", maxSplits: 2, omittingEmptySubsequences: false)
            guard parts.count == 3 else { return nil }
            return (parts[0] == "1", String(parts[1]), String(parts[2]))
        }
    }
    func payloads(_ topic: String) -> [JSONValue] {
        messages.filter { $0.topic == topic }.compactMap { try? JSONReader.parse($0.payload) }
    }
    func stop() { child.stop() }
}

func canConnect(port: Int) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    addr.sin_port = UInt16(port).bigEndian
    return withUnsafePointer(to: &addr) { p in
        p.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
    }
}

/// An agent with a quiet radio, one RF button "front-door" (each inject a press of its own) and
/// `[mqtt]` on the loopback broker at `port`, reconnecting within a second.
func mqttAgentConfig(_ dir: TempDir, socket: String, port: Int, gateway: String = "gw", waitForHomeAssistant: Int?,
                     extra: String = "") throws -> String {
    try dir.write("agent.toml", """
    gateway_id = "\(gateway)"
    [paths]
    state_dir = "\(dir.file("state"))"
    control_socket = "\(socket)"
    [clock]
    require_sync = false
    [radio.rtl433]
    binary = "\(try quietRadio(dir))"
    [tracker.button]
    cooldown_ms = 0
    repeat_gap_ms = 20
    [[device]]
    id = "front-door"
    name = "Front door"
    match = { code = 1 }
    [mqtt]
    host = "127.0.0.1"
    port = \(port)
    retry_initial_ms = 100
    retry_max_ms = 1000
    \(waitForHomeAssistant.map { "wait_for_home_assistant_s = \($0)" } ?? "")
    \(extra)
    """)
}

/// `agentctl inject press` of the front door `count` times, further apart than repeat_gap_ms
/// (separate presses); the event ids.
func injectPressIDs(_ socket: String, count: Int) throws -> [String] {
    try (0..<count).map { _ in
        usleep(30_000)
        let r = try runCommand(Paths.agentctlBinary, ["inject", "press", "--device", "front-door", "--socket", socket, "--json"])
        XCTAssertEqual(r.status, 0, r.stderr)
        return (try? JSONReader.parse(r.stdout))?["event_ids"]?.arrayValues?.first?.stringValue ?? ""
    }
}

/// The MQTT sink against a real broker: presses and Home Assistant discovery arrive; a broker
/// that is down (and comes back empty, without persistence) loses nothing and gets the events
/// in order; a kill -9 mid-publish loses nothing; a refused login is a clear status.
final class MQTTSinkTests: XCTestCase {
    func requireBroker() throws {
        try requireFile("/usr/sbin/mosquitto", "mosquitto (make test installs it)")
        try requireFile("/usr/bin/mosquitto_sub", "mosquitto_sub (make test installs mosquitto-clients)")
        try requireFile(Paths.agentBinary, "doorbell-agent")
    }

    /// `waitForHomeAssistant`: nil leaves the default; these tests have no Home Assistant, so 0.
    func config(_ dir: TempDir, socket: String, port: Int, waitForHomeAssistant: Int? = 0, mqtt extra: String = "") throws -> String {
        try mqttAgentConfig(dir, socket: socket, port: port, waitForHomeAssistant: waitForHomeAssistant, extra: extra)
    }

    func mqttStatus(_ socket: String) -> JSONValue? { agentStatus(socket)?["mqtt"] }

    func injectIDs(_ socket: String, count: Int) throws -> [String] { try injectPressIDs(socket, count: count) }

    func testPressesAndDiscoveryArriveAndABrokerOutageLosesNothing() throws {
        try requireBroker()
        let dir = try TempDir()
        let broker = try MosquittoBroker(dir)
        try broker.start()
        defer { broker.stop() }
        var sub = try TopicRecorder(dir, port: broker.port)
        let socket = dir.file("control.sock")
        let metrics = dir.file("agent.prom")
        let agent = try startAgent(dir, config: try config(dir, socket: socket, port: broker.port,
                                                           mqtt: "[metrics]\nfile = \"\(metrics)\"\ninterval_s = 1"), socket: socket)
        defer { agent.stop() }
        eventually(15, "connected") { mqttStatus(socket)?["connected"]?.boolValue == true }

        let first = try injectIDs(socket, count: 1)
        eventually(10, "the press on its Home Assistant event topic") { !sub.payloads("doorbell/gw/front-door/event").isEmpty }
        let press = sub.payloads("doorbell/gw/front-door/event").first
        XCTAssertEqual(press?["event_type"]?.stringValue, "ring", "a doorbell's press rings (Home Assistant's doorbell type)")
        XCTAssertEqual(press?["id"]?.stringValue, first.first)
        XCTAssertEqual(sub.payloads("doorbell/gw/events").first?["id"]?.stringValue, first.first)
        // Discovery: an event entity with its device triggers, under the gateway.
        let event = sub.payloads("homeassistant/event/doorbell_gw/front-door/config").first
        XCTAssertEqual(event?["state_topic"]?.stringValue, "doorbell/gw/front-door/event")
        XCTAssertEqual(event?["event_types"]?.arrayValues?.compactMap(\.stringValue), ["ring", "hold"])
        XCTAssertEqual(event?["device"]?["via_device"]?.stringValue, "doorbell_gw")
        XCTAssertEqual(event?["availability_topic"]?.stringValue, "doorbell/gw/status")
        XCTAssertNotNil(sub.payloads("homeassistant/device_automation/doorbell_gw/front-door_press/config").first)
        XCTAssertTrue(sub.messages.contains { $0.topic == "doorbell/gw/status" && $0.payload == "online" })
        XCTAssertFalse(sub.messages.contains { $0.payload.contains("whsec_") || $0.payload.contains("bindkey") })
        eventually(10, "acknowledged") { mqttStatus(socket)?["pending"]?.intValue == 0 }
        eventually(10, "the sink's metrics") {
            let text = (try? String(contentsOfFile: metrics, encoding: .utf8)) ?? ""
            return text.contains("doorbell_mqtt_connected 1") && text.contains("doorbell_mqtt_acknowledged_total 1") && text.contains("doorbell_mqtt_pending 0")
        }

        // The broker dies; presses go on (the chime would ring) and wait in the outbox.
        sub.stop()
        broker.stop()
        let during = try injectIDs(socket, count: 3)
        eventually(15, "the sink says it lost the broker") {
            mqttStatus(socket)?["connected"]?.boolValue == false && mqttStatus(socket)?["pending"]?.intValue == 3
        }
        XCTAssertTrue((agentStatus(socket)?["problems"]?.arrayValues ?? []).contains { $0.stringValue?.hasPrefix("mqtt:") ?? false },
                      "\(String(describing: agentStatus(socket)?["problems"]))")

        // It comes back with nothing (no persistence): the events arrive, in order.
        sub = try broker.restartWithRecorderFirst(name: "sub-2")
        defer { sub.stop() }
        eventually(30, "the waiting events after the broker returned") { sub.payloads("doorbell/gw/events").count >= 3 }
        XCTAssertEqual(sub.payloads("doorbell/gw/events").compactMap { $0["id"]?.stringValue }, during)
        XCTAssertEqual(sub.payloads("doorbell/gw/events").compactMap { $0["sequence"]?.intValue }, [2, 3, 4])
        eventually(10, "nothing pending") { mqttStatus(socket)?["pending"]?.intValue == 0 }
        // Discovery is published again to the empty broker.
        eventually(10, "discovery again") { !sub.payloads("homeassistant/event/doorbell_gw/front-door/config").isEmpty }
        XCTAssertEqual(agentStatus(socket)?["health"]?.stringValue, "ok", "\(String(describing: agentStatus(socket)?["problems"]))")
    }

    func testAKillDashNineMidPublishLosesNothing() throws {
        try requireBroker()
        let dir = try TempDir()
        let broker = try MosquittoBroker(dir)
        try broker.start()
        defer { broker.stop() }
        let sub = try TopicRecorder(dir, port: broker.port)
        defer { sub.stop() }
        let socket = dir.file("control.sock")
        // MQTT 5 here (a session expiry interval keeps the session); 3.1.1 in the other tests.
        let cfg = try config(dir, socket: socket, port: broker.port, mqtt: "protocol = \"5\"")
        var agent = try startAgent(dir, config: cfg, socket: socket)
        eventually(15, "connected") { mqttStatus(socket)?["connected"]?.boolValue == true }
        // The broker stops answering (SIGSTOP): the publishes go out and no PUBACK comes back.
        broker.child?.signal(SIGSTOP)
        let ids = try injectIDs(socket, count: 20)
        XCTAssertEqual(mqttStatus(socket)?["pending"]?.intValue, 20)
        agent.signal(SIGKILL)
        agent.wait(seconds: 5)
        broker.child?.signal(SIGCONT)
        agent = try startAgent(dir, config: cfg, socket: socket, name: "agent-2")
        defer { agent.stop() }
        eventually(30, "every event at least once") { Set(sub.payloads("doorbell/gw/events").compactMap { $0["id"]?.stringValue }).isSuperset(of: ids) }
        eventually(10, "nothing pending") { mqttStatus(socket)?["pending"]?.intValue == 0 }
    }

    func testARefusedLoginIsAClearErrorInStatus() throws {
        try requireBroker()
        let dir = try TempDir()
        let passwords = dir.file("passwd")
        let made = try runCommand("/usr/bin/mosquitto_passwd", ["-b", "-c", passwords, "doorbell", "right-password"])
        XCTAssertEqual(made.status, 0, made.stderr)
        let broker = try MosquittoBroker(dir, conf: "allow_anonymous false\npassword_file \(passwords)\n")
        try broker.start()
        defer { broker.stop() }
        let secret = try dir.write("mqtt.pass", "wrong-password\n")
        chmod(secret, 0o600)
        let socket = dir.file("control.sock")
        let agent = try startAgent(dir, config: try config(dir, socket: socket, port: broker.port,
                                                           mqtt: "username = \"doorbell\"\npassword_file = \"\(secret)\""), socket: socket)
        defer { agent.stop() }
        eventually(15, "the refusal in status") { mqttStatus(socket)?["last_error"]?.stringValue?.contains("username and password_file") ?? false }
        XCTAssertEqual(mqttStatus(socket)?["connected"]?.boolValue, false)
        XCTAssertEqual(agentStatus(socket)?["health"]?.stringValue, "degraded")
        let human = try runCommand(Paths.agentctlBinary, ["status", "--socket", socket])
        XCTAssertTrue(human.stdout.contains("NOT connected"), human.stdout)
    }

    /// A broker that stops answering holds nothing else up: the chime rings and the cloud gets
    /// every press; the events stay in the outbox until the broker has them too.
    func testAStuckBrokerDoesNotSlowTheChimeOrTheCloud() throws {
        try requireBroker()
        let dir = try TempDir()
        let broker = try MosquittoBroker(dir)
        try broker.start()
        defer { broker.child?.signal(SIGCONT); broker.stop() }
        let receiver = try ScriptedReceiver(dir: dir, ["--script", "200"])
        defer { receiver.stop() }
        let secret = try webhookSecret(dir)
        let chime = try ChimeRecorder(dir)
        let socket = dir.file("control.sock")
        let cfg = try config(dir, socket: socket, port: broker.port, mqtt: """
            \(chime.toml)
            [uplink]
            url = "\(receiver.url)"
            ca_file = "\(receiver.caFile)"
            hmac_secret_file = "\(secret)"
            retry_initial_ms = 200
            retry_max_ms = 1000
            """)
        let agent = try startAgent(dir, config: cfg, socket: socket)
        defer { agent.stop() }
        eventually(15, "connected") { mqttStatus(socket)?["connected"]?.boolValue == true }
        broker.child?.signal(SIGSTOP)
        let ids = try injectIDs(socket, count: 5)
        eventually(20, "the cloud has every press") { receiver.requests.count >= 5 }
        XCTAssertEqual(receiver.requests.compactMap { try? JSONReader.parse($0["body"]?.stringValue ?? "") }.compactMap { $0["id"]?.stringValue }, ids)
        eventually(10, "five chimes") { chime.rings.count == 5 }
        let s = agentStatus(socket)
        XCTAssertEqual(s?["outbox"]?["depth"]?.intValue, 5, "kept for the broker")
        XCTAssertEqual(s?["mqtt"]?["pending"]?.intValue, 5)
        broker.child?.signal(SIGCONT)
        eventually(30, "the broker has them too; the outbox is empty") { agentStatus(socket)?["outbox"]?["depth"]?.intValue == 0 }
    }

    /// Discovery follows the config: a reload removes the entities of a device that left, and
    /// Home Assistant's birth message brings the configs again.
    func testReloadRemovesEntitiesAndHomeAssistantsBirthRepublishes() throws {
        try requireBroker()
        let dir = try TempDir()
        let broker = try MosquittoBroker(dir)
        try broker.start()
        defer { broker.stop() }
        let sub = try TopicRecorder(dir, port: broker.port)
        defer { sub.stop() }
        let socket = dir.file("control.sock")
        let garage = "[[device]]\nid = \"garage\"\nmatch = { code = 2 }\n"
        let cfg = try config(dir, socket: socket, port: broker.port, mqtt: garage)
        let agent = try startAgent(dir, config: cfg, socket: socket)
        defer { agent.stop() }
        let garageTopic = "homeassistant/event/doorbell_gw/garage/config"
        eventually(15, "the garage's entity") { !sub.payloads(garageTopic).isEmpty }
        _ = try config(dir, socket: socket, port: broker.port)
        agent.signal(SIGHUP)
        eventually(15, "an empty retained config removes it") { sub.messages.contains { $0.topic == garageTopic && $0.payload.isEmpty } }
        let before = sub.payloads("homeassistant/event/doorbell_gw/front-door/config").count
        let birth = try runCommand("/usr/bin/mosquitto_pub", ["-h", "127.0.0.1", "-p", String(broker.port), "-t", "homeassistant/status", "-m", "online"])
        XCTAssertEqual(birth.status, 0, birth.stderr)
        eventually(15, "discovery again after Home Assistant's birth message") {
            sub.payloads("homeassistant/event/doorbell_gw/front-door/config").count > before
        }
        let junk = try runCommand("/usr/bin/mosquitto_pub", ["-h", "127.0.0.1", "-p", String(broker.port), "-t", "homeassistant/status", "-m", "{\"hostile\": true}"])
        XCTAssertEqual(junk.status, 0, junk.stderr)
        eventually(10, "a hostile message is ignored and counted") { mqttStatus(socket)?["ignored"]?["unexpected_payload"]?.intValue == 1 }
        XCTAssertEqual(mqttStatus(socket)?["connected"]?.boolValue, true)
    }

    /// TLS: the broker's certificate checked against ca_file; a wrong CA is a clear error.
    func testTLSToTheBrokerAndAWrongCAIsAClearError() throws {
        try requireBroker()
        let dir = try TempDir()
        let pki = dir.file("pki")
        let made = try runCommand(Paths.repoRoot + "/scripts/make-test-pki.sh", [pki])
        XCTAssertEqual(made.status, 0, made.stderr)
        // Mosquitto started as root reads its key after dropping to its own user.
        chmod(pki + "/server.key", 0o644)
        // Mosquitto started as root reads its key after dropping to its own user.
        chmod(pki + "/server.key", 0o644)
        let broker = try MosquittoBroker(dir, conf: "allow_anonymous true\ncafile \(pki)/ca.pem\ncertfile \(pki)/server.pem\nkeyfile \(pki)/server.key\n")
        try broker.start()
        defer { broker.stop() }
        let other = dir.file("other-pki")
        XCTAssertEqual(try runCommand(Paths.repoRoot + "/scripts/make-test-pki.sh", [other]).status, 0)
        let socket = dir.file("control.sock")
        var agent = try startAgent(dir, config: try config(dir, socket: socket, port: broker.port, mqtt: "ca_file = \"\(other)/ca.pem\""), socket: socket)
        eventually(15, "the TLS failure in status") { mqttStatus(socket)?["last_error"]?.stringValue?.contains("TLS") ?? false }
        XCTAssertTrue(mqttStatus(socket)?["last_error"]?.stringValue?.contains("ca_file") ?? false, "\(String(describing: mqttStatus(socket)))")
        XCTAssertEqual(mqttStatus(socket)?["broker"]?.stringValue, "mqtts://127.0.0.1:\(broker.port)")
        agent.stop()
        agent = try startAgent(dir, config: try config(dir, socket: socket, port: broker.port, mqtt: "ca_file = \"\(pki)/ca.pem\""), socket: socket, name: "agent-2")
        defer { agent.stop() }
        eventually(15, "connected over TLS") { mqttStatus(socket)?["connected"]?.boolValue == true }
        XCTAssertEqual(try injectIDs(socket, count: 1).count, 1)
        eventually(10, "acknowledged over TLS") { mqttStatus(socket)?["acknowledged"]?.intValue == 1 }
    }

    /// The outbox's bounds hold while the broker is away; when it returns, what was evicted is
    /// explained by the gateway.evicted event on the same topic, so every sequence is accounted for.
    func testEvictionWhileTheBrokerIsAwayIsExplainedToTheHouse() throws {
        try requireBroker()
        let dir = try TempDir()
        let broker = try MosquittoBroker(dir)
        try broker.start()
        defer { broker.stop() }
        let socket = dir.file("control.sock")
        let agent = try startAgent(dir, config: try config(dir, socket: socket, port: broker.port, mqtt: "[outbox]\nmax_events = 10"), socket: socket)
        defer { agent.stop() }
        eventually(15, "connected") { mqttStatus(socket)?["connected"]?.boolValue == true }
        broker.stop()
        _ = try injectIDs(socket, count: 15)
        let sub = try broker.restartWithRecorderFirst(name: "sub")
        defer { sub.stop() }
        eventually(30, "drained to the broker") { agentStatus(socket)?["outbox"]?["depth"]?.intValue == 0 }
        let events = sub.payloads("doorbell/gw/events")
        var seen = Set(events.compactMap { $0["sequence"]?.intValue })
        for e in events where e["type"]?.stringValue == "gateway.evicted" {
            for s in e["data"]?["sequences"]?.arrayValues ?? [] { if let n = s.intValue { seen.insert(n) } }
        }
        let last = try XCTUnwrap(seen.max())
        XCTAssertEqual(seen, Set(1...last), "every sequence either arrived or is listed as evicted")
        XCTAssertTrue(events.contains { $0["type"]?.stringValue == "gateway.evicted" })
    }

    /// A broker that requires client certificates: the gateway's cert_file/key_file get it in.
    func testABrokerThatRequiresAClientCertificate() throws {
        try requireBroker()
        let dir = try TempDir()
        let pki = dir.file("pki")
        XCTAssertEqual(try runCommand(Paths.repoRoot + "/scripts/make-test-pki.sh", [pki]).status, 0)
        chmod(pki + "/server.key", 0o644) // mosquitto reads it after dropping to its own user
        // The gateway's client certificate, signed by the same test CA.
        let ext = try dir.write("client.ext", "basicConstraints = critical, CA:FALSE\nkeyUsage = critical, digitalSignature\nextendedKeyUsage = clientAuth\n")
        for args in [["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", dir.file("gw.key")],
                     ["req", "-new", "-key", dir.file("gw.key"), "-subj", "/CN=gw", "-out", dir.file("gw.csr")],
                     ["x509", "-req", "-in", dir.file("gw.csr"), "-CA", pki + "/ca.pem", "-CAkey", pki + "/ca.key", "-days", "2",
                      "-set_serial", "7", "-extfile", ext, "-out", dir.file("gw.pem")]] {
            let r = try runCommand("/usr/bin/openssl", args)
            XCTAssertEqual(r.status, 0, r.stderr)
        }
        let broker = try MosquittoBroker(dir, conf: "allow_anonymous true\nrequire_certificate true\ncafile \(pki)/ca.pem\ncertfile \(pki)/server.pem\nkeyfile \(pki)/server.key\n")
        try broker.start()
        defer { broker.stop() }
        let socket = dir.file("control.sock")
        let without = try startAgent(dir, config: try config(dir, socket: socket, port: broker.port, mqtt: "ca_file = \"\(pki)/ca.pem\""),
                                     socket: socket, name: "agent-without")
        eventually(15, "refused without a certificate, and said so") { mqttStatus(socket)?["last_error"]?.stringValue != nil }
        XCTAssertEqual(mqttStatus(socket)?["connected"]?.boolValue, false)
        without.stop()
        let agent = try startAgent(dir, config: try config(dir, socket: socket, port: broker.port, mqtt: """
            ca_file = "\(pki)/ca.pem"
            cert_file = "\(dir.file("gw.pem"))"
            key_file = "\(dir.file("gw.key"))"
            """), socket: socket)
        defer { agent.stop() }
        eventually(15, "connected with the client certificate") { mqttStatus(socket)?["connected"]?.boolValue == true }
        XCTAssertEqual(try injectIDs(socket, count: 1).count, 1)
        eventually(10, "acknowledged") { mqttStatus(socket)?["acknowledged"]?.intValue == 1 }
    }
}
