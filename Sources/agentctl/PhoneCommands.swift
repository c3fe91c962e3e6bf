import ArgumentParser
import DoorbellCore
import DoorbellRuntime

// The owner's iPhones ([radio.ble] ancs): open pairing, list the bonded phones, forget one,
// dismiss the ringing notification when the door is answered.

extension AgentctlCommand {
    struct Pair: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Let a phone pair for a while (like an accessory's pairing button).",
            discussion: "Open Settings → Bluetooth on the iPhone near the base station while the window is open; the phone pairs without a code (the base station has no display). --seconds 0 closes the window.")
        @OptionGroup var options: SocketOptions
        @Option(help: "How long the window stays open (0–\(ControlRequest.maxPairingSeconds)).") var seconds = 120

        func run() throws {
            let r = try ask(options, .pair(seconds: seconds), PairReply.self)
            print(options.json ? JSONWriter.string(r.json) : ControlReplyText.pairing(r))
        }
    }

    struct Phones: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "The bonded phones: last seen, connected, reading notifications.")
        @OptionGroup var options: SocketOptions

        func run() throws {
            let r = try ask(options, .phones, PhonesReply.self)
            if options.json { print(JSONWriter.string(r.json)); return }
            printLines(ControlReplyText.phones(r))
        }
    }

    struct Forget: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove a phone's bond (it must pair again to be read).")
        @OptionGroup var options: SocketOptions
        @Argument(help: "The phone's address (as agentctl phones lists it) or name.") var phone: String

        func run() throws {
            let r = try ask(options, .forget(phone: phone), ForgetReply.self)
            print(options.json ? JSONWriter.string(r.json) : ControlReplyText.forgot(r))
        }
    }

    struct Answer: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "The door was answered: dismiss the ringing doorbell notification on the connected phones.")
        @OptionGroup var options: SocketOptions

        func run() throws {
            let r = try ask(options, .answer, AnswerReply.self)
            print(options.json ? JSONWriter.string(r.json) : ControlReplyText.answered(r))
        }
    }
}
