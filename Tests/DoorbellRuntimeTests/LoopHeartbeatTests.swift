import DoorbellCore
import DoorbellRuntime
import Foundation
import XCTest

/// The heartbeats with real loops: an idle control socket and a quiet radio keep beating (the
/// watchdog keeps being pinged), a radio thread stuck in its work (a pipeline that never returns)
/// is reported once its silence passes the deadline, and beats again once it moves.
final class LoopHeartbeatTests: XCTestCase {
    func testAStuckRadioIsFoundByItsHeartbeatWhileIdleLoopsAreNot() throws {
        let dir = try TempDir()
        let monitor = LoopMonitor(graceMicros: 300_000)
        let control = ControlServer(path: dir.file("control.sock"), log: Logger(level: .error), policy: PeerPolicy(allowedGroup: getegid()),
                                    heartbeat: monitor.heartbeat("control", periodMicros: 100_000)) { _ in .single(.object([("ok", .bool(true))])) }
        try control.start()
        defer { control.stop() }
        // One line, then quiet air for ten minutes.
        let fake = try dir.write("rtl433.sh", "#!/bin/sh\necho '{\"model\":\"Generic-Remote\",\"cmd\":1}'\nexec sleep 600\n")
        chmod(fake, 0o755)
        let release = WakeSignal()
        let stuck = Locked(false)
        let radio = RTL433Radio(settings: RTL433Settings(binary: fake), log: Logger(level: .error),
                                heartbeat: monitor.heartbeat("radio rtl433", periodMicros: 100_000)) { _ in
            // The first line blocks like a deadlocked pipeline would.
            guard !stuck.withLock({ s -> Bool in defer { s = true }; return s }) else { return }
            release.wait(timeoutMicros: 60_000_000)
        }
        try radio.start()
        defer { radio.stop() }
        eventually(20, "the stuck radio is reported") { monitor.problems().contains { $0.hasPrefix("radio rtl433: no heartbeat for") } }
        XCTAssertEqual(monitor.problems().filter { !$0.hasPrefix("radio rtl433:") }, [], "the idle control socket is alive")
        XCTAssertTrue(monitor.problems().first?.hasSuffix("stuck") ?? false, "\(monitor.problems())")
        release.signal()
        eventually(20, "the radio beats again on quiet air") { monitor.problems().isEmpty }
        usleep(1_000_000) // ten periods of quiet air: still beating
        XCTAssertEqual(monitor.problems(), [])
    }
}

extension LoopHeartbeatTests {
    /// The metrics writer is a watched loop (it had no heartbeat): idle between writes it keeps
    /// beating, a write stuck in the status behind it is reported once its silence passes the
    /// deadline, and it beats again once the write returns.
    func testAStuckMetricsWriteIsFoundByItsHeartbeatWhileAnIdleWriterIsNot() throws {
        let dir = try TempDir()
        let monitor = LoopMonitor(graceMicros: 300_000)
        let release = WakeSignal()
        let renders = Locked(0)
        let writer = MetricsWriter(settings: MetricsSettings(file: dir.file("agent.prom"), intervalSeconds: 600), log: Logger(level: .error),
                                   heartbeat: monitor.heartbeat("metrics", periodMicros: 100_000)) {
            // The first write blocks like a status that never returns; later ones do not.
            if renders.withLock({ n -> Int in n += 1; return n }) == 1 { release.wait(timeoutMicros: 60_000_000) }
            return "doorbell_up 1\n"
        }
        try writer.start()
        eventually(20, "the stuck write is reported") { monitor.problems().contains { $0.hasPrefix("metrics: no heartbeat for") } }
        release.signal()
        eventually(20, "the writer beats again, waiting ten minutes for its next write") { monitor.problems().isEmpty }
        usleep(1_000_000) // ten periods of waiting: still beating
        XCTAssertEqual(monitor.problems(), [])
        XCTAssertEqual(monitor.states().map(\.name), ["metrics"])
        writer.stop()
        XCTAssertEqual(monitor.states().map(\.name), [], "stopped on purpose: no longer watched")
    }

    /// A user allowed four tasks: the main thread, the control socket's, the outbox syncer's and
    /// the spill retries' take them, and the uplink's cannot start. Before, the agent ran on without an uplink,
    /// pinging the watchdog and delivering nothing; now it stops with EX_OSERR and says why.
    func testAnAgentWhoseUplinkCannotStartStopsAndSaysWhy() throws {
        try requireFile(Paths.agentBinary, "doorbell-agent")
        try requireFile("/usr/bin/setpriv", "setpriv (util-linux)")
        try requireFile("/usr/bin/prlimit", "prlimit (util-linux)")
        guard geteuid() == 0 else { throw skip("needs root to run the agent as a user of its own") }
        let dir = try TempDir()
        chmod(dir.path, 0o777)
        let socket = dir.file("control.sock")
        let config = try dir.write("agent.toml", """
        \(agentHeader(dir, socket: socket))
        [uplink]
        url = "https://127.0.0.1:9/events"
        """)
        chmod(config, 0o644)
        // A uid nobody else uses: RLIMIT_NPROC counts every task of the user.
        let agent = try Child("/usr/bin/prlimit", ["--nproc=4", "/usr/bin/setpriv", "--reuid=61427", "--regid=61427", "--clear-groups",
                                                   Paths.agentBinary, "run", "--config", config], dir: dir, name: "agent")
        defer { agent.stop() }
        XCTAssertEqual(agent.wait(seconds: 30), 71, agent.stderr)
        XCTAssertTrue(agent.stderr.contains("cannot start the uplink loop: cannot start thread uplink: Resource temporarily unavailable"), agent.stderr)
        XCTAssertTrue(agent.stderr.contains("the agent stops so that systemd starts it again"), agent.stderr)
    }
}
