import DoorbellCore
import Foundation
import XCTest

/// The agent speaks systemd's notify protocol: READY once up, STATUS lines, WATCHDOG pings
/// earned by a live pipeline, STOPPING on SIGTERM. A datagram socket stands in for systemd.
final class SystemdNotifyTests: XCTestCase {
    func testReadyStatusWatchdogAndStopping() throws {
        try requireFile(Paths.agentBinary, "doorbell-agent")
        let dir = try TempDir()
        let notifyPath = dir.file("notify.sock")
        let listener = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        XCTAssertGreaterThanOrEqual(listener, 0)
        defer { close(listener) }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            for (i, b) in notifyPath.utf8.enumerated() { raw[i] = b }
        }
        let bound = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        XCTAssertEqual(bound, 0)
        var tv = timeval(tv_sec: 1, tv_usec: 0)
        setsockopt(listener, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))

        let config = try dir.write("agent.toml", """
        gateway_id = "gw"
        [paths]
        state_dir = "\(dir.file("state"))"
        control_socket = "\(dir.file("control.sock"))"
        """)
        let agent = try Child(Paths.agentBinary, ["run", "--config", config], dir: dir, name: "agent",
                              environment: ["NOTIFY_SOCKET": notifyPath, "WATCHDOG_USEC": "400000"])
        defer { agent.stop() }

        var messages: [String] = []
        func receive(until predicate: () -> Bool) {
            let deadline = Date().addingTimeInterval(30)
            var buffer = [UInt8](repeating: 0, count: 4096)
            while !predicate() && Date() < deadline {
                let n = buffer.withUnsafeMutableBytes { recv(listener, $0.baseAddress, $0.count, 0) }
                if n > 0 { messages.append(String(decoding: buffer[0..<n], as: UTF8.self)) }
            }
        }
        receive { messages.contains { $0.contains("READY=1") } && messages.filter { $0.contains("WATCHDOG=1") }.count >= 2 }
        XCTAssertTrue(messages.first?.hasPrefix("READY=1\nSTATUS=") ?? false, "\(messages)")
        XCTAssertGreaterThanOrEqual(messages.filter { $0.contains("WATCHDOG=1") }.count, 2, "\(messages)")

        agent.signal(SIGTERM)
        receive { messages.contains("STOPPING=1") }
        XCTAssertTrue(messages.contains("STOPPING=1"), "\(messages)")
        XCTAssertEqual(agent.wait(seconds: 20), 0, agent.stderr)
    }
}
