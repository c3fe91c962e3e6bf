import CloudCore
import CloudPush
import CloudServer
import CloudStore
import Crypto
import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import Synchronization
import Testing

/// The cloud end to end, short of the network between agent and cloud: signed events into the
/// router, SQLite on disk, the fan-out over real TLS + HTTP/2 to the APNs-compatible test server.
/// Where the store lives: a SQLite file, and a PostgreSQL schema when a test server is given
/// (`cloud/scripts/with-test-postgres.sh`, which `make test` uses).
enum StoreBackend: String, Sendable, CustomTestStringConvertible {
    case sqlite
    case postgres

    /// PostgreSQL only with a test server, except under CI=true, where its absence must fail the
    /// run (the `#require` in `make(in:)`) rather than shrink it to SQLite.
    static var available: [StoreBackend] {
        let environment = ProcessInfo.processInfo.environment
        return environment["DOORBELL_CLOUD_TEST_POSTGRES"] == nil && environment["CI"] != "true" ? [.sqlite] : [.sqlite, .postgres]
    }

    var testDescription: String { rawValue }

    /// A fresh, empty store, what removes it afterwards, and how to open a second connection to
    /// it (as a second `serve` process would).
    func make(in directory: URL) async throws
        -> (CloudStore, cleanup: @Sendable () -> Void, another: @Sendable () async throws -> CloudStore) {
        switch self {
        case .sqlite:
            let path = directory.appendingPathComponent("cloud-\(UUID().uuidString).sqlite").path
            return (try await CloudStore(url: path), {}, { try await CloudStore(url: path) })
        case .postgres:
            let base = try #require(ProcessInfo.processInfo.environment["DOORBELL_CLOUD_TEST_POSTGRES"])
            let schema = "fanout_" + String(UInt64.random(in: 0...UInt64.max), radix: 16)
            let admin = try await PostgresPool.open(conninfo: base)
            try await admin.execute(script: "CREATE SCHEMA \(schema)", operation: "create test schema")
            let conninfo = base + " options='-csearch_path=\(schema)'"
            let store = try await CloudStore(database: PostgresPool.open(conninfo: conninfo))
            // Run from deinit, which cannot await: waits (at most 10 s) for the drop.
            let cleanup: @Sendable () -> Void = {
                let done = DispatchSemaphore(value: 0)
                Task.detached {
                    try? await admin.execute(script: "DROP SCHEMA \(schema) CASCADE", operation: "drop test schema")
                    await admin.close()
                    done.signal()
                }
                _ = done.wait(timeout: .now() + 10)
            }
            return (store, cleanup, { try await CloudStore(database: PostgresPool.open(conninfo: conninfo)) })
        }
    }
}

@Suite(.serialized) final class FanOutTests: Sendable {
    let directory: URL
    let secret = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"
    let adminToken = "admin-secret-for-tests"
    let logger = Logger(label: "fan-out-test")
    /// PUSH lines, as `doorbell-cloud serve` prints them.
    let lines = CapturedLines()

    init() async throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("fanout-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    /// Drops the PostgreSQL schemas the test made.
    let cleanups = Mutex<[@Sendable () -> Void]>([])

    deinit {
        for cleanup in cleanups.withLock({ $0 }) { cleanup() }
        try? FileManager.default.removeItem(at: directory)
    }

    /// The router with a fan-out to `apns`, and the fan-out running in the background.
    struct Cloud {
        let app: Application<RouterResponder<BasicRequestContext>>
        let fanOut: FanOut
        let client: APNsClient
        let store: CloudStore
        let another: @Sendable () async throws -> CloudStore
    }

    func apnsSettings(_ apns: APNsTestServer, concurrency: Int) throws -> APNsSettings {
        var settings = APNsSettings(key: try APNsSigningKey(pem: apns.keyPEM, teamID: APNsTestServer.teamID,
                                                            keyID: APNsTestServer.keyID))
        settings.productionURL = apns.url
        settings.sandboxURL = apns.url
        settings.caFile = apns.caFile
        settings.concurrency = concurrency
        settings.requestTimeoutSeconds = 10
        return settings
    }

    func cloud(_ apns: APNsTestServer, backend: StoreBackend = .sqlite, concurrency: Int = 50) async throws -> Cloud {
        let (store, cleanup, another) = try await backend.make(in: directory)
        cleanups.withLock { $0.append(cleanup) }
        let client = try APNsClient(settings: apnsSettings(apns, concurrency: concurrency), logger: logger)
        let lines = self.lines
        let fanOut = FanOut(store: store, client: client, logger: logger, clock: WallClock.system.millisecondsSinceEpoch,
                            owner: "first") {
            delivery, outcome, effect in
            if case .delivered = outcome {
                lines.output.pushed(eventID: delivery.eventID, token: delivery.token, state: "delivered", status: 200,
                                    reason: nil, pruned: false)
            } else if case .unregistered(let reason, _) = outcome {
                lines.output.pushed(eventID: delivery.eventID, token: delivery.token, state: "unregistered", status: 410,
                                    reason: reason, pruned: effect == .pruned)
            }
        }
        let events = EventsEndpoint(fallbackKeys: nil, store: store, output: OutputLines { _ in }, fanOut: fanOut)
        let api = AppAPI(store: store, adminToken: adminToken, fanOut: fanOut, topics: [APNsTestServer.topic])
        return Cloud(app: Application(router: makeRouter(events: events, api: api)), fanOut: fanOut, client: client,
                     store: store, another: another)
    }

    // MARK: API helpers

    func call(_ client: some TestClientProtocol, _ method: HTTPRequest.Method, _ uri: String, token: String?,
              _ body: String = "") async throws -> (HTTPResponse.Status, [String: Any]) {
        var headers = HTTPFields()
        if let token { headers[.authorization] = "Bearer " + token }
        headers[.contentType] = "application/json"
        return try await client.execute(uri: uri, method: method, headers: headers, body: ByteBuffer(string: body)) {
            let text = String(buffer: $0.body)
            let json = (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? [:]
            return ($0.status, json)
        }
    }

    func createAccount(_ client: some TestClientProtocol, _ name: String) async throws -> (id: String, token: String) {
        let (status, json) = try await call(client, .post, "/accounts", token: adminToken, #"{"name":"\#(name)"}"#)
        #expect(status == .created)
        return (try #require(json["id"] as? String), try #require(json["token"] as? String))
    }

    /// Registers `token` as the app does: each phone's installation secret is its own (derived
    /// from the token here, so a test can register the same phone again).
    func register(_ client: some TestClientProtocol, _ token: String, account: String) async throws {
        let (status, json) = try await call(client, .put, "/phones/\(token)", token: account,
                                            #"{"environment":"sandbox","bundle_id":"\#(APNsTestServer.topic)","installation_secret":"\#(installationSecret(of: token))"}"#)
        #expect(status == .ok, "\(json)")
    }

    func installationSecret(of token: String) -> String { "inst-" + token }

    /// Owner with a gateway and the doorbell gw-0001:front-door shared with `guests` accounts.
    func household(_ client: some TestClientProtocol, guests: Int) async throws -> [(id: String, token: String)] {
        let owner = try await createAccount(client, "Owner")
        var (status, json) = try await call(client, .post, "/gateways", token: owner.token,
                                            #"{"id":"gw-0001","secret":"\#(secret)"}"#)
        #expect(status == .created, "\(json)")
        (status, json) = try await call(client, .put, "/doorbells/gw-0001:front-door", token: owner.token,
                                        #"{"name":"Front door","site":"home"}"#)
        #expect(status == .ok, "\(json)")
        var accounts = [owner]
        for index in 0..<guests {
            let guest = try await createAccount(client, "Guest \(index)")
            (status, json) = try await call(client, .post, "/doorbells/gw-0001:front-door/shares", token: owner.token,
                                            #"{"account_id":"\#(guest.id)"}"#)
            #expect(status == .created, "\(json)")
            accounts.append(guest)
        }
        return accounts
    }

    /// POSTs a v1-signed doorbell.pressed event, as the agent does.
    func press(_ client: some TestClientProtocol, id: String, sequence: Int64 = 1,
               secret: String? = nil) async throws -> (HTTPResponse.Status, [String: Any]) {
        let body = #"{"id":"\#(id)","sequence":\#(sequence),"type":"doorbell.pressed","gateway_id":"gw-0001","occurred_at":"2026-11-23T18:00:00.000000Z","test":false,"device":{"id":"front-door","name":"Front door","radio":"rtl433"},"data":{"code":"91568f"}}"#
        return try await post(client, id: id, body: body, secret: secret)
    }

    /// POSTs `body` v1-signed as gw-0001, as the agent does.
    func post(_ client: some TestClientProtocol, id: String, body: String,
              secret: String? = nil) async throws -> (HTTPResponse.Status, [String: Any]) {
        let timestamp = String(Int64(Date().timeIntervalSince1970))
        let signature = SignatureVerifier.v1Signature(
            secret: try WebhookSecret(parsing: secret ?? self.secret), id: id, timestamp: timestamp, body: Array(body.utf8))
        var headers = HTTPFields()
        for (name, value) in [("webhook-id", id), ("webhook-timestamp", timestamp), ("webhook-signature", signature),
                              ("doorbell-gateway-id", "gw-0001"), ("content-type", "application/json")] {
            headers[try #require(HTTPFields.Element.Name(name))] = value
        }
        return try await client.execute(uri: "/events", method: .post, headers: headers, body: ByteBuffer(string: body)) {
            ($0.status, (try? JSONSerialization.jsonObject(with: Data(String(buffer: $0.body).utf8)) as? [String: Any]) ?? [:])
        }
    }

    /// Polls `condition` every 100 ms until it holds or `seconds` pass; whether it held.
    func eventuallyAsync(_ seconds: Int, _ condition: () async throws -> Bool) async throws -> Bool {
        for _ in 0..<(seconds * 10) {
            if try await condition() { return true }
            try await Task.sleep(for: .milliseconds(100))
        }
        return try await condition()
    }

    /// The event a logged APNs request was about (from its payload).
    func eventID(of request: [String: Any]) -> String? {
        ((request["payload"] as? [String: Any])?["doorbell"] as? [String: Any])?["event_id"] as? String
    }

    /// Waits (at most 60 s) until no delivery of `eventID` is pending.
    func settled(_ eventID: String, _ store: CloudStore) async throws -> [Delivery] {
        for _ in 0..<600 {
            let rows = try await store.deliveries(eventID: eventID)
            if !rows.isEmpty, !rows.contains(where: { $0.state == .pending }) { return rows }
            try await Task.sleep(for: .milliseconds(100))
        }
        Issue.record("deliveries of \(eventID) still pending after 60 s")
        return try await store.deliveries(eventID: eventID)
    }

    func withFanOut<T>(_ cloud: Cloud, _ body: () async throws -> T) async throws -> T {
        let runner = Task { await cloud.fanOut.run() }
        defer { runner.cancel() }
        let value = try await body()
        runner.cancel()
        await runner.value
        await cloud.client.shutdown()
        return value
    }

    // MARK: Scenarios

    /// The issue's scenario: 200 phones on 5 accounts, 20 of them dead; the agent delivers the
    /// same event three times. 180 pushes, 20 tokens pruned, no phone rings twice.
    @Test(arguments: StoreBackend.available)
    func twoHundredPhonesTwentyDeadThreeDeliveries(backend: StoreBackend) async throws {
        let tokensByAccount: [[String]] = (0..<5).map { _ in (0..<40).map { _ in randomDeviceToken() } }
        let all = tokensByAccount.flatMap { $0 }
        let dead = Set(all.shuffled().prefix(20))
        var scripted: [String: Any] = [:]
        for token in dead { scripted[token] = [["status": 410, "reason": "Unregistered", "timestamp_ms": "now"]] }
        let apns = try APNsTestServer(script: ["tokens": scripted, "default": ["status": 200]])
        let cloud = try await cloud(apns, backend: backend)
        let eventID = "019ab2c4-5d6e-7f80-9a1b-2c3d4e5f6a7b"

        try await withFanOut(cloud) {
            try await cloud.app.test(.router) { client in
                let accounts = try await household(client, guests: 4)
                for (account, tokens) in zip(accounts, tokensByAccount) {
                    for token in tokens { try await register(client, token, account: account.token) }
                }
                // Two deliveries race, a third comes later (the agent's retry after a lost 200).
                async let first = press(client, id: eventID)
                async let second = press(client, id: eventID)
                let answers = try await [first, second]
                #expect(answers.allSatisfy { $0.0 == .ok })
                #expect(answers.map { $0.1["status"] as? String }.sorted { ($0 ?? "") < ($1 ?? "") } == ["accepted", "duplicate"])
                #expect(answers.compactMap { $0.1["pushes"] as? Int } == [200])
                let rows = try await settled(eventID, cloud.store)
                let third = try await press(client, id: eventID)
                #expect(third.1["status"] as? String == "duplicate")

                #expect(rows.count == 200)
                #expect(rows.filter { $0.state == .delivered }.count == 180)
                #expect(Set(rows.filter { $0.state == .unregistered }.map(\.token)) == dead)

                let owner = accounts[0]
                let (status, json) = try await call(client, .get, "/events/\(eventID)/deliveries", token: owner.token)
                #expect(status == .ok)
                #expect((json["deliveries"] as? [Any])?.count == 200)
                // A guest sees only the pushes to its own phones.
                let guestView = try await call(client, .get, "/events/\(eventID)/deliveries", token: accounts[1].token)
                #expect((guestView.1["deliveries"] as? [Any])?.count == 40)
            }
        }

        let requests = try apns.processed()
        let ok = requests.filter { $0["status"] as? Int == 200 }.compactMap { $0["token"] as? String }
        #expect(ok.count == 180, "every live phone rang exactly once")
        #expect(Set(ok).count == 180)
        #expect(Set(ok).isDisjoint(with: dead))
        #expect(requests.count == 200, "no push was sent twice: \(requests.count) requests")
        var remaining = 0
        for tokens in tokensByAccount {
            for token in tokens {
                if try await cloud.store.phone(token: token) != nil { remaining += 1 }
            }
        }
        #expect(remaining == 180, "the 20 dead tokens are pruned")
        let pushLines = lines.all.filter { $0.hasPrefix("PUSH \(eventID) ") }
        #expect(pushLines.count == 200)
        #expect(pushLines.filter { $0.hasSuffix(" unregistered 410 Unregistered pruned") }.count == 20)
        #expect(pushLines.allSatisfy { $0.split(separator: " ")[2].count == 9 }, "tokens shortened: \(pushLines.first ?? "")")

        // The headers and payload APNs gets.
        let sample = try #require(requests.first { $0["status"] as? Int == 200 })
        let headers = try #require(sample["headers"] as? [String: String])
        #expect(headers["apns-topic"] == APNsTestServer.topic)
        #expect(headers["apns-push-type"] == "alert")
        #expect(headers["apns-priority"] == "10")
        let apnsIDs = requests.compactMap { ($0["headers"] as? [String: String])?["apns-id"] }
        #expect(Set(apnsIDs).count == 200, "each request has its own apns-id")
        #expect(!apnsIDs.contains(eventID))
        #expect(headers["apns-collapse-id"] == "ring-gw-0001:front-door")
        #expect(Int64(headers["apns-expiration"] ?? "") ?? 0 > Int64(Date().timeIntervalSince1970))
        let payload = try #require(sample["payload"] as? [String: Any])
        let aps = try #require(payload["aps"] as? [String: Any])
        #expect(aps["thread-id"] as? String == "doorbell-gw-0001:front-door")
        let alert = try #require(aps["alert"] as? [String: Any])
        #expect(alert["loc-key"] as? String == "DOORBELL_PRESSED")
        #expect(alert["title"] as? String == "Front door")
        let doorbell = try #require(payload["doorbell"] as? [String: Any])
        #expect(doorbell["event_id"] as? String == eventID)
        #expect(doorbell["gateway_id"] as? String == "gw-0001")
    }

    /// APNs revokes the provider token in the middle of a 200-phone fan-out (50 in flight): the
    /// pushes refused with it are sent again with one replacement. Every phone rings once, and
    /// no more than two JWTs are ever signed (the issue saw 753, up to 674 s in the future).
    @Test(arguments: StoreBackend.available)
    func aProviderTokenRejectedMidFanOutIsReplacedOnce(backend: StoreBackend) async throws {
        let tokens = (0..<200).map { _ in randomDeviceToken() }
        let apns = try APNsTestServer(script: ["default": ["status": 200], "reject_first_jwt_after": 20])
        let cloud = try await cloud(apns, backend: backend, concurrency: 50)
        let eventID = "019ab2c4-5d6e-7f80-9a1b-2c3d4e5f6a40"
        try await withFanOut(cloud) {
            try await cloud.app.test(.router) { client in
                let owner = try await household(client, guests: 0)[0]
                for token in tokens { try await register(client, token, account: owner.token) }
                // The runaway began when the 403 came in the second the first token was signed
                // (its replacement then carried a future iat); start the fan-out early in a second.
                // Whatever the timing, the assertions below hold for a correct schedule.
                for _ in 0..<100 where Int64(Date().timeIntervalSince1970 * 1000) % 1000 > 100 {
                    try await Task.sleep(for: .milliseconds(10))
                }
                #expect(try await press(client, id: eventID).1["pushes"] as? Int == 200)
                let rows = try await settled(eventID, cloud.store)
                #expect(rows.filter { $0.state == .delivered }.count == 200)
            }
        }
        let requests = try apns.processed()
        let ok = requests.filter { $0["status"] as? Int == 200 }.compactMap { $0["token"] as? String }
        #expect(ok.count == 200, "every phone rang exactly once")
        #expect(Set(ok) == Set(tokens))
        #expect(requests.contains { $0["reason"] as? String == "ExpiredProviderToken" }, "the token was revoked mid-way")
        let jwts = Set(requests.compactMap { $0["jwt_id"] as? String })
        #expect(jwts.count == 2, "one replacement for the whole burst: \(jwts.count) JWTs")
        let now = Int(Date().timeIntervalSince1970)
        #expect(requests.compactMap { $0["jwt_iat"] as? Int }.allSatisfy { $0 <= now }, "no token from the future")
    }

    /// A wrong key: APNs refuses every token. One replacement is tried, then nothing is signed
    /// for 20 minutes (APNs would answer TooManyProviderTokenUpdates); the pushes wait, and the
    /// health says so. The issue saw a new token and a critical line for every push.
    @Test func aWrongKeyHoldsPushesAfterOneReplacement() async throws {
        let tokens = (0..<60).map { _ in randomDeviceToken() }
        let apns = try APNsTestServer(script: ["default": ["status": 200]])
        var settings = try apnsSettings(apns, concurrency: 20)
        settings.key = APNsSigningKey(privateKey: P256.Signing.PrivateKey(), teamID: APNsTestServer.teamID,
                                      keyID: APNsTestServer.keyID)
        let (store, cleanup, _) = try await StoreBackend.sqlite.make(in: directory)
        cleanups.withLock { $0.append(cleanup) }
        let client = try APNsClient(settings: settings, logger: logger)
        let fanOut = FanOut(store: store, client: client, logger: logger, clock: WallClock.system.millisecondsSinceEpoch,
                            owner: "wrong-key")
        let events = EventsEndpoint(fallbackKeys: nil, store: store, output: OutputLines { _ in }, fanOut: fanOut)
        let api = AppAPI(store: store, adminToken: adminToken, fanOut: fanOut, topics: [APNsTestServer.topic])
        let app = Application(router: makeRouter(events: events, api: api))
        let eventID = "019ab2c4-5d6e-7f80-9a1b-2c3d4e5f6a41"
        let runner = Task { await fanOut.run() }
        try await app.test(.router) { client in
            let owner = try await household(client, guests: 0)[0]
            for token in tokens { try await register(client, token, account: owner.token) }
            #expect(try await press(client, id: eventID).1["pushes"] as? Int == 60)
            let held = try await eventuallyAsync(30) {
                try await store.deliveries(eventID: eventID).allSatisfy { $0.attempts >= 1 }
            }
            #expect(held, "every push attempted once")
            let health = try await call(client, .get, "/healthz", token: nil).1
            #expect(health["apns_provider_token"] as? String == "failing", "\(health)")
            #expect(health["apns_provider_tokens_signed"] as? Int == 2, "\(health)")
        }
        runner.cancel()
        await runner.value
        await client.shutdown()
        let rows = try await store.deliveries(eventID: eventID)
        let inNineteenMinutes = Int64(Date().timeIntervalSince1970 * 1000) + 19 * 60_000
        #expect(rows.allSatisfy { $0.state == .pending && $0.nextAttemptAtMilliseconds > inNineteenMinutes },
                "held until the next token may be signed")
        let jwts = Set(try apns.log().filter { ($0["event"] as? String) == "request" }.compactMap { $0["jwt_id"] as? String })
        #expect(jwts.count == 2, "the first token and one replacement: \(jwts.count)")
    }

    /// GOAWAY after 30 streams while up to 50 are in flight: the unprocessed ones are sent again
    /// on a new connection; every phone rings exactly once.
    @Test func goAwayMidBatchStillDeliversAll() async throws {
        let tokens = (0..<100).map { _ in randomDeviceToken() }
        let apns = try APNsTestServer(script: [
            "default": ["status": 200], "goaway_after_streams": 30, "goaway_connections": 1, "delay_ms": 20,
        ])
        let cloud = try await cloud(apns, concurrency: 50)
        let eventID = "019ab2c4-5d6e-7f80-9a1b-2c3d4e5f6a01"
        try await withFanOut(cloud) {
            try await cloud.app.test(.router) { client in
                let accounts = try await household(client, guests: 0)
                for token in tokens { try await register(client, token, account: accounts[0].token) }
                #expect(try await press(client, id: eventID).1["pushes"] as? Int == 100)
                let rows = try await settled(eventID, cloud.store)
                #expect(rows.filter { $0.state == .delivered }.count == 100)
            }
        }
        let log = try apns.log()
        #expect(log.contains { $0["event"] as? String == "goaway" }, "the server did send GOAWAY")
        let ok = try apns.processed().filter { $0["status"] as? Int == 200 }.compactMap { $0["token"] as? String }
        #expect(ok.count == 100)
        #expect(Set(ok) == Set(tokens))
    }

    /// Per-token outcomes, each handled on its own while the others go through.
    @Test(arguments: StoreBackend.available)
    func eachTokenOutcomeIsHandledOnItsOwn(backend: StoreBackend) async throws {
        let reRegistered = randomDeviceToken()
        let badOnce = randomDeviceToken()
        let throttled = randomDeviceToken()
        let flaky = randomDeviceToken()
        let reset = randomDeviceToken()
        let tooLarge = randomDeviceToken()
        let notForTopic = randomDeviceToken()
        let healthy = (0..<10).map { _ in randomDeviceToken() }
        let apns = try APNsTestServer(script: ["tokens": [:], "default": ["status": 200]])
        let cloud = try await cloud(apns, backend: backend)
        let first = "019ab2c4-5d6e-7f80-9a1b-2c3d4e5f6a02"
        try await withFanOut(cloud) {
            try await cloud.app.test(.router) { client in
                let owner = try await household(client, guests: 0)[0]
                for token in [reRegistered, badOnce, throttled, flaky, reset, tooLarge, notForTopic] + healthy {
                    try await register(client, token, account: owner.token)
                }
                // APNs saw the token die just before the phone registered it again.
                let registeredAt = try #require(try await cloud.store.phone(token: reRegistered)).registeredAtMilliseconds
                try apns.setScript([
                    "tokens": [
                        reRegistered: [["status": 410, "reason": "Unregistered", "timestamp_ms": registeredAt - 1]],
                        badOnce: [["status": 400, "reason": "BadDeviceToken"], ["status": 200]],
                        throttled: [["status": 429, "reason": "TooManyRequests"], ["status": 200]],
                        flaky: [["status": 500, "reason": "InternalServerError"], ["status": 503, "reason": "ServiceUnavailable"], ["status": 200]],
                        reset: [["reset": true], ["status": 200]],
                        tooLarge: [["status": 413, "reason": "PayloadTooLarge"]],
                        notForTopic: [["status": 400, "reason": "DeviceTokenNotForTopic"]],
                    ],
                    "default": ["status": 200],
                    "expire_provider_token_first": 1,
                ])
                #expect(try await press(client, id: first).1["pushes"] as? Int == 17)
                let rows = try await settled(first, cloud.store)
                func state(_ token: String) -> DeliveryState? { rows.first { $0.token == token }?.state }
                #expect(state(reRegistered) == .unregistered)
                #expect(try await cloud.store.phone(token: reRegistered) != nil, "re-registered after the 410's timestamp: kept")
                #expect(state(badOnce) == .failed)
                #expect(try await cloud.store.phone(token: badOnce)?.badTokenCount == 1, "flagged, not yet deleted")
                #expect(state(throttled) == .delivered)
                #expect(state(flaky) == .delivered)
                #expect(state(reset) == .delivered)
                #expect(state(tooLarge) == .failed)
                #expect(state(notForTopic) == .failed)
                #expect(healthy.allSatisfy { state($0) == .delivered })

                // BadDeviceToken again: now the token is deleted.
                try apns.setScript(["tokens": [badOnce: [["status": 400, "reason": "BadDeviceToken"]]], "default": ["status": 200]])
                let second = "019ab2c4-5d6e-7f80-9a1b-2c3d4e5f6a03"
                _ = try await press(client, id: second, sequence: 2)
                _ = try await settled(second, cloud.store)
                #expect(try await cloud.store.phone(token: badOnce) == nil)
            }
        }
        let requests = try apns.processed().filter { eventID(of: $0) == first }
        func count(_ token: String) -> Int { requests.filter { $0["token"] as? String == token }.count }
        #expect(count(tooLarge) == 1, "PayloadTooLarge is never retried")
        #expect(count(notForTopic) == 1, "DeviceTokenNotForTopic is never retried")
        #expect(count(throttled) == 2)
        #expect(count(flaky) == 3)
        let expired = requests.filter { $0["reason"] as? String == "ExpiredProviderToken" }
        #expect(expired.count == 1)
        let issued = Set(requests.compactMap { $0["jwt_id"] as? String })
        #expect(issued.count == 2, "a new provider token was signed after ExpiredProviderToken")
    }

    /// A phone reports entering a beacon region: it gets the message its owner set, once per interval.
    @Test(arguments: StoreBackend.available)
    func beaconReportPushesTheConfiguredMessageRateLimited(backend: StoreBackend) async throws {
        let apns = try APNsTestServer(script: ["default": ["status": 200]])
        let cloud = try await cloud(apns, backend: backend)
        let uuid = "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0"
        let phone = randomDeviceToken()
        let stranger = randomDeviceToken()
        try await withFanOut(cloud) {
            try await cloud.app.test(.router) { client in
                let accounts = try await household(client, guests: 1)
                let (owner, guest) = (accounts[0], accounts[1])
                let outsider = try await createAccount(client, "Outsider")
                try await register(client, phone, account: guest.token)
                try await register(client, stranger, account: outsider.token)
                var (status, json) = try await call(client, .put, "/beacon-messages", token: owner.token, #"""
                    {"uuid":"\#(uuid)","major":1,"minor":2,"site":"home","title":"Welcome home","body":"The front door knows you are here"}
                    """#)
                #expect(status == .ok, "\(json)")
                let report = #"{"uuid":"\#(uuid)","major":1,"minor":2,"event":"entered","token":"\#(phone)"}"#
                (status, json) = try await call(client, .post, "/beacon-reports", token: guest.token, report)
                #expect(status == .accepted, "\(json)")
                let id = try #require(json["id"] as? String)
                #expect(try await settled(id, cloud.store).first?.state == .delivered)
                (status, json) = try await call(client, .post, "/beacon-reports", token: guest.token, report)
                #expect(status == .tooManyRequests, "one message per phone and region per interval")
                // Someone the doorbell is not shared with gets nothing.
                (status, json) = try await call(client, .post, "/beacon-reports", token: outsider.token,
                    #"{"uuid":"\#(uuid)","major":1,"minor":2,"token":"\#(stranger)"}"#)
                #expect(json["status"] as? String == "no_message")
                // Another account's phone token cannot be used.
                (status, _) = try await call(client, .post, "/beacon-reports", token: outsider.token, report)
                #expect(status == .notFound)
            }
        }
        let pushed = try apns.processed()
        #expect(pushed.count == 1)
        let payload = try #require(pushed.first?["payload"] as? [String: Any])
        let alert = try #require((payload["aps"] as? [String: Any])?["alert"] as? [String: Any])
        #expect(alert["title"] as? String == "Welcome home")
    }

    /// Revoking a share stops pushes to the guest's phones for later events.
    @Test func unshareStopsPushesToTheGuest() async throws {
        let apns = try APNsTestServer(script: ["default": ["status": 200]])
        let cloud = try await cloud(apns)
        let ownerPhone = randomDeviceToken()
        let guestPhone = randomDeviceToken()
        try await withFanOut(cloud) {
            try await cloud.app.test(.router) { client in
                let accounts = try await household(client, guests: 1)
                try await register(client, ownerPhone, account: accounts[0].token)
                try await register(client, guestPhone, account: accounts[1].token)
                #expect(try await press(client, id: "019ab2c4-5d6e-7f80-9a1b-2c3d4e5f6a10").1["pushes"] as? Int == 2)
                let (status, _) = try await call(client, .delete, "/doorbells/gw-0001:front-door/shares/\(accounts[1].id)",
                                                 token: accounts[0].token)
                #expect(status == .noContent)
                #expect(try await press(client, id: "019ab2c4-5d6e-7f80-9a1b-2c3d4e5f6a11", sequence: 2).1["pushes"] as? Int == 1)
                // Only the owner may share or unshare; the former guest no longer sees the doorbell
                // at all, so it is answered as to a stranger (404).
                let (refused, _) = try await call(client, .post, "/doorbells/gw-0001:front-door/shares",
                                                  token: accounts[1].token, #"{"account_id":"\#(accounts[1].id)"}"#)
                #expect(refused == .notFound)
            }
        }
    }

    /// Events of a gateway nobody enrolled are refused exactly like events signed with a wrong
    /// key, after the same checks: whether a gateway id is enrolled cannot be probed.
    @Test func unenrolledGatewayCannotBeToldFromABadSignature() async throws {
        let apns = try APNsTestServer(script: ["default": ["status": 200]])
        let cloud = try await cloud(apns)
        try await cloud.app.test(.router) { client in
            let unknown = try await press(client, id: "019ab2c4-5d6e-7f80-9a1b-2c3d4e5f6a20")
            _ = try await household(client, guests: 0)
            let wrongKey = try await press(client, id: "019ab2c4-5d6e-7f80-9a1b-2c3d4e5f6a20",
                                           secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
            #expect(unknown.0 == .unauthorized)
            #expect(unknown.0 == wrongKey.0)
            #expect(unknown.1["error"] as? String == "bad_signature")
            #expect(unknown.1["error"] as? String == wrongKey.1["error"] as? String)
            #expect(unknown.1["reason"] as? String == wrongKey.1["reason"] as? String)
            #expect((unknown.1["reason"] as? String)?.contains("POST /gateways") == true)
        }
        await cloud.client.shutdown()
    }

    /// The same event id again with another body: answered as a duplicate (the agent must not
    /// retry it for ever), the first body kept, and counted where an operator looks.
    @Test func aConflictingBodyUnderAStoredIdIsCounted() async throws {
        let apns = try APNsTestServer(script: ["default": ["status": 200]])
        let cloud = try await cloud(apns)
        let id = "019ab2c4-5d6e-7f80-9a1b-2c3d4e5f6a21"
        try await cloud.app.test(.router) { client in
            _ = try await household(client, guests: 0)
            #expect(try await press(client, id: id).1["status"] as? String == "accepted")
            #expect(try await press(client, id: id).1["status"] as? String == "duplicate")
            var health = try await call(client, .get, "/healthz", token: nil).1
            #expect(health["conflicting_duplicates"] as? Int == 0, "\(health)")
            #expect(try await press(client, id: id, sequence: 7).1["status"] as? String == "duplicate")
            health = try await call(client, .get, "/healthz", token: nil).1
            #expect(health["conflicting_duplicates"] as? Int == 1, "\(health)")
            #expect(try await cloud.store.event(id: id)?.sequence == 1, "the first body is kept")
        }
        await cloud.client.shutdown()
    }

    /// Bad input of any kind gets a 4xx that says what to fix, and changes nothing.
    @Test func badRequestsAreRefusedWithWhatToFix() async throws {
        let apns = try APNsTestServer(script: ["default": ["status": 200]])
        let cloud = try await cloud(apns)
        try await cloud.app.test(.router) { client in
            let owner = try await household(client, guests: 0)[0]
            let cases: [(HTTPRequest.Method, String, String?, String, HTTPResponse.Status, String)] = [
                (.post, "/accounts", nil, #"{"name":"x"}"#, .unauthorized, "Bearer <admin token>"),
                (.post, "/accounts", "wrong", #"{"name":"x"}"#, .unauthorized, "admin token"),
                (.get, "/doorbells", "dbk_unknown", "", .unauthorized, "unknown account token"),
                (.post, "/gateways", owner.token, "{not json", .badRequest, "JSON object"),
                (.post, "/gateways", owner.token, #"{"id":"gw-2"}"#, .badRequest, "public_key"),
                (.post, "/gateways", owner.token, #"{"id":"gw 2","secret":"whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"}"#, .badRequest, "gateway id"),
                (.post, "/gateways", owner.token, #"{"id":"gw-2","public_key":"not-a-key"}"#, .badRequest, "Ed25519"),
                (.post, "/gateways", owner.token, #"{"id":5}"#, .badRequest, "'id'"),
                // APNs tokens are 32 bytes: 66 or 200 hex digits are refused.
                (.put, "/phones/\(randomDeviceToken())ab", owner.token, #"{"environment":"sandbox","bundle_id":"com.example.doorbell","installation_secret":"\#(String(repeating: "s", count: 43))"}"#, .badRequest, "64 hex digits"),
                (.put, "/phones/\(String(repeating: "ab", count: 100))", owner.token, #"{"environment":"sandbox","bundle_id":"com.example.doorbell","installation_secret":"\#(String(repeating: "s", count: 43))"}"#, .badRequest, "64 hex digits"),
                (.put, "/phones/xyz", owner.token, #"{"environment":"sandbox","bundle_id":"com.example.doorbell","installation_secret":"\#(String(repeating: "s", count: 43))"}"#, .badRequest, "hex"),
                (.put, "/phones/\(randomDeviceToken())", owner.token, #"{"environment":"staging","bundle_id":"com.example.doorbell","installation_secret":"\#(String(repeating: "s", count: 43))"}"#, .badRequest, "sandbox"),
                (.put, "/phones/\(randomDeviceToken())", owner.token, #"{"environment":"sandbox","bundle_id":"com.other.app","installation_secret":"\#(String(repeating: "s", count: 43))"}"#, .badRequest, "com.example.doorbell"),
                (.put, "/phones/\(randomDeviceToken())", owner.token, #"{"environment":"sandbox"}"#, .badRequest, "bundle_id"),
                (.put, "/doorbells/no-colon", owner.token, "{}", .badRequest, "<gateway id>:<device id>"),
                (.put, "/doorbells/gw-9:front", owner.token, "{}", .notFound, "enroll it first"),
                (.post, "/doorbells/gw-0001:front-door/shares", owner.token, #"{"account_id":"acct_nobody"}"#, .notFound, "no account"),
                (.get, "/events/nope/deliveries", owner.token, "", .notFound, "no event"),
                (.put, "/beacon-messages", owner.token, #"{"uuid":"x","major":1,"minor":2,"site":"home","title":"t","body":"b"}"#, .badRequest, "UUID"),
                (.put, "/beacon-messages", owner.token, #"{"uuid":"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0","major":1,"minor":2,"title":"t","body":"b"}"#, .badRequest, "exactly one scope"),
                (.post, "/beacon-reports", owner.token, #"{"uuid":"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0","major":1,"minor":2,"token":"\#(randomDeviceToken())"}"#, .notFound, "register this phone"),
            ]
            for (method, uri, token, body, status, hint) in cases {
                let (got, json) = try await call(client, method, uri, token: token, body)
                #expect(got == status, "\(method) \(uri) \(body): \(json)")
                #expect((json["reason"] as? String)?.contains(hint) == true, "\(method) \(uri): \(json)")
            }
            // Another account cannot take over an enrolled gateway.
            let other = try await createAccount(client, "Other")
            let (status, json) = try await call(client, .post, "/gateways", token: other.token,
                                                #"{"id":"gw-0001","secret":"whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"}"#)
            #expect(status == .conflict, "\(json)")
        }
        await cloud.client.shutdown()
    }

    /// Two fan-outs on one database (two `serve` processes): each due push is claimed by one of
    /// them, so every phone rings exactly once. A claim takes at most 80 (concurrency 20 × 4) of
    /// the 150, so both take a share: APNs answers after 50 ms, so the first fan-out's first
    /// batch keeps it busy for at least 200 ms, long enough for the second to claim the rest.
    @Test(arguments: StoreBackend.available)
    func twoFanOutsOnOneDatabaseSendEachPushOnce(backend: StoreBackend) async throws {
        let tokens = (0..<150).map { _ in randomDeviceToken() }
        let apns = try APNsTestServer(script: ["default": ["status": 200], "delay_ms": 50])
        let cloud = try await cloud(apns, backend: backend, concurrency: 20)
        let secondStore = try await cloud.another()
        let secondClient = try APNsClient(settings: apnsSettings(apns, concurrency: 20), logger: logger)
        let second = FanOut(store: secondStore, client: secondClient, logger: logger,
                            clock: WallClock.system.millisecondsSinceEpoch, owner: "second")
        let eventID = "019ab2c4-5d6e-7f80-9a1b-2c3d4e5f6a30"
        try await cloud.app.test(.router) { client in
            let owner = try await household(client, guests: 0)[0]
            for token in tokens { try await register(client, token, account: owner.token) }
            #expect(try await press(client, id: eventID).1["pushes"] as? Int == 150)
            let first = Task { await cloud.fanOut.run() }
            let other = Task { await second.run() }
            let rows = try await settled(eventID, cloud.store)
            first.cancel()
            other.cancel()
            await first.value
            await other.value
            #expect(rows.filter { $0.state == .delivered }.count == 150)
        }
        await cloud.client.shutdown()
        await secondClient.shutdown()
        let ok = try apns.processed().filter { $0["status"] as? Int == 200 }.compactMap { $0["token"] as? String }
        #expect(ok.count == 150, "no push sent twice")
        #expect(Set(ok) == Set(tokens))
        #expect(cloud.fanOut.statistics.delivered > 0 && second.statistics.delivered > 0, "both took a share")
    }
}
