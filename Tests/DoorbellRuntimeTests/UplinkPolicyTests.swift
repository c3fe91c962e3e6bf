import DoorbellCore
import DoorbellRuntime
import Foundation
import XCTest

/// How the uplink treats what the receiver says: Retry-After, 410 Gone; and TLS pinning / mTLS.
final class UplinkPolicyTests: XCTestCase {
    var dir: TempDir!
    var receiver: ScriptedReceiver?
    var agent: Child?
    var socket: String { dir.file("control.sock") }

    override func setUpWithError() throws {
        try requireFile(Paths.agentBinary, "doorbell-agent")
        dir = try TempDir()
    }

    override func tearDown() {
        agent?.stop()
        receiver?.stop()
    }

    func startServer(_ args: [String]) throws { receiver = try ScriptedReceiver(dir: dir, args) }

    func startAgentAndPress(uplinkExtra: String = "") throws {
        let secret = try dir.write("g.whsec", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n")
        let config = try dir.write("agent.toml", agentConfig(
            stateDir: dir.file("state"), socket: socket, radio: "[radio.rtl433]\nbinary = \"\(try quietRadio(dir))\"",
            devices: [("front-door", "{ code = 1 }")], url: receiver?.url ?? "", caFile: dir.file("pki/ca.pem"),
            secretFile: secret, extra: uplinkExtra))
        agent = try startAgent(dir, config: config, socket: socket)
        XCTAssertEqual(try injectPress(socket), 0)
    }

    var requests: [JSONValue] { receiver?.requests ?? [] }

    func testRetryAfterIsHonoured() throws {
        try startServer(["--script", "429,200", "--retry-after", "2"])
        try startAgentAndPress()
        eventually(30, "delivered after the 429") { agentStatus(socket)?["uplink"]?["delivered"]?.intValue == 1 }
        let times = requests.compactMap { $0["t"]?.doubleValue }
        XCTAssertEqual(times.count, 2)
        // Backoff alone would retry within 1 s (retry_max_ms = 1000); Retry-After asked for 2 s.
        if times.count == 2 { XCTAssertGreaterThanOrEqual(times[1] - times[0], 1.9) }
        // Every attempt is signed afresh: same id, its own timestamp header.
        let ids = Set(requests.compactMap { $0["headers"]?["webhook-id"]?.stringValue })
        XCTAssertEqual(ids.count, 1)
        let stamps = requests.compactMap { $0["headers"]?["webhook-timestamp"]?.stringValue }
        XCTAssertEqual(Set(stamps).count, 2, "re-signed with the attempt's own timestamp: \(stamps)")
        let signatures = Set(requests.compactMap { $0["headers"]?["webhook-signature"]?.stringValue })
        XCTAssertEqual(signatures.count, 2)
    }

    func testGoneStopsDeliveryAndKeepsTheEvent() throws {
        try startServer(["--script", "410"])
        try startAgentAndPress()
        eventually(30, "endpoint marked gone") { agentStatus(socket)?["uplink"]?["endpoint_gone"]?.boolValue == true }
        let status = agentStatus(socket)
        XCTAssertEqual(status?["health"]?.stringValue, "degraded")
        XCTAssertEqual(status?["outbox"]?["depth"]?.intValue, 1, "the event is kept")
        XCTAssertEqual(status?["outbox"]?["dead"]?.intValue, 0, "not parked: the endpoint is gone, not the event")
        usleep(2_500_000) // longer than the 1 s retry cap: a retrying agent would have asked again
        XCTAssertEqual(requests.count, 1)
    }

    func testPinnedKeyMismatchIsRefusedWithAHintAndAMatchingPinDelivers() throws {
        try startServer(["--script", "200"])
        let wrong = "sha256//AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
        try startAgentAndPress(uplinkExtra: "pinned_public_key = \"\(wrong)\"")
        eventually(30, "pin mismatch reported") {
            agentStatus(socket)?["uplink"]?["last_error"]?.stringValue?.contains("does not match uplink.pinned_public_key") ?? false
        }
        XCTAssertEqual(requests.count, 0, "nothing is sent to a server whose key does not match")
        agent?.stop()

        let pin = try runCommand("/bin/sh", ["-c", "openssl x509 -in \(dir.file("pki/server.pem")) -pubkey -noout | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64"])
        let right = "sha256//" + pin.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        try startAgentAndPress(uplinkExtra: "pinned_public_key = \"\(right)\"")
        eventually(30, "delivered with the right pin") { agentStatus(socket)?["uplink"]?["delivered"]?.intValue ?? 0 >= 1 }
    }

    func testMutualTLSWithTheGatewayCertificate() throws {
        try startServer(["--script", "200", "--client-ca", dir.file("pki/ca.pem")])
        let pki = dir.file("pki")
        let made = try runCommand("/bin/sh", ["-c", """
            cd \(pki) && openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout client.key -subj /CN=gw-test -out client.csr 2>/dev/null && \
            openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -out client.pem 2>/dev/null
            """])
        XCTAssertEqual(made.status, 0, made.stderr)
        try startAgentAndPress(uplinkExtra: "client_cert_file = \"\(pki)/client.pem\"\nclient_key_file = \"\(pki)/client.key\"")
        eventually(30, "delivered over mTLS") { agentStatus(socket)?["uplink"]?["delivered"]?.intValue == 1 }
    }
}
