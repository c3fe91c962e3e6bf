import CloudCore
@testable import CloudStore
import Foundation
import Testing

/// Where a test's store lives: a SQLite file, or a schema of its own on the test PostgreSQL
/// (cloud/scripts/with-test-postgres.sh; under CI=true its absence fails instead of skipping).
enum Backend: String, Sendable, CustomTestStringConvertible {
    case sqlite
    case postgres

    static var all: [Backend] {
        let environment = ProcessInfo.processInfo.environment
        return environment["DOORBELL_CLOUD_TEST_POSTGRES"] == nil && environment["CI"] != "true" ? [.sqlite] : [.sqlite, .postgres]
    }

    var testDescription: String { rawValue }

    /// A new empty database (not yet a store: a migration test fills it first).
    func database(in directory: URL) async throws -> any SQLDatabase {
        switch self {
        case .sqlite:
            return try SQLiteConnection(path: directory.appendingPathComponent("cloud-\(UUID().uuidString).sqlite").path)
        case .postgres:
            let base = try #require(ProcessInfo.processInfo.environment["DOORBELL_CLOUD_TEST_POSTGRES"])
            let schema = "acct_" + String(UInt64.random(in: 0...UInt64.max), radix: 16)
            let admin = try await PostgresPool.open(conninfo: base)
            try await admin.execute(script: "CREATE SCHEMA \(schema)", operation: "create test schema")
            await admin.close()
            return try await PostgresPool.open(conninfo: base + " options='-csearch_path=\(schema)'")
        }
    }
}

/// #30 at the store: the phone claim, the lifecycle, beacon messages and the migration from
/// schema 3, on SQLite and PostgreSQL.
@Suite final class AccountStoreTests {
    let directory: URL
    let token = String(repeating: "ab", count: 32)
    let aliceApp = String(repeating: "A", count: 43)
    let carolApp = String(repeating: "C", count: 43)
    let secret = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("accounts-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    deinit {
        try? FileManager.default.removeItem(at: directory)
    }

    func register(_ store: CloudStore, _ account: Account, _ app: String, token: String? = nil) async throws -> PhoneClaim.Decision {
        try await store.registerPhone(token: token ?? self.token, accountID: account.id, installationSecret: app,
                                      environment: .sandbox, bundleID: "com.example.doorbell", now: 10)
    }

    func ingest(_ store: CloudStore, _ id: String, gateway: String = "gw-1") async throws -> CloudStore.IngestResult {
        let envelope = EventEnvelope(id: id, sequence: 1, type: "doorbell.pressed", gatewayID: gateway, deviceID: "front",
                                     occurredAt: "2026-11-23T18:00:00Z", deviceName: "Front")
        let stored = StoredEvent(id: id, sequence: 1, type: envelope.type, gatewayID: gateway, deviceID: "front",
                                 occurredAt: envelope.occurredAt, body: "{}", receivedAtMilliseconds: 1, verified: ["v1"])
        return try await store.ingest(stored, envelope: envelope, now: 1, pushTTLMilliseconds: 60_000) {
            PushPayload.forEvent(envelope, doorbell: $0)
        }
    }

    @Test(arguments: Backend.all)
    func aTokenMovesOnlyWithItsInstallationSecret(backend: Backend) async throws {
        let store = try await CloudStore(database: backend.database(in: directory))
        let alice = try await store.createAccount(name: "Alice", now: 1).0
        let carol = try await store.createAccount(name: "Carol", now: 1).0
        #expect(try await register(store, alice, aliceApp) == .register)
        await #expect(throws: DirectoryError.self) { try await self.register(store, carol, self.carolApp) }
        #expect(try await store.phones(accountID: alice.id).map(\.token) == [token], "still Alice's")
        await #expect(throws: DirectoryError.self) { try await store.unregisterPhone(token: self.token, accountID: carol.id) }
        #expect(try await register(store, alice, aliceApp) == .refresh)
        // The phone itself signs into Carol's account.
        #expect(try await register(store, carol, aliceApp) == .move(from: alice.id))
        #expect(try await store.phones(accountID: alice.id).isEmpty)
        #expect(try await store.phone(token: token)?.accountID == carol.id)
        // Carol's, now: a reinstalled app (new secret) on Carol's account binds it anew.
        #expect(try await register(store, carol, carolApp) == .rebind)
        await #expect(throws: DirectoryError.self) { try await self.register(store, alice, self.aliceApp) }
        await store.close()
    }

    /// A gateway handed on: removed by its old owner, enrolled by the new one; neither sees the
    /// other's events, and what hung on it is gone.
    @Test(arguments: Backend.all)
    func aGatewayRemovedAndEnrolledAgainShowsNothingAcrossOwners(backend: Backend) async throws {
        let store = try await CloudStore(database: backend.database(in: directory))
        let alice = try await store.createAccount(name: "Alice", now: 1).0
        let bob = try await store.createAccount(name: "Bob", now: 1).0
        let carol = try await store.createAccount(name: "Carol", now: 1).0
        try await store.enrollGateway(id: "gw-1", accountID: alice.id, publicKey: nil, secret: secret, now: 1)
        _ = try await register(store, alice, aliceApp)
        #expect(try await ingest(store, "e-alice") == .stored(pushes: 1))
        try await store.share(doorbellID: "gw-1:front", with: bob.id, by: alice.id, now: 2)
        try await store.putBeaconMessage(accountID: alice.id, region: .iBeacon(uuid: "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", major: 1, minor: 2),
                                         event: "entered", doorbellID: "gw-1:front", site: nil, title: "Hi", body: "")

        // Neither a guest nor a stranger may remove it; the stranger cannot tell it exists.
        await #expect(throws: DirectoryError.notFound("this account has no gateway gw-1")) {
            try await store.removeGateway(id: "gw-1", accountID: carol.id)
        }
        await #expect(throws: DirectoryError.self) { try await store.removeDoorbell(id: "gw-1:front", accountID: carol.id) }
        do {
            try await store.removeDoorbell(id: "gw-1:front", accountID: bob.id)
            Issue.record("a guest removed the doorbell")
        } catch let error as DirectoryError {
            guard case .forbidden = error else { Issue.record("\(error)"); return }
        }

        try await store.removeGateway(id: "gw-1", accountID: alice.id)
        #expect(try await store.event(id: "e-alice") == nil, "its events go with it")
        #expect(try await store.deliveries(eventID: "e-alice").isEmpty)
        #expect(try await store.doorbells(visibleTo: bob.id).isEmpty, "and its shares")
        #expect(try await store.beaconMessages(accountID: alice.id).isEmpty, "and its doorbells' beacon messages")

        try await store.enrollGateway(id: "gw-1", accountID: carol.id, publicKey: nil, secret: secret, now: 3)
        #expect(try await ingest(store, "e-carol") == .stored(pushes: 0), "Alice's phone does not ring for Carol's door")
        #expect(try await store.doorbell(id: "gw-1:front")?.accountID == carol.id)
        #expect(try await !store.canSee(doorbellID: "gw-1:front", accountID: alice.id))
        #expect(try await !store.canSee(doorbellID: "gw-1:front", accountID: bob.id))
        await store.close()
    }

    @Test(arguments: Backend.all)
    func deletingAnAccountTakesItsPhonesPushesAndToken(backend: Backend) async throws {
        let store = try await CloudStore(database: backend.database(in: directory))
        let (alice, aliceToken) = try await store.createAccount(name: "Alice", now: 1)
        let bob = try await store.createAccount(name: "Bob", now: 1).0
        try await store.enrollGateway(id: "gw-1", accountID: alice.id, publicKey: nil, secret: secret, now: 1)
        _ = try await ingest(store, "e0")
        try await store.share(doorbellID: "gw-1:front", with: bob.id, by: alice.id, now: 2)
        _ = try await register(store, bob, carolApp)
        #expect(try await ingest(store, "e1") == .stored(pushes: 1), "Bob's phone, as a guest")
        try await store.deleteAccount(id: bob.id)
        #expect(try await store.deliveries(eventID: "e1").isEmpty, "its queued push is gone")
        #expect(try await store.phone(token: token) == nil)
        #expect(try await store.shares(doorbellID: "gw-1:front", ownerID: alice.id).isEmpty)
        try await store.deleteAccount(id: alice.id)
        #expect(try await store.account(bearer: aliceToken) == nil)
        #expect(try await store.allEvents().isEmpty)
        await store.close()
    }

    @Test(arguments: Backend.all)
    func oneRegionOneMessageIdAndNoPushLargerThanAPNsTakes(backend: Backend) async throws {
        let store = try await CloudStore(database: backend.database(in: directory))
        let alice = try await store.createAccount(name: "Alice", now: 1).0
        let region = BeaconRegion.eddystone(namespace: "edd1ebeac04e5defa017", instance: nil)
        let first = try await store.putBeaconMessage(accountID: alice.id, region: region, event: "entered", doorbellID: nil,
                                                     site: "home", title: "Hi", body: "one")
        let second = try await store.putBeaconMessage(accountID: alice.id, region: region, event: "entered", doorbellID: nil,
                                                      site: "home", title: "Hi", body: "two")
        #expect(first.id == second.id)
        #expect(try await store.beaconMessages(accountID: alice.id).map(\.body) == ["two"])
        // A report from one instance of the namespace finds the namespace's message.
        let instance = BeaconRegion.eddystone(namespace: "edd1ebeac04e5defa017", instance: "0bdb87539b67")
        #expect(try await store.beaconMessage(for: alice.id, region: instance, event: "entered")?.id == first.id)
        do {
            try await store.putBeaconMessage(accountID: alice.id, region: region, event: "exited", doorbellID: nil, site: "home",
                                             title: "Hi", body: String(repeating: "\u{1F6AA}", count: 1000))
            Issue.record("a 4 KB body was accepted")
        } catch let error as DirectoryError {
            #expect(error.description.contains("APNs takes at most 4096"), "\(error)")
        }
        #expect(try await store.beaconMessages(accountID: alice.id).count == 1)
        try await store.deleteBeaconMessage(id: first.id, accountID: alice.id)
        #expect(try await store.beaconMessages(accountID: alice.id).isEmpty)
        await store.close()
    }

    /// The database holds secrets: 0600, its WAL and shared-memory files too, whatever the
    /// umask, and a file made earlier with 0644 is tightened.
    @Test func theSQLiteFilesAreTheOwnersOnly() async throws {
        let path = directory.appendingPathComponent("old.sqlite").path
        #expect(FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o644]))
        #expect(try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int == 0o644)
        let store = try await CloudStore(url: path)
        try await store.enrollGateway(id: "gw-1", accountID: store.createAccount(name: "A", now: 1).0.id, publicKey: nil,
                                      secret: secret, now: 1)
        let fresh = directory.appendingPathComponent("fresh.sqlite").path
        let other = try await CloudStore(url: fresh)
        _ = try await other.createAccount(name: "B", now: 1)
        for file in [path, path + "-wal", path + "-shm", fresh, fresh + "-wal", fresh + "-shm"] {
            #expect(try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int == 0o600, "\(file)")
        }
        await store.close()
        await other.close()
    }

    /// A database of schema 3 (as the previous release left it) opens: its phone keeps its
    /// account and cannot be taken, its beacon message and rate limit keep working by region.
    @Test(arguments: Backend.all)
    func aSchema3DatabaseMigrates(backend: Backend) async throws {
        let database = try await backend.database(in: directory)
        try await database.execute(script: SchemaV3.script, operation: "create schema 3")
        try await database.execute(script: """
            INSERT INTO schema_version (version) VALUES (3);
            INSERT INTO accounts (id, name, token_sha256, created_at_ms) VALUES ('acct_alice', 'Alice', 'x', 1), ('acct_carol', 'Carol', 'y', 1);
            INSERT INTO phones (token, account_id, environment, bundle_id, registered_at_ms, bad_token_count)
                VALUES ('\(token)', 'acct_alice', 'sandbox', 'com.example.doorbell', 1, 0);
            INSERT INTO beacon_messages (id, account_id, uuid, major, minor, doorbell_id, site, event, title, body)
                VALUES ('bm_old', 'acct_alice', 'E2C56DB5-DFFB-48D2-B060-D0F5A71096E0', 1, 2, NULL, 'home', 'entered', 'Hi', 'there');
            INSERT INTO beacon_pushes (token, uuid, major, minor, last_push_ms)
                VALUES ('\(token)', 'E2C56DB5-DFFB-48D2-B060-D0F5A71096E0', 1, 2, 1000);
            """, operation: "fill schema 3")
        let store = try await CloudStore(database: database)
        let version = try await database.query("SELECT version FROM schema_version", [], operation: "read").rows.first?.integer(0)
        #expect(version == CloudSchema.version)
        let alice = try #require(try await store.account(id: "acct_alice"))
        let carol = try #require(try await store.account(id: "acct_carol"))
        await #expect(throws: DirectoryError.self) { try await self.register(store, carol, self.carolApp) }
        #expect(try await register(store, alice, aliceApp) == .rebind, "its own account binds it")
        #expect(try await register(store, carol, aliceApp) == .move(from: alice.id), "and then the phone can move")
        let region = BeaconRegion.iBeacon(uuid: "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", major: 1, minor: 2)
        #expect(try await store.beaconMessage(for: alice.id, region: region, event: "entered")?.id == "bm_old")
        #expect(try await !store.claimBeaconPush(token: token, region: region, now: 1500, intervalMilliseconds: 1000),
                "the rate limit carried over")
        let again = try await store.putBeaconMessage(accountID: alice.id, region: region, event: "entered", doorbellID: nil,
                                                     site: "home", title: "Hi", body: "again")
        #expect(again.id == "bm_old")
        await store.close()
    }
}

/// The schema of release 3 (CloudSchema.script before schema 4), as a database of it was made.
enum SchemaV3 {
    static let beaconTables = """
        CREATE TABLE beacon_messages (id TEXT PRIMARY KEY NOT NULL, account_id TEXT NOT NULL REFERENCES accounts (id),
            uuid TEXT NOT NULL, major BIGINT NOT NULL, minor BIGINT NOT NULL,
            doorbell_id TEXT REFERENCES doorbells (id) ON DELETE CASCADE, site TEXT, event TEXT NOT NULL,
            title TEXT NOT NULL, body TEXT NOT NULL, UNIQUE (account_id, uuid, major, minor, event));
        CREATE TABLE beacon_pushes (token TEXT NOT NULL, uuid TEXT NOT NULL, major BIGINT NOT NULL, minor BIGINT NOT NULL,
            last_push_ms BIGINT NOT NULL, PRIMARY KEY (token, uuid, major, minor));
        """

    /// Takes a schema 4 SQLite database back to schema 3's shape (its beacon tables emptied).
    static let downgradeFrom4 = """
        ALTER TABLE phones DROP COLUMN installation_sha256; ALTER TABLE phones DROP COLUMN name;
        ALTER TABLE phones DROP COLUMN name_shared; DROP TABLE beacon_messages; DROP TABLE beacon_pushes;
        \(beaconTables)
        """

    static let script = """
        CREATE TABLE events (id TEXT PRIMARY KEY NOT NULL, sequence BIGINT NOT NULL, type TEXT NOT NULL,
            gateway_id TEXT NOT NULL, device_id TEXT, occurred_at TEXT NOT NULL, body TEXT NOT NULL,
            received_at_ms BIGINT NOT NULL, verified TEXT NOT NULL);
        CREATE INDEX events_by_gateway_sequence ON events (gateway_id, sequence);
        CREATE TABLE accounts (id TEXT PRIMARY KEY NOT NULL, name TEXT NOT NULL, token_sha256 TEXT NOT NULL UNIQUE,
            created_at_ms BIGINT NOT NULL);
        CREATE TABLE gateways (id TEXT PRIMARY KEY NOT NULL, account_id TEXT NOT NULL REFERENCES accounts (id),
            public_key TEXT, secret TEXT, enrolled_at_ms BIGINT NOT NULL);
        CREATE TABLE doorbells (id TEXT PRIMARY KEY NOT NULL, gateway_id TEXT NOT NULL REFERENCES gateways (id) ON DELETE CASCADE,
            device_id TEXT NOT NULL, account_id TEXT NOT NULL REFERENCES accounts (id), name TEXT NOT NULL, site TEXT,
            created_at_ms BIGINT NOT NULL, UNIQUE (gateway_id, device_id));
        CREATE TABLE shares (doorbell_id TEXT NOT NULL REFERENCES doorbells (id) ON DELETE CASCADE,
            account_id TEXT NOT NULL REFERENCES accounts (id), granted_at_ms BIGINT NOT NULL, PRIMARY KEY (doorbell_id, account_id));
        CREATE TABLE phones (token TEXT PRIMARY KEY NOT NULL, account_id TEXT NOT NULL REFERENCES accounts (id),
            environment TEXT NOT NULL, bundle_id TEXT NOT NULL, registered_at_ms BIGINT NOT NULL,
            bad_token_count BIGINT NOT NULL DEFAULT 0);
        CREATE INDEX phones_by_account ON phones (account_id);
        CREATE TABLE deliveries (event_id TEXT NOT NULL, token TEXT NOT NULL, account_id TEXT NOT NULL,
            environment TEXT NOT NULL, bundle_id TEXT NOT NULL, doorbell_id TEXT, payload TEXT NOT NULL, apns_id TEXT NOT NULL,
            collapse_id TEXT, expires_at_ms BIGINT NOT NULL, state TEXT NOT NULL, attempts BIGINT NOT NULL DEFAULT 0,
            next_attempt_at_ms BIGINT NOT NULL, last_status BIGINT, last_reason TEXT, created_at_ms BIGINT NOT NULL,
            updated_at_ms BIGINT NOT NULL, lease_owner TEXT, displayed_at_ms BIGINT, displayed_on TEXT,
            not_displayed_at_ms BIGINT, PRIMARY KEY (event_id, token));
        CREATE INDEX deliveries_due ON deliveries (state, next_attempt_at_ms);
        \(beaconTables)
        CREATE TABLE phone_links (gateway_id TEXT NOT NULL, phone_id TEXT NOT NULL, token TEXT NOT NULL, phone_name TEXT,
            linked_at_ms BIGINT NOT NULL, PRIMARY KEY (gateway_id, phone_id));
        CREATE TABLE schema_version (version BIGINT NOT NULL);
        """
}
