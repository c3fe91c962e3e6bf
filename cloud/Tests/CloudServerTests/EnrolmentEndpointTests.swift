import CloudCore
import CloudServer
import CloudStore
import Foundation
import Hummingbird
import HummingbirdTesting
import Synchronization
import Testing

/// #29 over HTTP: an account makes enrolment tokens; a gateway enrols with one, once; wrong,
/// expired and used tokens get their own answer, none naming an account; a bad boot file is
/// reported with the token. The clock is moved, not waited for.
@Suite final class EnrolmentEndpointTests: Sendable {
    let directory: URL
    let adminToken = "admin-token-for-enrolment-tests"
    let now = Mutex<Int64>(1_800_000_000_000)
    let key = "ed25519:" + Data(repeating: 3, count: 32).base64EncodedString()
    let otherKey = "ed25519:" + Data(repeating: 5, count: 32).base64EncodedString()

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("enrol-http-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    deinit {
        try? FileManager.default.removeItem(at: directory)
    }

    func call(_ client: some TestClientProtocol, _ method: HTTPRequest.Method, _ uri: String, token: String? = nil,
              _ body: String = "") async throws -> (HTTPResponse.Status, [String: Any], String) {
        var headers = HTTPFields()
        if let token { headers[.authorization] = "Bearer " + token }
        headers[.contentType] = "application/json"
        return try await client.execute(uri: uri, method: method, headers: headers, body: ByteBuffer(string: body)) {
            let text = String(buffer: $0.body)
            return ($0.status, (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? [:], text)
        }
    }

    func enrolBody(_ token: String, _ gateway: String, key: String? = nil) -> String {
        #"{"token":"\#(token)","gateway_id":"\#(gateway)","public_key":"\#(key ?? self.key)"}"#
    }

    @Test(arguments: StoreBackend.available)
    func aTokenEnrolsOnceAndEveryRefusalIsItsOwn(backend: StoreBackend) async throws {
        let (store, cleanup, _) = try await backend.make(in: directory)
        defer { cleanup() }
        let clock = WallClock { self.now.withLock { $0 } }
        let api = AppAPI(store: store, adminToken: adminToken, clock: clock, fanOut: nil)
        let events = EventsEndpoint(fallbackKeys: nil, store: store, output: OutputLines { _ in }, clock: clock)
        let app = Application(router: makeRouter(events: events, api: api))
        try await app.test(.router) { client in
            let alice = try #require(try await call(client, .post, "/accounts", token: adminToken, #"{"name":"Alice"}"#).1["token"] as? String)
            let bob = try #require(try await call(client, .post, "/accounts", token: adminToken, #"{"name":"Bob"}"#).1["token"] as? String)
            var (status, json, text) = try await call(client, .post, "/enrolment-tokens", token: alice, #"{"ttl_s":30}"#)
            #expect(status == .badRequest, "\(text)")
            (status, json, text) = try await call(client, .post, "/enrolment-tokens", token: alice, #"{"ttl_s":3600}"#)
            #expect(status == .created, "\(text)")
            let token = try #require(json["token"] as? String)
            #expect(token.hasPrefix("dbe_") && json["expires_at_ms"] as? Int64 == now.withLock { $0 } + 3_600_000)
            #expect(try await call(client, .post, "/enrolment-tokens", token: nil, "{}").0 == .unauthorized)

            // Wrong tokens read alike, whether mistyped or unknown.
            let unknown = try await call(client, .post, "/enrol", enrolBody("dbe_" + String(repeating: "u", count: 43), "gw-1"))
            let typo = try await call(client, .post, "/enrol", enrolBody("dbe_typo", "gw-1"))
            #expect(unknown.0 == .unauthorized && unknown.1["error"] as? String == "enrolment_token_unknown")
            #expect(typo.0 == .unauthorized && typo.1["error"] as? String == "enrolment_token_unknown")

            // Bob holds gw-1: 409 as POST /gateways says, and the token is not spent.
            #expect(try await call(client, .post, "/gateways", token: bob, #"{"id":"gw-1","public_key":"\#(otherKey)"}"#).0 == .created)
            (status, json, text) = try await call(client, .post, "/enrol", enrolBody(token, "gw-1"))
            #expect(status == .conflict && json["error"] as? String == "conflict", "\(text)")
            (status, json, text) = try await call(client, .post, "/enrol", enrolBody(token, "gw-2"))
            #expect(status == .created && json["status"] as? String == "enrolled", "\(text)")
            #expect(!text.contains("acct_"), "the answer names no account")
            #expect(try await store.gateway(id: "gw-2")?.publicKey == key)
            (status, json, _) = try await call(client, .post, "/enrol", enrolBody(token, "gw-2"))
            #expect(status == .ok && json["status"] as? String == "already_enrolled")
            (status, json, text) = try await call(client, .post, "/enrol", enrolBody(token, "gw-3"))
            #expect(status == .conflict && json["error"] as? String == "enrolment_token_used", "\(text)")
            #expect(!text.contains("acct_"))
            (status, json, _) = try await call(client, .post, "/enrol", enrolBody(token, "gw-2", key: otherKey))
            #expect(status == .conflict && json["error"] as? String == "enrolment_token_used", "the same id with another key")

            // A token made for one gateway, and expiry by the clock.
            let bound = try #require(try await call(client, .post, "/enrolment-tokens", token: alice, #"{"gateway_id":"gw-9"}"#).1["token"] as? String)
            (status, json, _) = try await call(client, .post, "/enrol", enrolBody(bound, "gw-8"))
            #expect(status == .forbidden && json["error"] as? String == "enrolment_token_other_gateway")
            now.withLock { $0 += 86_400_000 }
            (status, json, _) = try await call(client, .post, "/enrol", enrolBody(bound, "gw-9"))
            #expect(status == .gone && json["error"] as? String == "enrolment_token_expired")

            // A bad boot file, reported with a live token; only its account sees it.
            let fresh = try #require(try await call(client, .post, "/enrolment-tokens", token: alice, "{}").1["token"] as? String)
            (status, _, text) = try await call(client, .post, "/enrol/problems",
                                               #"{"token":"\#(fresh)","gateway_id":"gw-5","problem":"doorbell.toml:7: log.level: unknown level"}"#)
            #expect(status == .accepted, "\(text)")
            (status, _, _) = try await call(client, .post, "/enrol/problems", #"{"token":"\#(bound)","gateway_id":"gw-9","problem":"x"}"#)
            #expect(status == .unauthorized, "an expired token reports nothing")
            let reports = try await call(client, .get, "/provisioning-reports", token: alice).1["reports"] as? [[String: Any]]
            #expect(reports?.map { $0["gateway_id"] as? String } == ["gw-5"])
            #expect((try await call(client, .get, "/provisioning-reports", token: bob).1["reports"] as? [Any])?.isEmpty == true)
        }
    }
}
