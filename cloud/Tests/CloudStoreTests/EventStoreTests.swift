import CloudCore
import CloudStore
import Foundation
import Testing

@Suite final class EventStoreTests {
    let directory: URL

    init() async throws {
        directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("doorbell-cloud-store-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    deinit {
        try? FileManager.default.removeItem(at: directory)
    }

    var path: String { directory.appendingPathComponent("events.sqlite").path }

    func event(_ id: String, sequence: Int64, gateway: String = "gw-1") -> StoredEvent {
        let body = #"{"id":"\#(id)","sequence":\#(sequence)}"#
        let envelope = EventEnvelope(id: id, sequence: sequence, type: "doorbell.pressed", gatewayID: gateway,
                                     deviceID: "front-door", occurredAt: "2026-11-22T14:03:07.123456Z")
        return StoredEvent(
            id: envelope.id, sequence: envelope.sequence, type: envelope.type, gatewayID: envelope.gatewayID,
            deviceID: envelope.deviceID, occurredAt: envelope.occurredAt, body: body,
            receivedAtMilliseconds: 1_000 + sequence, verified: ["v1", "v1a"])
    }

    @Test func insertsOnceAndReportsDuplicates() async throws {
        let store = try await EventStore(path: path)
        #expect(try await store.insert(event("e1", sequence: 1)) == .inserted)
        #expect(try await store.insert(event("e1", sequence: 1)) == .duplicate)
        #expect(try await store.allEvents().count == 1)
    }

    @Test func listsBySequenceAndSurvivesReopening() async throws {
        do {
            let store = try await EventStore(path: path)
            for sequence: Int64 in [3, 1, 2] {
                _ = try await store.insert(event("e\(sequence)", sequence: sequence))
            }
            #expect(FileManager.default.fileExists(atPath: path + "-wal"), "journal_mode should be WAL")
        }
        let events = try await EventStore(path: path).allEvents()
        #expect(events.map(\.sequence) == [1, 2, 3])
        #expect(events[0] == event("e1", sequence: 1))
    }

    @Test func concurrentDeliveriesOfOneEventStoreItOnce() async throws {
        let store = try await EventStore(path: path)
        let stored = event("e1", sequence: 1)
        let results = try await withThrowingTaskGroup(of: EventStore.InsertResult.self) { group in
            for _ in 0..<16 {
                group.addTask { try await store.insert(stored) }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results.filter { $0 == .inserted }.count == 1)
        #expect(results.filter { $0 == .duplicate }.count == 15)
    }

    @Test func jsonLineEmbedsTheBody() {
        #expect(event("e1", sequence: 1).jsonLine ==
            #"{"id":"e1","sequence":1,"type":"doorbell.pressed","gateway_id":"gw-1","device":"front-door","occurred_at":"2026-11-22T14:03:07.123456Z","received_at_ms":1001,"verified":["v1","v1a"],"body":{"id":"e1","sequence":1}}"#)
    }

    @Test func unopenablePathNamesTheFile() async {
        await #expect {
            try await EventStore(path: "/nonexistent-dir/x/events.sqlite")
        } throws: { error in
            "\(error)".contains("/nonexistent-dir/x/events.sqlite")
        }
    }
}
