import DoorbellCore
import Testing

/// The requests agentctl builds are the requests the agent parses; what it cannot take is
/// refused with a message that says what it would take.
@Suite struct ControlProtocolTests {
    static let all: [ControlRequest] = [.status, .pubkey, .version, .scan, .capture, .events(follow: false), .events(follow: true),
                                        .inject(device: "front-door"), .queue(.list(dead: true, limit: 0)),
                                        .queue(.list(dead: false, limit: 10_000)), .queue(.retry), .queue(.purgeDead),
                                        .pair(seconds: 0), .pair(seconds: 600), .phones, .forget(phone: "C4:11:22:33:44:07"), .answer]

    @Test(arguments: all) func everyRequestSurvivesItsEncoding(_ request: ControlRequest) throws {
        let line = JSONWriter.string(request.json)
        #expect(try ControlRequest(json: JSONReader.parse(line)) == request, "\(line)")
        #expect(ControlRequest.commands.contains(request.command))
    }

    @Test func theWireFormatIsTheOneOlderAgentctlsSend() throws {
        #expect(try ControlRequest(json: JSONReader.parse(#"{"command":"queue","action":"list","dead":false,"limit":50}"#)) == .queue(.list(dead: false, limit: 50)))
        #expect(try ControlRequest(json: JSONReader.parse(#"{"command":"queue"}"#)) == .queue(.list(dead: false, limit: 100)))
        #expect(try ControlRequest(json: JSONReader.parse(#"{"command":"events","follow":true}"#)) == .events(follow: true))
    }

    @Test(arguments: [
        (#"{"command":"reboot"}"#, "unknown command \"reboot\"; known: status, pubkey"),
        (#"{}"#, "unknown command (none)"),
        (#"[1]"#, "a request is a JSON object"),
        (#"{"command":"inject"}"#, "inject needs \"device\""),
        (#"{"command":"queue","action":"drop"}"#, "unknown queue action \"drop\""),
        (#"{"command":"queue","limit":-1}"#, "must be 0–10000, not -1"),
        (#"{"command":"queue","limit":1e12}"#, "must be 0–10000"),
        (#"{"command":"pair","seconds":601}"#, "pair \"seconds\" must be 0–600"),
        (#"{"command":"forget"}"#, "forget needs \"phone\""),
    ]) func badRequestsAreRefusedWithWhatWouldWork(_ line: String, _ message: String) throws {
        let json = try JSONReader.parse(line)
        #expect(throws: ControlRequestError.self) { try ControlRequest(json: json) }
        do throws(ControlRequestError) {
            _ = try ControlRequest(json: json)
        } catch {
            #expect(error.description.contains(message), "\(error.description)")
        }
    }
}
