import ArgumentParser
import DoorbellCore
import DoorbellRuntime
import Glibc

@main
struct DoorbellAgentCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "doorbell-agent",
        abstract: "Doorbell base station agent: radios → presses → signed HTTPS events.",
        version: AgentVersion.current,
        subcommands: [Run.self, CheckConfig.self, Replay.self, Pubkey.self, EncodeOOK.self, Version.self],
        defaultSubcommand: Run.self
    )
}

/// One read and validation of a config file: the config and the bytes it came from, or every
/// issue as text.
func readConfig(_ path: String) -> Result<(AgentConfig, [UInt8]), ConfigError> {
    guard let bytes = readFile(path) else {
        return .failure(ConfigError(issues: [ConfigIssue(file: path, key: "", message: "cannot read the config file: \(errnoText()). Default location: /etc/doorbell-agent/agent.toml")]))
    }
    do {
        return .success((try ConfigLoader.parse(bytes: bytes, file: path, checks: ConfigFileChecks(isReadableFile: { isReadableFile($0) })), bytes))
    } catch {
        return .failure(error)
    }
}

/// Reads and validates a config file; prints every issue and exits 78 (EX_CONFIG) on error.
func loadConfig(_ path: String) throws -> AgentConfig {
    switch readConfig(path) {
    case let .success((config, _)): return config
    case let .failure(error):
        printError(error.description)
        throw ExitCode(78)
    }
}

/// The config, or — when it cannot be read or is invalid and a copy of the last config that
/// loaded exists — that copy, with the reason it is in use (nil when the file itself loaded).
/// A gateway keeps ringing after a power cut tore an edit; without a copy it exits 78 as before.
func loadConfigOrLastGood(_ path: String) throws -> (AgentConfig, [UInt8], String?) {
    let failure: ConfigError
    switch readConfig(path) {
    case let .success((config, bytes)): return (config, bytes, nil)
    case let .failure(error): failure = error
    }
    printError(failure.description)
    guard let stateDir = LastGoodConfig.stateDirBeforeConfig(), let saved = LastGoodConfig.load(stateDir: stateDir),
          let cfg = try? ConfigLoader.parse(bytes: saved, file: path, checks: ConfigFileChecks(isReadableFile: { isReadableFile($0) })) else {
        throw ExitCode(78)
    }
    let first = failure.issues.first?.description ?? failure.description
    let problem = "\(first) — running on the last good copy (\(LastGoodConfig.path(stateDir: stateDir))); fix the file, then systemctl reload doorbell-agent"
    printError("doorbell-agent: " + problem)
    return (cfg, saved, problem)
}

func printError(_ message: String) {
    var bytes = Array(message.utf8)
    bytes.append(0x0A)
    bytes.withUnsafeBytes { _ = write(2, $0.baseAddress, $0.count) }
}

extension DoorbellAgentCommand {
    struct Run: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Run the agent until SIGTERM or SIGINT.")

        @Option(name: .long, help: "Config file.")
        var config = "/etc/doorbell-agent/agent.toml"

        @Option(name: .long, help: "Override [log] level: debug, info, notice, warning, error.")
        var logLevel: String?

        func run() throws {
            StopSignals.block()
            let (cfg, bytes, problem) = try loadConfigOrLastGood(config)
            var level = cfg.log.level
            if let logLevel {
                guard let l = LogLevel(rawValue: logLevel) else {
                    printError("--log-level: unknown level \"\(logLevel)\"; use one of \(LogLevel.allCases.map(\.rawValue).joined(separator: ", "))")
                    throw ExitCode(64)
                }
                level = l
            }
            let log = Logger(level: level)
            let agent: Agent
            do {
                agent = try Agent(config: cfg, log: log)
                if let problem {
                    agent.configProblem.withLock { $0 = problem }
                    log.error("config.invalid_running_last_good", [("file", config), ("problem", problem)])
                } else {
                    agent.saveLastGoodConfig(bytes)
                }
                try agent.start()
            } catch {
                log.error("agent.start_failed", [("error", error.description)])
                throw ExitCode(error.exitCode)
            }
            agent.runUntilStopped(notifier: SystemdNotifier(), configPath: config)
        }
    }

    struct CheckConfig: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "check-config", abstract: "Validate a config file; exit 0 if good, 78 (EX_CONFIG) with every problem listed if not.")

        @Argument(help: "Config file.")
        var file = "/etc/doorbell-agent/agent.toml"

        func run() throws {
            let cfg = try loadConfig(file)
            print("\(file): OK — gateway \(cfg.gatewayID), \(cfg.devices.count) device(s), radio rtl433 \(cfg.rtl433 == nil ? "off" : "on"), radio ook \(cfg.ook.map { "on (\($0.source.rawValue))" } ?? "off"), radio ble \(cfg.ble == nil ? "off" : "on"), \(cfg.regions.count) region(s), uplink \(cfg.uplink?.url ?? "not configured")")
        }
    }

    struct Replay: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Run recordings through the decoders and trackers; print events as JSON lines.",
            discussion: """
            Takes rtl_433 JSON lines (.json/.jsonl: each line's own `time` drives the tracker, so a
            recording replays with its real spacing) and OOK timelines (.ook rtl_433 pulse data,
            .vcd value change dumps: the agent's own EV1527/PT2262/rc-switch decoder, as on a GPIO
            receiver; each event names the protocol, code and time unit), and .btsnoop HCI captures
            (BTHome buttons and iBeacon regions; agentctl capture writes them). No network, no outbox.
            Without --config every decoded transmitter counts as a device.
            """)

        @Option(name: .long, help: "Config file whose devices and tracker settings to use.")
        var config: String?

        @Argument(help: "rtl_433 JSON line files (rtl_433 -F json output), .ook or .vcd timelines, .btsnoop captures.")
        var files: [String]

        func run() throws {
            let cfg = try config.map(loadConfig)
            var ook = OOKPipeline(directory: cfg.map { DeviceDirectory(devices: $0.devices) }, button: cfg?.button ?? ButtonTracker.Settings(),
                                  decoder: cfg?.ook?.decoder ?? OOKDecoder.Settings(), glitchMicros: Int64(cfg?.ook?.glitchMicros ?? 80))
            var ble = BLEPipeline(devices: cfg?.devices ?? [], regions: cfg?.regions ?? [], button: cfg?.button ?? ButtonTracker.Settings())
            ble.learnAll = cfg == nil
            var pipeline = RFPipeline(radio: "rtl433", directory: cfg.map { DeviceDirectory(devices: $0.devices) },
                                      settings: cfg?.button ?? ButtonTracker.Settings())
            let startWall = Clocks.wallMicros()
            var sequence: Int64 = 0
            var rng = SystemRandomNumberGenerator()
            var timeline = RecordingTimeline(start: 0)
            func emit(_ events: [AgentEvent], wall: Int64) {
                for event in events {
                    sequence += 1
                    let id = UUIDv7.make(unixMillis: wall / 1000, random: &rng)
                    print(String(decoding: event.body(id: id, sequence: sequence, gatewayID: cfg?.gatewayID ?? "replay",
                                                      agentVersion: AgentVersion.current), as: UTF8.self))
                }
            }
            for file in files {
                guard let bytes = readFile(file, maxBytes: 256 << 20) else {
                    printError("\(file): cannot read: \(errnoText())")
                    throw ExitCode(66)
                }
                let recording: Recording
                do { recording = try Recording.read(fileName: file, bytes: bytes) } catch {
                    printError(error.description)
                    throw ExitCode(65)
                }
                let start = timeline.place(recording)
                for input in recording.inputs {
                    switch input {
                    case let .ble(reports, at, unix):
                        let time = ReceiveTime(monoMicros: start + at, wallMicros: unix, clockSynced: true)
                        for report in reports { emit(ble.handle(report: report, at: time), wall: unix) }
                    case let .edge(high, at):
                        let time = ReceiveTime(monoMicros: start + at, wallMicros: startWall + start + at, clockSynced: true)
                        emit(ook.edge(high: high, atMicros: start + at, time: time), wall: time.wallMicros)
                    case let .quiet(at):
                        let time = ReceiveTime(monoMicros: start + at, wallMicros: startWall + start + at, clockSynced: true)
                        emit(ook.idle(atMicros: start + at, time: time), wall: time.wallMicros)
                    case let .rtl433(line, at, unix):
                        let wall = unix ?? startWall + start + at
                        emit(pipeline.handle(line: line, at: ReceiveTime(monoMicros: start + at, wallMicros: wall, clockSynced: true)), wall: wall)
                    }
                }
            }
            let c = pipeline.counters
            let b = ble.counters
            if b.reports > 0 {
                let beacons = ble.heard.values.filter { $0.kind == "ibeacon" }.map(\.identity).sorted()
                printError("replay: BLE \(b.reports) reports, \(b.bthome) BTHome, \(b.ibeacons) iBeacon (\(beacons.joined(separator: ", "))), \(b.replaysRefused) replays refused, \(b.decryptFailures) bad MICs")
            }
            let d = ook.decoder.counters
            if d.pulses > 0 {
                printError("replay: OOK \(d.pulses) pulses, \(ook.edges.counters.glitches) glitches folded, \(d.words) words, \(d.codes) confirmed, \(d.rejected) rejected stretches")
            }
            printError("replay: \(c.lines) lines, \(c.frames) frames, \(c.malformed) malformed, \(c.unmatchedFrames) from unconfigured transmitters, \(sequence) events")
        }
    }

    struct Pubkey: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print the device public key, creating the key first if there is none (factory enrollment).",
            discussion: "Prints `ed25519:<base64>`, the form the receiver and enrollment take. agentctl pubkey asks a running agent instead.")

        @Option(name: .long, help: "Config file (its paths.state_dir holds the key).")
        var config = "/etc/doorbell-agent/agent.toml"

        func run() throws {
            let cfg = try loadConfig(config)
            let log = Logger(level: .notice)
            do {
                try Agent.prepareStateDir(cfg.paths.stateDir)
                let key = try DeviceKeyStore.loadOrCreate(path: cfg.paths.deviceKeyPath, log: log)
                print("ed25519:" + DeviceKeyStore.publicKeyBase64(key.publicKey))
            } catch let error as AgentStartError {
                printError(error.description)
                throw ExitCode(error.exitCode)
            } catch {
                printError("\(error)")
                throw ExitCode(73)
            }
        }
    }

    struct EncodeOOK: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "encode-ook",
            abstract: "Write a fixed-code button press as rtl_433 pulse data (.ook) or a pin timeline (.vcd) to stdout.",
            discussion: """
            Test a decoder setup without a transmitter: rtl_433 -c board/common/rtl_433-doorbells.conf -r FILE.ook,
            or doorbell-agent replay FILE.vcd (the GPIO receiver's decoder).
            """)

        @Option(help: "24-bit code, hex (e.g. 0x5A3C91).") var code: String
        @Option(help: "Time unit T in microseconds.") var tUs = 350
        @Option(help: "Words per press.") var repeats = 20
        @Option(help: "Uniform timing jitter, ± microseconds.") var jitterUs = 30
        @Option(help: "Presses, separated by --gap-ms.") var presses = 1
        @Option(help: "Silence between presses, milliseconds.") var gapMs = 5_000
        @Option(help: "Random seed (same seed, same file).") var seed: UInt64 = 1
        @Option(help: "rc-switch protocol 1-6 (1 = EV1527/PT2262 timing).") var `protocol` = 1
        @Flag(help: "Sync after the bits, as PT2262 chips send it.") var syncLast = false
        @Flag(help: "Write a value change dump of the receiver pin (.vcd) instead of rtl_433 pulse data.") var vcd = false
        @Option(help: "With --vcd: receiver noise spikes per second of silence before and after the press (0 = clean).") var noisePerSecond = 0

        func validate() throws {
            guard let v = ConfigLoader.parseCode(code), v >= 0, v < 1 << 24 else { throw ValidationError("--code must be a 24-bit hex code like 0x5A3C91") }
            guard (50...2_000).contains(tUs) else { throw ValidationError("--t-us must be 50...2000") }
            guard (1...200).contains(repeats), (0...500).contains(jitterUs), (1...100).contains(presses) else {
                throw ValidationError("--repeats 1...200, --jitter-us 0...500, --presses 1...100")
            }
            guard (1...6).contains(`protocol`) else { throw ValidationError("--protocol must be 1...6 (rc-switch's table)") }
            guard (0...5_000).contains(noisePerSecond) else { throw ValidationError("--noise-per-second must be 0...5000") }
        }

        func run() {
            let value = UInt32(ConfigLoader.parseCode(code) ?? 0)
            var rng = SeededRandom(seed: seed)
            var encoder = EV1527Encoder(timeUnitMicros: tUs, repeats: repeats, jitterMicros: jitterUs)
            encoder.rcSwitchProtocol = `protocol`
            encoder.syncFirst = !syncLast
            var pulses: [Pulse] = []
            for i in 0..<presses {
                var press = encoder.press(code: value, random: &rng)
                // A press ends after its last bit; the next one starts after the silence.
                if i < presses - 1, let last = press.indices.last { press[last].lowMicros = gapMs * 1000 }
                pulses += press
            }
            var command = "doorbell-agent encode-ook --code \(code) --t-us \(tUs) --repeats \(repeats) --jitter-us \(jitterUs) --presses \(presses) --seed \(seed)"
            if `protocol` != 1 { command += " --protocol \(`protocol`)" }
            if syncLast { command += " --sync-last" }
            if vcd {
                if noisePerSecond > 0 { command += " --noise-per-second \(noisePerSecond)" }
                let edges = VCDTimeline.withNoise(PulseRecording.edges(pulses: pulses), spikesPerSecond: noisePerSecond, random: &rng)
                print(VCDTimeline.write(edges, comment: command + " --vcd"), terminator: "")
            } else {
                print(OOKPulseFile.write(pulses, comment: command), terminator: "")
            }
        }
    }

    struct Version: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print the version.")
        func run() { print("doorbell-agent \(AgentVersion.current)") }
    }
}
