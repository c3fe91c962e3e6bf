import DoorbellCore
import Foundation
import XCTest

/// Bad input of every kind gets a clear message and never a crash.
final class BadInputTests: XCTestCase {
    func testConfigWithATypoExits78AndSaysWhere() throws {
        try requireFile(Paths.agentBinary, "doorbell-agent")
        let dir = try TempDir()
        let config = try dir.write("agent.toml", """
        gateway_id = "gw"
        [radio.rtl433]
        replay = []
        [uplink]
        url = "https://127.0.0.1:1/events"
        hmac_secret_fle = "x"
        """)
        let r = try runCommand(Paths.agentBinary, ["check-config", config])
        XCTAssertEqual(r.status, 78)
        XCTAssertTrue(r.stderr.contains("agent.toml:6:1: uplink.hmac_secret_fle: unknown key; did you mean \"hmac_secret_file\"?"), r.stderr)
    }

    func testMissingCAFileIsReportedByCheckConfigAndRun() throws {
        try requireFile(Paths.agentBinary, "doorbell-agent")
        let dir = try TempDir()
        let config = try dir.write("agent.toml", """
        gateway_id = "gw"
        [paths]
        state_dir = "state"
        control_socket = "control.sock"
        [uplink]
        url = "https://127.0.0.1:1/events"
        ca_file = "missing-ca.pem"
        """)
        for args in [["check-config", config], ["run", "--config", config]] {
            let r = try runCommand(Paths.agentBinary, args)
            XCTAssertEqual(r.status, 78, args.joined(separator: " "))
            XCTAssertTrue(r.stderr.contains("uplink.ca_file: cannot read CA file \(dir.path)/missing-ca.pem"), r.stderr)
        }
    }

    func testGarbageFromRtl433IsCountedAndThePressStillArrivesInTheOutbox() throws {
        try requireFile(Paths.agentBinary, "doorbell-agent")
        let dir = try TempDir()
        // A stand-in for rtl_433 that prints garbage around one good line, then stays up.
        let fake = try dir.write("fake-rtl433.sh", """
        #!/bin/sh
        echo 'garbage{'
        printf '\\000\\377\\n'
        echo '{"model" : "EV1527-flex", "code" : 5913745}'
        echo '{"model" : "EV1527-flex", "code" : '
        exec sleep 60
        """)
        chmod(fake, 0o755)
        let socket = dir.file("control.sock")
        let config = try dir.write("agent.toml", """
        \(agentHeader(dir, socket: socket))
        [radio.rtl433]
        binary = "\(fake)"
        [[device]]
        id = "front-door"
        match = { code = "0x5A3C91" }
        """)
        let agent = try Child(Paths.agentBinary, ["run", "--config", config], dir: dir, name: "agent")
        defer { agent.stop() }
        eventually(30, "one press and two malformed lines counted") {
            guard let s = agentStatus(socket) else { return false }
            return s["events"]?["doorbell.pressed"]?.intValue == 1 && s["radios"]?.arrayFirst?["malformed"]?.intValue == 3
        }
        XCTAssertTrue(agent.process.isRunning)
        XCTAssertEqual(agentStatus(socket)?["outbox"]?["depth"]?.intValue, 1, "no uplink configured: the event waits")
        XCTAssertTrue(agent.stderr.contains("rtl433.bad_line"), agent.stderr)
    }

    func testMissingRtl433BinaryIsAStatusNotACrash() throws {
        try requireFile(Paths.agentBinary, "doorbell-agent")
        let dir = try TempDir()
        let socket = dir.file("control.sock")
        let config = try dir.write("agent.toml", """
        \(agentHeader(dir, socket: socket))
        [radio.rtl433]
        binary = "rtl_433-not-installed"
        """)
        let agent = try Child(Paths.agentBinary, ["run", "--config", config], dir: dir, name: "agent")
        defer { agent.stop() }
        eventually(30, "radio shows missing") { agentStatus(socket)?["radios"]?.arrayFirst?["state"]?.stringValue == "missing" }
        let r = try runCommand(Paths.agentctlBinary, ["status", "--socket", socket])
        XCTAssertEqual(r.status, 1, "degraded exits 1")
        XCTAssertTrue(r.stdout.contains("program not found. Install it (for rtl_433: apt-get install rtl-433)"), r.stdout)
    }

    func testAgentctlWithoutAgentExits69() throws {
        try requireFile(Paths.agentctlBinary, "agentctl")
        let dir = try TempDir()
        let r = try runCommand(Paths.agentctlBinary, ["status", "--socket", dir.file("nobody.sock")])
        XCTAssertEqual(r.status, 69)
        XCTAssertTrue(r.stderr.contains("is doorbell-agent running?"), r.stderr)
    }
}
