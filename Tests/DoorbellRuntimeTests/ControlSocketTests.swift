import DoorbellCore
import DoorbellRuntime
import Foundation
import XCTest

/// The control socket under clients that misbehave: silent connections and a follower that never
/// reads do not hold `status` up, followers are capped with a message, and an accept error other
/// than running out of descriptors is said and withholds the watchdog instead of ending quietly.
final class ControlSocketTests: XCTestCase {
    struct Server {
        let server: ControlServer
        let path: String
        let lines: Locked<[String]>
        let monitor: LoopMonitor
    }

    func startServer(_ dir: TempDir, maxFollowers: Int = 8) throws -> Server {
        let path = dir.file("control.sock")
        let lines = Locked<[String]>([])
        let monitor = LoopMonitor(graceMicros: 300_000)
        let server = ControlServer(path: path, log: Logger(level: .info) { line in lines.withLock { $0.append(line) } },
                                   policy: PeerPolicy(allowedGroup: getegid()), admission: ControlAdmission(maxRequests: 16, maxFollowers: maxFollowers),
                                   heartbeat: monitor.heartbeat("control", periodMicros: 100_000)) { json in
            guard json["command"]?.stringValue == "events" else { return .single(.object([("ok", .bool(true)), ("version", .string("test"))])) }
            return .stream { write in
                guard write(.object([("ok", .bool(true)), ("following", .bool(true))])) else { return }
                for _ in 0..<6_000 where write(.object([("heartbeat", .bool(true))])) { usleep(10_000) }
            }
        }
        try server.start()
        addTeardownBlock { server.stop() }
        return Server(server: server, path: path, lines: lines, monitor: monitor)
    }

    /// A connected client socket that sends `line` (if any) and is never read.
    func rawClient(_ path: String, sending line: String? = nil) throws -> Int32 {
        let s = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in for (i, b) in path.utf8.enumerated() { raw[i] = b } }
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(s, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        XCTAssertEqual(rc, 0, "connect: \(errnoText())")
        if let line { _ = (line + "\n").withCString { send(s, $0, strlen($0), Int32(MSG_NOSIGNAL)) } }
        addTeardownBlock { close(s) }
        return s
    }

    func testStatusAnswersWhileSilentClientsAndAFollowerThatNeverReadsHoldOn() throws {
        let dir = try TempDir()
        let s = try startServer(dir)
        // Four clients that connect and say nothing: served one after the other on the accept
        // thread, each held it for its 2 s read timeout, 8 s before anyone else got an answer.
        for _ in 0..<4 { _ = try rawClient(s.path) }
        _ = try rawClient(s.path, sending: #"{"command":"events","follow":true}"#)
        eventually(10, "the follower is being served") { s.server.connections.followers == 1 }
        // agentctl's own timeout is 5 s.
        let answer = try ControlClient.request(path: s.path, ControlRequest.version.json, timeoutSeconds: 5)
        XCTAssertEqual(answer["version"]?.stringValue, "test")
        XCTAssertTrue(s.monitor.problems().isEmpty, "\(s.monitor.problems())")
    }

    func testFollowersBeyondTheCapAreRefusedWithAClearMessage() throws {
        let dir = try TempDir()
        let s = try startServer(dir, maxFollowers: 2)
        for _ in 0..<2 { _ = try rawClient(s.path, sending: #"{"command":"events","follow":true}"#) }
        eventually(10, "two followers") { s.server.connections.followers == 2 }
        let refused = try ControlClient.request(path: s.path, ControlRequest.events(follow: true).json)
        XCTAssertEqual(refused["ok"]?.boolValue, false)
        XCTAssertTrue(refused["error"]?.stringValue?.contains("2 followers (agentctl events --follow, agentctl capture) are already connected") ?? false, "\(refused)")
        XCTAssertEqual(s.server.connections.followers, 2)
        XCTAssertEqual(try ControlClient.request(path: s.path, ControlRequest.version.json)["ok"]?.boolValue, true, "status is still served")
        XCTAssertTrue(s.lines.snapshot.contains { $0.contains("control.followers_full") }, "\(s.lines.snapshot)")
    }

    /// The listener shut down under the loop (accept then fails with EINVAL): before, the control
    /// thread returned without a word and the agent went on pinging the watchdog, unreachable.
    func testAnAcceptErrorIsSaidAndWithholdsTheWatchdog() throws {
        let dir = try TempDir()
        let s = try startServer(dir)
        usleep(300_000)
        XCTAssertTrue(s.monitor.problems().isEmpty, "an idle control loop beats: \(s.monitor.problems())")
        let listener = try XCTUnwrap(listeningDescriptor(path: s.path), "the server's listening socket among /proc/self/fd")
        XCTAssertEqual(shutdown(listener, Int32(SHUT_RDWR)), 0)
        eventually(10, "the ended loop is reported") { !s.monitor.problems().isEmpty }
        let problems = s.monitor.problems()
        XCTAssertEqual(problems.count, 1)
        XCTAssertTrue(problems.first?.hasPrefix("control: the loop ended: accept on \(s.path) failed: Invalid argument") ?? false, "\(problems)")
        XCTAssertTrue(s.lines.snapshot.contains { $0.contains("control.stopped") && $0.contains("Invalid argument") }, "\(s.lines.snapshot)")
    }

    /// The listening socket bound to `path`, found the way `ss -xlp` does: its inode in
    /// /proc/net/unix, then the descriptor pointing at it.
    func listeningDescriptor(path: String) -> Int32? {
        guard let table = try? String(contentsOfFile: "/proc/net/unix", encoding: .utf8) else { return nil }
        let inodes = table.split(separator: "\n").compactMap { row -> String? in
            let f = row.split(separator: " ")
            // Num RefCount Protocol Flags Type St Inode Path; Flags 00010000 is a listener.
            guard f.count >= 8, f[7] == path[...], f[3] == "00010000" else { return nil }
            return String(f[6])
        }
        guard let inode = inodes.first, let fds = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") else { return nil }
        for name in fds {
            if (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + name)) == "socket:[\(inode)]" { return Int32(name) }
        }
        return nil
    }
}

/// Children see only their stdin, stdout and stderr, even when they are spawned while other
/// threads make pipes and take control connections (pipe() or accept() then FD_CLOEXEC left a
/// window in which an action inherited them, and could then keep rtl_433's pipe open for ever).
final class DescriptorInheritanceTests: XCTestCase {
    func testAnActionSpawnedWhileDescriptorsAreMadeInheritsNone() throws {
        let dir = try TempDir()
        // The shell waits for ls (not the last command), so /proc/$$/fd is the action's own table;
        // no redirection in the shell (dash would keep copies of 1 and 2 on 10 and 11 meanwhile).
        let action = ActionConfig(name: "list-fds", exec: ["/bin/sh", "-c", "ls -l /proc/$$/fd/; echo listed; true"],
                                  timeoutMs: 10_000, maxRunning: 64)
        let output = Locked<[String]>([])
        let runner = ActionRunner(actions: [action], log: Logger(level: .debug) { line in
            if line.contains("action.output") { output.withLock { $0.append(line) } }
        })
        let path = dir.file("control.sock")
        let server = ControlServer(path: path, log: Logger(level: .error), policy: PeerPolicy(allowedGroup: getegid())) { _ in
            .single(.object([("ok", .bool(true))]))
        }
        try server.start()
        defer { server.stop() }
        let churning = Locked(true)
        let churners = DispatchGroup()
        for kind in 0..<3 {
            DispatchQueue.global().async(group: churners) {
                while churning.snapshot {
                    if kind == 2 {
                        _ = try? ControlClient.request(path: path, ControlRequest.version.json) // an accepted connection in the agent
                    } else {
                        _ = PollableStop() // a pipe made and closed
                    }
                }
            }
        }
        let press = AgentEvent(type: .doorbellPressed, device: DeviceRef(id: "front-door", name: "Front", radio: "rtl433"), occurredAtMicros: 0, clockSynced: true)
        let runs = 40
        for _ in 0..<runs {
            runner.trigger(press, json: .object([]))
            usleep(20_000)
        }
        eventually(60, "every action listed its descriptors") {
            output.snapshot.filter { $0.hasSuffix("line=listed") }.count == runs && runner.status.snapshot[0].running == 0
        }
        churning.withLock { $0 = false }
        churners.wait()
        // "line=lr-x------ 1 root root 64 Nov 27 12:53 0 -> /dev/null"
        let rows = output.snapshot.filter { $0.contains(" -> ") }
        XCTAssertGreaterThanOrEqual(rows.count, 3 * runs, "\(output.snapshot.prefix(10))")
        let leaks = rows.filter { row in
            let fd = row.components(separatedBy: " -> ")[0].split(separator: " ").last.map(String.init) ?? "?"
            return !["0", "1", "2"].contains(fd)
        }
        XCTAssertTrue(leaks.isEmpty, "descriptors inherited by actions:\n" + leaks.prefix(20).joined(separator: "\n"))
    }
}
