import DoorbellCore
import DoorbellRuntime
import Foundation
import XCTest

/// Local actions: one run per press with the event in the environment, a hanging action killed
/// at its timeout, a storm bounded by max_running, failures in the status.
final class ActionTests: XCTestCase {
    func testExecActionsRunOncePerPressAndStayBounded() throws {
        try requireFile(Paths.agentBinary, "doorbell-agent")
        let dir = try TempDir()
        let socket = dir.file("control.sock")
        let outDir = dir.file("rings")
        try FileManager.default.createDirectory(atPath: outDir, withIntermediateDirectories: true)
        let ring = try dir.write("ring.sh", "#!/bin/sh\necho \"$DOORBELL_DEVICE_ID $DOORBELL_EVENT_TYPE $DOORBELL_TEST\" > \(outDir)/$$.txt\n")
        let hang = try dir.write("hang.sh", "#!/bin/sh\nsleep 60\n")
        let fail = try dir.write("fail.sh", "#!/bin/sh\necho 'relay not found' >&2\nexit 3\n")
        for f in [ring, hang, fail] { chmod(f, 0o755) }
        let config = try dir.write("agent.toml", """
        \(agentHeader(dir, socket: socket))
        [radio.rtl433]
        binary = "\(try quietRadio(dir))"
        [tracker.button]
        cooldown_ms = 0
        repeat_gap_ms = 20
        [[device]]
        id = "front-door"
        match = { code = 1 }
        [[action]]
        name = "chime"
        exec = ["\(ring)"]
        [[action]]
        name = "stuck-relay"
        exec = ["\(hang)"]
        timeout_ms = 2000
        max_running = 1
        [[action]]
        name = "broken"
        exec = ["\(fail)"]
        """)
        let agent = try startAgent(dir, config: config, socket: socket)
        defer { agent.stop() }
        for _ in 0..<3 {
            usleep(30_000)
            XCTAssertEqual(try injectPress(socket), 0)
        }
        eventually(30, "three chimes") { ((try? FileManager.default.contentsOfDirectory(atPath: outDir)) ?? []).count == 3 }
        let rings = try FileManager.default.contentsOfDirectory(atPath: outDir).map { try String(contentsOfFile: outDir + "/" + $0, encoding: .utf8) }
        XCTAssertEqual(rings, Array(repeating: "front-door doorbell.pressed 1\n", count: 3))

        eventually(30, "stuck relay timed out, broken one failed") {
            let a = agentStatus(socket)?["actions"]?.arrayValues ?? []
            let stuck = a.first { $0["name"]?.stringValue == "stuck-relay" }
            let broken = a.first { $0["name"]?.stringValue == "broken" }
            return (stuck?["timeouts"]?.intValue ?? 0) >= 1 && broken?["failures"]?.intValue == 3
        }
        let actions = agentStatus(socket)?["actions"]?.arrayValues ?? []
        let stuck = actions.first { $0["name"]?.stringValue == "stuck-relay" }
        // max_running = 1: presses that came while it hung were skipped, not queued; every press is
        // accounted for as a run that timed out, a skip, or the run still going.
        let accounted = ["timeouts", "skipped_busy", "running"].map { stuck?[$0]?.intValue ?? 0 }.reduce(0, +)
        XCTAssertEqual(accounted, 3, "\(String(describing: stuck))")
        XCTAssertGreaterThanOrEqual(stuck?["skipped_busy"]?.intValue ?? 0, 1)
        XCTAssertTrue(actions.first { $0["name"]?.stringValue == "broken" }?["last_error"]?.stringValue?.contains("exited with status 3") ?? false)
        XCTAssertTrue(agent.stderr.contains("relay not found"), "action stderr goes to the log")
        XCTAssertEqual(agentStatus(socket)?["health"]?.stringValue, "degraded")
    }

    /// The RF side of the cooldown rule (BLERadioTests has the BLE side): presses 0.7 s and
    /// 1.1 s after a forwarded one are counted, not forwarded, and do not ring the chime.
    func testRFPressesWithinTheCooldownAreCountedNotForwardedAndDoNotRing() throws {
        try requireFile(Paths.agentBinary, "doorbell-agent")
        let dir = try TempDir()
        let socket = dir.file("control.sock")
        let receiver = try ScriptedReceiver(dir: dir, ["--script", "200"])
        defer { receiver.stop() }
        let secret = try webhookSecret(dir)
        let chime = try ChimeRecorder(dir)
        // Each press is a burst of code words 50 ms apart, as a transmitter repeats its code.
        let radio = try dir.write("rtl433.sh", """
        #!/bin/sh
        press() { for i in 1 2 3 4; do echo '{"model" : "EV1527", "code" : 5913745}'; sleep 0.05; done; }
        sleep 1; press; sleep 0.55; press; sleep 0.95; press; sleep 2.6; press
        echo done > \(dir.file("radio-done"))
        exec sleep 600
        """)
        chmod(radio, 0o755)
        let config = try dir.write("agent.toml", agentConfig(stateDir: dir.file("state"), socket: socket,
                                                             radio: "[radio.rtl433]\nbinary = \"\(radio)\"",
                                                             devices: [("front-door", "{ code = 5913745 }")],
                                                             url: receiver.url, caFile: receiver.caFile, secretFile: secret,
                                                             extra: chime.toml))
        let agent = try startAgent(dir, config: config, socket: socket)
        defer { agent.stop() }
        eventually(30, "all presses sent and delivered") {
            FileManager.default.fileExists(atPath: dir.file("radio-done")) && agentStatus(socket)?["outbox"]?["depth"]?.intValue == 0
                && (agentStatus(socket)?["presses"]?["forwarded"]?.intValue ?? 0) >= 2
        }
        let bodies = receiver.requests.compactMap { try? JSONReader.parse($0["body"]?.stringValue ?? "") }
        XCTAssertEqual(bodies.compactMap { $0["type"]?.stringValue }, ["doorbell.pressed", "doorbell.pressed"], agent.stderr.suffix(2000).description)
        XCTAssertEqual(bodies.compactMap { $0["data"]?["suppressed"]?.intValue }, [0, 2])
        XCTAssertEqual(agentStatus(socket)?["presses"]?["suppressed"]?.intValue, 2)
        eventually(10, "two chimes") { chime.rings.count == 2 }
        usleep(500_000)
        XCTAssertEqual(chime.rings.count, 2)
    }

    /// A system with no thread to give (address space capped below one more thread's stack) must
    /// not crash the agent on a press: the press is stored, the action's failure is explained.
    func testAnActionThatCannotGetAThreadIsAFailureNotACrash() throws {
        try requireFile(Paths.agentBinary, "doorbell-agent")
        try requireFile("/usr/bin/prlimit", "prlimit (util-linux)")
        let dir = try TempDir()
        let socket = dir.file("control.sock")
        let config = try dir.write("agent.toml", """
        \(agentHeader(dir, socket: socket))
        [radio.rtl433]
        binary = "\(try quietRadio(dir))"
        [[device]]
        id = "front-door"
        match = { code = 1 }
        [[action]]
        name = "chime"
        exec = ["/bin/true"]
        """)
        let agent = try startAgent(dir, config: config, socket: socket)
        defer { agent.stop() }
        let pid = agent.process.processIdentifier
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        let vmKiB = try XCTUnwrap(status.split(separator: "\n").first { $0.hasPrefix("VmSize:") }?.split(separator: " ").dropFirst().first.flatMap { Int($0) })
        // 4 MiB more than it maps now: less than one more thread's 8 MiB stack.
        let capped = try runCommand("/usr/bin/prlimit", ["--pid", String(pid), "--as=\((vmKiB + 4096) * 1024)"])
        XCTAssertEqual(capped.status, 0, capped.stderr)
        XCTAssertEqual(try injectPress(socket), 0)
        eventually(10, "the action's failure in status") {
            agentStatus(socket)?["actions"]?.arrayValues?.first?["failures"]?.intValue == 1
        }
        let s = agentStatus(socket)
        XCTAssertEqual(s?["outbox"]?["depth"]?.intValue, 1, "the press is stored")
        XCTAssertTrue(s?["actions"]?.arrayValues?.first?["last_error"]?.stringValue?.contains("no thread") ?? false)
        XCTAssertTrue((s?["problems"]?.arrayValues ?? []).contains { $0.stringValue?.hasPrefix("threads:") ?? false })
        XCTAssertNil(agent.wait(seconds: 0.2), "the agent is still running")
    }

    /// An `answer_phones` action tells the phone link once per press of its own button, on the
    /// pipeline's thread (nothing to run); without a link it is a failure that says why.
    func testAnAnswerPhonesActionTellsThePhoneLinkForItsOwnButtonOnly() {
        var answer = ActionConfig(name: "answer", devices: ["hall-button"], exec: [])
        answer.answerPhones = true
        let told = Locked(0), lines = Locked<[String]>([])
        let log = Logger(level: .info) { line in lines.withLock { $0.append(line) } }
        let runner = ActionRunner(actions: [answer], log: log) { told.withLock { $0 += 1 }; return true }
        func press(_ device: String) -> AgentEvent {
            AgentEvent(type: .doorbellPressed, device: DeviceRef(id: device, name: device, radio: "ble"), occurredAtMicros: 0, clockSynced: true)
        }
        runner.trigger(press("front-door"), json: .object([]))
        runner.trigger(press("hall-button"), json: .object([]))
        XCTAssertEqual(told.snapshot, 1, "the front door's press does not answer")
        let status = runner.status.snapshot.first
        XCTAssertEqual(status?.does, "answer_phones")
        XCTAssertEqual(status?.runs, 1)
        XCTAssertEqual(status?.failures, 0)
        XCTAssertTrue(lines.snapshot.contains { $0.contains("action.answer_phones action=answer device=hall-button") }, "\(lines.snapshot)")

        let offline = ActionRunner(actions: [answer], log: log) { false }
        offline.trigger(press("hall-button"), json: .object([]))
        XCTAssertEqual(offline.status.snapshot.first?.failures, 1)
        XCTAssertTrue(offline.status.snapshot.first?.lastError?.contains("the phone link is not running") ?? false)
    }
}
