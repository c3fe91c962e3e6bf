import ArgumentParser
import DoorbellCore
import DoorbellRuntime
import Glibc

@main
struct AgentctlCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "agentctl",
        abstract: "Ask the running doorbell-agent how it is doing.",
        discussion: "Shell completions: agentctl --generate-completion-script bash|zsh|fish",
        version: AgentVersion.current,
        subcommands: [Status.self, Events.self, Queue.self, Inject.self, Scan.self, Capture.self, Pubkey.self, Pair.self, Phones.self, Forget.self, Answer.self, Config.self, Version.self]
    )
}

struct SocketOptions: ParsableArguments {
    @Option(name: .long, help: "Control socket of the agent.")
    var socket = PathSettings.defaultControlSocket

    @Flag(name: .long, help: "Machine-readable JSON output.")
    var json = false
}

/// Sends `request` and reads the answer as `Reply`; a refusal or an answer of another shape is
/// said on stderr (exit 1), an unreachable agent too (exit 69).
func ask<Reply: ControlReplyBody>(_ options: SocketOptions, _ request: ControlRequest, _: Reply.Type) throws -> Reply {
    let response: JSONValue
    do {
        response = try ControlClient.request(path: options.socket, request.json)
    } catch {
        FileHandleErr.write("agentctl: \(error.description)")
        throw ExitCode(69) // EX_UNAVAILABLE
    }
    let decoded: ControlResponse.Decoded<Reply>
    do { decoded = try ControlResponse.decode(response, as: Reply.self) } catch {
        FileHandleErr.write("agentctl: \(error.description)")
        throw ExitCode(1)
    }
    switch decoded {
    case let .ok(reply): return reply
    case let .refused(message):
        FileHandleErr.write("agentctl: \(message)")
        throw ExitCode(1)
    }
}

func printLines(_ lines: [String]) { for line in lines { print(line) } }

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
        @Option(name: .long, help: "State directory whose provisioning.json (doorbell-agent provision) is shown too.")
        var stateDir = PathSettings.defaultStateDir

        func run() throws {
            // Read first: a box whose boot file was bad has no running agent, and this says why.
            let provisioning = readFile(stateDir + "/provisioning.json").flatMap(ProvisionStatus.init(json:))
            let reply: StatusReply
            do {
                reply = try ask(options, .status, StatusReply.self)
            } catch {
                if let provisioning { FileHandleErr.write(provisioning.summary) }
                throw error
            }
            let report = reply.report
            if options.json {
                var status = reply.status
                if case let .object(members) = status, let provisioning {
                    status = .object(members + [("provisioning", provisioning.json)])
                }
                print(JSONWriter.string(status))
            } else {
                guard let report else {
                    FileHandleErr.write("agentctl: the agent's answer is not a status report (is agentctl from another version than the agent? `agentctl version` tells); `agentctl status --json` shows it raw")
                    throw ExitCode(1)
                }
                print(StatusTable.render(report))
                if let provisioning { print(provisioning.summary) }
            }
            if report?.health != "ok" || provisioning?.state == .problem { throw ExitCode(1) }
        }
    }

    struct Pubkey: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print the device public key (Ed25519) and key id for enrollment.")
        @OptionGroup var options: SocketOptions

        func run() throws {
            let r = try ask(options, .pubkey, PubkeyReply.self)
            if options.json {
                print(JSONWriter.string(.object([("algorithm", .string(r.algorithm)), ("key_id", .string(r.keyID)), ("public_key", .string(r.publicKey))])))
            } else {
                printLines(ControlReplyText.pubkey(r))
            }
        }
    }

    struct Events: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show recent events; --follow keeps printing new ones (Ctrl-C to stop).")
        @OptionGroup var options: SocketOptions
        @Flag(name: .shortAndLong, help: "Keep printing events as they happen.") var follow = false

        func run() throws {
            if follow {
                do {
                    try ControlClient.stream(path: options.socket, ControlRequest.events(follow: true).json) { value in
                        switch ControlStreamLine(json: value, capturing: false) {
                        case .started, .heartbeat, .capture: return true
                        case let .dropped(n):
                            FileHandleErr.write("agentctl: \(n) events skipped (this terminal was too slow)")
                            return true
                        case let .event(body):
                            print(options.json ? JSONWriter.string(body) : ControlReplyText.event(body))
                            fflush(nil)
                            return true
                        }
                    }
                } catch {
                    FileHandleErr.write("agentctl: \(error.description)")
                    throw ExitCode(69)
                }
                return
            }
            for e in try ask(options, .events(follow: false), EventsReply.self).events { print(options.json ? JSONWriter.string(e) : ControlReplyText.event(e)) }
        }
    }

    struct Queue: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "The outbox: list waiting events, retry dead letters, purge them.",
            subcommands: [List.self, Retry.self, Purge.self], defaultSubcommand: List.self)

        struct List: ParsableCommand {
            static let configuration = CommandConfiguration(abstract: "List the events waiting in the outbox, oldest first.")
            @OptionGroup var options: SocketOptions
            @Flag(help: "List the dead letters (events the receiver refused for good) instead.") var dead = false
            @Option(help: "At most this many.") var limit = 50

            func run() throws {
                let r = try ask(options, .queue(.list(dead: dead, limit: limit)), QueueListReply.self)
                if options.json { print(JSONWriter.string(r.json)); return }
                printLines(ControlReplyText.queue(r))
            }
        }

        struct Retry: ParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Put every dead letter back in the queue (after fixing the receiver).")
            @OptionGroup var options: SocketOptions
            @Option(help: "Show delivery progress for up to this many seconds (0: don't wait).") var waitSeconds = 60

            func run() throws {
                let r = try ask(options, .queue(.retry), QueueRetryReply.self)
                if options.json { print(JSONWriter.string(r.json)); return }
                print(ControlReplyText.requeued(r))
                guard r.requeued > 0, waitSeconds > 0 else { return }
                // Progress: the queue draining, on one line, until empty, stuck or out of time.
                let counts = ControlRequest.queue(.list(dead: false, limit: 0))
                let start = try ask(options, counts, QueueListReply.self).depth
                for _ in 0..<(waitSeconds * 4) {
                    let q = try ask(options, counts, QueueListReply.self)
                    let depth = q.depth
                    print("\rdelivering: \(max(0, start - depth))/\(start) done, \(q.dead) dead", terminator: "")
                    fflush(nil)
                    if depth == 0 { break }
                    usleep(250_000)
                }
                print("")
            }
        }

        struct Purge: ParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Delete the dead letters. Nothing else is ever deleted by hand.")
            @OptionGroup var options: SocketOptions
            @Flag(help: "Required: purge the dead letters.") var dead = false

            func validate() throws {
                guard dead else { throw ValidationError("only dead letters can be purged: agentctl queue purge --dead") }
            }

            func run() throws {
                let r = try ask(options, .queue(.purgeDead), QueuePurgeReply.self)
                print(options.json ? JSONWriter.string(r.json) : ControlReplyText.purged(r))
            }
        }
    }

    struct Scan: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "What the radios hear: identity, model, RSSI, frames/s, last seen, and a [[device]] snippet for each stranger.")
        @OptionGroup var options: SocketOptions
        @Option(help: "Listen this long to measure frame rates.") var seconds = 10

        func run() throws {
            func snapshot() throws -> [String: ScanReply.Transmitter] {
                Dictionary(try ask(options, .scan, ScanReply.self).transmitters.map { ($0.key, $0) }, uniquingKeysWith: { a, _ in a })
            }
            let before = try snapshot()
            if seconds > 0 {
                FileHandleErr.write("agentctl: listening for \(seconds) s ...")
                sleep(UInt32(seconds))
            }
            let after = try snapshot()
            let rows = after.values.sorted { $0.lastSeen > $1.lastSeen }
            func rate(_ t: ScanReply.Transmitter) -> Double? {
                seconds > 0 ? Double(t.frames - (before[t.key]?.frames ?? 0)) / Double(seconds) : nil
            }
            if options.json {
                print(JSONWriter.string(.array(rows.map { t in
                    guard case var .object(m) = t.json else { return t.json }
                    m.append(("frames_per_s", .number(rate(t) ?? 0)))
                    return .object(m)
                })))
                return
            }
            if rows.isEmpty { print("nothing heard yet (since the agent started)") }
            for t in rows { printLines(ControlReplyText.transmitter(t, framesPerSecond: rate(t))) }
        }
    }

    struct Capture: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Record what the radios deliver for N seconds into FILE: rtl_433 JSON lines, and the OOK radio's pulses as FILE.ook (replay either with doorbell-agent replay).")
        @OptionGroup var options: SocketOptions
        @Option(help: "How long to record.") var seconds = 30
        @Option(help: "Output file.") var out: String

        func validate() throws {
            guard (1...3_600).contains(seconds) else { throw ValidationError("--seconds must be 1...3600") }
        }

        func run() throws {
            let fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
            guard fd >= 0 else {
                FileHandleErr.write("agentctl: cannot create \(out): \(errnoText())")
                throw ExitCode(73)
            }
            defer { close(fd) }
            let deadline = Clocks.monotonicMicros() + Int64(seconds) * 1_000_000
            var lines = 0
            var pulses: [Pulse] = []
            var hci: [BTSnoopRecord] = []
            do {
                // A quiet air sends nothing: check the deadline every second anyway.
                try ControlClient.stream(path: options.socket, ControlRequest.capture.json, idleSeconds: 1,
                                         onIdle: { Clocks.monotonicMicros() < deadline }) { value in
                    switch ControlStreamLine(json: value, capturing: true) {
                    case let .capture(.ble(h4, received, t)) where hci.count < 2_000_000:
                        hci.append(BTSnoopRecord(timeMicros: t, received: received, packet: h4))
                    case let .capture(.ookPulse(p)) where pulses.count < 2_000_000:
                        pulses.append(p)
                    case let .capture(.rtl433(line)):
                        var bytes = Array(line.utf8)
                        bytes.append(0x0A)
                        _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
                        lines += 1
                    default:
                        break
                    }
                    return Clocks.monotonicMicros() < deadline
                }
            } catch {
                FileHandleErr.write("agentctl: \(error.description)")
                throw ExitCode(69)
            }
            if !pulses.isEmpty {
                let ookPath = out.hasSuffix(".ook") ? out : out + ".ook"
                if ookPath == out { ftruncate(fd, 0) }
                guard (try? writeSmallFile(ookPath, OOKPulseFile.write(pulses, comment: "agentctl capture, \(seconds) s"))) != nil else {
                    FileHandleErr.write("agentctl: cannot write \(ookPath): \(errnoText())")
                    throw ExitCode(73)
                }
                print("captured \(pulses.count) OOK pulse(s) in \(seconds) s to \(ookPath)")
            }
            if !hci.isEmpty {
                let path = out.hasSuffix(".btsnoop") ? out : out + ".btsnoop"
                if path == out { ftruncate(fd, 0) }
                let bytes = BTSnoop.file(hci)
                let f = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
                guard f >= 0, bytes.withUnsafeBytes({ write(f, $0.baseAddress, $0.count) }) == bytes.count else {
                    FileHandleErr.write("agentctl: cannot write \(path): \(errnoText())")
                    throw ExitCode(73)
                }
                close(f)
                print("captured \(hci.count) HCI packet(s) in \(seconds) s to \(path) (btmon -r \(path); doorbell-agent replay \(path))")
            }
            if lines > 0 || (pulses.isEmpty && hci.isEmpty) { print("captured \(lines) line(s) in \(seconds) s to \(out)") }
        }
    }

    struct Inject: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Inject a synthetic press through the real pipeline (tracker, outbox, signed delivery), marked test.",
            discussion: "How an installer proves the whole chain works: agentctl inject press --device front-door")
        @OptionGroup var options: SocketOptions
        @Argument(help: "What to inject: press.") var what: String
        @Option(help: "Device id from the config.") var device: String

        func validate() throws {
            guard what == "press" else { throw ValidationError("only `press` can be injected") }
        }

        func run() throws {
            let r = try ask(options, .inject(device: device), InjectReply.self)
            print(options.json ? JSONWriter.string(r.json) : ControlReplyText.injected(r, device: device))
        }
    }

    struct Config: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Check config files without the daemon.", subcommands: [Check.self])

        struct Check: ParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Validate a config file; exit 0 if good, 78 with every problem listed if not.")
            @Argument(help: "Config file.") var file = "/etc/doorbell-agent/agent.toml"
            @Flag(name: .long, help: "Machine-readable JSON output.") var json = false

            func run() throws {
                guard let bytes = readFile(file) else {
                    FileHandleErr.write("\(file): cannot read the config file: \(errnoText())")
                    throw ExitCode(78)
                }
                do {
                    let cfg = try ConfigLoader.parse(bytes: bytes, file: file,
                                                     checks: ConfigFileChecks(isReadableFile: { isReadableFile($0) }))
                    print(json ? JSONWriter.string(.object([("ok", .bool(true)), ("gateway_id", .string(cfg.gatewayID)), ("devices", .number(Double(cfg.devices.count)))]))
                               : "\(file): OK — gateway \(cfg.gatewayID), \(cfg.devices.count) device(s)")
                } catch {
                    if json {
                        print(JSONWriter.string(.object([("ok", .bool(false)), ("issues", .array(error.issues.map { i in
                            .object([("file", .string(i.file)), ("line", i.line.map { .number(Double($0)) } ?? .null),
                                     ("column", i.column.map { .number(Double($0)) } ?? .null), ("key", .string(i.key)), ("message", .string(i.message))])
                        }))])))
                    } else {
                        FileHandleErr.write(error.description)
                    }
                    throw ExitCode(78)
                }
            }
        }
    }

    struct Version: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print agentctl's version (and the agent's, if it runs).")
        @OptionGroup var options: SocketOptions

        func run() {
            let agent = (try? ControlClient.request(path: options.socket, ControlRequest.version.json)).flatMap { reply in
                if case let .ok(v)? = try? ControlResponse.decode(reply, as: VersionReply.self) { return v.version }
                return nil
            }
            if options.json {
                print(JSONWriter.string(.object([("agentctl", .string(AgentVersion.current)), ("agent", agent.map(JSONValue.string) ?? .null)])))
            } else {
                print("agentctl \(AgentVersion.current)" + (agent.map { ", doorbell-agent \($0) running" } ?? ""))
            }
        }
    }
}
