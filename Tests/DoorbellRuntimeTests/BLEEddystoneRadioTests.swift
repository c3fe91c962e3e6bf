import DoorbellCore
import DoorbellRuntime
import Foundation
import XCTest

/// An Eddystone-UID beacon through the whole agent: the virtual controller advertises it (UID
/// and TLM interleaved from one address), the agent scans, and exactly one arrival and one
/// departure reach the HTTPS receiver, with the beacon's telemetry; status and metrics count the
/// decoder's answers.
extension BLERadioTests {
    func testAnEddystoneBeaconArrivesAndLeavesOnce() throws {
        try requireHarness()
        let dir = try TempDir()
        let scenario = """
        {"name": "eddystone-visit",
         "advertisers": [
           {"id": "keys", "kind": "eddystone_uid", "address": "C0:11:22:33:44:05", "namespace": "edd1ebeac04e5defa017",
            "instance": "0123456789ab", "tx_power": -18, "battery_mv": 2950, "temperature_c": 21.5, "rotate_s": 0.5,
            "rssi": -55, "interval_ms": 100},
           {"id": "stranger", "kind": "eddystone_uid", "address": "C0:11:22:33:44:06", "namespace": "edd1ebeac04e5defa017",
            "instance": "00000000ffff", "rssi": -50, "interval_ms": 200},
           {"id": "noise1", "kind": "noise_mfr", "address": "CA:58:B7:91:F1:D8"}],
         "events": [
           {"t": 0.0, "id": "noise1", "action": "on", "duration": 8.0},
           {"t": 0.5, "id": "stranger", "action": "on", "duration": 6.0},
           {"t": 1.0, "id": "keys", "action": "on", "duration": 3.0}]}
        """
        let radio = try startRadio(dir, scenario: scenario)
        defer { radio.child.stop() }
        let socket = dir.file("control.sock")
        let (receiver, secret) = try acceptingReceiver(dir)
        defer { receiver.stop() }
        let ble = """
        [radio.ble]
        transport = "tcp"
        address = "127.0.0.1:\(radio.port)"

        [[region]]
        id = "keys"
        name = "Keys"
        namespace = "EDD1EBEAC04E5DEFA017"
        instance = "0123456789ab"
        enter_rssi = -80
        min_samples = 2
        exit_timeout_s = 2
        """
        let config = try dir.write("agent.toml", agentConfig(stateDir: dir.file("state"), socket: socket, radio: ble, devices: [],
                                                             url: receiver.url, caFile: receiver.caFile, secretFile: secret,
                                                             extra: "[metrics]\nfile = \"\(dir.file("agent.prom"))\"\ninterval_s = 1\n"))
        let agent = try startAgent(dir, config: config, socket: socket)
        defer { agent.stop() }

        waitForVisitDelivered(radio, socket: socket, seconds: 40)
        let bodies = receiver.requests.compactMap { try? JSONReader.parse($0["body"]?.stringValue ?? "") }
        XCTAssertEqual(bodies.compactMap { $0["type"]?.stringValue }, ["beacon.entered", "beacon.exited"],
                       "exactly one visit, nothing from the stranger or the noise: \(agent.stderr.suffix(2000))")
        XCTAssertTrue(bodies.allSatisfy { $0["device"]?["id"]?.stringValue == "keys" })
        let entered = bodies.first
        XCTAssertEqual(entered?["data"]?["namespace"]?.stringValue, "edd1ebeac04e5defa017")
        XCTAssertEqual(entered?["data"]?["instance"]?.stringValue, "0123456789ab")
        XCTAssertNil(entered?["data"]?["uuid"])
        // By its departure the beacon's TLM frames have been paired with it by address.
        let exited = bodies.last
        XCTAssertEqual(exited?["data"]?["battery_mv"]?.intValue, 2950)
        XCTAssertEqual(exited?["data"]?["temperature_c"]?.doubleValue, 21.5)
        XCTAssertEqual(exited?["data"]?["reason"]?.stringValue, "timeout")

        let status = agentStatus(socket)?["radios"]?.arrayValues?.first { $0["name"]?.stringValue == "ble" }
        let eddystone = status?["decoders"]?["eddystone"]
        XCTAssertGreaterThan(eddystone?["seen"]?.intValue ?? 0, 10, "\(String(describing: status))")
        XCTAssertEqual(eddystone?["corrupt"]?.intValue, 0)
        XCTAssertGreaterThan(status?["decoders"]?["observations"]?["eddystone_tlm"]?.intValue ?? 0, 0)
        let table = try runCommand(Paths.agentctlBinary, ["status", "--socket", socket]).stdout
        XCTAssertTrue(table.contains("eddystone \(eddystone?["seen"]?.intValue ?? -1) seen, 0 corrupt"), table)

        // The scan lists the stranger with a snippet that selects it.
        let scan = try runCommand(Paths.agentctlBinary, ["scan", "--json", "--seconds", "0", "--socket", socket]).stdout
        XCTAssertTrue(scan.contains("edd1ebeac04e5defa017/00000000ffff") && scan.contains("namespace = \\\"edd1ebeac04e5defa017\\\""), scan)

        eventually(10, "metrics written with the decoder counts") {
            ((try? String(contentsOfFile: dir.file("agent.prom"), encoding: .utf8)) ?? "")
                .contains("doorbell_ble_decoder_adverts_total{radio=\"ble\",decoder=\"eddystone\",verdict=\"seen\"}")
        }
        let metrics = (try? String(contentsOfFile: dir.file("agent.prom"), encoding: .utf8)) ?? ""
        XCTAssertTrue(metrics.contains("doorbell_ble_decoder_adverts_total{radio=\"ble\",decoder=\"ibeacon\",verdict=\"corrupt\"} 0"), metrics)
    }
}
