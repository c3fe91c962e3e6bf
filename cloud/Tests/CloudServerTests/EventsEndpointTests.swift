import CloudCore
import CloudServer
import CloudStore
import Crypto
import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import Synchronization
import Testing

/// Collects the receiver's stdout lines.
final class CapturedLines: Sendable {
    private let lines = Mutex<[String]>([])
    var output: OutputLines { OutputLines { line in self.lines.withLock { $0.append(line) } } }
    var all: [String] { lines.withLock { $0 } }
}

@Suite final class EventsEndpointTests: Sendable {
    static let now: Int64 = 1_800_000_000
    let secret: WebhookSecret
    /// The gateway's Ed25519 device key, as raw bytes (swift-crypto's key types are not Sendable).
    let deviceKeyBytes = Array(Curve25519.Signing.PrivateKey().rawRepresentation)
    let lines = CapturedLines()
    let store: CloudStore
    let directory: URL

    init() async throws {
        secret = try WebhookSecret(parsing: "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD")
        directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("doorbell-cloud-server-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        store = try await CloudStore(url: directory.appendingPathComponent("events.sqlite").path)
    }

    deinit {
        try? FileManager.default.removeItem(at: directory)
    }

    func deviceKey() throws -> Curve25519.Signing.PrivateKey {
        try Curve25519.Signing.PrivateKey(rawRepresentation: deviceKeyBytes)
    }

    func endpoint(failFirst: Int = 0) throws -> EventsEndpoint {
        let keys = try GatewayKeys(secret: secret, publicKey: GatewayPublicKey(deviceKey().publicKey))
        return EventsEndpoint(
            fallbackKeys: keys, store: store, output: lines.output,
            clock: .fixed(seconds: Self.now), failFirst: failFirst > 0 ? FailFirst(total: failFirst) : nil)
    }

    func body(id: String, sequence: Int64 = 1) -> String {
        #"{"id":"\#(id)","sequence":\#(sequence),"type":"doorbell.pressed","gateway_id":"gw-0001","occurred_at":"2026-11-22T14:03:07.123456Z","device":{"id":"front-door"}}"#
    }

    /// Headers for `body`, signed with v1 and v1a unless `signature` overrides them.
    func headers(id: String, body: String, timestamp: Int64 = now, signature: String? = nil,
                 omit: String? = nil) throws -> HTTPFields {
        let ts = String(timestamp)
        let bytes = Array(body.utf8)
        let signed = try signature ?? [
            SignatureVerifier.v1Signature(secret: secret, id: id, timestamp: ts, body: bytes),
            SignatureVerifier.v1aSignature(privateKey: deviceKey(), id: id, timestamp: ts, body: bytes),
        ].joined(separator: " ")
        var fields = HTTPFields()
        for (name, value) in [("webhook-id", id), ("webhook-timestamp", ts), ("webhook-signature", signed),
                              ("content-type", "application/json")] where name != omit {
            fields[try #require(HTTPFields.Element.Name(name))] = value
        }
        return fields
    }

    func post(_ client: some TestClientProtocol, body: String, headers: HTTPFields) async throws -> (HTTPResponse.Status, String) {
        try await client.execute(uri: "/events", method: .post, headers: headers, body: ByteBuffer(string: body)) {
            ($0.status, String(buffer: $0.body))
        }
    }

    @Test func acceptedThenDuplicate() async throws {
        let app = Application(router: makeRouter(events: try endpoint()))
        let id = "019a4f6e-2b1c-7c3d-8e9f-0a1b2c3d4e5f"
        let body = body(id: id)
        let headers = try headers(id: id, body: body)
        try await app.test(.router) { client in
            let first = try await post(client, body: body, headers: headers)
            #expect(first.0 == .ok)
            #expect(first.1 == #"{"status":"accepted","id":"\#(id)","pushes":0}"# + "\n")
            let second = try await post(client, body: body, headers: headers)
            #expect(second.0 == .ok)
            #expect(second.1 == #"{"status":"duplicate","id":"\#(id)"}"# + "\n")
        }
        #expect(lines.all == [
            #"EVENT {"id":"\#(id)","sequence":1,"type":"doorbell.pressed","gateway_id":"gw-0001","device":"front-door","occurred_at":"2026-11-22T14:03:07.123456Z","verified":["v1","v1a"]}"#,
            "DUPLICATE \(id)",
        ])
        let stored = try await store.allEvents()
        #expect(stored.count == 1)
        #expect(stored.first?.body == body)
        #expect(stored.first?.verified == ["v1", "v1a"])
    }

    /// Issue #27, 12: stdout is a pipe nobody reads (full): events are still accepted, their
    /// lines beyond the queue's capacity are dropped and counted, and once the reader reads
    /// again it gets the queued lines and a `DROPPED <n>` line for the gap.
    @Test func aBlockedStdoutPipeDoesNotStallIngest() async throws {
        var ends: [Int32] = [0, 0]
        #expect(pipe(&ends) == 0)
        defer { close(ends[0]); close(ends[1]) }
        // Fill the pipe until it would block, then the queue: its writer blocks on its first
        // write, so of 200 lines at most 50 wait and the rest are dropped.
        let flags = fcntl(ends[1], F_GETFL)
        _ = fcntl(ends[1], F_SETFL, flags | O_NONBLOCK)
        let block = [UInt8](repeating: UInt8(ascii: "."), count: 4096)
        for _ in 0..<1_000 where write(ends[1], block, block.count) > 0 {}
        // A pipe with less than a page free refuses a whole page but takes smaller writes (the
        // queue's lines): fill the rest a byte at a time.
        for _ in 0..<8_192 where write(ends[1], block, 1) > 0 {}
        _ = fcntl(ends[1], F_SETFL, flags)
        let queue = LineQueue(fileDescriptor: ends[1], capacity: 50)
        let filler = OutputLines(queue: queue)
        for n in 0..<200 { filler.unavailable(attempt: n, of: 200) }
        // The writer takes a batch off the queue and blocks writing it into the full pipe; once
        // it holds one, top the queue up until a line is refused: then every new line is dropped.
        #expect(await eventually(30) { queue.inFlight > 0 }, "the writer is blocked on the full pipe")
        var refused = false
        for n in 0..<1_000 where !refused {
            let before = queue.dropped
            filler.unavailable(attempt: n, of: 1_000)
            refused = queue.dropped > before
        }
        #expect(refused && queue.dropped >= 100, "the queue is full")
        let droppedBefore = queue.dropped

        let keys = try GatewayKeys(secret: secret, publicKey: GatewayPublicKey(deviceKey().publicKey))
        let events = EventsEndpoint(fallbackKeys: keys, store: store, output: OutputLines(queue: queue),
                                    clock: .fixed(seconds: Self.now))
        let app = Application(router: makeRouter(events: events))
        let accepted = Mutex(0)
        // Bounded: a stalled ingest fails here instead of hanging the suite.
        let posting = Task {
            try await app.test(.router) { client in
                for n in 0..<20 {
                    let id = "019a4f6e-2b1c-7c3d-8e9f-0a1b2c3d4f\(String(format: "%02d", n))"
                    let body = body(id: id)
                    if try await post(client, body: body, headers: headers(id: id, body: body)).0 == .ok {
                        accepted.withLock { $0 += 1 }
                    }
                }
            }
        }
        #expect(await eventually(30) { accepted.withLock { $0 } == 20 }, "every event accepted while stdout is blocked")
        if accepted.withLock({ $0 }) == 20 { try await posting.value } else { posting.cancel() }
        #expect(queue.dropped >= droppedBefore + 20, "their lines were dropped and counted")
        #expect(try await store.allEvents().count == 20)

        // The reader comes back: what was queued arrives, then the count of what was not.
        var text = ""
        var buffer = [UInt8](repeating: 0, count: 65_536)
        _ = fcntl(ends[0], F_SETFL, O_NONBLOCK)
        let drained = await eventually(30) {
            let count = read(ends[0], &buffer, buffer.count)
            if count > 0 { text += String(decoding: buffer[0..<count], as: UTF8.self) }
            return text.contains("DROPPED ")
        }
        #expect(drained, "a DROPPED line once the reader is back")
        let reported = text.split(separator: "\n").filter { $0.hasPrefix("DROPPED ") }.compactMap { Int($0.dropFirst(8)) }
        #expect(reported.reduce(0, +) <= queue.dropped && !reported.isEmpty, "\(reported) of \(queue.dropped)")
    }

    @Test func badSignatureIs401() async throws {
        let app = Application(router: makeRouter(events: try endpoint()))
        let body = body(id: "e1")
        try await app.test(.router) { client in
            let forged = try headers(id: "e1", body: body, signature: "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw=")
            let (status, text) = try await post(client, body: body, headers: forged)
            #expect(status == .unauthorized)
            #expect(text.contains(#""error":"bad_signature""#))
            // Signed for other bytes than were sent.
            let signedOther = try headers(id: "e1", body: body + " ")
            let otherBytes = try await post(client, body: body, headers: signedOther)
            #expect(otherBytes.0 == .unauthorized)
        }
        #expect(lines.all.count == 2)
        #expect(lines.all.allSatisfy { $0.hasPrefix("REJECTED bad_signature id=e1 ") })
        #expect(try await store.allEvents().isEmpty)
    }

    @Test func staleTimestampIs401() async throws {
        let app = Application(router: makeRouter(events: try endpoint()))
        let body = body(id: "e1")
        try await app.test(.router) { client in
            let stale = try headers(id: "e1", body: body, timestamp: Self.now - 301)
            let (status, text) = try await post(client, body: body, headers: stale)
            #expect(status == .unauthorized)
            #expect(text.contains(#""error":"stale_timestamp""#))
            let edge = try headers(id: "e1", body: body, timestamp: Self.now + 300)
            let atEdge = try await post(client, body: body, headers: edge)
            #expect(atEdge.0 == .ok)
        }
        #expect(lines.all.first?.hasPrefix("REJECTED stale_timestamp id=e1 ") == true)
    }

    @Test(arguments: ["webhook-id", "webhook-timestamp", "webhook-signature"])
    func missingHeaderIs401(_ header: String) async throws {
        let app = Application(router: makeRouter(events: try endpoint()))
        let body = body(id: "e1")
        try await app.test(.router) { client in
            let (status, text) = try await post(client, body: body, headers: try headers(id: "e1", body: body, omit: header))
            #expect(status == .unauthorized)
            #expect(text.contains("missing header \(header)"))
        }
        #expect(lines.all.count == 1)
        #expect(lines.all.first?.hasPrefix("REJECTED missing_header ") == true)
    }

    @Test func invalidBodiesAre400() async throws {
        let app = Application(router: makeRouter(events: try endpoint()))
        try await app.test(.router) { client in
            let array = "[1,2,3]"
            let (status, text) = try await post(client, body: array, headers: try headers(id: "e1", body: array))
            #expect(status == .badRequest)
            #expect(text.contains("not a JSON object"))

            let other = body(id: "e2")
            let mismatch = try await post(client, body: other, headers: try headers(id: "e1", body: other))
            #expect(mismatch.0 == .badRequest)
            #expect(mismatch.1.contains(#""error":"id_mismatch""#))
        }
        #expect(lines.all.map { $0.split(separator: " ").prefix(2).joined(separator: " ") } ==
                ["REJECTED invalid_body", "REJECTED id_mismatch"])
    }

    @Test func failFirstAnswers503ThenAccepts() async throws {
        let app = Application(router: makeRouter(events: try endpoint(failFirst: 2)))
        let body = body(id: "e1")
        let headers = try headers(id: "e1", body: body)
        try await app.test(.router) { client in
            var statuses: [HTTPResponse.Status] = []
            for _ in 0..<3 {
                statuses.append(try await post(client, body: body, headers: headers).0)
            }
            #expect(statuses == [.serviceUnavailable, .serviceUnavailable, .ok])
        }
        #expect(lines.all.prefix(2) == ["UNAVAILABLE 1/2", "UNAVAILABLE 2/2"])
        #expect(lines.all.last?.hasPrefix("EVENT ") == true)
    }

    @Test func liveServerReportsItsPortAndAnswersHealthz() async throws {
        let readyFile = directory.appendingPathComponent("ready.json").path
        let app = try makeApplication(
            settings: ServerSettings(host: "127.0.0.1", port: 0, tls: nil, readyFile: readyFile),
            events: try endpoint(), output: lines.output, logger: Logger(label: "test"))
        try await app.test(.live) { client in
            let status = try await client.execute(uri: "/healthz", method: .get) { $0.status }
            #expect(status == .ok)
            let port = try #require(client.port)
            let ready = try String(contentsOfFile: readyFile, encoding: .utf8)
            #expect(ready == "{\"port\": \(port)}\n")
            #expect(lines.all.first == "LISTENING http://127.0.0.1:\(port)")
        }
    }
}
