import CloudCore
import CloudStore
import Foundation
import Testing

/// The real `doorbell-cloud serve` process under faults: SIGTERM and SIGKILL in the middle of a
/// fan-out, against the APNs stand-in holding its answers (APNs has the pushes; the phones rang).
@Suite(.serialized) final class ServeFaultTests {
    let directory: URL
    let secret = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"

    init() async throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("serve-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    deinit {
        try? FileManager.default.removeItem(at: directory)
    }

    /// A SQLite database with an owner, gateway gw-0001 and `phones` phones; their tokens.
    func household(phones: Int) async throws -> (db: String, store: CloudStore, tokens: [String]) {
        let db = directory.appendingPathComponent("cloud.sqlite").path
        let store = try await CloudStore(url: db)
        let owner = try await store.createAccount(name: "Owner", now: 1).0
        try await store.enrollGateway(id: "gw-0001", accountID: owner.id, publicKey: nil, secret: secret, now: 1)
        let tokens = (0..<phones).map { _ in randomDeviceToken() }
        for token in tokens {
            try await store.registerPhone(token: token, accountID: owner.id, installationSecret: String(repeating: "s", count: 43), environment: .sandbox,
                                    bundleID: APNsTestServer.topic, now: 1)
        }
        return (db, store, tokens)
    }

    func accepted(_ apns: APNsTestServer) throws -> [String] {
        try apns.processed().filter { $0["status"] as? Int == 200 }.compactMap { $0["token"] as? String }
    }

    /// Issue #17, 2: SIGTERM while APNs holds the answers to 40 pushes it has already accepted.
    /// The process waits for them (bounded by its drain time), records them delivered and exits
    /// 0; the next run sends nothing again: every phone rang once.
    @Test func sigtermLetsPushesOnTheWireFinishAndRecordsThem() async throws {
        let (db, store, tokens) = try await household(phones: 40)
        let apns = try APNsTestServer(script: ["default": ["status": 200], "hold_ms": 2000])
        let eventID = "019ab2c4-5d6e-7f80-9a1b-2c3d4e5f6b01"
        let serve = try ServeProcess(apns: apns, db: db, in: directory, name: "first")
        #expect(try serve.press(id: eventID, secret: secret) == 200, "\(serve.stderr.suffix(2000))")
        #expect(try eventually(30) { try accepted(apns).count == 40 }, "APNs has all 40 pushes")
        #expect(serve.stop(SIGTERM) == 0, "exits 0 after the drain: \(serve.stderr.suffix(2000))")
        let rows = try await store.deliveries(eventID: eventID)
        #expect(rows.filter { $0.state == .delivered }.count == 40,
                "outcomes recorded before exit: \(rows.map(\.state.rawValue).sorted())")

        try apns.setScript(["default": ["status": 200]])
        let again = try ServeProcess(apns: apns, db: db, in: directory, name: "second")
        _ = try await eventually(30) { try await store.deliveries(eventID: eventID).allSatisfy { $0.state != .pending } }
        #expect(again.stop(SIGTERM) == 0)
        let ok = try accepted(apns)
        #expect(ok.count == 40, "no push sent twice: \(ok.count) accepted")
        #expect(Set(ok) == Set(tokens))
    }

    /// Issue #17, 3: SIGKILL while 40 claimed pushes are on the wire. Restarted (same instance),
    /// the process sends them at once, not when their 60 s lease runs out.
    @Test func aRestartAfterACrashSendsItsClaimedPushesAtOnce() async throws {
        let (db, store, tokens) = try await household(phones: 40)
        let apns = try APNsTestServer(script: ["default": ["status": 200], "hold_ms": 120_000])
        let eventID = "019ab2c4-5d6e-7f80-9a1b-2c3d4e5f6b02"
        let serve = try ServeProcess(apns: apns, db: db, in: directory, name: "first")
        #expect(try serve.press(id: eventID, secret: secret) == 200, "\(serve.stderr.suffix(2000))")
        #expect(try eventually(30) { try apns.processed().count == 40 }, "all 40 on the wire")
        #expect(serve.stop(SIGKILL, within: 10) != nil)
        let leased = try await store.deliveries(eventID: eventID)
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        #expect(leased.allSatisfy { $0.state == .pending && $0.nextAttemptAtMilliseconds > now + 20_000 },
                "claimed under a lease when the process died")

        try apns.setScript(["default": ["status": 200]])
        let restarted = try ServeProcess(apns: apns, db: db, in: directory, name: "second")
        // The lease has 40 s or more to run: settling within 15 s means the restart took them back.
        let settled = try await eventually(15) { try await store.deliveries(eventID: eventID).allSatisfy { $0.state == .delivered } }
        let states = try await store.deliveries(eventID: eventID).map(\.state.rawValue)
        #expect(settled, "sent again within 15 s of the restart: \(states)")
        #expect(restarted.stop(SIGTERM) == 0)
        #expect(Set(try accepted(apns)) == Set(tokens))
    }

    // MARK: Hostile clients (issue #17, 4)

    /// `serve` with no phones and an APNs stand-in (kept alive by the caller).
    func server(_ name: String, _ arguments: [String]) async throws -> (APNsTestServer, ServeProcess) {
        let (db, _, _) = try await household(phones: 0)
        let apns = try APNsTestServer(script: ["default": ["status": 200]])
        return (apns, try ServeProcess(apns: apns, db: db, in: directory, name: name, arguments: arguments))
    }

    /// Tests/helpers/hostile_http_client.py against `serve`, started; its stdout.
    func startHostile(_ serve: ServeProcess, _ mode: String, count: Int = 10, seconds: Double = 30) throws -> (Process, Pipe) {
        let python = try #require(APNsTestServer.python, "run scripts/venv.sh")
        let client = Process()
        client.executableURL = URL(fileURLWithPath: python)
        client.arguments = [APNsTestServer.repository.appendingPathComponent("Tests/helpers/hostile_http_client.py").path,
                            "--port", String(serve.port), "--ca", serve.caFile, "--count", String(count),
                            "--seconds", String(seconds), mode]
        let output = Pipe()
        client.standardOutput = output
        try client.run()
        return (client, output)
    }

    /// Runs one hostile client to its end; its JSON answer.
    func hostile(_ serve: ServeProcess, _ mode: String, count: Int = 10, seconds: Double = 30) throws -> [String: Any] {
        let (client, output) = try startHostile(serve, mode, count: count, seconds: seconds)
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        client.waitUntilExit()
        let last = text.split(separator: "\n").last.map(String.init) ?? ""
        return (try? JSONSerialization.jsonObject(with: Data(last.utf8)) as? [String: Any]) ?? [:]
    }

    /// A declared 99999999999-byte body is refused with 413 before any of it is sent; idle
    /// connections, half-sent headers and stalled bodies are closed by the server.
    @Test func hostileClientsAreCutOff() async throws {
        let (apns, serve) = try await server("limits", ["--header-timeout-seconds", "1", "--body-timeout-seconds", "2"])
        defer { withExtendedLifetime(apns) {} }
        let declared = try hostile(serve, "declare-length", seconds: 10)
        #expect(declared["status"] as? Int == 413, "\(declared)")
        // A chunked body declares nothing: it is cut at the route's limit, with the same JSON 413.
        let chunked = try hostile(serve, "chunked", seconds: 10)
        let answer = chunked["body"] as? [String: Any]
        #expect(chunked["status"] as? Int == 413, "\(chunked)")
        #expect(answer?["error"] as? String == "payload_too_large" && answer?["limit_bytes"] as? Int == 256 * 1024, "\(chunked)")
        let idle = try hostile(serve, "idle", count: 50, seconds: 15)
        #expect(idle["closed"] as? Int == 50, "idle connections closed: \(idle)")
        let half = try hostile(serve, "half-headers", seconds: 15)
        #expect(half["closed"] as? Bool == true, "half-sent headers: \(half)")
        let stalled = try hostile(serve, "stall-body", seconds: 15)
        #expect(stalled["closed"] as? Bool == true, "stalled body: \(stalled)")
        #expect(serve.stop(SIGTERM) == 0)
    }

    /// Beyond --max-connections a connection is closed as soon as it is accepted; those within
    /// stay open.
    @Test func connectionsBeyondTheCapAreClosed() async throws {
        let (apns, serve) = try await server("cap", ["--max-connections", "5", "--header-timeout-seconds", "30"])
        defer { withExtendedLifetime(apns) {} }
        let cap = try hostile(serve, "cap", count: 5, seconds: 10)
        #expect(cap["extra_closed"] as? Bool == true, "\(cap)")
        #expect(cap["held_open"] as? Int == 5, "\(cap)")
        #expect(serve.stop(SIGTERM) == 0)
    }

    /// SIGTERM while a client stalls in the middle of a body: the shutdown completes within
    /// --shutdown-timeout-seconds all the same (the issue saw it never complete).
    @Test func sigtermCompletesWhileABodyIsStalled() async throws {
        let (apns, serve) = try await server("stall", ["--body-timeout-seconds", "600", "--shutdown-timeout-seconds", "3"])
        defer { withExtendedLifetime(apns) {} }
        let (client, output) = try startHostile(serve, "stall-body", seconds: 60)
        defer { if client.isRunning { client.terminate() } }
        let first = output.fileHandleForReading.availableData  // blocks until {"sent": true} (or EOF)
        #expect(String(decoding: first, as: UTF8.self).contains("sent"))
        // Let the server read the head it was sent, so the request is mid-body when SIGTERM comes
        // (a connection still without a request is closed at once). The outcome asserted does
        // not depend on this wait.
        try await Task.sleep(for: .seconds(1))
        let status = serve.stop(SIGTERM, within: 20)
        #expect(status != nil, "exited within 20 s of SIGTERM: \(serve.stderr.suffix(2000))")
    }
}
