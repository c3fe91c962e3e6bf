import CloudCore
@testable import CloudStore
import Foundation
import Testing

/// `CloudStore.ingest` and `record` on a SQLite file: what gets queued, and what outcomes do.
@Suite final class IngestTests {
    let directory: URL
    let store: CloudStore
    let owner: Account
    let token = String(repeating: "ab", count: 32)

    init() async throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("ingest-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        store = try await CloudStore(url: directory.appendingPathComponent("cloud.sqlite").path)
        owner = try await store.createAccount(name: "Owner", now: 1).0
        try await store.enrollGateway(id: "gw-1", accountID: owner.id, publicKey: nil,
                                secret: "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD", now: 1)
        try await store.registerPhone(token: token, accountID: owner.id, installationSecret: String(repeating: "s", count: 43), environment: .production,
                                bundleID: "com.example.doorbell", now: 1)
    }

    deinit {
        try? FileManager.default.removeItem(at: directory)
    }

    func ingest(_ id: String, type: String = "doorbell.pressed", gateway: String = "gw-1", device: String? = "front",
                test: Bool = false, now: Int64 = 1_000) async throws -> CloudStore.IngestResult {
        let envelope = EventEnvelope(id: id, sequence: 1, type: type, gatewayID: gateway, deviceID: device,
                                     occurredAt: "2026-11-23T18:00:00Z", deviceName: "Front", isTest: test)
        let stored = StoredEvent(id: id, sequence: 1, type: type, gatewayID: gateway, deviceID: device,
                                 occurredAt: envelope.occurredAt, body: "{}", receivedAtMilliseconds: now, verified: ["v1"])
        return try await store.ingest(stored, envelope: envelope, now: now, pushTTLMilliseconds: 60_000) {
            PushPayload.forEvent(envelope, doorbell: $0)
        }
    }

    @Test func aPressQueuesOnePushPerPhoneOnceAndCreatesTheDoorbell() async throws {
        #expect(try await ingest("e1") == .stored(pushes: 1))
        #expect(try await ingest("e1") == .duplicate)
        let rows = try await store.deliveries(eventID: "e1")
        #expect(rows.count == 1)
        #expect(rows.first?.state == .pending)
        #expect(rows.first?.collapseID == "ring-gw-1:front")
        #expect(rows.first?.expiresAtMilliseconds == 61_000)
        #expect(try await store.doorbell(id: "gw-1:front")?.name == "Front")
    }

    @Test func testEventsBeaconsAndUnenrolledGatewaysPushNothing() async throws {
        #expect(try await ingest("t1", test: true) == .stored(pushes: 0))
        #expect(try await ingest("b1", type: "beacon.entered", device: "porch-region") == .stored(pushes: 0))
        #expect(try await store.doorbell(id: "gw-1:porch-region") == nil, "a beacon region is not a doorbell")
        #expect(try await ingest("u1", gateway: "gw-unknown") == .stored(pushes: 0))
        #expect(try await store.allEvents().count == 3, "all stored all the same")
    }

    @Test func aRetryPastTheExpirationExpiresAndA410PrunesOnlyAnOlderRegistration() async throws {
        _ = try await ingest("e1")
        let delivery = try #require(try await store.claimDue(now: 1_000, limit: 10, leaseMilliseconds: 500, owner: "a").first)
        try await store.record(.retry(status: 500, reason: "InternalServerError", at: 2_000), for: delivery, now: 1_100)
        #expect(try await store.claimDue(now: 1_999, limit: 10, leaseMilliseconds: 500, owner: "a").isEmpty, "not due before its backoff")
        #expect(try await store.nextDueTime() == 2_000)
        let again = try #require(try await store.claimDue(now: 2_000, limit: 10, leaseMilliseconds: 500, owner: "a").first)
        #expect(again.attempts == 1)
        try await store.record(.retry(status: nil, reason: "timeout", at: 70_000), for: again, now: 2_100)
        #expect(try await store.deliveries(eventID: "e1").first?.state == .expired)

        _ = try await ingest("e2")
        let second = try #require(try await store.claimDue(now: 3_000, limit: 10, leaseMilliseconds: 500, owner: "a").first)
        // The phone registered at 1; APNs says the app was gone from 0 on: it came back since.
        #expect(try await store.record(.unregistered(reason: "Unregistered", timestampMs: 0), for: second, now: 3_000) == .kept)
        #expect(try await store.phone(token: token) != nil)
    }

    /// A crash mid-send: the same instance restarted takes its claimed pushes back at once;
    /// another process waits for the lease. The clock is a parameter: no sleeping.
    @Test func aRestartTakesItsOwnLeasesBackAndLeavesOthersAlone() async throws {
        _ = try await ingest("e1")
        let lease = LeasePolicy(requestTimeoutSeconds: 15).leaseMilliseconds
        #expect(lease == 60_000)
        #expect(try await store.claimDue(now: 10_000, limit: 10, leaseMilliseconds: lease, owner: "host-a").count == 1)
        // host-a dies. host-b, alive all along, may not take it before the lease runs out.
        #expect(try await store.reclaimLeases(owner: "host-b", now: 11_000) == 0)
        #expect(try await store.claimDue(now: 11_000, limit: 10, leaseMilliseconds: lease, owner: "host-b").isEmpty)
        // host-a restarted recognises its own lease and takes it back at once.
        #expect(try await store.reclaimLeases(owner: "host-a", now: 11_000) == 1)
        #expect(try await store.nextDueTime() == 11_000)
        let again = try #require(try await store.claimDue(now: 11_000, limit: 10, leaseMilliseconds: lease, owner: "host-a").first)
        try await store.record(.delivered, for: again, now: 11_100)
        #expect(try await store.reclaimLeases(owner: "host-a", now: 12_000) == 0, "a finished push is nobody's lease")

        // Without a restart, host-b takes an orphaned lease when it runs out, not before.
        _ = try await ingest("e2", now: 20_000)
        #expect(try await store.claimDue(now: 20_000, limit: 10, leaseMilliseconds: lease, owner: "host-a").count == 1)
        #expect(try await store.claimDue(now: 20_000 + lease - 1, limit: 10, leaseMilliseconds: lease, owner: "host-b").isEmpty)
        #expect(try await store.claimDue(now: 20_000 + lease, limit: 10, leaseMilliseconds: lease, owner: "host-b").count == 1)
    }

    /// Issue #27, 10: a server whose lease ran out (stalled, or its answers slow) and whose
    /// push another server took meanwhile records nothing: the new owner's outcome stands,
    /// and a late retry does not put a delivered push back in the queue (a second ring).
    @Test func aLateOutcomeUnderAnExpiredLeaseDoesNotOverwriteTheNewOwners() async throws {
        _ = try await ingest("e1")
        let mine = try #require(try await store.claimDue(now: 1_000, limit: 10, leaseMilliseconds: 500, owner: "host-a").first)
        let theirs = try #require(try await store.claimDue(now: 1_500, limit: 10, leaseMilliseconds: 500, owner: "host-b").first)
        // host-a's late answer, before and after host-b's own: neither is written.
        #expect(try await store.record(.delivered, for: mine, now: 1_600, owner: "host-a") == .superseded)
        #expect(try await store.record(.delivered, for: theirs, now: 1_700, owner: "host-b") == CloudStore.TokenEffect.none)
        #expect(try await store.record(.retry(status: 503, reason: "ServiceUnavailable", at: 2_000), for: mine, now: 1_800,
                                       owner: "host-a") == .superseded)
        #expect(try await store.record(.unregistered(reason: "Unregistered", timestampMs: 5_000), for: mine, now: 1_800,
                                       owner: "host-a") == .superseded)
        let row = try #require(try await store.deliveries(eventID: "e1").first)
        #expect(row.state == .delivered && row.attempts == 1 && row.lastStatus == 200, "\(row)")
        #expect(try await store.phone(token: token) != nil, "a superseded 410 prunes nothing")
    }

    /// A graceful stop hands the claimed pushes it did not start back at once.
    @Test func releasedLeasesAreDueAtOnce() async throws {
        _ = try await ingest("e1")
        let claimed = try await store.claimDue(now: 1_000, limit: 10, leaseMilliseconds: 60_000, owner: "host-a")
        try await store.releaseLeases(claimed, owner: "host-a", now: 1_500)
        #expect(try await store.claimDue(now: 1_500, limit: 10, leaseMilliseconds: 60_000, owner: "host-b").count == 1)
    }

    /// A schema 1 database (no lease_owner) is upgraded in place on open, its queue kept.
    @Test func aVersionOneDatabaseIsUpgraded() async throws {
        _ = try await ingest("e1")
        let path = directory.appendingPathComponent("cloud.sqlite").path
        let raw = try SQLiteConnection(path: path)
        try await raw.execute(script: """
            ALTER TABLE deliveries DROP COLUMN lease_owner; ALTER TABLE deliveries DROP COLUMN displayed_at_ms;
            ALTER TABLE deliveries DROP COLUMN displayed_on; ALTER TABLE deliveries DROP COLUMN not_displayed_at_ms;
            UPDATE schema_version SET version = 1;
            """ + SchemaV3.downgradeFrom4, operation: "downgrade to schema 1")
        let reopened = try await CloudStore(url: path)
        #expect(try await raw.query("SELECT version FROM schema_version", [], operation: "v").rows.first?.integer(0) == CloudSchema.version)
        #expect(try await reopened.claimDue(now: 1_000, limit: 10, leaseMilliseconds: 500, owner: "a").count == 1)
    }

    /// A schema 2 database (before receipts) is upgraded in place, its pushes kept.
    @Test func aVersionTwoDatabaseGetsTheReceiptColumns() async throws {
        _ = try await ingest("e1")
        let path = directory.appendingPathComponent("cloud.sqlite").path
        let raw = try SQLiteConnection(path: path)
        try await raw.execute(script: """
            ALTER TABLE deliveries DROP COLUMN displayed_at_ms; ALTER TABLE deliveries DROP COLUMN displayed_on;
            ALTER TABLE deliveries DROP COLUMN not_displayed_at_ms; DROP TABLE phone_links; UPDATE schema_version SET version = 2;
            """ + SchemaV3.downgradeFrom4, operation: "downgrade to schema 2")
        let reopened = try await CloudStore(url: path)
        #expect(try await raw.query("SELECT version FROM schema_version", [], operation: "v").rows.first?.integer(0) == CloudSchema.version)
        #expect(try await reopened.deliveries(eventID: "e1").first?.receipt == "none")
    }

    /// A schema 5 database (before heartbeats) is upgraded in place; then a heartbeat is
    /// recorded once per id (a replay changes nothing) and its owner sees it, ids are forgotten
    /// after `forgetBefore`, and removing the gateway removes its last heartbeat.
    @Test func aVersionFiveDatabaseRecordsHeartbeatsOncePerID() async throws {
        let path = directory.appendingPathComponent("cloud.sqlite").path
        let raw = try SQLiteConnection(path: path)
        try await raw.execute(script: "DROP TABLE gateway_heartbeats; DROP TABLE heartbeat_ids; UPDATE schema_version SET version = 5;",
                              operation: "downgrade to schema 5")
        let reopened = try await CloudStore(url: path)
        #expect(try await raw.query("SELECT version FROM schema_version", [], operation: "v").rows.first?.integer(0) == CloudSchema.version)
        #expect(try await reopened.gateways(accountID: owner.id).map(\.lastSeenMilliseconds) == [nil])
        let beat = GatewayHeartbeat(id: "hb-1", gatewayID: "gw-1", agentVersion: "1.0", bootSlot: "A", sentAt: 2)
        #expect(try await reopened.recordHeartbeat(beat, now: 2_000, forgetBefore: 0))
        #expect(try await reopened.recordHeartbeat(beat, now: 3_000, forgetBefore: 0) == false, "a replay")
        #expect(try await reopened.gateways(accountID: owner.id)
                == [GatewaySummary(id: "gw-1", enrolledAtMilliseconds: 1, lastSeenMilliseconds: 2_000, agentVersion: "1.0", bootSlot: "A")])
        let next = GatewayHeartbeat(id: "hb-2", gatewayID: "gw-1", agentVersion: "1.1", bootSlot: nil, sentAt: 4)
        #expect(try await reopened.recordHeartbeat(next, now: 4_000, forgetBefore: 2_500), "hb-1's id is forgotten")
        #expect(try await raw.query("SELECT id FROM heartbeat_ids", [], operation: "ids").rows.map { $0.text(0) } == ["hb-2"])
        #expect(try await reopened.gateways(accountID: owner.id).first?.agentVersion == "1.1")
        try await reopened.removeGateway(id: "gw-1", accountID: owner.id)
        #expect(try await raw.query("SELECT COUNT(*) FROM gateway_heartbeats", [], operation: "n").rows.first?.integer(0) == 0)
    }

    func receipt(_ id: String, _ type: String, gateway: String = "gw-1", data: String) async throws -> CloudStore.IngestResult {
        let envelope = EventEnvelope(id: id, sequence: 2, type: type, gatewayID: gateway, deviceID: "front",
                                     occurredAt: "2026-11-23T18:00:05Z", deviceName: "Front", isTest: false)
        let stored = StoredEvent(id: id, sequence: 2, type: type, gatewayID: gateway, deviceID: "front", occurredAt: envelope.occurredAt,
                                 body: #"{"id":"\#(id)","type":"\#(type)","data":\#(data)}"#, receivedAtMilliseconds: 2_000, verified: ["v1"])
        return try await store.ingest(stored, envelope: envelope, now: 2_000, pushTTLMilliseconds: 60_000) { _ in nil }
    }

    /// A receipt is placed only on a push of the reporting gateway's own doorbells.
    @Test func aReceiptIsRecordedOnlyForTheGatewaysOwnPushes() async throws {
        try await store.enrollGateway(id: "gw-2", accountID: owner.id, publicKey: nil, secret: "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD", now: 1)
        _ = try await ingest("e1")
        let reference = PushReference.make(eventID: "e1", token: token)
        let data = #"{"reference":"\#(reference)","phone":{"id":"p1","name":"Anna"}}"#
        #expect(try await receipt("r0", "push.displayed", gateway: "gw-2", data: data) == .receipt(.unmatched))
        #expect(try await store.deliveries(eventID: "e1").first?.receipt == "none")
        #expect(try await receipt("r1", "push.displayed", data: data) == .receipt(.recorded(eventID: "e1", token: token)))
        let row = try #require(try await store.deliveries(eventID: "e1").first)
        #expect(row.receipt == "displayed" && row.displayedOn == "Anna" && row.displayedAtMilliseconds == 2_000)
        // "Not displayed" never overrides a display that was seen.
        #expect(try await receipt("r2", "push.not_displayed", data: #"{"press_event_id":"e1","phone":{"id":"p1"}}"#) == .receipt(.unmatched))
        #expect(try await store.deliveries(eventID: "e1").first?.receipt == "displayed")
        #expect(try await store.allEvents().count == 4, "receipts are stored as events all the same")
    }
}
