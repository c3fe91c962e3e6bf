import ArgumentParser
import DoorbellCore
import DoorbellRuntime
import Glibc

@main
struct AgentctlCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "agentctl",
        abstract: "Ask the running doorbell-agent how it is doing.",
        version: AgentVersion.current,
        subcommands: [Status.self, Pubkey.self, Version.self]
    )
}

struct SocketOptions: ParsableArguments {
    @Option(name: .long, help: "Control socket of the agent.")
    var socket = PathSettings.defaultControlSocket

    @Flag(name: .long, help: "Machine-readable JSON output.")
    var json = false
}

func ask(_ options: SocketOptions, _ command: String) throws -> JSONValue {
    let response: JSONValue
    do {
        response = try ControlClient.request(path: options.socket, .object([("command", .string(command))]))
    } catch {
        FileHandleErr.write("agentctl: \(error.description)")
        throw ExitCode(69) // EX_UNAVAILABLE
    }
    guard response["ok"]?.boolValue == true else {
        FileHandleErr.write("agentctl: \(response["error"]?.stringValue ?? "the agent refused the request")")
        throw ExitCode(1)
    }
    return response
}

enum FileHandleErr {
    static func write(_ message: String) {
        var bytes = Array(message.utf8)
        bytes.append(0x0A)
        bytes.withUnsafeBytes { _ = Glibc.write(2, $0.baseAddress, $0.count) }
    }
}

extension AgentctlCommand {
    struct Status: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show the agent's health. Exit 0 healthy, 1 degraded, 69 agent unreachable.")
        @OptionGroup var options: SocketOptions

        func run() throws {
            let status = try ask(options, "status")["status"] ?? .null
            if options.json {
                print(JSONWriter.string(status))
            } else {
                print(StatusTable.render(status))
            }
            if status["health"]?.stringValue != "ok" { throw ExitCode(1) }
        }
    }

    struct Pubkey: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print the device public key (Ed25519) and key id for enrollment.")
        @OptionGroup var options: SocketOptions

        func run() throws {
            let r = try ask(options, "pubkey")
            if options.json {
                print(JSONWriter.string(.object([("algorithm", r["algorithm"] ?? .null), ("key_id", r["key_id"] ?? .null),
                                                 ("public_key", r["public_key"] ?? .null)])))
            } else {
                print("ed25519:\(r["public_key"]?.stringValue ?? "")")
                print("key id: \(r["key_id"]?.stringValue ?? "")")
            }
        }
    }

    struct Version: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print agentctl's version.")
        func run() { print("agentctl \(AgentVersion.current)") }
    }
}

/// The human view of `status`: short, aligned, the problems first.
enum StatusTable {
    static func render(_ s: JSONValue) -> String {
        var rows: [(String, String)] = []
        func text(_ v: JSONValue?) -> String {
            switch v {
            case let .string(x)?: return x
            case let .number(n)?: return n.rounded() == n ? String(Int64(n)) : String(n)
            case let .bool(b)?: return b ? "yes" : "no"
            case .null?, nil: return "-"
            default: return JSONWriter.string(v ?? .null)
            }
        }
        rows.append(("health", text(s["health"])))
        if case let .array(problems)? = s["problems"] { for p in problems { rows.append(("  problem", text(p))) } }
        rows.append(("gateway", text(s["gateway_id"])))
        rows.append(("version", "\(text(s["version"])) (pid \(text(s["pid"])), up \(text(s["uptime_s"])) s)"))
        rows.append(("clock", s["clock"]?["synchronized"]?.boolValue == true ? "synchronized" : "NOT synchronized (events are marked clock_synced=false)"))
        if case let .array(radios)? = s["radios"] {
            for r in radios {
                rows.append(("radio \(text(r["name"]))", "\(text(r["state"])): \(text(r["lines"])) lines, \(text(r["frames"])) frames, \(text(r["malformed"])) malformed, \(text(r["unmatched_frames"])) unmatched, \(text(r["restarts"])) restarts"))
                if r["last_error"] != .null { rows.append(("  last error", text(r["last_error"]))) }
            }
        }
        if case let .object(events)? = s["events"] {
            rows.append(("events", events.map { "\($0.0) \(text($0.1))" }.joined(separator: ", ")))
        }
        rows.append(("presses", "\(text(s["presses"]?["forwarded"])) forwarded, \(text(s["presses"]?["suppressed"])) within cooldown"))
        let o = s["outbox"]
        rows.append(("outbox", "\(text(o?["depth"])) waiting, oldest \(text(o?["oldest_age_s"])) s, last sequence \(text(o?["last_sequence"]))"))
        if let u = s["uplink"], u != .null {
            rows.append(("uplink", "\(text(u["url"])): \(text(u["delivered"])) delivered, \(text(u["failed_attempts"])) failed attempts"))
            rows.append(("  last success", text(u["last_success"])))
            if u["last_error"] != .null { rows.append(("  last error", "\(text(u["last_error_at"])) \(text(u["last_error"]))")) }
        } else {
            rows.append(("uplink", "not configured"))
        }
        if case let .array(unknown)? = s["unknown_transmitters"], !unknown.isEmpty {
            rows.append(("not configured", "\(unknown.count) transmitter(s) heard:"))
            for u in unknown { rows.append(("  \(text(u["identity"]))", "\(text(u["model"])), \(text(u["frames"])) frames, last \(text(u["last_seen"]))")) }
        }
        let width = rows.map(\.0.count).max() ?? 0
        return rows.map { $0.0 + String(repeating: " ", count: width - $0.0.count) + "  " + $0.1 }.joined(separator: "\n")
    }
}
