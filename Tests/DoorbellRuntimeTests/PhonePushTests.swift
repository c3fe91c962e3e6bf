import CCurl
import DoorbellCore
import Foundation
import XCTest

/// The whole story, every part real: a recorded press → rtl_433 → doorbell-agent → signed HTTPS →
/// doorbell-cloud (an owner who enrolled the gateway by its Ed25519 key, named the doorbell and
/// shared it with a guest) → APNs over HTTP/2 (Tests/helpers/apns_test_server.py) → one push per
/// phone of the owner and the guest; the token APNs calls dead is pruned.
final class PhonePushTests: XCTestCase {
    static let python = Paths.repoRoot + "/.venv/bin/python"
    static let teamID = "TEAM123456"
    static let keyID = "KEY1234567"
    static let topic = "com.example.doorbell"
    /// The body of `PUT /phones/{token}` as the app sends it: its installation secret (one per
    /// phone here, made from its token) with every registration.
    static func phoneRegistration(_ token: String) -> JSONValue {
        .object([("environment", .string("sandbox")), ("bundle_id", .string(topic)),
                 ("installation_secret", .string("installation-" + token))])
    }
    static let doorbellName = "Front door"

    func testPressRingsOwnerAndGuestPhonesAndPrunesTheDeadToken() throws {
        try requireFile(Paths.agentBinary, "doorbell-agent")
        guard FileManager.default.isExecutableFile(atPath: Self.python) else {
            throw skip("SKIPPED: .venv missing (scripts/venv.sh, run by make test, installs h2 and cryptography for the APNs test server)")
        }
        let dir = try TempDir()
        // PKI (one CA for the cloud and the APNs server), the agent's state dir with its device key.
        let fixture = try CloudFixture(dir: dir)

        // The APNs side: one of the owner's phones has uninstalled the app.
        let ownerLive = Self.randomToken(), ownerDead = Self.randomToken(), guestPhone = Self.randomToken()
        let stack = try PushStack.start(dir, fixture: fixture, script: """
        {"tokens": {"\(ownerDead)": [{"status": 410, "reason": "Unregistered", "timestamp_ms": "now"}]}, "default": {"status": 200}}
        """)
        let apns = stack.apns, cloud = stack.cloud, api = stack.api, adminToken = stack.adminToken, apnsLog = stack.apnsLog, cloudPort = stack.cloudPort
        defer { apns.stop(); cloud.stop() }

        // Accounts.
        let owner = try api.expect(201, "POST", "/accounts", token: adminToken, .object([("name", .string("Owner"))]))
        let guest = try api.expect(201, "POST", "/accounts", token: adminToken, .object([("name", .string("Guest"))]))
        let ownerToken = try XCTUnwrap(owner["token"]?.stringValue), guestToken = try XCTUnwrap(guest["token"]?.stringValue)
        let guestID = try XCTUnwrap(guest["id"]?.stringValue)

        // The agent's config; its public key as the installer reads it for enrollment.
        let socket = dir.file("control.sock")
        let radio = """
        [radio.rtl433]
        conf_file = "\(Paths.boardConf)"
        replay = ["\(Paths.repoRoot)/board/sim/recordings/front-door.ook"]
        """
        let config = try dir.write("agent.toml", agentConfig(
            gateway: "gw-test", stateDir: fixture.stateDir, socket: socket, radio: radio,
            devices: [("front-door", #"{ code = "0x5A3C91" }"#)], url: "https://127.0.0.1:\(cloudPort)/events",
            caFile: fixture.caFile, secretFile: fixture.secretFile))
        let pubkey = try runCommand(Paths.agentBinary, ["pubkey", "--config", config])
        XCTAssertEqual(pubkey.status, 0, pubkey.stderr)
        let publicKey = pubkey.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertEqual(publicKey, try String(contentsOfFile: fixture.publicKeyFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines))

        // The owner enrolls the gateway by its key alone, names and shares the doorbell; phones.
        try api.expect(201, "POST", "/gateways", token: ownerToken, .object([("id", .string("gw-test")), ("public_key", .string(publicKey))]))
        let doorbellID = "gw-test:front-door"
        try api.expect(200, "PUT", "/doorbells/\(doorbellID)", token: ownerToken, .object([("name", .string(Self.doorbellName))]))
        try api.expect(201, "POST", "/doorbells/\(doorbellID)/shares", token: ownerToken, .object([("account_id", .string(guestID))]))
        // Each phone registers as its app does, with its installation's secret; the cloud answers
        // the opaque id its deliveries are shown by (never the token: cloud issue #30).
        var phoneIDs: [String: String] = [:]
        for (token, account) in [(ownerLive, ownerToken), (ownerDead, ownerToken), (guestPhone, guestToken)] {
            let registered = try api.expect(200, "PUT", "/phones/\(token)", token: account, Self.phoneRegistration(token))
            phoneIDs[token] = registered["id"]?.stringValue
        }

        // The press.
        let agent = try Child(Paths.agentBinary, ["run", "--config", config], dir: dir, name: "agent")
        defer { agent.stop() }
        eventually(60, "replay finished and the outbox drained") {
            guard let s = agentStatus(socket) else { return false }
            return s["radios"]?.arrayFirst?["state"]?.stringValue == "finished" && s["outbox"]?["depth"]?.intValue == 0
        }
        let agentEvents = try runCommand(Paths.agentctlBinary, ["events", "--json", "--socket", socket]).stdout
            .split(separator: "\n").compactMap { try? JSONReader.parse(String($0)) }
        let pressed = agentEvents.filter { $0["type"]?.stringValue == "doorbell.pressed" }
        XCTAssertEqual(pressed.count, 1, "agent events: \(agentEvents)\nagent log:\n\(agent.stderr.suffix(3000))")
        let eventID = try XCTUnwrap(pressed.first?["id"]?.stringValue, "the agent's event id")

        // Until APNs has answered three pushes and the cloud recorded every outcome.
        var deliveries: [JSONValue] = []
        eventually(60, "3 pushes answered and recorded") {
            let answered = apnsRecords(apnsLog).filter { $0["event"]?.stringValue == "request" }.count
            guard answered >= 3, let r = try? api.call("GET", "/events/\(eventID)/deliveries", token: ownerToken), r.status == 200
            else { return false }
            deliveries = r.json?["deliveries"]?.arrayValues ?? []
            return deliveries.count >= 3 && !deliveries.contains { $0["state"]?.stringValue == "pending" }
        }
        let diagnostics = { "\nAPNs log:\n\(apnsRecords(apnsLog).map(JSONWriter.string).joined(separator: "\n"))\ncloud stdout:\n\(cloud.stdout)\ncloud stderr:\n\(cloud.stderr.suffix(4000))" }

        // The cloud stored the event once, verified by the enrolled key (no fallback keys exist).
        let cloudEvents = cloud.stdout.split(separator: "\n").filter { $0.hasPrefix("EVENT ") }
            .compactMap { try? JSONReader.parse(String($0.dropFirst(6))) }
        XCTAssertEqual(cloudEvents.count, 1, diagnostics())
        XCTAssertEqual(cloudEvents.first?["id"]?.stringValue, eventID)
        XCTAssertEqual(cloudEvents.first?["verified"]?.arrayValues?.compactMap(\.stringValue), ["v1a"])

        // The owner's view of the deliveries: 2 delivered, 1 unregistered, the event's apns-id.
        let tokenByID = Dictionary(phoneIDs.map { ($0.value, $0.key) }, uniquingKeysWith: { a, _ in a })
        let byToken = Dictionary(deliveries.map { (tokenByID[$0["phone_id"]?.stringValue ?? ""] ?? "", $0) }, uniquingKeysWith: { a, _ in a })
        XCTAssertEqual(deliveries.count, 3, diagnostics())
        XCTAssertEqual(Set(byToken.keys), [ownerLive, ownerDead, guestPhone], diagnostics())
        XCTAssertEqual(byToken[ownerLive]?["state"]?.stringValue, "delivered")
        XCTAssertEqual(byToken[guestPhone]?["state"]?.stringValue, "delivered")
        XCTAssertEqual(byToken[ownerDead]?["state"]?.stringValue, "unregistered")
        XCTAssertEqual(byToken[ownerDead]?["last_status"]?.intValue, 410)
        XCTAssertEqual(deliveries.filter { $0["state"]?.stringValue == "delivered" }.count, 2)
        // Each push has its own apns-id (cloud issue #17), never the event id.
        let apnsIDs = deliveries.compactMap { $0["apns_id"]?.stringValue }
        XCTAssertEqual(Set(apnsIDs).count, 3, "\(deliveries)")
        XCTAssertFalse(apnsIDs.contains(eventID.lowercased()))
        // A guest sees only the pushes to its own phones.
        let guestView = try api.expect(200, "GET", "/events/\(eventID)/deliveries", token: guestToken)
        XCTAssertEqual(guestView["deliveries"]?.arrayValues?.compactMap { $0["phone_id"]?.stringValue }, [phoneIDs[guestPhone] ?? "?"])

        // The dead token is gone; the others stay.
        let ownerPhones = try api.expect(200, "GET", "/phones", token: ownerToken)
        XCTAssertEqual(ownerPhones["phones"]?.arrayValues?.compactMap { $0["token"]?.stringValue }, [ownerLive], "\(ownerPhones)")
        let guestPhones = try api.expect(200, "GET", "/phones", token: guestToken)
        XCTAssertEqual(guestPhones["phones"]?.arrayValues?.compactMap { $0["token"]?.stringValue }, [guestPhone])

        // Everything stops; the APNs log is then complete, so "exactly once" covers late retries.
        agent.stop()
        XCTAssertEqual(agent.process.terminationStatus, 0, "agent exit: \(agent.stderr.suffix(2000))")
        cloud.stop()
        apns.stop()
        let records = apnsRecords(apnsLog)
        let requests = records.filter { $0["event"]?.stringValue == "request" }
        XCTAssertEqual(requests.filter { $0["status"]?.intValue == 200 }.count, 2, diagnostics())
        XCTAssertEqual(requests.filter { $0["status"]?.intValue == 410 }.count, 1, diagnostics())
        XCTAssertEqual(requests.count, 3, diagnostics())
        XCTAssertEqual(records.filter { ["reset", "unprocessed"].contains($0["event"]?.stringValue ?? "") }.count, 0, diagnostics())
        let tokens = requests.compactMap { $0["token"]?.stringValue?.lowercased() }
        XCTAssertEqual(tokens.sorted(), [ownerLive, ownerDead, guestPhone].sorted(), "each token exactly once")
        for r in requests {
            let token = r["token"]?.stringValue ?? "?"
            XCTAssertEqual(r["status"]?.intValue, token == ownerDead ? 410 : 200, token)
            XCTAssertEqual(r["headers"]?["apns-id"]?.stringValue, byToken[token.lowercased()]?["apns_id"]?.stringValue,
                           "the push's own apns-id, as the deliveries list shows it")
            XCTAssertEqual(r["headers"]?["apns-topic"]?.stringValue, Self.topic)
            XCTAssertEqual(r["payload"]?["aps"]?["alert"]?["title"]?.stringValue, Self.doorbellName, "the title is the doorbell's name")
            XCTAssertEqual(r["payload"]?["aps"]?["alert"]?["body"]?.stringValue, "Someone is at the door")
            XCTAssertEqual(r["payload"]?["doorbell"]?["event_id"]?.stringValue, eventID)
            XCTAssertEqual(r["payload"]?["doorbell"]?["id"]?.stringValue, doorbellID)
        }
    }

    /// A random 64-hex-digit APNs device token.
    static func randomToken() -> String {
        (0..<32).map { _ in
            let b = UInt8.random(in: 0...255)
            return (b < 16 ? "0" : "") + String(b, radix: 16)
        }.joined()
    }
}

/// The APNs test server's JSON-lines log, parsed.
func apnsRecords(_ path: String) -> [JSONValue] {
    ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "")
        .split(separator: "\n").compactMap { try? JSONReader.parse(String($0)) }
}

/// The cloud's app API over HTTPS, through libcurl (the agent's `HTTPSClient` only POSTs).
struct AppAPIClient {
    let base: String
    let caFile: String

    struct Failure: Error, CustomStringConvertible { let description: String }

    /// One request; the body and the answer are JSON.
    func call(_ method: String, _ path: String, token: String?, _ body: JSONValue? = nil) throws -> (status: Int, json: JSONValue?, text: String) {
        guard let h = curl_easy_init() else { throw Failure(description: "curl_easy_init failed") }
        defer { curl_easy_cleanup(h) }
        final class Sink { var bytes: [UInt8] = [] }
        let sink = Sink()
        var headers: UnsafeMutablePointer<curl_slist>?
        headers = curl_slist_append(headers, "Accept: application/json")
        headers = curl_slist_append(headers, "Expect:")
        if let token { headers = curl_slist_append(headers, "Authorization: Bearer \(token)") }
        if body != nil { headers = curl_slist_append(headers, "Content-Type: application/json") }
        defer { curl_slist_free_all(headers) }
        var errorBuffer = [CChar](repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        let rc: CURLcode = withExtendedLifetime(sink) {
            // libcurl copies string options; the error buffer and sink live until perform returns.
            _ = (base + path).withCString { doorbell_curl_setopt_ptr(h, CURLOPT_URL, $0) }
            _ = caFile.withCString { doorbell_curl_setopt_ptr(h, CURLOPT_CAINFO, $0) }
            _ = method.withCString { doorbell_curl_setopt_ptr(h, CURLOPT_CUSTOMREQUEST, $0) }
            _ = "".withCString { doorbell_curl_setopt_ptr(h, CURLOPT_PROXY, $0) }
            _ = doorbell_curl_setopt_long(h, CURLOPT_NOSIGNAL, 1)
            _ = doorbell_curl_setopt_long(h, CURLOPT_CONNECTTIMEOUT_MS, 5_000)
            _ = doorbell_curl_setopt_long(h, CURLOPT_TIMEOUT_MS, 15_000)
            _ = doorbell_curl_setopt_ptr(h, CURLOPT_HTTPHEADER, UnsafeRawPointer(headers))
            if let body {
                let bytes = JSONWriter.encode(body)
                _ = doorbell_curl_setopt_off(h, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(bytes.count))
                _ = bytes.withUnsafeBytes { doorbell_curl_setopt_ptr(h, CURLOPT_COPYPOSTFIELDS, $0.baseAddress) }
            }
            _ = doorbell_curl_setopt_ptr(h, CURLOPT_WRITEDATA, Unmanaged.passUnretained(sink).toOpaque())
            _ = doorbell_curl_setopt_write(h, CURLOPT_WRITEFUNCTION) { data, size, count, context in
                guard let data, let context else { return 0 }
                let n = size * count
                data.withMemoryRebound(to: UInt8.self, capacity: n) {
                    Unmanaged<Sink>.fromOpaque(context).takeUnretainedValue().bytes.append(contentsOf: UnsafeBufferPointer(start: $0, count: n))
                }
                return n
            }
            return errorBuffer.withUnsafeMutableBufferPointer { buffer in
                _ = doorbell_curl_setopt_ptr(h, CURLOPT_ERRORBUFFER, buffer.baseAddress)
                defer { _ = doorbell_curl_setopt_ptr(h, CURLOPT_ERRORBUFFER, nil) }
                return curl_easy_perform(h)
            }
        }
        guard rc == CURLE_OK else {
            let detail = errorBuffer[0] != 0
                ? String(decoding: errorBuffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
                : String(cString: curl_easy_strerror(rc))
            throw Failure(description: "\(method) \(path): \(detail)")
        }
        var status = 0
        _ = doorbell_curl_getinfo_long(h, CURLINFO_RESPONSE_CODE, &status)
        let text = String(decoding: sink.bytes, as: UTF8.self)
        return (status, try? JSONReader.parse(text), text)
    }

    /// `call`, asserting the status; returns the JSON answer (`null` if there is none).
    @discardableResult
    func expect(_ status: Int, _ method: String, _ path: String, token: String?, _ body: JSONValue? = nil,
                file: StaticString = #filePath, line: UInt = #line) throws -> JSONValue {
        let r = try call(method, path, token: token, body)
        XCTAssertEqual(r.status, status, "\(method) \(path): \(r.text)", file: file, line: line)
        return r.json ?? .null
    }
}

/// The APNs test server (with an ES256 key the cloud signs with) and a doorbell-cloud pushing to
/// it over TLS, on a fresh SQLite database; what a test needs to drive both.
struct PushStack {
    let apns: Child
    let cloud: Child
    let api: AppAPIClient
    let adminToken: String
    let apnsLog: String
    let cloudPort: Int

    static func start(_ dir: TempDir, fixture: CloudFixture, script: String) throws -> PushStack {
        // A .p8 is PKCS#8 PEM, which is what openssl genpkey writes.
        let p8 = dir.file("AuthKey_\(PhonePushTests.keyID).p8"), apnsPublic = dir.file("apns.pub.pem")
        let keygen = try runCommand("/bin/sh", ["-c", "openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out '\(p8)' && openssl pkey -in '\(p8)' -pubout -out '\(apnsPublic)'"])
        XCTAssertEqual(keygen.status, 0, keygen.stderr)
        let scriptFile = try dir.write("apns-script.json", script)
        let apnsLog = dir.file("apns.jsonl")
        let apnsReady = dir.file("apns-ready.json")
        let apns = try Child(PhonePushTests.python, [
            Paths.repoRoot + "/Tests/helpers/apns_test_server.py",
            "--cert", dir.file("pki/server.pem"), "--key", dir.file("pki/server.key"),
            "--port", "0", "--ready-file", apnsReady,
            "--team-id", PhonePushTests.teamID, "--key-id", PhonePushTests.keyID, "--public-key", apnsPublic, "--topic", PhonePushTests.topic,
            "--script", scriptFile, "--log", apnsLog, "--max-seconds", "600",
        ], dir: dir, name: "apns")
        eventually(30, "APNs test server ready") { FileManager.default.fileExists(atPath: apnsReady) || !apns.process.isRunning }
        let apnsPort = Int((try? JSONReader.parse(String(contentsOfFile: apnsReady, encoding: .utf8)))?["port"]?.intValue ?? 0)
        guard apnsPort > 0 else { apns.stop(); throw PushStackError(description: "APNs test server did not start:\n\(apns.stderr)") }
        let apnsURL = "https://127.0.0.1:\(apnsPort)"

        // The cloud: fresh database, admin token, APNs at the test server, no fallback gateway keys.
        let adminToken = "admin-" + UUID().uuidString
        let adminTokenFile = try dir.write("admin.token", adminToken + "\n")
        let cloudReady = dir.file("cloud-ready.json")
        let cloud = try Child(Paths.cloudBinary, [
            "serve", "--host", "127.0.0.1", "--port", "0", "--ready-file", cloudReady,
            "--tls-cert", dir.file("pki/server.pem"), "--tls-key", dir.file("pki/server.key"),
            "--db", dir.file("cloud.sqlite"), "--admin-token-file", adminTokenFile,
            "--apns-key", p8, "--apns-key-id", PhonePushTests.keyID, "--apns-team-id", PhonePushTests.teamID, "--apns-topic", PhonePushTests.topic,
            "--apns-sandbox-url", apnsURL, "--apns-production-url", apnsURL, "--apns-ca", fixture.caFile,
        ], dir: dir, name: "cloud")
        eventually(60, "doorbell-cloud ready file") { FileManager.default.fileExists(atPath: cloudReady) || !cloud.process.isRunning }
        let cloudPort = Int((try? JSONReader.parse(String(contentsOfFile: cloudReady, encoding: .utf8)))?["port"]?.intValue ?? 0)
        guard cloudPort > 0 else { apns.stop(); cloud.stop(); throw PushStackError(description: "doorbell-cloud did not start:\n\(cloud.stderr)") }
        return PushStack(apns: apns, cloud: cloud, api: AppAPIClient(base: "https://127.0.0.1:\(cloudPort)", caFile: fixture.caFile),
                         adminToken: adminToken, apnsLog: apnsLog, cloudPort: cloudPort)
    }
}

struct PushStackError: Error, CustomStringConvertible { let description: String }
