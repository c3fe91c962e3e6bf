import CSQLite
import DoorbellCore
import Foundation
import XCTest

/// A press's request goes out while its fsync runs (Outbox+Sync.swift). The agent is SIGKILLed
/// by the receiver the moment that request arrives, then started again on the same state:
/// - as a process crash leaves it (the commit is in the page cache): the press is sent again
///   with the same id, so a receiver deduplicating by id (the cloud) rings once;
/// - as a power cut before the fsync returned may leave it (the outbox as it was before the
///   press): the press is not sent again — the copy the receiver has is the only one.
/// Either way nothing is lost, no press has two ids and no sequence two presses (mutation: the
/// agent not skipping the reservation after the reboot gives the next press the killed one's
/// sequence). Real agent, real SQLite on disk, real
/// HTTPS receiver.
final class PressFsyncCrashTests: XCTestCase {
    func crashBetweenSendAndFsync(powerCut: Bool) throws -> (first: [JSONValue], second: [JSONValue]) {
        try requireFile(Paths.agentBinary, "doorbell-agent")
        let dir = try TempDir()
        let pidFile = dir.file("agent.pid")
        let receiver = try ScriptedReceiver(dir: dir, ["--script", "200,kill,200", "--kill-pid-file", pidFile])
        defer { receiver.stop() }
        let socket = dir.file("control.sock")
        let secret = try dir.write("g.whsec", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n")
        let config = try dir.write("agent.toml", agentConfig(
            stateDir: dir.file("state"), socket: socket, radio: "[radio.rtl433]\nbinary = \"\(try quietRadio(dir))\"",
            devices: [("front-door", "{ code = 1 }")], url: receiver.url, caFile: receiver.caFile, secretFile: secret)
            + "\n[tracker.button]\ncooldown_ms = 0\nrepeat_gap_ms = 20\n")
        let outbox = dir.file("state/outbox.sqlite")

        let agent = try startAgent(dir, config: config, socket: socket, name: "agent-1")
        defer { agent.stop() }
        try "\(agent.process.processIdentifier)".write(toFile: pidFile, atomically: true, encoding: .utf8)
        // A first press reserves the sequences ahead (flushed before it is sent); the next one is
        // the press sent while its fsync runs.
        XCTAssertEqual(try injectPress(socket), 0)
        eventually(20, "first press delivered") { agentStatus(socket)?["outbox"]?["depth"]?.intValue == 0 && receiver.requests.count == 1 }
        usleep(30_000) // the press tracker's repeat gap
        // What the device holds before the press: the state a power cut before its fsync leaves.
        let before = try [outbox, outbox + "-wal"].map { try Data(contentsOf: URL(fileURLWithPath: $0)) }
        // agentctl may not get its answer: the request can reach the receiver (which kills the
        // agent) before the press's fsync has returned, and so before the agent answers.
        XCTAssertTrue([0, 69].contains(try injectPress(socket)))
        XCTAssertNotNil(agent.wait(seconds: 20), "the receiver killed the agent on the press's request")
        XCTAssertEqual(receiver.requests.count, 2)
        if powerCut {
            try before[0].write(to: URL(fileURLWithPath: outbox))
            try before[1].write(to: URL(fileURLWithPath: outbox + "-wal"))
            try? FileManager.default.removeItem(atPath: outbox + "-shm")
            // The power cut is a reboot: the agent finds a reservation from another boot.
            var db: OpaquePointer?
            XCTAssertEqual(sqlite3_open(outbox, &db), SQLITE_OK)
            XCTAssertEqual(sqlite3_exec(db, "UPDATE meta SET value = value + 1 WHERE key = 'reserved_boot'", nil, nil, nil), SQLITE_OK)
            XCTAssertEqual(sqlite3_changes(db), 1, "the first press reserved sequences")
            sqlite3_close(db)
        }

        let again = try startAgent(dir, config: config, socket: socket, name: "agent-2")
        defer { again.stop() }
        usleep(30_000) // the press tracker's repeat gap
        XCTAssertEqual(try injectPress(socket), 0)
        // A crash: the first press again, then the second; a power cut: the second alone.
        let expected = powerCut ? 3 : 4
        eventually(30, "outbox drained") { agentStatus(socket)?["outbox"]?["depth"]?.intValue == 0 && receiver.requests.count >= expected }
        let requests = receiver.requests
        // No sequence ever reaches the receiver under two ids.
        let ids = ScriptedReceiver.idsBySequence(requests)
        XCTAssertTrue(ids.values.allSatisfy { $0.count == 1 }, "\(ids)")
        return (Array(requests.dropFirst().prefix(1)), Array(requests.dropFirst(2)))
    }

    func id(_ r: JSONValue) -> String? { (try? JSONReader.parse(r["body"]?.stringValue ?? ""))?["id"]?.stringValue }

    func testAProcessCrashAfterTheSendResendsThePressUnderItsOwnId() throws {
        let (first, rest) = try crashBetweenSendAndFsync(powerCut: false)
        let killed = try XCTUnwrap(first.first.flatMap(id))
        let ids = rest.map(id)
        XCTAssertEqual(ids.filter { $0 == killed }.count, 1, "sent again, same id: \(ids)")
        XCTAssertEqual(Set(ids.compactMap { $0 }).count, 2, "the second press has an id of its own: \(ids)")
        XCTAssertTrue(rest.allSatisfy { $0["answer"]?.stringValue == "200" })
    }

    func testAPowerCutBeforeTheFsyncLosesNothingAndRingsOnce() throws {
        let (first, rest) = try crashBetweenSendAndFsync(powerCut: true)
        let killed = try XCTUnwrap(first.first.flatMap(id))
        let ids = rest.map(id)
        XCTAssertFalse(ids.contains(killed), "the press the device lost is not sent again: \(ids)")
        XCTAssertEqual(ids.count, 1, "only the second press: \(ids)")
        XCTAssertTrue(rest.allSatisfy { $0["answer"]?.stringValue == "200" })
    }
}
