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
