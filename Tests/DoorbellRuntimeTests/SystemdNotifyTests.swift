import DoorbellCore
import Foundation
import XCTest

/// The agent speaks systemd's notify protocol: READY once up, STATUS lines, WATCHDOG pings
/// earned by a live pipeline, STOPPING on SIGTERM. A datagram socket stands in for systemd.
final class SystemdNotifyTests: XCTestCase {
    /// systemd's end of NOTIFY_SOCKET: every datagram the agent sends, in order.
    final class NotifyListener {
        let path: String
        let fd: Int32
        var messages: [String] = []

        init(_ dir: TempDir) throws {
            path = dir.file("notify.sock")
            fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
            XCTAssertGreaterThanOrEqual(fd, 0)
            var addr = sockaddr_un()
            addr.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &addr.sun_path) { raw in
                for (i, b) in path.utf8.enumerated() { raw[i] = b }
            }
            let bound = withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            XCTAssertEqual(bound, 0)
            var tv = timeval(tv_sec: 0, tv_usec: 200_000)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        }

        deinit { close(fd) }

        /// Receives until `predicate` holds or `seconds` pass.
        func receive(seconds: Double = 30, until predicate: () -> Bool) {
            let deadline = Date().addingTimeInterval(seconds)
            var buffer = [UInt8](repeating: 0, count: 4096)
            while !predicate() && Date() < deadline {
                let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                if n > 0 { messages.append(String(decoding: buffer[0..<n], as: UTF8.self)) }
            }
        }

        var pings: Int { messages.filter { $0.contains("WATCHDOG=1") }.count }
    }

    func startAgent(_ dir: TempDir, _ listener: NotifyListener, watchdogMicros: Int) throws -> Child {
        let config = try dir.write("agent.toml", """
        gateway_id = "gw"
        [paths]
        state_dir = "\(dir.file("state"))"
        control_socket = "\(dir.file("control.sock"))"
        """)
        return try Child(Paths.agentBinary, ["run", "--config", config], dir: dir, name: "agent",
                         environment: ["NOTIFY_SOCKET": listener.path, "WATCHDOG_USEC": String(watchdogMicros)])
    }

    func testReadyStatusWatchdogAndStopping() throws {
        try requireFile(Paths.agentBinary, "doorbell-agent")
        let dir = try TempDir()
        let systemd = try NotifyListener(dir)
        let agent = try startAgent(dir, systemd, watchdogMicros: 400_000)
        defer { agent.stop() }

        systemd.receive { systemd.messages.contains { $0.contains("READY=1") } && systemd.pings >= 2 }
        XCTAssertTrue(systemd.messages.first?.hasPrefix("READY=1\nSTATUS=") ?? false, "\(systemd.messages)")
        XCTAssertGreaterThanOrEqual(systemd.pings, 2, "\(systemd.messages)")

        agent.signal(SIGTERM)
        systemd.receive { systemd.messages.contains("STOPPING=1") }
        XCTAssertTrue(systemd.messages.contains("STOPPING=1"), "\(systemd.messages)")
        XCTAssertEqual(agent.wait(seconds: 20), 0, agent.stderr)
    }

    /// Stopped (SIGSTOP: a debugger, a paused VM, a starved CPU) and continued before systemd's
    /// deadline, the agent keeps its ping rhythm:
    /// - continued before its next ping was due, it pings when due. Before, sigtimedwait's EINTR
    ///   on SIGCONT restarted the whole half-interval wait: the ping came up to a full tick late,
    ///   at the very edge of WatchdogSec (the board's rig saw the watchdog restart the agent after
    ///   a stop in its GPIO test);
    /// - continued after it was due, it pings at once and says it was frozen.
    func testAFrozenAgentKeepsItsPingRhythm() throws {
        try requireFile(Paths.agentBinary, "doorbell-agent")
        let dir = try TempDir()
        let systemd = try NotifyListener(dir)
        // A 20 s watchdog: pings every 10 s from READY.
        let agent = try startAgent(dir, systemd, watchdogMicros: 20_000_000)
        defer { agent.stop() }
        systemd.receive { systemd.messages.contains { $0.contains("READY=1") } }
        let ready = Date()
        XCTAssertTrue(systemd.messages.contains { $0.contains("READY=1") }, agent.stderr)
        agent.signal(SIGSTOP)
        systemd.receive(seconds: 5) { false }
        agent.signal(SIGCONT)
        systemd.receive(seconds: 14) { systemd.pings > 0 }
        XCTAssertEqual(systemd.pings, 1, "\(systemd.messages)")
        // Due 10 s after READY; a restarted wait would have made it 10 s after the resume (≈ 15 s).
        XCTAssertLessThan(Date().timeIntervalSince(ready), 13, "the ping waited a whole tick after the resume")

        agent.signal(SIGSTOP)  // the next ping is due in 10 s: inside this stop
        systemd.receive(seconds: 16) { false }
        XCTAssertEqual(systemd.pings, 1, "no ping while stopped: \(systemd.messages)")
        agent.signal(SIGCONT)
        let resumed = Date()
        systemd.receive(seconds: 14) { systemd.pings > 1 }
        XCTAssertEqual(systemd.pings, 2, "\(systemd.messages)")
        XCTAssertLessThan(Date().timeIntervalSince(resumed), 7, "the ping waited for the next tick")
        XCTAssertTrue(agent.stderr.contains("agent.resumed"), agent.stderr)
        XCTAssertFalse(agent.stderr.contains("agent.watchdog_withheld"), agent.stderr)
        agent.signal(SIGTERM)
        XCTAssertEqual(agent.wait(seconds: 20), 0, agent.stderr)
    }
}
