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

    /// The README asks for a 0600 password file; check-config says when it is open to others, with
    /// the fix, and is quiet once it is not.
    func testCheckConfigWarnsOfAPasswordFileOthersCanRead() throws {
        try requireFile(Paths.agentBinary, "doorbell-agent")
        let dir = try TempDir()
        let password = try dir.write("mqtt.password", "secret\n")
        chmod(password, 0o644)
        let config = try dir.write("agent.toml", """
        gateway_id = "gw"
        [radio.rtl433]
        replay = []
        [mqtt]
        host = "127.0.0.1"
        username = "doorbell"
        password_file = "\(password)"
        """)
        let loose = try runCommand(Paths.agentBinary, ["check-config", config])
        XCTAssertEqual(loose.status, 0, "a warning, not an error: \(loose.stderr)")
        XCTAssertTrue(loose.stderr.contains("mqtt.password_file \(password) is open to every user of this machine (mode 0644)"), loose.stderr)
        XCTAssertTrue(loose.stderr.contains("chmod 600 \(password)"), loose.stderr)
        chmod(password, 0o600)
        let tight = try runCommand(Paths.agentBinary, ["check-config", config])
        XCTAssertEqual(tight.status, 0, tight.stderr)
        XCTAssertFalse(tight.stderr.contains("password_file"), tight.stderr)
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

    /// Out of file descriptors (here: many `agentctl events --follow` clients under a low limit),
    /// the control socket waits instead of spinning a core on accept(), says why in the log, and
    /// answers again once descriptors are free.
    func testRunningOutOfDescriptorsDoesNotSpinTheControlSocket() throws {
        try requireFile(Paths.agentBinary, "doorbell-agent")
        try requireFile("/usr/bin/prlimit", "prlimit (util-linux)")
        let dir = try TempDir()
        let controlPath = dir.file("control.sock")
        let config = try dir.write("agent.toml", """
        \(agentHeader(dir, socket: controlPath))
        [radio.rtl433]
        binary = "\(try quietRadio(dir))"
        """)
        // Followers are capped at 8: the limit leaves fewer than 8 descriptors above the agent's
        // own (about 11: the outbox and its WAL, pipes, the sockets, rtl_433's pipes).
        let agent = try Child("/usr/bin/prlimit", ["--nofile=18:18", Paths.agentBinary, "run", "--config", config], dir: dir, name: "agent")
        defer { agent.stop() }
        eventually(30, "agent answers") { agentStatus(controlPath) != nil }
        var clients: [Int32] = []
        defer { for c in clients { close(c) } }
        // One follower at a time (each holds a descriptor of the agent) until one gets no answer:
        // that one waits in the listen backlog for a descriptor.
        for _ in 0..<40 {
            let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            guard fd >= 0 else { break }
            var wait = timeval(tv_sec: 1, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
            var addr = sockaddr_un()
            addr.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &addr.sun_path) { raw in
                for (i, b) in controlPath.utf8.prefix(raw.count - 1).enumerated() { raw[i] = b }
            }
            let connected = withUnsafePointer(to: &addr) { p in
                p.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) == 0 }
            }
            clients.append(fd)
            guard connected else { break }
            _ = "{\"command\":\"events\",\"follow\":true}\n".withCString { write(fd, $0, strlen($0)) }
            var answer = [UInt8](repeating: 0, count: 256)
            if read(fd, &answer, answer.count) <= 0 { break }
        }
        eventually(20, "the agent ran out of descriptors and said so") { agent.stderr.contains("control.out_of_descriptors") }
        // CPU time over 2 s of waiting: a spinning accept loop burns about 2 s of it.
        func cpuTicks() -> Int {
            let stat = (try? String(contentsOfFile: "/proc/\(agent.process.processIdentifier)/stat", encoding: .utf8)) ?? ""
            let fields = stat.split(separator: ")").last?.split(separator: " ") ?? []
            return fields.count > 12 ? (Int(fields[11]) ?? 0) + (Int(fields[12]) ?? 0) : 0
        }
        let before = cpuTicks()
        sleep(2)
        let used = Double(cpuTicks() - before) / Double(sysconf(Int32(_SC_CLK_TCK)))
        XCTAssertLessThan(used, 0.5, "the agent used \(used) s of CPU in 2 s while out of descriptors")
        for c in clients { close(c) }
        clients.removeAll()
        eventually(30, "the control socket answers again") { agentStatus(controlPath) != nil }
    }

    /// A power cut after an unsynced edit can leave NUL bytes in agent.toml (the field rig saw it):
    /// the agent starts on the last config that loaded and says so, instead of staying down.
    func testADamagedConfigRunsOnTheLastGoodCopyAndSaysSo() throws {
        try requireFile(Paths.agentBinary, "doorbell-agent")
        let dir = try TempDir()
        let socket = dir.file("control.sock")
        let good = """
        \(agentHeader(dir, socket: socket))
        [radio.rtl433]
        binary = "\(try quietRadio(dir))"
        [[device]]
        id = "front-door"
        match = { code = 1 }
        """
        let config = try dir.write("agent.toml", good)
        // systemd's StateDirectory=: where the agent looks before it can read the config.
        let env = ["STATE_DIRECTORY": dir.file("state")]
        var agent = try Child(Paths.agentBinary, ["run", "--config", config], dir: dir, name: "agent-1", environment: env)
        eventually(30, "agent answers") { agentStatus(socket) != nil }
        agent.stop()
        XCTAssertTrue(FileManager.default.fileExists(atPath: dir.file("state/agent.toml.last-good")))

        // The edit torn by the power cut.
        let torn = try FileHandle(forWritingTo: URL(fileURLWithPath: config))
        try torn.seekToEnd()
        try torn.write(contentsOf: Data("\n[[device]]\nid = \"garage\"\n".utf8) + Data(repeating: 0, count: 64))
        try torn.close()
        let check = try runCommand(Paths.agentBinary, ["check-config", config])
        XCTAssertEqual(check.status, 78, "the file itself is invalid")

        agent = try Child(Paths.agentBinary, ["run", "--config", config], dir: dir, name: "agent-2", environment: env)
        defer { agent.stop() }
        eventually(30, "the agent runs on the last good copy") { agentStatus(socket) != nil }
        let problems = agentStatus(socket)?["problems"]?.arrayValues?.compactMap(\.stringValue) ?? []
        XCTAssertTrue(problems.contains { $0.hasPrefix("config: ") && $0.contains("last good copy") }, "\(problems)")
        XCTAssertEqual(try injectPress(socket), 0, "the devices of the last good config work")
        XCTAssertTrue(agent.stderr.contains("config.invalid_running_last_good"))

        // Fixed and reloaded: the problem is gone.
        _ = try dir.write("agent.toml", good)
        agent.signal(SIGHUP)
        eventually(30, "reloaded") { agentStatus(socket)?["config_reload"]?["ok"]?.boolValue == true }
        XCTAssertFalse((agentStatus(socket)?["problems"]?.arrayValues ?? []).contains { $0.stringValue?.hasPrefix("config: ") ?? false })
    }
}
