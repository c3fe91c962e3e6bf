import DoorbellCore
@testable import DoorbellRuntime
import Foundation
import XCTest

/// Until outbox schema v4 the BTHome packet ids lived in `state_dir/ble-buttons.json`: the first
/// start of a newer agent takes them into the outbox once and removes the file, so an upgrade does
/// not forget them (a re-broadcast right after it would be a second press).
final class ButtonMemoryMigrationTests: XCTestCase {
    func testTheOldFileIsTakenIntoTheOutboxOnceAndRemoved() throws {
        let dir = try TempDir()
        let legacy = try dir.write("ble-buttons.json", #"{"C0:11:22:33:44:02": {"packet_id": 9, "counter": null}, "C0:11:22:33:44:03": {"packet_id": 2, "counter": 11}}"#)
        let outbox = try Outbox(path: dir.file("outbox.sqlite"))
        // A row the outbox already has wins over the file's (it is newer).
        _ = try outbox.append([], memory: ["C0:11:22:33:44:03": BTHomeButtonTracker.DeviceMemory(packetID: 3, counter: 12)], bounds: nil, report: nil)
        let memory = Agent.loadButtonMemory(outbox, legacyFile: legacy, log: Logger(level: .error))
        XCTAssertEqual(memory["C0:11:22:33:44:02"], BTHomeButtonTracker.DeviceMemory(packetID: 9, counter: nil))
        XCTAssertEqual(memory["C0:11:22:33:44:03"], BTHomeButtonTracker.DeviceMemory(packetID: 3, counter: 12))
        XCTAssertFalse(FileManager.default.fileExists(atPath: legacy))
        XCTAssertEqual(try outbox.buttonMemory(), memory)
        // A damaged file is removed and the outbox's memory stands.
        _ = try dir.write("ble-buttons.json", "{not json")
        XCTAssertEqual(Agent.loadButtonMemory(outbox, legacyFile: legacy, log: Logger(level: .error)), memory)
        XCTAssertFalse(FileManager.default.fileExists(atPath: legacy))
    }
}
