import DoorbellCore
import Foundation
import XCTest

/// `agentctl scan` lists what the radio hears with a snippet for strangers; `agentctl capture`
/// records the radio's lines into a file that `doorbell-agent replay` reads back.
final class ScanCaptureTests: XCTestCase {
    func testScanAndCapture() throws {
        try requireFile(Paths.agentBinary, "doorbell-agent")
        let dir = try TempDir()
        let socket = dir.file("control.sock")
        // A radio that keeps hearing one configured bell and one stranger, five lines a second each.
        let chatty = try dir.write("chatty-rtl433.sh", """
        #!/bin/sh
        i=0
        while [ $i -lt 3000 ]; do
          echo '{"model" : "EV1527", "code" : 5913745, "rssi" : -7.5}'
          echo '{"model" : "Generic-Remote", "id" : 5069, "cmd" : 192}'
          i=$((i+1)); sleep 0.2
        done
        """)
        chmod(chatty, 0o755)
        let config = try dir.write("agent.toml", """
        \(agentHeader(dir, socket: socket))
        [radio.rtl433]
        binary = "\(chatty)"
        [[device]]
        id = "front-door"
        match = { code = "0x5A3C91" }
        """)
        let agent = try Child(Paths.agentBinary, ["run", "--config", config], dir: dir, name: "agent")
        defer { agent.stop() }
        eventually(30, "agent answers") { agentStatus(socket) != nil }

        let scan = try runCommand(Paths.agentctlBinary, ["scan", "--seconds", "2", "--socket", socket])
        XCTAssertEqual(scan.status, 0, scan.stderr)
        XCTAssertTrue(scan.stdout.contains("code=5a3c91  EV1527  rssi -7.5 dB"), scan.stdout)
        XCTAssertTrue(scan.stdout.contains("device front-door"), scan.stdout)
        XCTAssertTrue(scan.stdout.contains("id=5069,cmd=192  Generic-Remote"), scan.stdout)
        XCTAssertTrue(scan.stdout.contains("match = { id = 5069, cmd = 192 }"), scan.stdout)
        XCTAssertFalse(scan.stdout.contains("match = { code = \"0x5A3C91\" }"), "configured devices get no snippet")

        let file = dir.file("capture.jsonl")
        let capture = try runCommand(Paths.agentctlBinary, ["capture", "--seconds", "2", "--out", file, "--socket", socket])
        XCTAssertEqual(capture.status, 0, capture.stderr)
        let lines = ((try? String(contentsOfFile: file, encoding: .utf8)) ?? "").split(separator: "\n")
        XCTAssertGreaterThan(lines.count, 2, capture.stdout)
        let replay = try runCommand(Paths.agentBinary, ["replay", "--config", config, file])
        XCTAssertEqual(replay.status, 0, replay.stderr)
        XCTAssertTrue(replay.stdout.contains("\"front-door\""), "the captured lines replay as the bell: \(replay.stdout) \(replay.stderr)")
    }
}
