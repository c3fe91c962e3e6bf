import DoorbellCore
import Foundation
import XCTest

/// The agent's MQTT discovery checked by the judge that matters: a real Home Assistant core
/// (PyPI, .venv-ha) with its MQTT integration on a real Mosquitto. The sim board's recordings
/// (an RF press, a BTHome button press with its battery, a visitor's iBeacon arriving and
/// leaving) go through the agent; Home Assistant must create the devices under the gateway and
/// the entities, and take the states, without a warning about our messages.
final class HomeAssistantTests: XCTestCase {
    /// A broker on loopback and a Home Assistant on it, started.
    func house(_ dir: TempDir) throws -> (MosquittoBroker, HomeAssistantCore) {
        let broker = try MosquittoBroker(dir)
        try broker.start()
        do { return (broker, try HomeAssistantCore(dir, broker: broker)) } catch {
            broker.stop()
            throw error
        }
    }

    func testHomeAssistantCreatesTheDevicesAndEntitiesAndTakesTheStates() throws {
        let dir = try TempDir()
        let (broker, ha) = try house(dir)
        defer { ha.child.signal(SIGKILL); broker.stop() }
        let config = ha.config

        // The sim board, with the broker's port and its own state.
        let socket = dir.file("control.sock")
        let board = Paths.repoRoot + "/board/sim"
        let agentConfig = try dir.write("agent.toml", """
        gateway_id = "gw-ha"
        [paths]
        state_dir = "\(dir.file("state"))"
        control_socket = "\(socket)"
        [clock]
        require_sync = false
        [radio.rtl433]
        conf_file = "\(Paths.repoRoot)/board/common/rtl_433-doorbells.conf"
        replay = ["\(board)/recordings/front-door.ook"]
        [radio.ble]
        transport = "replay"
        replay = ["\(board)/recordings/garden.btsnoop"]
        [tracker.button]
        cooldown_ms = 0 # the installer's test press follows the replayed one at once
        [[region]]
        id = "visitor"
        name = "Visitor at the door"
        uuid = "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0"
        major = 100
        min_samples = 2
        exit_timeout_s = 2
        [[device]]
        id = "front-door"
        name = "Front door"
        radio = "rtl433"
        match = { code = "0x5A3C91" }
        [[device]]
        id = "garden-gate"
        name = "Garden gate"
        radio = "ble"
        match = { address = "C0:11:22:33:44:02" }
        [mqtt]
        host = "127.0.0.1"
        port = \(broker.port)
        """)
        let agent = try startAgent(dir, config: agentConfig, socket: socket)
        defer { agent.stop() }
        // The recordings replay at once; they go out after Home Assistant's birth (it has only just
        // started) or, if that came before the agent connected, after wait_for_home_assistant_s.
        eventually(90, "the recordings replayed and acknowledged") {
            agentStatus(socket)?["mqtt"]?["pending"]?.intValue == 0 && (agentStatus(socket)?["events"]?["beacon.exited"]?.intValue ?? 0) == 1
        }
        XCTAssertEqual(try injectPress(socket), 0)
        eventually(15, "acknowledged") { agentStatus(socket)?["mqtt"]?["pending"]?.intValue == 0 }
        eventually(15, "Home Assistant received the installer's press") { ha.received.count >= 2 }
        // Home Assistant saves its registries a few seconds after a change, its last states at stop.
        eventually(60, "Home Assistant saved its registries") {
            let entities = (try? String(contentsOfFile: config + "/.storage/core.entity_registry", encoding: .utf8)) ?? ""
            let devices = (try? String(contentsOfFile: config + "/.storage/core.device_registry", encoding: .utf8)) ?? ""
            return entities.contains("sensor.garden_gate_battery") && devices.contains("doorbell_gw-ha_visitor")
        }
        ha.child.signal(SIGTERM)
        XCTAssertNotNil(ha.child.wait(seconds: 60), "Home Assistant did not stop")
        func storage(_ name: String) throws -> JSONValue {
            try JSONReader.parse(String(contentsOfFile: config + "/.storage/" + name, encoding: .utf8))
        }
        let devices = try storage("core.device_registry")["data"]?["devices"]?.arrayValues ?? []
        func device(_ identifier: String) -> JSONValue? {
            devices.first { $0["identifiers"]?.arrayValues?.first?.arrayValues?.last?.stringValue == identifier }
        }
        let gateway = try XCTUnwrap(device("doorbell_gw-ha"), "\(devices)")
        for child in ["doorbell_gw-ha_front-door", "doorbell_gw-ha_garden-gate", "doorbell_gw-ha_visitor"] {
            XCTAssertEqual(device(child)?["via_device_id"]?.stringValue, gateway["id"]?.stringValue, "\(child) under the gateway")
        }
        let entities = (try storage("core.entity_registry")["data"]?["entities"]?.arrayValues ?? []).compactMap { $0["entity_id"]?.stringValue }
        for expected in ["event.front_door", "event.garden_gate", "sensor.garden_gate_battery", "binary_sensor.visitor_at_the_door",
                         "binary_sensor.doorbell_gateway_gw_ha_problem", "sensor.doorbell_gateway_gw_ha_events_waiting"] {
            XCTAssertTrue(entities.contains(expected), "\(expected) missing from \(entities)")
        }
        let states = (try storage("core.restore_state")["data"]?.arrayValues ?? []).compactMap { $0["state"] }
        func state(_ id: String) -> JSONValue? { states.first { $0["entity_id"]?.stringValue == id } }
        // Home Assistant's rule for a doorbell-class event entity: it offers `ring` (2025.x and later
        // warn "will stop working in Home Assistant 2027.4" otherwise; this 2024.3 core predates
        // the warning, so its rule is checked here on the entity it made).
        let frontDoor = state("event.front_door")?["attributes"]
        XCTAssertEqual(frontDoor?["device_class"]?.stringValue, "doorbell")
        XCTAssertTrue(frontDoor?["event_types"]?.arrayValues?.contains(.string("ring")) ?? false, "\(String(describing: frontDoor))")
        XCTAssertEqual(frontDoor?["event_type"]?.stringValue, "ring", "a doorbell's press rings")
        XCTAssertEqual(state("sensor.garden_gate_battery")?["state"]?.stringValue, "88")
        XCTAssertEqual(state("binary_sensor.visitor_at_the_door")?["state"]?.stringValue, "off", "the visitor left")
        XCTAssertEqual(state("binary_sensor.doorbell_gateway_gw_ha_problem")?["state"]?.stringValue, "off")
        ha.assertNoComplaint()
    }

    /// #26 item 7 against the real thing: presses published right after the discovery at the first
    /// start, and presses made while the broker was down and published when it came back, before
    /// Home Assistant (reconnecting on its own 10 s timer) had subscribed again. Home Assistant must
    /// receive each once (and its event entity fires on each). With `wait_for_home_assistant_s = 0` (publishing at connect, as before) the
    /// second part loses them.
    func testHomeAssistantFiresEveryPressAtFirstStartAndAcrossABrokerRestart() throws {
        let dir = try TempDir()
        let (broker, ha) = try house(dir)
        defer { ha.child.signal(SIGKILL); broker.stop() }
        defer { if (testRun?.failureCount ?? 0) > 0 { try? FileManager.default.copyItem(atPath: dir.path, toPath: "/tmp/ha-failed-" + String(dir.path.suffix(8))) } }
        let socket = dir.file("control.sock")
        let agentConfig = try mqttAgentConfig(dir, socket: socket, port: broker.port, gateway: "gw-ha", waitForHomeAssistant: nil)
        let agent = try startAgent(dir, config: agentConfig, socket: socket)
        defer { agent.stop() }
        // The first start: pressed at once, while the discovery is only just out.
        let first = try injectPressIDs(socket, count: 2)
        eventually(90, "Home Assistant received the first presses") { Set(ha.received).isSuperset(of: first) }

        // The broker goes away for 20 s and comes back empty. Home Assistant (paho) retries after
        // 1, 2, 4, 8, 16 s: it is back some 10 s after the broker; the agent within a second.
        broker.stop()
        let outage = Date()
        eventually(30, "Home Assistant saw the broker go") { ha.child.stderr.contains("Disconnected from MQTT server") }
        let during = try injectPressIDs(socket, count: 5)
        usleep(useconds_t(max(0, 20 - Date().timeIntervalSince(outage)) * 1_000_000))
        try broker.start()
        eventually(120, "Home Assistant received the presses made while the broker was down") { Set(ha.received).isSuperset(of: during) }
        eventually(15, "acknowledged") { agentStatus(socket)?["mqtt"]?["pending"]?.intValue == 0 }
        let received = ha.received
        for id in first + during { XCTAssertEqual(received.filter { $0 == id }.count, 1, "\(id) received \(received.filter { $0 == id }.count) times") }
        XCTAssertEqual(agentStatus(socket)?["mqtt"]?["home_assistant"]?.stringValue, "online")
        ha.assertNoComplaint()
    }
}

/// A Home Assistant core (.venv-ha) with only its MQTT integration, set up as the UI would (a
/// config entry) on `broker`, its MQTT client's log at debug: how the tests see what it received.
final class HomeAssistantCore {
    static let hass = Paths.repoRoot + "/.venv-ha/bin/hass"
    let child: Child
    let config: String

    init(_ dir: TempDir, broker: MosquittoBroker) throws {
        try requireFile(Self.hass, "Home Assistant (scripts/venv-ha.sh; make test runs it)")
        try requireFile("/usr/sbin/mosquitto", "mosquitto (make test installs it)")
        try requireFile(Paths.agentBinary, "doorbell-agent")
        config = dir.file("ha")
        try FileManager.default.createDirectory(atPath: config + "/.storage", withIntermediateDirectories: true)
        _ = try dir.write("ha/configuration.yaml", """
        homeassistant:
          name: test
          latitude: 0
          longitude: 0
          elevation: 0
          unit_system: metric
          time_zone: UTC
        http:
          server_host: 127.0.0.1
          server_port: \(try freeLoopbackPort())
        logger:
          default: warning
          logs:
            homeassistant.components.mqtt.client: debug
            homeassistant.bootstrap: info
        """)
        _ = try dir.write("ha/.storage/core.config_entries", """
        {"version": 1, "minor_version": 2, "key": "core.config_entries", "data": {"entries": [
         {"entry_id": "01doorbelltestmqttentry00000", "version": 1, "minor_version": 1, "domain": "mqtt", "title": "test broker",
          "data": {"broker": "127.0.0.1", "port": \(broker.port), "discovery": true}, "options": {},
          "pref_disable_new_entities": false, "pref_disable_polling": false, "source": "user", "unique_id": null, "disabled_by": null}]}}
        """)
        child = try Child(Self.hass, ["-c", config, "--skip-pip"], dir: dir, name: "hass")
        eventually(180, "Home Assistant started") { child.stderr.contains("Home Assistant initialized") }
        XCTAssertFalse(child.stderr.contains("recovery mode"), "Home Assistant is missing a package of its own: \(child.stderr.suffix(3000))")
        eventually(120, "Home Assistant subscribed to discovery") { child.stderr.contains("Subscribing to homeassistant/+/+/+/config") }
    }

    /// The ids of the events Home Assistant received on the front door's event topic, in order,
    /// repeats included: its MQTT client subscribes there only for the event entity, which fires
    /// on each (its debug log shows every message received).
    var received: [String] {
        (child.stdout + child.stderr).split(separator: "\n").compactMap { line in
            guard line.contains("Received message on doorbell/gw-ha/front-door/event"), let r = line.range(of: #""id":""#) else { return nil }
            let id = line[r.upperBound...].prefix { $0 != "\"" }
            return id.isEmpty ? nil : String(id)
        }
    }

    func assertNoComplaint(file: StaticString = #filePath, line: UInt = #line) {
        for l in (child.stdout + child.stderr).split(separator: "\n") where l.contains("doorbell") && (l.contains("WARNING") || l.contains("ERROR")) {
            XCTFail("Home Assistant complained about our messages: \(l)", file: file, line: line)
        }
    }
}
