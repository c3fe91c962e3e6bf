import CloudCore
@testable import CloudStore
import Foundation
import Testing

/// #29 at the store, on SQLite and PostgreSQL: a token binds one gateway to its account, once,
/// atomically, and never after it expired; a gateway another account holds is refused with the
/// token left unspent; problems are reported only with a live token.
@Suite final class EnrolmentStoreTests {
    let directory: URL
    let key = "ed25519:" + Data(repeating: 7, count: 32).base64EncodedString()
    let otherKey = "ed25519:" + Data(repeating: 9, count: 32).base64EncodedString()

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("enrol-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    deinit {
        try? FileManager.default.removeItem(at: directory)
    }

    func refusal(_ body: () async throws -> Void) async -> EnrolmentToken.TokenProblem? {
        do {
            try await body()
            return nil
        } catch EnrolmentRefusal.token(let problem) {
            return problem
        } catch {
            Issue.record("unexpected \(error)")
            return nil
        }
    }

    @Test(arguments: Backend.all)
    func aTokenEnrolsOneGatewayOnce(backend: Backend) async throws {
        let store = try await CloudStore(database: backend.database(in: directory))
        let alice = try await store.createAccount(name: "Alice", now: 1).0
        let (token, expires) = try await store.createEnrolmentToken(accountID: alice.id, gatewayID: nil, ttlSeconds: 3_600, now: 1_000)
        #expect(expires == 1_000 + 3_600_000)
        let stored = try await store.database.query("SELECT token_sha256 FROM enrolment_tokens", [], operation: "t").rows
        #expect(stored.map { $0.text(0) } == [CloudStore.tokenHash(token)], "kept hashed, never in clear")
        let first = try await store.enrol(token: token, gatewayID: "gw-1", publicKey: key, now: 2_000)
        #expect(first == (alice.id, true))
        #expect(try await store.gateway(id: "gw-1") == Gateway(id: "gw-1", accountID: alice.id, publicKey: key, secret: nil))
        // The same gateway and key again (its answer was lost): told it is enrolled.
        let again = try await store.enrol(token: token, gatewayID: "gw-1", publicKey: key, now: 3_000)
        #expect(again == (alice.id, false))
        #expect(await refusal { _ = try await store.enrol(token: token, gatewayID: "gw-2", publicKey: self.key, now: 3_000) } == .used)
        #expect(await refusal { _ = try await store.enrol(token: token, gatewayID: "gw-1", publicKey: self.otherKey, now: 3_000) } == .used)
        #expect(try await store.gateway(id: "gw-2") == nil)
        #expect(await refusal { _ = try await store.enrol(token: token, gatewayID: "gw-1", publicKey: self.key, now: expires) } == .expired)
    }

    @Test(arguments: Backend.all)
    func wrongExpiredAndForeignTokensAreToldApart(backend: Backend) async throws {
        let store = try await CloudStore(database: backend.database(in: directory))
        let alice = try await store.createAccount(name: "Alice", now: 1).0
        let bob = try await store.createAccount(name: "Bob", now: 1).0
        let unknown = EnrolmentToken.prefix + String(repeating: "x", count: 43)
        #expect(await refusal { _ = try await store.enrol(token: unknown, gatewayID: "gw-1", publicKey: self.key, now: 1) } == .unknown)
        #expect(await refusal { _ = try await store.enrol(token: "dbe_short", gatewayID: "gw-1", publicKey: self.key, now: 1) } == .malformed)
        let (short, expires) = try await store.createEnrolmentToken(accountID: alice.id, gatewayID: nil, ttlSeconds: 60, now: 0)
        #expect(await refusal { _ = try await store.enrol(token: short, gatewayID: "gw-1", publicKey: self.key, now: expires) } == .expired)
        let (bound, _) = try await store.createEnrolmentToken(accountID: alice.id, gatewayID: "gw-9", ttlSeconds: 60, now: 0)
        #expect(await refusal { _ = try await store.enrol(token: bound, gatewayID: "gw-1", publicKey: self.key, now: 1) } == .otherGateway)
        // Bob holds gw-1: Alice's token cannot take it (409, as POST /gateways), and stays good.
        try await store.enrollGateway(id: "gw-1", accountID: bob.id, publicKey: otherKey, secret: nil, now: 1)
        let (token, _) = try await store.createEnrolmentToken(accountID: alice.id, gatewayID: nil, ttlSeconds: 60, now: 0)
        await #expect(throws: DirectoryError.self) { try await store.enrol(token: token, gatewayID: "gw-1", publicKey: self.key, now: 1) }
        #expect(try await store.gateway(id: "gw-1")?.accountID == bob.id)
        try await store.removeGateway(id: "gw-1", accountID: bob.id)
        #expect(try await store.enrol(token: token, gatewayID: "gw-1", publicKey: key, now: 2) == (alice.id, true), "not spent by the refusal")
    }

    /// Gateways racing with one token (a copied SD card): exactly one wins, the rest are told it
    /// was used, and the gateway table holds the winner only.
    @Test(arguments: Backend.all)
    func concurrentUsesSpendItOnce(backend: Backend) async throws {
        let store = try await CloudStore(database: backend.database(in: directory))
        let alice = try await store.createAccount(name: "Alice", now: 1).0
        let (token, _) = try await store.createEnrolmentToken(accountID: alice.id, gatewayID: nil, ttlSeconds: 60, now: 0)
        let key = self.key
        let outcomes = await withTaskGroup(of: Bool?.self) { group in
            for i in 0..<8 {
                group.addTask {
                    do {
                        return try await store.enrol(token: token, gatewayID: "gw-\(i)", publicKey: key, now: 1).enrolled
                    } catch EnrolmentRefusal.token(.used) {
                        return false
                    } catch {
                        return nil
                    }
                }
            }
            var all: [Bool?] = []
            for await outcome in group { all.append(outcome) }
            return all
        }
        #expect(outcomes.filter { $0 == true }.count == 1, "\(outcomes)")
        #expect(outcomes.filter { $0 == false }.count == 7, "\(outcomes)")
        let gateways = try await store.database.query("SELECT COUNT(*) FROM gateways", [], operation: "count").rows.first?.integer(0)
        #expect(gateways == 1)
    }

    /// The race made certain on PostgreSQL (whose pool runs transactions side by side): another
    /// session spends the token and holds its row lock while `enrol` reads the token unspent and
    /// tries to spend it too. Once the first commits, `enrol` must be told `used`, not enrol a
    /// second gateway. (SQLite runs one session at a time: no such interleaving exists there.)
    @Test(.enabled(if: Backend.all.contains(.postgres)))
    func aUseInFlightWinsOverASecondOnPostgres() async throws {
        let database = try await Backend.postgres.database(in: directory)
        let store = try await CloudStore(database: database)
        let alice = try await store.createAccount(name: "Alice", now: 1).0
        let (token, _) = try await store.createEnrolmentToken(accountID: alice.id, gatewayID: nil, ttlSeconds: 60, now: 0)
        let hash = CloudStore.tokenHash(token)
        let (locked, signalLocked) = AsyncStream.makeStream(of: Void.self)
        let holder = Task {
            try await database.withTransaction("the other gateway's use") { (db) async throws(StoreError) in
                try await db.query("UPDATE enrolment_tokens SET used_at_ms = 1, used_by_gateway = 'gw-first', used_public_key = 'k' WHERE token_sha256 = $1",
                                   [.text(hash)], operation: "spend")
                signalLocked.yield()
                // Long enough for enrol below to read the row and reach its own UPDATE; were it
                // slower, the test would still pass, never fail wrongly.
                try? await Task.sleep(for: .milliseconds(500))
            }
        }
        for await _ in locked { break }
        #expect(await refusal { _ = try await store.enrol(token: token, gatewayID: "gw-second", publicKey: self.key, now: 2) } == .used)
        try await holder.value
        #expect(try await store.gateway(id: "gw-second") == nil)
    }

    @Test(arguments: Backend.all)
    func problemsNeedALiveTokenAndAreBounded(backend: Backend) async throws {
        let store = try await CloudStore(database: backend.database(in: directory))
        let alice = try await store.createAccount(name: "Alice", now: 1).0
        let bob = try await store.createAccount(name: "Bob", now: 1).0
        let (token, expires) = try await store.createEnrolmentToken(accountID: alice.id, gatewayID: nil, ttlSeconds: 60, now: 0)
        let problem = "doorbell.toml:12:1: [uplink] url: must be https://"
        for _ in 0..<(EnrolmentToken.maxReports + 5) {
            #expect(try await store.reportProvisioningProblem(token: token, gatewayID: "gw-1", problem: problem, now: 5))
        }
        let reports = try await store.provisioningReports(accountID: alice.id)
        #expect(reports.count == EnrolmentToken.maxReports)
        #expect(reports.first?.problem == problem && reports.first?.gatewayID == "gw-1")
        #expect(try await store.provisioningReports(accountID: bob.id).isEmpty)
        #expect(try await !store.reportProvisioningProblem(token: token, gatewayID: "gw-1", problem: problem, now: expires))
        #expect(try await !store.reportProvisioningProblem(token: EnrolmentToken.prefix + String(repeating: "y", count: 43),
                                                          gatewayID: "gw-1", problem: problem, now: 1))
        // Deleting the account takes its tokens and reports with it.
        try await store.deleteAccount(id: alice.id)
        #expect(try await store.database.query("SELECT COUNT(*) FROM enrolment_tokens", [], operation: "c").rows.first?.integer(0) == 0)
        #expect(try await store.provisioningReports(accountID: alice.id).isEmpty)
    }
}
