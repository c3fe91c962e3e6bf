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
            let r = try ask(options, .pair(seconds: seconds))
            if options.json { print(JSONWriter.string(r)); return }
            if let until = r["pairing_until"]?.stringValue { print("pairing open until \(until)") } else { print("pairing closed") }
        }
    }

    struct Phones: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "The bonded phones: last seen, connected, reading notifications.")
        @OptionGroup var options: SocketOptions

        func run() throws {
            let r = try ask(options, .phones)
            if options.json { print(JSONWriter.string(r)); return }
            let list = r["phones"]?.arrayValues ?? []
            if list.isEmpty { print("no bonded phones (agentctl pair opens pairing)") }
            for p in list {
                let state = p["connected"]?.boolValue == true ? (p["reading_notifications"]?.boolValue == true ? "connected, reading notifications" : "connected") : "not connected"
                let name = p["name"]?.stringValue.flatMap { $0.isEmpty ? nil : " \($0)" } ?? ""
                print("\(p["id"]?.stringValue ?? "?")\(name): \(state), last seen \(p["last_seen"]?.stringValue ?? "never"), bonded \(p["bonded_at"]?.stringValue ?? "?")")
            }
            if let until = r["pairing_until"]?.stringValue { print("pairing open until \(until)") }
            if let e = r["last_error"]?.stringValue { print("last error: \(e)") }
        }
    }

    struct Forget: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove a phone's bond (it must pair again to be read).")
        @OptionGroup var options: SocketOptions
        @Argument(help: "The phone's address (as agentctl phones lists it) or name.") var phone: String

        func run() throws {
            let r = try ask(options, .forget(phone: phone))
            print(options.json ? JSONWriter.string(r) : "forgot \(r["forgotten"]?.stringValue ?? phone)")
        }
    }

    struct Answer: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "The door was answered: dismiss the ringing doorbell notification on the connected phones.")
        @OptionGroup var options: SocketOptions

        func run() throws {
            let r = try ask(options, .answer)
            print(options.json ? JSONWriter.string(r) : "dismissing on \(r["dismissing"]?.intValue ?? 0) connected phone(s)")
        }
    }
}
