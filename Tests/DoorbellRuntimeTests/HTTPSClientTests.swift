import DoorbellCore
import DoorbellRuntime
import Foundation
import XCTest

/// libcurl against a real TLS server on loopback (Tests/helpers/https_test_server.py).
final class HTTPSClientTests: XCTestCase {
    var dir: TempDir!
    var server: Child?
    var port = 0

    override func setUpWithError() throws {
        dir = try TempDir()
        let r = try runCommand("/bin/bash", [Paths.repoRoot + "/scripts/make-test-pki.sh", dir.file("pki")])
        XCTAssertEqual(r.status, 0, r.stderr)
    }

    override func tearDown() { server?.stop() }

    func startServer(script: String) throws {
        let ready = dir.file("ready.json")
        server = try Child("/usr/bin/python3", [Paths.repoRoot + "/Tests/helpers/https_test_server.py",
                                                "--cert", dir.file("pki/server.pem"), "--key", dir.file("pki/server.key"),
                                                "--script", script, "--log", dir.file("requests.jsonl"),
                                                "--ready-file", ready, "--max-seconds", "30"], dir: dir, name: "server")
        eventually(20, "test server ready") { FileManager.default.fileExists(atPath: ready) }
        port = Int((try? JSONReader.parse(String(contentsOfFile: ready, encoding: .utf8)))?["port"]?.intValue ?? 0)
    }

    var requests: [JSONValue] {
        ((try? String(contentsOfFile: dir.file("requests.jsonl"), encoding: .utf8)) ?? "")
            .split(separator: "\n").compactMap { try? JSONReader.parse(String($0)) }
    }

    func client(caFile: String? = nil, timeoutMs: Int = 5_000) throws -> HTTPSClient {
        try HTTPSClient(options: HTTPSClientOptions(url: "https://127.0.0.1:\(port)/events", caFile: caFile ?? dir.file("pki/ca.pem"),
                                                    connectTimeoutMs: 2_000, requestTimeoutMs: timeoutMs, userAgent: "test"))
    }

    func testBodyAndHeadersArriveExactlyAndOneConnectionIsReused() throws {
        try startServer(script: "200,503,200")
        let c = try client()
        let body = Array(#"{"id":"x","n":"é"}"#.utf8)
        var statuses: [Int] = []
        for _ in 0..<3 {
            guard case let .success(r) = c.post(body: body, headers: [("webhook-id", "x"), ("Content-Type", "application/json")]) else {
                return XCTFail("request failed")
            }
            statuses.append(r.status)
            XCTAssertEqual(r.header("content-type"), "application/json")
        }
        XCTAssertEqual(statuses, [200, 503, 200])
        let seen = requests
        XCTAssertEqual(seen.count, 3)
        XCTAssertEqual(seen.first?["body"]?.stringValue.map { Array($0.unicodeScalars.map { UInt8($0.value) }) }, body)
        XCTAssertEqual(seen.first?["headers"]?["webhook-id"]?.stringValue, "x")
        XCTAssertEqual(Set(seen.compactMap { $0["connection"]?.intValue }), [1], "all requests on one kept-alive connection")
    }

    func testRedirectIsReturnedNotFollowed() throws {
        try startServer(script: "302")
        guard case let .success(r) = try client().post(body: [], headers: []) else { return XCTFail("request failed") }
        XCTAssertEqual(r.status, 302)
        XCTAssertEqual(requests.count, 1)
    }

    func testWrongCAIsATLSVerificationErrorWithAHint() throws {
        try startServer(script: "200")
        let other = try TempDir()
        _ = try runCommand("/bin/bash", [Paths.repoRoot + "/scripts/make-test-pki.sh", other.file("pki")])
        guard case let .failure(e) = try client(caFile: other.file("pki/ca.pem")).post(body: [], headers: []) else {
            return XCTFail("must not trust a server signed by another CA")
        }
        XCTAssertEqual(e.code, .tlsVerify)
        XCTAssertTrue(e.message.contains("uplink.ca_file"), e.message)
    }

    func testNothingListeningIsConnectionRefused() throws {
        port = try freeLoopbackPort()
        guard case let .failure(e) = try client().post(body: [], headers: []) else { return XCTFail("nothing listens there") }
        XCTAssertEqual(e.code, .connectionRefused)
        XCTAssertTrue(e.message.contains("Is the receiver running"), e.message)
    }

    func testServerThatNeverAnswersTimesOut() throws {
        try startServer(script: "hang")
        guard case let .failure(e) = try client(timeoutMs: 700).post(body: [1], headers: []) else { return XCTFail("must time out") }
        XCTAssertEqual(e.code, .timeout)
    }

    func startHelper(_ python: String, _ script: String, _ args: [String], name: String) throws -> (Child, Int) {
        let ready = dir.file("\(name)-ready.json")
        let child = try Child(python, [Paths.repoRoot + "/Tests/helpers/" + script, "--ready-file", ready, "--max-seconds", "30"] + args,
                              dir: dir, name: name)
        eventually(30, "\(name) ready") { FileManager.default.fileExists(atPath: ready) }
        let port = Int((try? JSONReader.parse(String(contentsOfFile: ready, encoding: .utf8)))?["port"]?.intValue ?? 0)
        return (child, port)
    }

    func testHTTP2IsUsedWhenTheServerOffersIt() throws {
        let python = Paths.repoRoot + "/.venv/bin/python"
        guard FileManager.default.isExecutableFile(atPath: python) else {
            throw skip("SKIPPED: .venv missing (scripts/venv.sh, run by make test, installs hypercorn)")
        }
        let (h2, h2Port) = try startHelper(python, "h2_test_server.py", ["--cert", dir.file("pki/server.pem"), "--key", dir.file("pki/server.key"),
                                                                         "--log", dir.file("h2.jsonl")], name: "h2")
        defer { h2.stop() }
        port = h2Port
        let c = try client()
        for _ in 0..<2 {
            guard case let .success(r) = c.post(body: Array("{}".utf8), headers: [("Content-Type", "application/json")]) else {
                return XCTFail("h2 request failed: \(h2.stderr)")
            }
            XCTAssertEqual(r.status, 200)
        }
        let versions = ((try? String(contentsOfFile: dir.file("h2.jsonl"), encoding: .utf8)) ?? "").split(separator: "\n")
            .compactMap { try? JSONReader.parse(String($0)) }.compactMap { $0["http_version"]?.stringValue }
        XCTAssertEqual(versions, ["2", "2"])
    }

    func testAWindowOfRequestsIsInFlightAtOnceOnOneHTTP2Connection() throws {
        let python = Paths.repoRoot + "/.venv/bin/python"
        guard FileManager.default.isExecutableFile(atPath: python) else {
            throw skip("SKIPPED: .venv missing (scripts/venv.sh, run by make test, installs hypercorn)")
        }
        // The first request goes alone (the client learns that the connection multiplexes), then the
        // other 4 together: the server holds its answers until 4 are in flight (bounded by --gather-seconds).
        let (h2, h2Port) = try startHelper(python, "h2_test_server.py", ["--cert", dir.file("pki/server.pem"), "--key", dir.file("pki/server.key"),
                                                                         "--log", dir.file("h2.jsonl"), "--gather", "4", "--gather-seconds", "20",
                                                                         "--answers", "3:503"], name: "h2")
        defer { h2.stop() }
        port = h2Port
        let c = try client()
        let window = (1...5).map { HTTPRequest(body: Array("{\"sequence\":\($0)}".utf8), headers: [("Content-Type", "application/json")]) }
        for round in 0..<2 {
            var statuses = [Int](repeating: 0, count: window.count)
            c.send(window) { i, r in
                if case let .success(response) = r { statuses[i] = response.status } else { statuses[i] = -1 }
            }
            XCTAssertEqual(statuses, round == 0 ? [200, 200, 503, 200, 200] : [200, 200, 200, 200, 200], "each answer reaches its own request")
        }
        XCTAssertTrue(c.multiplexing)
        let log = ((try? String(contentsOfFile: dir.file("h2.jsonl"), encoding: .utf8)) ?? "").split(separator: "\n")
            .compactMap { try? JSONReader.parse(String($0)) }
        XCTAssertEqual(log.count, 10)
        XCTAssertEqual(Set(log.compactMap { $0["http_version"]?.stringValue }), ["2"])
        XCTAssertEqual(Set(log.compactMap { $0["connection"]?.intValue }).count, 1, "both windows on one connection")
        XCTAssertEqual(log.prefix(5).compactMap { $0["in_flight"]?.intValue }.max(), 4, "the rest of the first window at once")
        XCTAssertEqual(log.suffix(5).compactMap { $0["in_flight"]?.intValue }.max(), 5, "the whole second window at once")
    }

    func testAWindowGoesOneAtATimeInOrderOverHTTP1() throws {
        try startServer(script: "200,500,200")
        let c = try client()
        var statuses = [Int](repeating: 0, count: 3)
        let window = (0..<3).map { HTTPRequest(body: Array("{\"n\":\($0)}".utf8), headers: []) }
        c.send(window) { i, r in
            if case let .success(response) = r { statuses[i] = response.status } else { statuses[i] = -1 }
        }
        XCTAssertEqual(statuses, [200, 500, 200], "answered in the order sent")
        XCTAssertFalse(c.multiplexing)
        XCTAssertEqual(requests.compactMap { $0["body"]?.stringValue }, ["{\"n\":0}", "{\"n\":1}", "{\"n\":2}"])
        XCTAssertEqual(Set(requests.compactMap { $0["connection"]?.intValue }), [1])
    }

    /// The uplink's form: over HTTP/1.1 each request is made only when it is handed over (after
    /// the one before was answered), so it is signed at its own time; the caller's work runs while
    /// requests are out; a request the caller could not make (nil) is skipped without an answer.
    func testRequestsAreMadeOneAtATimeAndTheCallerWorksWhileTheyAreOut() throws {
        try startServer(script: "200")
        let c = try client()
        var trace: [String] = []
        var waits = 0
        c.send(count: 4, request: { i in
            trace.append("make \(i)")
            return i == 2 ? nil : HTTPRequest(body: Array("{\"n\":\(i)}".utf8), headers: [])
        }, whileWaiting: {
            waits += 1
        }) { i, r in
            if case let .success(response) = r { trace.append("\(response.status) \(i)") } else { trace.append("failed \(i)") }
        }
        XCTAssertEqual(trace, ["make 0", "200 0", "make 1", "200 1", "make 2", "make 3", "200 3"],
                       "made lazily, one at a time; the one not made is skipped")
        XCTAssertGreaterThan(waits, 0, "the caller was offered the waits")
        XCTAssertEqual(requests.compactMap { $0["body"]?.stringValue }, ["{\"n\":0}", "{\"n\":1}", "{\"n\":3}"])
    }

    func testProxyIsUsedWhenConfigured() throws {
        try startServer(script: "200")
        let (proxy, proxyPort) = try startHelper("/usr/bin/python3", "connect_proxy.py", ["--log", dir.file("proxy.jsonl")], name: "proxy")
        defer { proxy.stop() }
        let c = try HTTPSClient(options: HTTPSClientOptions(url: "https://127.0.0.1:\(port)/events", caFile: dir.file("pki/ca.pem"),
                                                            userAgent: "test", proxy: "http://127.0.0.1:\(proxyPort)"))
        guard case let .success(r) = c.post(body: [], headers: []) else { return XCTFail("request through the proxy failed") }
        XCTAssertEqual(r.status, 200)
        let log = (try? String(contentsOfFile: dir.file("proxy.jsonl"), encoding: .utf8)) ?? ""
        XCTAssertTrue(log.contains("\"target\": \"127.0.0.1:\(port)\""), log)
    }

    func testMissingCAFileFailsAtInit() {
        XCTAssertThrowsError(try HTTPSClient(options: HTTPSClientOptions(url: "https://127.0.0.1:1/", caFile: "/nonexistent/ca.pem"))) { error in
            XCTAssertTrue("\(error)".contains("cannot read CA file /nonexistent/ca.pem"), "\(error)")
        }
    }
}
