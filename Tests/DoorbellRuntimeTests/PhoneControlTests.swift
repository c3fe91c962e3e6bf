import DoorbellCore
import DoorbellRuntime
import Foundation
import XCTest

/// The owner's commands for the phone link, through the real agent, agentctl and the control
/// socket, with the BLE radio on the virtual controller: the pairing window, the bond list from
/// the store on disk, forgetting, answering, and what the status shows.
final class PhoneControlTests: XCTestCase {
    func requireHarness() throws { try EmulatedPhone.requireHarness() }

    /// The virtual controller with nothing on the air, and an agent with only the BLE radio on it.
    func start(_ dir: TempDir, ble: String) throws -> (radio: Child, agent: Child, socket: String) {
        let scenario = try dir.write("scenario.json", #"{"name": "quiet", "advertisers": [], "events": []}"#)
        let ready = dir.file("radio-ready.json")
        let radio = try Child(BLERadioTests.python, [BLERadioTests.virtualRadio, "--port", "0", "--scenario", scenario, "--hold",
                                                     "--max-seconds", "120", "--ready-file", ready], dir: dir, name: "virtual-radio")
        eventually(30, "virtual controller ready") { FileManager.default.fileExists(atPath: ready) }
        let port = try JSONReader.parse(String(contentsOfFile: ready, encoding: .utf8))["port"]?.intValue ?? 0
        let socket = dir.file("control.sock")
        let config = try dir.write("agent.toml", """
        \(agentHeader(dir, socket: socket, stateDir: dir.path))
        [clock]
        require_sync = false
        [radio.ble]
        transport = "tcp"
        address = "127.0.0.1:\(port)"
        \(ble)
        """)
        return (radio, try startAgent(dir, config: config, socket: socket), socket)
    }

    func bond(_ last: UInt8, name: String) -> PhoneBond {
        PhoneBond(address: [0xC4, 0x11, 0x22, 0x33, 0x44, last], addressIsRandom: true, irk: Array(repeating: last, count: 16),
                  ltk: Array(repeating: last &+ 1, count: 16), name: name, bondedAtMicros: 1_795_000_000_000_000)
    }

    func testPairingWindowBondsAndForgettingThroughAgentctl() throws {
        try requireHarness()
        let dir = try TempDir()
        // A phone bonded before this start: the agent reads the store in the state directory.
        try BondStore(stateDir: dir.path, now: 0).update { $0.add(bond(7, name: "Anna's iPhone")) }
        let (radio, agent, socket) = try start(dir, ble: "ancs = true\nancs_app = \"com.example.doorbell\"")
        defer { agent.stop(); radio.stop() }
        eventually(30, "the BLE radio runs") {
            agentStatus(socket)?["radios"]?.arrayValues?.first { $0["name"]?.stringValue == "ble" }?["state"]?.stringValue == "running"
        }
        func ctl(_ args: [String]) throws -> (status: Int32, stdout: String, stderr: String) {
            try runCommand(Paths.agentctlBinary, args + ["--socket", socket])
        }
        var phones = try ctl(["phones"])
        XCTAssertEqual(phones.status, 0, phones.stderr)
        XCTAssertTrue(phones.stdout.contains("C4:11:22:33:44:07 Anna's iPhone: not connected"), phones.stdout)

        let pair = try ctl(["pair", "--seconds", "60"])
        XCTAssertEqual(pair.status, 0, pair.stderr)
        XCTAssertTrue(pair.stdout.hasPrefix("pairing open until 20"), pair.stdout)
        eventually(10, "the window shows in agentctl phones and status") {
            let p = (try? ctl(["phones", "--json"]).stdout).flatMap { try? JSONReader.parse($0) }
            return p?["pairing_until"]?.stringValue != nil && agentStatus(socket)?["phones"]?["pairing_until"]?.stringValue != nil
        }
        let table = try ctl(["status"]).stdout
        XCTAssertTrue(table.contains("1 bonded, none connected, 0 notifications read, pairing open until"), table)
        XCTAssertEqual(try ctl(["pair", "--seconds", "601"]).status, 1, "the window is bounded")
        XCTAssertEqual(try ctl(["pair", "--seconds", "0"]).stdout, "pairing closed\n")

        let unknown = try ctl(["forget", "Ben's iPhone"])
        XCTAssertEqual(unknown.status, 1)
        XCTAssertTrue(unknown.stderr.contains("no bonded phone \"Ben's iPhone\"; bonded: C4:11:22:33:44:07"), unknown.stderr)
        let forgot = try ctl(["forget", "c4:11:22:33:44:07"])
        XCTAssertEqual(forgot.stdout, "forgot C4:11:22:33:44:07\n", forgot.stderr)
        XCTAssertEqual(try BondStore(stateDir: dir.path, now: 0).bonds.bonds, [], "gone from disk")
        phones = try ctl(["phones"])
        XCTAssertTrue(phones.stdout.contains("no bonded phones"), phones.stdout)
        XCTAssertEqual(try ctl(["answer"]).stdout, "dismissing on 0 connected phone(s)\n")
    }

    func testWithoutThePhoneLinkTheCommandsSayHowToTurnItOn() throws {
        try requireHarness()
        let dir = try TempDir()
        let (radio, agent, socket) = try start(dir, ble: "")
        defer { agent.stop(); radio.stop() }
        eventually(30, "the agent answers") { agentStatus(socket) != nil }
        let r = try runCommand(Paths.agentctlBinary, ["pair", "--socket", socket])
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue(r.stderr.contains("the phone link is off: set ancs = true (and ancs_app) in [radio.ble]"), r.stderr)
        XCTAssertEqual(agentStatus(socket)?["phones"], .null)
    }

    func testADamagedBondsFileIsSetAsideAndShownAsAProblem() throws {
        try requireHarness()
        let dir = try TempDir()
        _ = try dir.write("phones.json", "{not json")
        let (radio, agent, socket) = try start(dir, ble: "ancs = true")
        defer { agent.stop(); radio.stop() }
        eventually(30, "the problem shows") {
            agentStatus(socket)?["problems"]?.arrayValues?.contains { $0.stringValue?.contains("phones: the phone bonds in") == true } == true
        }
        XCTAssertEqual(try runCommand(Paths.agentctlBinary, ["pair", "--socket", socket]).status, 0, "the link runs with no bonds")
    }
}
