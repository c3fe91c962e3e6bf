import DoorbellCore
import DoorbellRuntime
import Glibc

/// The command line is parsed by `AgentCommandLine` in the core (hand-written: see
/// CommandLineSpec.swift); here each command runs. Usage errors exit 64 (EX_USAGE).
@main
enum DoorbellAgentCommand {
    static func main() {
        let invocation: AgentInvocation
        do {
            invocation = try AgentCommandLine.parse(Array(CommandLine.arguments.dropFirst()))
        } catch {
            printError("Error: \(error.message)")
            var hint = AgentCommandLine.spec.usageHint(command: error.command)
            hint.removeLast()
            printError(hint)
            exit(64)
        }
        do {
            switch invocation {
            case let .help(text), let .completionScript(text): print(text, terminator: "")
            case let .version(version): print(version)
            case let .command(command): try run(command)
            }
        } catch {
            exit(error.code)
        }
        exit(0)
    }

    static func run(_ command: AgentCommand) throws(AgentExit) {
        switch command {
        case let .run(config, logLevel): try Run(config: config, logLevel: logLevel).run()
        case let .checkConfig(file): try CheckConfig(file: file).run()
        case let .replay(config, files): try Replay(config: config, files: files).run()
        case let .pubkey(config): try Pubkey(config: config).run()
        case let .encodeOOK(request): EncodeOOK(request: request).run()
        case let .provision(paths): try Provision(paths: paths).run()
        case .version: print("doorbell-agent \(AgentVersion.current)")
        }
    }
}

/// Ends the agent with this exit status (sysexits.h: 78 EX_CONFIG, 65 EX_DATAERR, ...), after the
/// reason was printed.
struct AgentExit: Error {
    let code: Int32
    init(_ code: Int32) { self.code = code }
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
func loadConfig(_ path: String) throws(AgentExit) -> AgentConfig {
    switch readConfig(path) {
    case let .success((config, _)): return config
    case let .failure(error):
        printError(error.description)
        throw AgentExit(78)
    }
}

/// The config, or — when it cannot be read or is invalid and a copy of the last config that
/// loaded exists — that copy, with the reason it is in use (nil when the file itself loaded).
/// A gateway keeps ringing after a power cut tore an edit; without a copy it exits 78 as before.
func loadConfigOrLastGood(_ path: String) throws(AgentExit) -> (AgentConfig, [UInt8], String?) {
    let failure: ConfigError
    switch readConfig(path) {
    case let .success((config, bytes)): return (config, bytes, nil)
    case let .failure(error): failure = error
    }
    printError(failure.description)
    guard let stateDir = LastGoodConfig.stateDirBeforeConfig(), let saved = LastGoodConfig.load(stateDir: stateDir),
          let cfg = try? ConfigLoader.parse(bytes: saved, file: path, checks: ConfigFileChecks(isReadableFile: { isReadableFile($0) })) else {
        throw AgentExit(78)
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
    struct Run {
        let config: String
        let logLevel: String?

        func run() throws(AgentExit) {
            StopSignals.block()
            let (cfg, bytes, problem) = try loadConfigOrLastGood(config)
            var level = cfg.log.level
            if let logLevel {
                guard let l = LogLevel(rawValue: logLevel) else {
                    printError("--log-level: unknown level \"\(logLevel)\"; use one of \(LogLevel.allCases.map(\.rawValue).joined(separator: ", "))")
                    throw AgentExit(64)
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
                throw AgentExit(error.exitCode)
            }
            agent.runUntilStopped(notifier: SystemdNotifier(), configPath: config)
        }
    }

    struct CheckConfig {
        let file: String

        func run() throws(AgentExit) {
            let cfg = try loadConfig(file)
            var st = stat()
            if let password = cfg.mqtt?.passwordFile, stat(password, &st) == 0,
               let warning = MQTTSettings.passwordFileWarning(path: password, mode: UInt32(st.st_mode)) {
                printError(warning)
            }
            print("\(file): OK — gateway \(cfg.gatewayID), \(cfg.devices.count) device(s), radio rtl433 \(cfg.rtl433 == nil ? "off" : "on"), radio ook \(cfg.ook.map { "on (\($0.source.rawValue))" } ?? "off"), radio ble \(cfg.ble == nil ? "off" : "on"), \(cfg.regions.count) region(s), uplink \(cfg.uplink?.url ?? "not configured")")
        }
    }

    struct Replay {
        let config: String?
        let files: [String]

        func run() throws(AgentExit) {
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
            let gatewayID = cfg?.gatewayID ?? "replay"
            let devices = cfg?.devices ?? []
            // Events are written as they come into one reused buffer, a write(2) per 64 KiB.
            var out = BufferedOutput()
            func emit(_ events: [AgentEvent], wall: Int64) {
                for e in events {
                    let event = AnswerButton.retype(e, devices: devices)  // as the running agent types it
                    sequence += 1
                    event.write(into: &out.bytes, gatewayID: gatewayID, agentVersion: AgentVersion.current, sequence: sequence) { bytes in
                        bytes.append(UInt8(ascii: "\""))
                        UUIDv7.append(unixMillis: wall / 1000, random: &rng, to: &bytes)
                        bytes.append(UInt8(ascii: "\""))
                    }
                    out.lineEnded()
                }
            }
            func fail(_ message: String, _ code: Int32) -> AgentExit {
                out.flush() // the events before the problem stay printed
                printError(message)
                return AgentExit(code)
            }
            for file in files {
                guard var reader = ChunkedFile(path: file) else { throw fail("\(file): cannot read: \(errnoText())", 66) }
                guard var chunk = reader.read() else { throw fail("\(file): cannot read: \(errnoText())", 66) }
                let start = timeline.start
                if file.lowercased().hasSuffix(".btsnoop") || chunk.starts(with: BTSnoop.magic) {
                    // A capture streams: read, decode and print as it goes, memory flat whatever its length.
                    var capture = BLECaptureReader(fileName: file)
                    while !chunk.isEmpty {
                        capture.feed(chunk)
                        do throws(Recording.Error) {
                            // In place: no array of reports, no copy of their data.
                            while try capture.nextReports({ report, at, unix in
                                let time = ReceiveTime(monoMicros: start + at, wallMicros: unix, clockSynced: true)
                                emit(ble.handle(report: report, at: time), wall: unix)
                            }) {}
                        } catch { throw fail(error.description, 65) }
                        guard let next = reader.read() else { throw fail("\(file): cannot read: \(errnoText())", 66) }
                        chunk = next
                    }
                    do throws(Recording.Error) { try capture.finish() } catch { throw fail(error.description, 65) }
                    timeline.ended(durationMicros: capture.durationMicros)
                    continue
                }
                // rtl_433 lines and OOK timelines are small: read whole, as the radios replay them.
                var bytes = Array(chunk)
                while !chunk.isEmpty, bytes.count < 256 << 20 {
                    guard let next = reader.read() else { throw fail("\(file): cannot read: \(errnoText())", 66) }
                    chunk = next
                    bytes.append(contentsOf: chunk)
                }
                let recording: Recording
                do { recording = try Recording.read(fileName: file, bytes: bytes) } catch { throw fail(error.description, 65) }
                timeline.ended(durationMicros: recording.durationMicros)
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
            out.flush()
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

    struct Pubkey {
        let config: String

        func run() throws(AgentExit) {
            let cfg = try loadConfig(config)
            let log = Logger(level: .notice)
            do {
                try Agent.prepareStateDir(cfg.paths.stateDir)
                let key = try DeviceKeyStore.loadOrCreate(path: cfg.paths.deviceKeyPath, log: log)
                print("ed25519:" + DeviceKeyStore.publicKeyBase64(key.publicKey))
            } catch let error as AgentStartError {
                printError(error.description)
                throw AgentExit(error.exitCode)
            } catch {
                printError("\(error)")
                throw AgentExit(73)
            }
        }
    }

    struct EncodeOOK {
        let request: EncodeOOKRequest

        func run() {
            let r = request
            var rng = SeededRandom(seed: r.seed)
            var encoder = EV1527Encoder(timeUnitMicros: r.timeUnitMicros, repeats: r.repeats, jitterMicros: r.jitterMicros)
            encoder.rcSwitchProtocol = r.rcSwitchProtocol
            encoder.syncFirst = !r.syncLast
            var pulses: [Pulse] = []
            for i in 0..<r.presses {
                var press = encoder.press(code: r.codeValue, random: &rng)
                // A press ends after its last bit; the next one starts after the silence.
                if i < r.presses - 1, let last = press.indices.last { press[last].lowMicros = r.gapMillis * 1000 }
                pulses += press
            }
            var command = "doorbell-agent encode-ook --code \(r.code) --t-us \(r.timeUnitMicros) --repeats \(r.repeats) --jitter-us \(r.jitterMicros) --presses \(r.presses) --seed \(r.seed)"
            if r.rcSwitchProtocol != 1 { command += " --protocol \(r.rcSwitchProtocol)" }
            if r.syncLast { command += " --sync-last" }
            if r.vcd {
                if r.noisePerSecond > 0 { command += " --noise-per-second \(r.noisePerSecond)" }
                let edges = VCDTimeline.withNoise(PulseRecording.edges(pulses: pulses), spikesPerSecond: r.noisePerSecond, random: &rng)
                print(VCDTimeline.write(edges, comment: command + " --vcd"), terminator: "")
            } else {
                print(OOKPulseFile.write(pulses, comment: command), terminator: "")
            }
        }
    }
}
