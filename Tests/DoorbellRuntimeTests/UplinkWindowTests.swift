import DoorbellCore
@testable import DoorbellRuntime
import Foundation
import XCTest

/// Backlog drain with several requests in flight (uplink.max_in_flight) against real receivers:
/// the HTTP/2 test server (hypercorn; it logs each request's connection, sequence and how many
/// were in flight when it arrived) and the stdlib HTTP/1.1 one. No timing is asserted on; every
/// wait is bounded.
final class UplinkWindowTests: XCTestCase {
    var dir: TempDir!
    var server: Child?
    var agent: Child?
    var port = 0
    var socket: String { dir.file("control.sock") }
    var python: String { Paths.repoRoot + "/.venv/bin/python" }

    override func setUpWithError() throws {
        try requireFile(Paths.agentBinary, "doorbell-agent")
        dir = try TempDir()
        let r = try runCommand("/bin/bash", [Paths.repoRoot + "/scripts/make-test-pki.sh", dir.file("pki")])
        XCTAssertEqual(r.status, 0, r.stderr)
    }

    override func tearDown() {
        agent?.stop()
        server?.stop()
    }

    /// `count` buffered doorbell presses from an hour ago (not live: the live-press rule stays out of the way).
    func prefill(_ count: Int) throws {
        try FileManager.default.createDirectory(atPath: dir.file("state"), withIntermediateDirectories: true)
        let outbox = try Outbox(path: dir.file("state/outbox.sqlite"))
        var rng = SystemRandomNumberGenerator()
        let hourAgo = Clocks.wallMicros() - 3_600_000_000
        for i in 0..<count {
            let event = AgentEvent(type: .doorbellPressed, device: DeviceRef(id: "front-door", name: "Front door", radio: "rtl433"),
                                   occurredAtMicros: hourAgo + Int64(i), clockSynced: true, data: .object([("code", .string("000001"))]))
            let id = UUIDv7.make(unixMillis: hourAgo / 1000 + Int64(i), random: &rng)
            _ = try outbox.append(id: id, type: event.type.rawValue, createdAtMs: hourAgo / 1000) { seq in
                event.body(id: id, sequence: seq, gatewayID: "gw-test", agentVersion: AgentVersion.current)
            }
        }
        outbox.close()
    }

    func startH2(_ args: [String] = []) throws {
        guard FileManager.default.isExecutableFile(atPath: python) else {
            throw skip("SKIPPED: .venv missing (scripts/venv.sh, run by make test, installs hypercorn)")
        }
        let ready = dir.file("h2-ready.json")
        server = try Child(python, [Paths.repoRoot + "/Tests/helpers/h2_test_server.py", "--cert", dir.file("pki/server.pem"),
                                    "--key", dir.file("pki/server.key"), "--log", dir.file("requests.jsonl"),
                                    "--ready-file", ready, "--max-seconds", "300"] + args, dir: dir, name: "h2")
        eventually(30, "h2 server ready") { FileManager.default.fileExists(atPath: ready) }
        port = Int((try? JSONReader.parse(String(contentsOfFile: ready, encoding: .utf8)))?["port"]?.intValue ?? 0)
    }

    func startH1(_ args: [String] = ["--script", "200"]) throws {
        let ready = dir.file("h1-ready.json")
        server = try Child("/usr/bin/python3", [Paths.repoRoot + "/Tests/helpers/https_test_server.py", "--cert", dir.file("pki/server.pem"),
                                                "--key", dir.file("pki/server.key"), "--log", dir.file("requests.jsonl"),
                                                "--ready-file", ready, "--max-seconds", "300"] + args, dir: dir, name: "h1")
        eventually(20, "h1 server ready") { FileManager.default.fileExists(atPath: ready) }
        port = Int((try? JSONReader.parse(String(contentsOfFile: ready, encoding: .utf8)))?["port"]?.intValue ?? 0)
    }

    /// No radio: a killed agent leaves no orphan behind, and nothing but the backlog is sent.
    func config(extra: String = "") throws -> String {
        let secret = try dir.write("g.whsec", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n")
        return try dir.write("agent.toml", agentConfig(
            stateDir: dir.file("state"), socket: socket, radio: nil, devices: [], url: "https://127.0.0.1:\(port)/events",
            caFile: dir.file("pki/ca.pem"), secretFile: secret, extra: extra))
    }

    /// Every request the receiver logged, in order.
    var requests: [JSONValue] {
        ((try? String(contentsOfFile: dir.file("requests.jsonl"), encoding: .utf8)) ?? "")
            .split(separator: "\n").compactMap { try? JSONReader.parse(String($0)) }
    }

    /// The sequence of a logged request: the h2 server logs it, the h1 one logs the body.
    func sequence(_ r: JSONValue) -> Int64? {
        r["sequence"]?.intValue ?? (try? JSONReader.parse(r["body"]?.stringValue ?? ""))?["sequence"]?.intValue
    }

    func answer(_ r: JSONValue) -> String { r["answer"]?.intValue.map { String($0) } ?? r["answer"]?.stringValue ?? "" }

    /// How many requests each sequence got.
    func requestsPerSequence() -> [Int64: Int] {
        var n: [Int64: Int] = [:]
        for r in requests { if let s = sequence(r) { n[s, default: 0] += 1 } }
        return n
    }

    func drained(_ count: Int, file: StaticString = #filePath, line: UInt = #line) {
        eventually(120, "outbox drained", file: file, line: line) { agentStatus(socket)?["outbox"]?["depth"]?.intValue == 0 }
        XCTAssertEqual(agentStatus(socket)?["uplink"]?["delivered"]?.intValue, Int64(count), file: file, line: line)
    }

    // MARK: - HTTP/2: several in flight on one connection

    func testBacklogDrainsWithSeveralRequestsInFlightOnOneHTTP2Connection() throws {
        try prefill(40)
        // The first answers wait until 4 requests are in flight at once; one at a time, they never would be.
        try startH2(["--gather", "4", "--gather-seconds", "20"])
        agent = try startAgent(dir, config: try config(), socket: socket)
        drained(40)
        let seen = requests
        XCTAssertEqual(requestsPerSequence(), Dictionary(uniqueKeysWithValues: (1...40).map { (Int64($0), 1) }), "each event exactly once")
        XCTAssertEqual(Set(seen.compactMap { $0["http_version"]?.stringValue }), ["2"])
        XCTAssertEqual(Set(seen.compactMap { $0["connection"]?.intValue }).count, 1, "one connection")
        let overlap = seen.compactMap { $0["in_flight"]?.intValue }.max() ?? 0
        XCTAssertGreaterThanOrEqual(overlap, 4, "requests overlapped on the connection")
        XCTAssertLessThanOrEqual(overlap, 8, "never more than uplink.max_in_flight (default 8)")
        XCTAssertEqual(agentStatus(socket)?["uplink"]?["failed_attempts"]?.intValue, 0)
    }

    func testMaxInFlightOneSendsStrictlyOneAtATimeInOrder() throws {
        try prefill(12)
        try startH2()
        agent = try startAgent(dir, config: try config(extra: "max_in_flight = 1"), socket: socket)
        drained(12)
        let seen = requests
        XCTAssertEqual(seen.compactMap(sequence), (1...12).map { Int64($0) }, "strictly in sequence order")
        XCTAssertEqual(Set(seen.compactMap { $0["in_flight"]?.intValue }), [1], "one at a time")
    }

    func testAFailureInTheMiddleOfAWindowRetriesOnlyThatEvent() throws {
        try prefill(20)
        try startH2(["--answers", "5:500"])
        agent = try startAgent(dir, config: try config(), socket: socket)
        drained(20)
        var expected = Dictionary(uniqueKeysWithValues: (1...20).map { (Int64($0), 1) })
        expected[5] = 2
        XCTAssertEqual(requestsPerSequence(), expected, "the failed one is sent again, nothing else is")
        XCTAssertEqual(requests.filter { sequence($0) == 5 }.map(answer), ["500", "200"])
        let status = agentStatus(socket)
        XCTAssertEqual(status?["uplink"]?["failed_attempts"]?.intValue, 1)
        XCTAssertEqual(status?["outbox"]?["dead"]?.intValue, 0)
    }

    func testGoneInTheMiddleOfAWindowStopsDeliveryAndKeepsTheRest() throws {
        try prefill(20)
        try startH2(["--answers", "6:410"])
        agent = try startAgent(dir, config: try config(), socket: socket)
        eventually(60, "endpoint marked gone") { agentStatus(socket)?["uplink"]?["endpoint_gone"]?.boolValue == true }
        eventually(30, "the window settled") { agentStatus(socket)?["outbox"]?["depth"]?.intValue ?? 0 < 20 }
        let before = requests.count
        usleep(2_500_000) // longer than the 1 s retry cap: a retrying agent would have asked again
        XCTAssertEqual(requests.count, before, "nothing more is sent after the 410")
        let acknowledged = Set(requests.filter { answer($0) == "200" }.compactMap(sequence))
        XCTAssertEqual(requests.filter { sequence($0) == 6 }.count, 1)
        XCTAssertFalse(acknowledged.contains(6))
        let status = agentStatus(socket)
        XCTAssertEqual(status?["uplink"]?["delivered"]?.intValue, Int64(acknowledged.count))
        XCTAssertEqual(status?["outbox"]?["depth"]?.intValue, Int64(20 - acknowledged.count), "acknowledged ones left, every other is kept")
        XCTAssertEqual(status?["outbox"]?["dead"]?.intValue, 0)
        agent?.stop()
        let left = Set(try Outbox(path: dir.file("state/outbox.sqlite")).pending(limit: 100).map(\.sequence))
        XCTAssertEqual(left, Set((1...20).map { Int64($0) }).subtracting(acknowledged))
        XCTAssertTrue(left.contains(6))
    }

    func testAPermanentRefusalInTheMiddleOfAWindowParksOnlyThatEvent() throws {
        try prefill(20)
        try startH2(["--answers", "7:400"])
        agent = try startAgent(dir, config: try config(), socket: socket)
        // The other 19, and sequence 21: the gateway.dead_letter report of 7.
        eventually(60, "the rest delivered") { agentStatus(socket)?["uplink"]?["delivered"]?.intValue == 20 }
        let status = agentStatus(socket)
        XCTAssertEqual(status?["outbox"]?["depth"]?.intValue, 0)
        XCTAssertEqual(status?["outbox"]?["dead"]?.intValue, 1)
        XCTAssertEqual(requestsPerSequence(), Dictionary(uniqueKeysWithValues: (1...21).map { (Int64($0), 1) }), "nothing sent twice")
        agent?.stop()
        let dead = try Outbox(path: dir.file("state/outbox.sqlite")).deadLetters(limit: 10)
        XCTAssertEqual(dead.map(\.sequence), [7])
        XCTAssertTrue(dead.first?.lastError?.contains("HTTP 400") ?? false, "\(String(describing: dead.first?.lastError))")
    }

    func testAConnectionClosedUnderAWindowMovesTheRestToANewOne() throws {
        try prefill(40)
        // hypercorn closes the connection after every 10th request, with streams of the window
        // still open. With a 10-minute request timeout, waiting for those would outlast the bound below.
        try startH2(["--max-requests", "10"])
        let path = try config()
        let text = try String(contentsOfFile: path, encoding: .utf8).replacingOccurrences(of: "request_timeout_ms = 5000", with: "request_timeout_ms = 600000")
        XCTAssertTrue(text.contains("request_timeout_ms = 600000"))
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        agent = try startAgent(dir, config: path, socket: socket)
        drained(40)
        let acknowledged = requests.filter { answer($0) == "200" }
        XCTAssertEqual(Set(acknowledged.compactMap(sequence)), Set((1...40).map { Int64($0) }), "every event acknowledged")
        XCTAssertGreaterThan(Set(requests.compactMap { $0["connection"]?.intValue }).count, 1, "the server did close connections")
        XCTAssertEqual(agentStatus(socket)?["outbox"]?["dead"]?.intValue, 0)
    }

    // MARK: - HTTP/1.1: the same window, one request after the other

    func testHTTP1OnlyReceiverDrainsEverythingInOrderOnOneConnection() throws {
        try prefill(30)
        try startH1()
        agent = try startAgent(dir, config: try config(), socket: socket)
        drained(30)
        let seen = requests
        XCTAssertEqual(seen.compactMap(sequence), (1...30).map { Int64($0) }, "one at a time, in order")
        XCTAssertEqual(Set(seen.compactMap { $0["connection"]?.intValue }), [1], "one kept-alive connection")
    }

    func testHTTP1ReceiverFailureMidWindowRetriesOnlyThatEvent() throws {
        try prefill(12)
        // Requests 1 (sequence 1, alone: the first window probes) then 2..9 as a window: the 4th of it fails.
        try startH1(["--script", "200,200,200,200,500,200"])
        agent = try startAgent(dir, config: try config(), socket: socket)
        drained(12)
        let perSequence = requestsPerSequence()
        XCTAssertEqual(perSequence.values.reduce(0, +), 13)
        XCTAssertEqual(perSequence.filter { $0.value == 2 }.count, 1, "exactly one event sent twice: \(perSequence)")
        XCTAssertEqual(Set(perSequence.keys), Set((1...12).map { Int64($0) }))
    }

    // MARK: - Power cut during a windowed drain

    func testKillsDuringAWindowedDrainLoseNothing() throws {
        try prefill(1500)
        try startH2()
        let config = try config()
        var rng = SeededRandom(seed: 11)
        for round in 0..<12 {
            let agent = try Child(Paths.agentBinary, ["run", "--config", config], dir: dir, name: "agent-\(round % 2)")
            usleep(UInt32(Int.random(in: 100_000...500_000, using: &rng)))
            agent.signal(SIGKILL)
            XCTAssertNotNil(agent.wait(seconds: 10))
        }
        agent = try startAgent(dir, config: config, socket: socket)
        eventually(120, "outbox drained") { agentStatus(socket)?["outbox"]?["depth"]?.intValue == 0 }
        var ids: [Int64: Set<String>] = [:]
        for r in requests where answer(r) == "200" {
            if let s = sequence(r), let id = r["id"]?.stringValue { ids[s, default: []].insert(id) }
        }
        XCTAssertEqual(Set(ids.keys), Set((1...1500).map { Int64($0) }), "every event reached the receiver")
        XCTAssertTrue(ids.values.allSatisfy { $0.count == 1 }, "one id per sequence: a resend is the same event")
        XCTAssertEqual(Set(requests.compactMap { $0["http_version"]?.stringValue }), ["2"])
    }

    // MARK: - The window itself

    func entry(_ seq: Int64, type: String = "beacon.entered", createdAtMs: Int64 = 0) -> UplinkItem {
        UplinkItem(id: "e\(seq)", sequence: seq, type: type, createdAtMs: createdAtMs, attempts: 0)
    }

    func testWindowTakesItsHeadThenTheOldestDueInOrder() {
        let due = (1...10).map { entry(Int64($0)) }
        let ids = { (w: [UplinkItem]) in w.map(\.sequence) }
        XCTAssertEqual(ids(UplinkMachine.window(due, head: due[0], size: 4)), [1, 2, 3, 4])
        XCTAssertEqual(ids(UplinkMachine.window(due, head: due[0], size: 1)), [1])
        // A live press goes first, the oldest due follow.
        XCTAssertEqual(ids(UplinkMachine.window(due, head: due[9], size: 4)), [10, 1, 2, 3])
        XCTAssertEqual(ids(UplinkMachine.window(Array(due.prefix(2)), head: due[0], size: 8)), [1, 2])
        // An event waiting out its own backoff is not due: the others pass it.
        var m = UplinkMachine(settings: UplinkMachine.Settings(maxInFlight: 4, backoff: FullJitterBackoff(initialMillis: 10_000, capMillis: 10_000),
                                                               requireClockSync: false))
        var rng = SeededRandom(seed: 1)
        _ = m.settle([(due[1], .delivered)], nowMonoMicros: 0, nowWallMs: 0, random: &rng)
        _ = m.settle([(due[0], .failed(status: 500, retryAfterMillis: nil)), (due[2], .delivered)], nowMonoMicros: 0, nowWallMs: 0, random: &rng)
        if let wait = m.notBefore["e1"], wait > 1 {
            guard case let .send(window, _) = m.next(pending: due, nowMonoMicros: 1, nowWallMs: 0, clockSynced: { true }) else { return XCTFail("not sent") }
            XCTAssertEqual(ids(window), [2, 3, 4, 5])
        }
    }

    func testMaxInFlightIsValidated() throws {
        let base = """
        gateway_id = "gw"
        [uplink]
        url = "https://cloud.example/events"
        sign_ed25519 = true

        """
        XCTAssertEqual(try ConfigLoader.parse(text: base, file: "agent.toml").uplink?.maxInFlight, 8)
        XCTAssertEqual(try ConfigLoader.parse(text: base + "max_in_flight = 1\n", file: "agent.toml").uplink?.maxInFlight, 1)
        XCTAssertEqual(try ConfigLoader.parse(text: base + "max_in_flight = 64\n", file: "agent.toml").uplink?.maxInFlight, 64)
        for bad in ["0", "65", "\"8\""] {
            XCTAssertThrowsError(try ConfigLoader.parse(text: base + "max_in_flight = \(bad)\n", file: "agent.toml")) { error in
                XCTAssertTrue("\(error)".contains("max_in_flight"), "\(error)")
            }
        }
    }
}
