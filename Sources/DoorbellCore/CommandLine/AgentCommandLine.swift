// doorbell-agent's subcommands as a CommandLineSpec and the typed command they parse to. Names,
// defaults and encode-ook's checks are those the ArgumentParser version had: scripts, the unit
// file and the docs call them.

/// What `doorbell-agent` was asked to do.
public enum AgentCommand: Equatable, Sendable {
    case run(config: String, logLevel: String?)
    case checkConfig(file: String)
    case replay(config: String?, files: [String])
    case pubkey(config: String)
    case encodeOOK(EncodeOOKRequest)
    case provision(ProvisionPaths)
    case version
}

/// `encode-ook`'s options, checked.
public struct EncodeOOKRequest: Equatable, Sendable {
    /// As typed (it goes into the file's comment); `codeValue` is what it says.
    public var code: String
    public var codeValue: UInt32
    public var timeUnitMicros: Int
    public var repeats: Int
    public var jitterMicros: Int
    public var presses: Int
    public var gapMillis: Int
    public var seed: UInt64
    public var rcSwitchProtocol: Int
    public var syncLast: Bool
    public var vcd: Bool
    public var noisePerSecond: Int
}

/// The parse of the agent's words: a command, or help/version/completion text to print.
public enum AgentInvocation: Equatable, Sendable {
    case command(AgentCommand)
    case help(String)
    case version(String)
    case completionScript(String)
}

public enum AgentCommandLine {
    public static let defaultConfig = "/etc/doorbell-agent/agent.toml"

    public static let spec = CommandLineSpec(
        name: "doorbell-agent",
        overview: "Doorbell base station agent: radios → presses → signed HTTPS events.",
        version: AgentVersion.current,
        commands: [
            CommandSpec("run", abstract: "Run the agent until SIGTERM or SIGINT.", options: [
                OptionSpec("config", .file, default: defaultConfig, help: "Config file."),
                OptionSpec("log-level", .text, help: "Override [log] level: debug, info, notice, warning, error.",
                           suggestions: LogLevel.allCases.map(\.rawValue)),
            ]),
            CommandSpec("check-config", abstract: "Validate a config file; exit 0 if good, 78 (EX_CONFIG) with every problem listed if not.",
                        arguments: [ArgumentSpec("file", help: "Config file.", default: defaultConfig)]),
            CommandSpec("replay", abstract: "Run recordings through the decoders and trackers; print events as JSON lines.",
                        discussion: """
                        Takes rtl_433 JSON lines (.json/.jsonl: each line's own `time` drives the
                        tracker, so a recording replays with its real spacing) and OOK timelines
                        (.ook rtl_433 pulse data, .vcd value change dumps: the agent's own
                        EV1527/PT2262/rc-switch decoder, as on a GPIO receiver; each event names the
                        protocol, code and time unit), and .btsnoop HCI captures (BTHome buttons and
                        iBeacon regions; agentctl capture writes them). No network, no outbox.
                        Without --config every decoded transmitter counts as a device.
                        """,
                        options: [OptionSpec("config", .file, help: "Config file whose devices and tracker settings to use.")],
                        arguments: [ArgumentSpec("files", help: "rtl_433 JSON line files (rtl_433 -F json output), .ook or .vcd timelines, .btsnoop captures.",
                                                 repeating: true)]),
            CommandSpec("pubkey", abstract: "Print the device public key, creating the key first if there is none (factory enrollment).",
                        discussion: "Prints `ed25519:<base64>`, the form the receiver and enrollment take. agentctl pubkey asks a running agent instead.",
                        options: [OptionSpec("config", .file, default: defaultConfig, help: "Config file (its paths.state_dir holds the key).")]),
            CommandSpec("encode-ook", abstract: "Write a fixed-code button press as rtl_433 pulse data (.ook) or a pin timeline (.vcd) to stdout.",
                        discussion: """
                        Test a decoder setup without a transmitter: rtl_433 -c
                        board/common/rtl_433-doorbells.conf -r FILE.ook, or doorbell-agent replay
                        FILE.vcd (the GPIO receiver's decoder).
                        """,
                        options: [
                            OptionSpec("code", .text, required: true, help: "24-bit code, hex (e.g. 0x5A3C91)."),
                            OptionSpec("t-us", .integer, default: "350", help: "Time unit T in microseconds."),
                            OptionSpec("repeats", .integer, default: "20", help: "Words per press."),
                            OptionSpec("jitter-us", .integer, default: "30", help: "Uniform timing jitter, ± microseconds."),
                            OptionSpec("presses", .integer, default: "1", help: "Presses, separated by --gap-ms."),
                            OptionSpec("gap-ms", .integer, default: "5000", help: "Silence between presses, milliseconds."),
                            OptionSpec("seed", .unsignedInteger, default: "1", help: "Random seed (same seed, same file)."),
                            OptionSpec("protocol", .integer, default: "1", help: "rc-switch protocol 1-6 (1 = EV1527/PT2262 timing).",
                                       suggestions: (1...6).map(String.init)),
                            OptionSpec("sync-last", .flag, help: "Sync after the bits, as PT2262 chips send it."),
                            OptionSpec("vcd", .flag, help: "Write a value change dump of the receiver pin (.vcd) instead of rtl_433 pulse data."),
                            OptionSpec("noise-per-second", .integer, default: "0",
                                       help: "With --vcd: receiver noise spikes per second of silence before and after the press (0 = clean)."),
                        ]),
            CommandSpec("provision", abstract: "First boot: take the boot partition's doorbell.toml into the config, enrol with the cloud, remove the secrets.",
                        discussion: """
                        Reads DIR/doorbell.toml (the board's agent.toml plus a [provision] table:
                        README, Provisioning), installs the agent config without [provision],
                        makes the device key, enrols with the one-time token, then rewrites the
                        boot file without the token and the Wi-Fi passphrase. Safe to run again at
                        any point. Exit 0 provisioned (or already), 75 the cloud is not reachable
                        yet (retry later), 78 the file must be fixed, 65 the cloud refused the
                        token, 73 a file could not be written.
                        """,
                        options: [
                            OptionSpec("boot-dir", .file, required: true, help: "The mounted boot partition holding doorbell.toml."),
                            OptionSpec("config-dir", .file, default: "/etc/doorbell-agent", help: "Where agent.toml goes."),
                            OptionSpec("state-dir", .file, default: "/var/lib/doorbell-agent", help: "The device key and provisioning.json."),
                            OptionSpec("authorized-keys", .file, default: "/root/.ssh/authorized_keys", help: "Where ssh_authorized_key is added."),
                            OptionSpec("wifi-dir", .file, default: "/etc/wpa_supplicant", help: "Where wpa_supplicant-wlan0.conf is written."),
                            OptionSpec("network-dir", .file, default: "/etc/systemd/network", help: "Where the systemd-networkd file for wlan0 is written."),
                        ]),
            CommandSpec("version", abstract: "Print the version."),
        ],
        defaultCommand: "run"
    )

    /// Reads the words after the program name.
    public static func parse(_ words: [String]) throws(CommandLineError) -> AgentInvocation {
        switch try spec.parse(words) {
        case let .help(command): return .help(spec.help(command: command))
        case .version: return .version(spec.version)
        case let .completionScript(shell): return .completionScript(spec.completionScript(for: shell))
        case let .command(parsed): return .command(try command(parsed))
        }
    }

    static func command(_ p: ParsedCommand) throws(CommandLineError) -> AgentCommand {
        let config = p.values["config"] ?? defaultConfig
        switch p.command {
        case "run": return .run(config: config, logLevel: p.values["log-level"])
        case "check-config": return .checkConfig(file: p.arguments["file"]?.first ?? defaultConfig)
        case "replay": return .replay(config: p.values["config"], files: p.arguments["files"] ?? [])
        case "pubkey": return .pubkey(config: config)
        case "encode-ook": return .encodeOOK(try encodeOOK(p))
        case "provision":
            return .provision(ProvisionPaths(
                bootDir: p.values["boot-dir"] ?? "", configDir: p.values["config-dir"] ?? "/etc/doorbell-agent",
                stateDir: p.values["state-dir"] ?? "/var/lib/doorbell-agent",
                authorizedKeys: p.values["authorized-keys"] ?? "/root/.ssh/authorized_keys",
                wifiDir: p.values["wifi-dir"] ?? "/etc/wpa_supplicant", networkDir: p.values["network-dir"] ?? "/etc/systemd/network"))
        default: return .version
        }
    }

    static func encodeOOK(_ p: ParsedCommand) throws(CommandLineError) -> EncodeOOKRequest {
        func invalid(_ message: String) -> CommandLineError { CommandLineError(.invalidValue, command: p.command, message) }
        let code = p.values["code"] ?? ""
        guard let value = ConfigLoader.parseCode(code), value >= 0, value < 1 << 24 else { throw invalid("--code must be a 24-bit hex code like 0x5A3C91") }
        let r = EncodeOOKRequest(
            code: code, codeValue: UInt32(value), timeUnitMicros: try p.integer("t-us"), repeats: try p.integer("repeats"),
            jitterMicros: try p.integer("jitter-us"), presses: try p.integer("presses"), gapMillis: try p.integer("gap-ms"),
            seed: try p.unsignedInteger("seed"), rcSwitchProtocol: try p.integer("protocol"), syncLast: p.flag("sync-last"),
            vcd: p.flag("vcd"), noisePerSecond: try p.integer("noise-per-second"))
        guard (50...2_000).contains(r.timeUnitMicros) else { throw invalid("--t-us must be 50...2000") }
        guard (1...200).contains(r.repeats), (0...500).contains(r.jitterMicros), (1...100).contains(r.presses) else {
            throw invalid("--repeats 1...200, --jitter-us 0...500, --presses 1...100")
        }
        guard (1...6).contains(r.rcSwitchProtocol) else { throw invalid("--protocol must be 1...6 (rc-switch's table)") }
        guard (0...5_000).contains(r.noisePerSecond) else { throw invalid("--noise-per-second must be 0...5000") }
        return r
    }
}
