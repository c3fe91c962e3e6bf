import DoorbellCore
import Foundation
import XCTest

/// A press that finds the uplink idle goes out without a read of the outbox, signed while its
/// commit ran (FreshEventHandOff, Deliverer.signAhead). The real agent, radio and receiver:
/// presses a few hundred milliseconds apart (each finds the uplink waiting), a burst of four in
/// one radio read (handed over together while the first is signed), and a 500 in between (the
/// presses during its backoff find the uplink busy and are read from the outbox): every press
/// reaches the receiver once with a 2xx, with a signature that verifies for the timestamp it carries.
final class PressHandOffTests: XCTestCase {
    func testPressesThatFindTheUplinkIdleGoOutOnceEachSignedWhileCommitted() throws {
        try requireFile(Paths.agentBinary, "doorbell-agent")
        let dir = try TempDir()
        let receiver = try ScriptedReceiver(dir: dir, ["--script", "200,200,200,200,200,500,200"])
        defer { receiver.stop() }
        let codes = [0x5A3C91, 0x5A3C92, 0x5A3C93, 0x5A3C94]
        func line(_ code: Int) -> String { "{\\\"model\\\" : \\\"EV1527\\\", \\\"code\\\" : \(code)}" }
        let spaced = 12
        let radio = try dir.write("radio.sh", """
            #!/bin/sh
            i=0
            while [ $i -lt \(spaced) ]; do
              sleep 0.3
              echo "\(line(codes[0]))"
              sleep 0.3
              echo "\(line(codes[1]))"
              i=$((i+1))
            done
            sleep 0.5
            printf '%s\\n%s\\n%s\\n%s\\n' "\(line(codes[0]))" "\(line(codes[1]))" "\(line(codes[2]))" "\(line(codes[3]))"
            exec sleep 100000
            """)
        chmod(radio, 0o755)
        let socket = dir.file("control.sock")
        let secretFile = try webhookSecret(dir)
        let config = try dir.write("agent.toml", agentConfig(
            stateDir: dir.file("state"), socket: socket, radio: "[radio.rtl433]\nbinary = \"\(radio)\"",
            devices: codes.enumerated().map { ("door-\($0.offset)", "{ code = \($0.element) }") }, url: receiver.url,
            caFile: receiver.caFile, secretFile: secretFile,
            extra: "[tracker.button]\ncooldown_ms = 0\nrepeat_gap_ms = 20\n"))
        let agent = try startAgent(dir, config: config, socket: socket)
        defer { agent.stop() }
        let expected = 2 * spaced + 4
        func presses() -> [JSONValue] {
            receiver.requests.filter { ($0["body"]?.stringValue ?? "").contains("doorbell.pressed") && $0["answer"]?.stringValue == "200" }
        }
        eventually(60, "every press reaches the receiver") { presses().count >= expected }
        eventually(10, "the agent counts them delivered") { agentStatus(socket)?["uplink"]?["delivered"]?.intValue == Int64(expected) }
        Thread.sleep(forTimeInterval: 0.5) // a duplicate would come now, if at all

        let received = presses()
        XCTAssertEqual(received.count, expected, "one 2xx per press, none twice")
        let ids = received.map { $0["headers"]?["webhook-id"]?.stringValue ?? "" }
        XCTAssertEqual(Set(ids).count, expected, "each event id once: \(ids)")
        let sequences = received.compactMap { r -> Int64? in
            let body = try? JSONReader.parse(r["body"]?.stringValue ?? "")
            return body?["sequence"]?.intValue
        }
        XCTAssertEqual(Set(sequences).count, expected)
        let secret = try WebhookSecret(parsing: String(contentsOfFile: secretFile, encoding: .utf8))
        let signer = WebhookSigner(hmacSecret: secret, deviceKey: nil)
        let answered500 = receiver.requests.filter { $0["answer"]?.stringValue == "500" }
        XCTAssertEqual(answered500.count, 1)
        XCTAssertTrue(ids.contains(answered500.first?["headers"]?["webhook-id"]?.stringValue ?? "-"), "the refused press went again")
        for r in received + answered500 {
            let headers = r["headers"]
            let id = headers?["webhook-id"]?.stringValue ?? ""
            let timestamp = Int64(headers?["webhook-timestamp"]?.stringValue ?? "") ?? 0
            let body: [UInt8] = Array((r["body"]?.stringValue ?? "").utf8)
            let v1 = signer.v1(id: id, timestamp: timestamp, body: body) ?? "none"
            let signatures = (headers?["webhook-signature"]?.stringValue ?? "").split(separator: " ").map(String.init)
            XCTAssertTrue(signatures.contains(v1), "signed for the timestamp it carries: \(String(describing: headers))")
        }
        // Both ways were taken: presses that found the uplink waiting without a read, signed ahead;
        // those during the 500's backoff (and its retry) by reading the outbox.
        let delivered = agent.stderr.split(separator: "\n").filter { $0.contains("uplink.delivered") }
        XCTAssertEqual(delivered.count, expected, agent.stderr)
        let handedOver = delivered.filter { $0.contains("via=hand_off") && $0.contains("signed=ahead") }.count
        print("PressHandOffTests: \(handedOver) of \(expected) presses handed over and signed ahead, \(delivered.filter { $0.contains("via=read") }.count) read")
        XCTAssertGreaterThanOrEqual(handedOver, spaced, "most spaced presses find the uplink idle:\n" + delivered.joined(separator: "\n"))
        XCTAssertTrue(delivered.contains { $0.contains("via=read") }, "the presses during the backoff are read:\n" + delivered.joined(separator: "\n"))
        XCTAssertFalse(agent.stderr.contains("panic") || agent.stderr.contains("Fatal error"), agent.stderr)
    }
}
