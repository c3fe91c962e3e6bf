import DoorbellCore
import Foundation
import XCTest

/// The outbox's syncer (Outbox+Sync.swift) with a real agent, real SQLite on disk and a real
/// HTTPS receiver: a radio press is committed and sent while its fsync is held open — an
/// LD_PRELOAD `fdatasync` that waits while a file exists, so the window is certain, not a race —
/// and the receiver SIGKILLs the agent the moment that press's request arrives. Nothing reported
/// stored is lost; the killed press was not reported stored (no `event.created` before its fsync
/// returned), is sent again under its own id after the restart, and never rings twice (mutation: the
/// "stored" follow-ups run at COMMIT instead of when the fsync returns → the killed press's
/// `event.created` is in the first agent's log).
final class SyncerCrashTests: XCTestCase {
    static let holdSource = """
    #define _GNU_SOURCE
    #include <dlfcn.h>
    #include <stdio.h>
    #include <stdlib.h>
    #include <string.h>
    #include <unistd.h>
    #include <fcntl.h>
    /* fdatasync (or fsync) of a file whose name ends in $HOLD_FSYNC_SUFFIX (default -wal) waits
       while $HOLD_FSYNC_FILE exists (at most 60 s), leaving $HOLD_FSYNC_FILE.entered behind when
       it did. */
    static void hold(int fd) {
        const char *hold = getenv("HOLD_FSYNC_FILE");
        const char *suffix = getenv("HOLD_FSYNC_SUFFIX");
        if (!suffix) suffix = "-wal";
        size_t k = strlen(suffix);
        char link[64], target[4096];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(link, target, sizeof target - 1);
        if (hold && n > (ssize_t)k) {
            target[n] = 0;
            if (strcmp(target + n - k, suffix) == 0 && access(hold, F_OK) == 0) {
                char entered[4200];
                snprintf(entered, sizeof entered, "%s.entered", hold);
                close(open(entered, O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
                for (int i = 0; i < 6000 && access(hold, F_OK) == 0; i++) usleep(10000);
            }
        }
    }
    int fdatasync(int fd) {
        static int (*real)(int);
        if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
        hold(fd);
        return real(fd);
    }
    int fsync(int fd) {
        static int (*real)(int);
        if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
        hold(fd);
        return real(fd);
    }
    """

    /// A real agent's setting: the fsync-holding shim, a receiver, a radio stand-in that sends one
    /// press line each time `press()` creates its trigger, and the agent's config.
    struct Rig {
        let dir: TempDir
        let shim: String
        let hold: String
        let receiver: ScriptedReceiver
        let chime: ChimeRecorder
        let socket: String
        let config: String
        let trigger: String

        init(receiverArgs: [String]) throws {
            try requireFile(Paths.agentBinary, "doorbell-agent")
            try requireFile("/usr/bin/cc", "cc (apt-get install gcc)")
            dir = try TempDir()
            shim = dir.file("hold-fsync.so")
            let built = try runCommand("/usr/bin/cc", ["-shared", "-fPIC", "-O1", "-o", shim, try dir.write("hold-fsync.c", SyncerCrashTests.holdSource), "-ldl"])
            XCTAssertEqual(built.status, 0, built.stderr)
            hold = dir.file("hold")
            receiver = try ScriptedReceiver(dir: dir, receiverArgs)
            trigger = dir.file("trigger")
            let radio = try dir.write("radio.sh", """
            #!/bin/sh
            while kill -0 $PPID 2>/dev/null; do
              if [ -e \(trigger) ]; then rm -f \(trigger); echo '{"model" : "EV1527", "code" : 1}'; fi
              sleep 0.01
            done
            """)
            chmod(radio, 0o755)
            chime = try ChimeRecorder(dir)
            socket = dir.file("control.sock")
            config = try dir.write("agent.toml", agentConfig(
                stateDir: dir.file("state"), socket: socket, radio: "[radio.rtl433]\nbinary = \"\(radio)\"",
                devices: [("front-door", "{ code = 1 }")], url: receiver.url, caFile: receiver.caFile, secretFile: try webhookSecret(dir))
                + "\n[tracker.button]\ncooldown_ms = 0\nrepeat_gap_ms = 20\n" + chime.toml)
        }

        /// `holding`: the end of the file name whose fsync the shim holds (default: the WAL).
        func startAgent(_ name: String, holding suffix: String = "-wal") throws -> Child {
            try Child(Paths.agentBinary, ["run", "--config", config], dir: dir, name: name,
                      environment: ["LD_PRELOAD": shim, "HOLD_FSYNC_FILE": hold, "HOLD_FSYNC_SUFFIX": suffix])
        }

        func press() {
            FileManager.default.createFile(atPath: trigger, contents: nil)
            eventually(10, "the radio read the trigger") { !FileManager.default.fileExists(atPath: trigger) }
            usleep(30_000) // the tracker's repeat gap: the next line is a new press
        }

        func created(_ agent: Child) -> [String] {
            agent.stderr.split(separator: "\n").filter { $0.contains("event.created") }.map(String.init)
        }
    }

    func testAKillWhileThePressesFsyncIsHeldLosesNothingStoredAndNeverRingsTwice() throws {
        let dir = try TempDir() // for the pid file, before the receiver that reads it
        let pidFile = dir.file("agent.pid")
        let rig = try Rig(receiverArgs: ["--script", "200,kill,200", "--kill-pid-file", pidFile])
        let (receiver, hold, socket, config, chime) = (rig.receiver, rig.hold, rig.socket, rig.config, rig.chime)
        defer { receiver.stop() }
        func press() { rig.press() }
        func created(_ agent: Child) -> [String] { rig.created(agent) }

        let agent = try rig.startAgent("agent-1")
        defer { agent.stop() }
        eventually(30, "agent answers") { agentStatus(socket) != nil }
        try "\(agent.process.processIdentifier)".write(toFile: pidFile, atomically: true, encoding: .utf8)
        // Press 1: stored (its fsync returned: event.created) and delivered.
        press()
        eventually(20, "press 1 delivered and stored") { receiver.requests.count == 1 && created(agent).count == 1 }
        let storedFirst = try XCTUnwrap(requestID(receiver.requests[0]))
        // Press 2: its fsync is held; its request reaches the receiver, which kills the agent.
        FileManager.default.createFile(atPath: hold, contents: nil)
        press()
        XCTAssertNotNil(agent.wait(seconds: 30), "the receiver killed the agent on press 2's request")
        XCTAssertTrue(FileManager.default.fileExists(atPath: hold + ".entered"), "press 2's fsync was under way, held, when the kill came")
        XCTAssertEqual(receiver.requests.count, 2)
        let killed = try XCTUnwrap(requestID(receiver.requests[1]))
        XCTAssertNotEqual(killed, storedFirst)
        XCTAssertEqual(created(agent).count, 1, "press 2 was never reported stored: \(created(agent))")
        XCTAssertFalse(created(agent).joined().contains(killed))
        try FileManager.default.removeItem(atPath: hold)

        // The process crashed (the commit is in the page cache): press 2 comes back under its own
        // id; press 3 is new.
        let again = try startAgent(rig.dir, config: config, socket: socket, name: "agent-2")
        defer { again.stop() }
        press()
        eventually(30, "everything delivered") { receiver.requests.count >= 4 && agentStatus(socket)?["outbox"]?["depth"]?.intValue == 0 }
        let requests = receiver.requests
        let ok = requests.filter { $0["answer"]?.stringValue == "200" }.compactMap(requestID)
        XCTAssertEqual(ok.filter { $0 == killed }.count, 1, "press 2 delivered once, same id: \(ok)")
        XCTAssertEqual(ok.filter { $0 == storedFirst }.count, 1, "press 1 kept: \(ok)")
        XCTAssertEqual(Set(ok).count, 3, "three presses, three ids: \(ok)")
        let ids = ScriptedReceiver.idsBySequence(requests)
        XCTAssertTrue(ids.values.allSatisfy { $0.count == 1 }, "one id per sequence: \(ids)")
        // Press 2's chime may die with the agent (its thread or program not started yet when the
        // kill came): presses 1 and 3 rang, and the resend never rings.
        eventually(10, "presses 1 and 3 rang") { chime.rings.count >= 2 }
        XCTAssertLessThanOrEqual(chime.rings.count, 3, "at most one ring per press, none for the resend: \(chime.rings)")
    }

    /// The uplink does not wait for a press's fsync before the next press: with press 2's fsync
    /// held, its 2xx is handed over and press 3 is sent meanwhile; press 2 is not sent again
    /// while its acknowledgement waits, and a clean stop during the held fsync applies both
    /// acknowledgements once it returns — the restarted agent sends nothing again (mutations:
    /// main's settle waiting for the fsync never sends press 3 while it is held; not skipping
    /// held rows sends press 2 twice; a stop that does not apply what is owed sends 2 and 3
    /// again after the restart).
    func testTheUplinkSendsTheNextPressWhileTheLastOnesAcknowledgementWaitsForItsFsync() throws {
        let rig = try Rig(receiverArgs: ["--script", "200"])
        defer { rig.receiver.stop() }
        let agent = try rig.startAgent("agent-1")
        defer { agent.stop() }
        eventually(30, "agent answers") { agentStatus(rig.socket) != nil }
        rig.press()
        eventually(20, "press 1 delivered and applied") {
            rig.receiver.requests.count == 1 && agentStatus(rig.socket)?["outbox"]?["depth"]?.intValue == 0
        }
        FileManager.default.createFile(atPath: rig.hold, contents: nil)
        rig.press()
        eventually(20, "press 2 sent while its fsync is held") { rig.receiver.requests.count == 2 }
        XCTAssertTrue(FileManager.default.fileExists(atPath: rig.hold + ".entered"), "press 2's fsync is held")
        rig.press()
        eventually(20, "press 3 sent while press 2's fsync is still held") { rig.receiver.requests.count == 3 }
        XCTAssertEqual(agentStatus(rig.socket)?["outbox"]?["depth"]?.intValue, 2, "neither acknowledgement applied before its fsync")
        usleep(300_000) // room for a resend of a held row to show itself
        XCTAssertEqual(rig.receiver.requests.count, 3, "nothing sent again while the acknowledgements wait")
        XCTAssertEqual(rig.created(agent).count, 1, "presses 2 and 3 not stored yet")

        // A clean stop while the fsync is held: it finishes once the fsync returns and applies both.
        agent.signal(SIGTERM)
        usleep(300_000)
        try FileManager.default.removeItem(atPath: rig.hold)
        XCTAssertEqual(agent.wait(seconds: 30), 0, "clean stop: \(agent.stderr.suffix(2000))")
        XCTAssertEqual(rig.created(agent).count, 3, "presses 2 and 3 stored once their fsync returned")
        let again = try startAgent(rig.dir, config: rig.config, socket: rig.socket, name: "agent-2")
        defer { again.stop() }
        XCTAssertEqual(agentStatus(rig.socket)?["outbox"]?["depth"]?.intValue, 0, "both acknowledgements applied at the stop")
        rig.press()
        eventually(20, "press 4 delivered") { rig.receiver.requests.count >= 4 }
        usleep(300_000)
        let ids = rig.receiver.requests.compactMap(requestID)
        XCTAssertEqual(ids.count, 4, "each press sent once: \(ids)")
        XCTAssertEqual(Set(ids).count, 4, "\(ids)")
    }

    /// The write-ahead log is checkpointed beside the presses: with the checkpoint's fsync of the
    /// database held (the first fsync of `outbox.sqlite` after the log passed 4,000 frames), the
    /// next press is committed and sent meanwhile, and nothing is lost or sent twice once it
    /// returns (fails on main, where SQLite's automatic checkpoint runs inside a commit under the
    /// outbox's lock: the next press waits behind it and is not sent while it is held).
    func testAPressIsSentWhileACheckpointsFsyncIsHeld() throws {
        let rig = try Rig(receiverArgs: ["--script", "200"])
        defer { rig.receiver.stop() }
        let agent = try rig.startAgent("agent-1", holding: "/outbox.sqlite")
        defer { agent.stop() }
        eventually(30, "agent answers") { agentStatus(rig.socket) != nil }
        FileManager.default.createFile(atPath: rig.hold, contents: nil)
        var presses = 0
        // A press and its acknowledgement add ≈ 5 frames (v8): the threshold (4,000 frames since
        // 2026-11-28) comes after ≈ 800.
        while presses < 1_500 && !FileManager.default.fileExists(atPath: rig.hold + ".entered") {
            rig.press()
            presses += 1
        }
        eventually(20, "every press so far sent") { rig.receiver.requests.count >= presses }
        XCTAssertTrue(FileManager.default.fileExists(atPath: rig.hold + ".entered"), "a checkpoint's fsync of the database is held after \(presses) presses")
        rig.press()
        eventually(20, "the next press sent while the checkpoint's fsync is held") { rig.receiver.requests.count >= presses + 1 }
        XCTAssertTrue(FileManager.default.fileExists(atPath: rig.hold), "still held")
        try FileManager.default.removeItem(atPath: rig.hold)
        eventually(30, "everything applied") { agentStatus(rig.socket)?["outbox"]?["depth"]?.intValue == 0 }
        let ids = rig.receiver.requests.compactMap(requestID)
        XCTAssertEqual(ids.count, presses + 1, "each press sent once: \(ids.count)")
        XCTAssertEqual(Set(ids).count, presses + 1)
        XCTAssertEqual(rig.created(agent).count, presses + 1, "every press stored")
    }

    func requestID(_ r: JSONValue) -> String? { (try? JSONReader.parse(r["body"]?.stringValue ?? ""))?["id"]?.stringValue }
}
