@testable import DoorbellCore
import PropertyBased
import Testing

/// doorbell-agent's command line: every subcommand's forms and defaults as the ArgumentParser
/// version read them, usage errors that say what would work, and the help layout help2man reads.
@Suite struct AgentCommandLineTests {
    static func command(_ words: [String]) throws -> AgentCommand {
        guard case let .command(c) = try AgentCommandLine.parse(words) else {
            Issue.record("\(words) did not parse to a command")
            return .version
        }
        return c
    }

    static func error(_ words: [String]) -> CommandLineError? {
        do {
            _ = try AgentCommandLine.parse(words)
            return nil
        } catch {
            return error
        }
    }

    static let defaultEncode = EncodeOOKRequest(
        code: "0x5A3C91", codeValue: 0x5A3C91, timeUnitMicros: 350, repeats: 20, jitterMicros: 30, presses: 1,
        gapMillis: 5_000, seed: 1, rcSwitchProtocol: 1, syncLast: false, vcd: false, noisePerSecond: 0)

    @Test func runIsTheDefaultSubcommand() throws {
        let conf = "/etc/doorbell-agent/agent.toml"
        #expect(try Self.command([]) == .run(config: conf, logLevel: nil))
        #expect(try Self.command(["--config", "x.toml"]) == .run(config: "x.toml", logLevel: nil))
        #expect(try Self.command(["run", "--config", "x.toml", "--log-level", "debug"]) == .run(config: "x.toml", logLevel: "debug"))
        #expect(try Self.command(["run", "--config=x.toml", "--log-level=nonsense"]) == .run(config: "x.toml", logLevel: "nonsense"))
        // The last of a repeated option wins, as in ArgumentParser.
        #expect(try Self.command(["--config", "a", "--config", "b"]) == .run(config: "b", logLevel: nil))
    }

    @Test func checkConfigTakesAnOptionalFile() throws {
        #expect(try Self.command(["check-config"]) == .checkConfig(file: "/etc/doorbell-agent/agent.toml"))
        #expect(try Self.command(["check-config", "board/sim/agent.toml"]) == .checkConfig(file: "board/sim/agent.toml"))
        #expect(try Self.command(["check-config", "--", "-odd.toml"]) == .checkConfig(file: "-odd.toml"))
        #expect(Self.error(["check-config", "a", "b"])?.kind == .unexpectedArgument)
    }

    @Test func replayTakesFilesAndAnOptionalConfig() throws {
        #expect(try Self.command(["replay", "a.ook"]) == .replay(config: nil, files: ["a.ook"]))
        #expect(try Self.command(["replay", "a.ook", "--config", "c.toml", "b.vcd"]) == .replay(config: "c.toml", files: ["a.ook", "b.vcd"]))
        #expect(try Self.command(["replay", "--config=c.toml", "-", "b.vcd"]) == .replay(config: "c.toml", files: ["-", "b.vcd"]))
        let missing = Self.error(["replay", "--config", "c.toml"])
        #expect(missing?.kind == .missingArgument)
        #expect(missing?.message.hasPrefix("missing '<files> ...'") == true)
    }

    @Test func pubkeyAndVersion() throws {
        #expect(try Self.command(["pubkey"]) == .pubkey(config: "/etc/doorbell-agent/agent.toml"))
        #expect(try Self.command(["pubkey", "--config", "c.toml"]) == .pubkey(config: "c.toml"))
        #expect(try Self.command(["version"]) == .version)
        #expect(try AgentCommandLine.parse(["--version"]) == .version("0.1.0"))
        #expect(try AgentCommandLine.parse(["encode-ook", "--version"]) == .version("0.1.0"))
    }

    @Test func encodeOOKDefaultsAndEveryOption() throws {
        #expect(try Self.command(["encode-ook", "--code", "0x5A3C91"]) == .encodeOOK(Self.defaultEncode))
        var all = Self.defaultEncode
        all.code = "0F3C55"
        all.codeValue = 0x0F3C55
        (all.timeUnitMicros, all.repeats, all.jitterMicros, all.presses, all.gapMillis) = (260, 12, 0, 3, 100)
        (all.seed, all.rcSwitchProtocol, all.syncLast, all.vcd, all.noisePerSecond) = (18_446_744_073_709_551_615, 6, true, true, 400)
        #expect(try Self.command([
            "encode-ook", "--code", "0F3C55", "--t-us", "260", "--repeats=12", "--jitter-us", "0", "--presses", "3", "--gap-ms", "100",
            "--seed", "18446744073709551615", "--protocol", "6", "--sync-last", "--vcd", "--noise-per-second=400",
        ]) == .encodeOOK(all))
    }

    /// encode-ook's checks, with the messages the ArgumentParser version's validate() gave.
    @Test func encodeOOKChecks() {
        let cases: [([String], String)] = [
            (["--code", "zz"], "--code must be a 24-bit hex code like 0x5A3C91"),
            (["--code", "0x1000000"], "--code must be a 24-bit hex code like 0x5A3C91"),
            (["--code", "1", "--t-us", "49"], "--t-us must be 50...2000"),
            (["--code", "1", "--t-us", "2001"], "--t-us must be 50...2000"),
            (["--code", "1", "--repeats", "0"], "--repeats 1...200, --jitter-us 0...500, --presses 1...100"),
            (["--code", "1", "--jitter-us", "501"], "--repeats 1...200, --jitter-us 0...500, --presses 1...100"),
            (["--code", "1", "--presses", "101"], "--repeats 1...200, --jitter-us 0...500, --presses 1...100"),
            (["--code", "1", "--protocol", "7"], "--protocol must be 1...6 (rc-switch's table)"),
            (["--code", "1", "--noise-per-second", "5001"], "--noise-per-second must be 0...5000"),
        ]
        for (words, message) in cases {
            let e = Self.error(["encode-ook"] + words)
            #expect(e == CommandLineError(.invalidValue, command: "encode-ook", message), "\(words)")
        }
    }

    @Test func usageErrorsSayWhatWouldWork() {
        let cases: [([String], CommandLineError.Kind, String?, String)] = [
            (["encode-ook"], .missingOption, "encode-ook", "missing '--code <code>': 24-bit code, hex (e.g. 0x5A3C91)."),
            (["encode-ook", "--code", "1", "--t-us", "abc"], .invalidValue, "encode-ook",
             "the value 'abc' is invalid for '--t-us <t-us>': expected a whole number, e.g. '--t-us 350'"),
            (["encode-ook", "--code", "1", "--seed", "-1"], .missingValue, "encode-ook",
             "missing value for '--seed <seed>'; write e.g. '--seed 1'"),
            (["encode-ook", "--code", "1", "--seed=-1"], .invalidValue, "encode-ook",
             "the value '-1' is invalid for '--seed <seed>': expected a whole number ≥ 0, e.g. '--seed 1'"),
            (["encode-ook", "--code", "1", "--vcd=yes"], .flagWithValue, "encode-ook", "'--vcd' is a flag and takes no value; write '--vcd' alone"),
            (["run", "--config"], .missingValue, "run", "missing value for '--config <config>'; write e.g. '--config /etc/doorbell-agent/agent.toml'"),
            (["--confg", "x"], .unknownOption, "run", "unknown option '--confg' for run; did you mean '--config'?"),
            (["check-config", "--code=1"], .unknownOption, "check-config", "unknown option '--code' for check-config; it is an option of 'doorbell-agent encode-ook'"),
            (["run", "-v"], .unknownOption, "run", "unknown option '-v' for run; its options: --config, --log-level"),
            (["version", "--json"], .unknownOption, "version", "unknown option '--json' for version; version takes none but --help"),
            (["chek-config"], .unknownSubcommand, nil, "unknown subcommand 'chek-config'; did you mean 'check-config'?"),
            (["frobnicate"], .unknownSubcommand, nil,
             "unknown subcommand 'frobnicate'; use one of run, check-config, replay, pubkey, encode-ook, provision, version"),
            (["help", "nope"], .unknownSubcommand, nil, "unknown subcommand 'nope'; use one of run, check-config, replay, pubkey, encode-ook, provision, version"),
            (["version", "extra"], .unexpectedArgument, "version", "unexpected argument 'extra'; version takes no arguments"),
            (["--generate-completion-script", "tcsh"], .invalidValue, nil, "unknown shell 'tcsh' for '--generate-completion-script'; use one of bash, zsh, fish"),
        ]
        for (words, kind, command, message) in cases {
            #expect(Self.error(words) == CommandLineError(kind, command: command, message), "\(words)")
        }
    }

    @Test func helpAndCompletionRequests() throws {
        let spec = AgentCommandLine.spec
        #expect(try AgentCommandLine.parse(["--help"]) == .help(spec.help(command: nil)))
        #expect(try AgentCommandLine.parse(["-h"]) == .help(spec.help(command: nil)))
        #expect(try AgentCommandLine.parse(["help"]) == .help(spec.help(command: nil)))
        #expect(try spec.parse(["help", "replay"]) == .help(command: "replay"))
        #expect(try spec.parse(["replay", "--help"]) == .help(command: "replay"))
        #expect(try spec.parse(["encode-ook", "--code", "bad", "-h"]) == .help(command: "encode-ook"))
        #expect(try spec.parse(["--generate-completion-script", "zsh"]) == .completionScript(.zsh))
        #expect(try spec.parse(["--generate-completion-script=fish"]) == .completionScript(.fish))
    }

    /// The layout make-deb.sh and help2man read: OVERVIEW first, then USAGE, OPTIONS, SUBCOMMANDS.
    @Test func programHelpGolden() throws {
        try Golden.check(AgentCommandLine.spec.help(command: nil), against: "cli-help.golden.txt")
    }

    @Test func subcommandHelpGolden() throws {
        let spec = AgentCommandLine.spec
        try Golden.check(spec.help(command: "encode-ook") + "\n" + spec.help(command: "check-config"), against: "cli-help-encode-ook.golden.txt")
        #expect(spec.usageHint(command: "run") == "Usage: doorbell-agent run [--config <config>] [--log-level <log-level>]\n  See 'doorbell-agent run --help' for more information.\n")
    }

    @Test func helpLinesFitEightyColumns() {
        let spec = AgentCommandLine.spec
        for name in [nil] + spec.commands.map(\.name) {
            for line in spec.help(command: name).split(separator: "\n") where !line.hasPrefix("USAGE:") {
                #expect(line.count <= 80, "\(line)")
            }
        }
    }

    /// Completions come from the spec: every subcommand and option is in each script.
    @Test func completionScriptsNameEverySubcommandAndOption() {
        let spec = AgentCommandLine.spec
        for shell in CompletionShell.allCases {
            let script = spec.completionScript(for: shell)
            for c in spec.commands {
                #expect(script.contains(c.name), "\(shell): \(c.name)")
                for o in c.options {
                    #expect(script.contains(shell == .fish ? "-l \(o.name)" : "--\(o.name)"), "\(shell): --\(o.name)")
                }
            }
        }
        #expect(spec.completionScript(for: .bash).contains("--config) COMPREPLY=($(compgen -f -- \"$cur\"))"))
        #expect(spec.completionScript(for: .zsh).hasPrefix("#compdef doorbell-agent\n"))
        #expect(spec.completionScript(for: .fish).contains("-n '__fish_seen_subcommand_from run' -l config -r -F"))
    }

    /// encode-ook's options in any order, each as `--x y` or `--x=y`, parse to the same request.
    @Test func anyOrderAndFormOfOptionsParsesTheSame() async {
        await propertyCheck(input: Gen.int(in: 0...1_000_000).array(of: 24...24)) { picks in
            var expected = Self.defaultEncode
            expected.timeUnitMicros = 50 + picks[0] % 1_951
            expected.repeats = 1 + picks[1] % 200
            expected.jitterMicros = picks[2] % 501
            expected.presses = 1 + picks[3] % 100
            expected.gapMillis = picks[4]
            expected.seed = UInt64(picks[5])
            expected.rcSwitchProtocol = 1 + picks[6] % 6
            expected.syncLast = picks[7] % 2 == 0
            expected.vcd = picks[8] % 2 == 0
            expected.noisePerSecond = picks[9] % 5_001
            var options: [(String, String?)] = [
                ("code", "0x5A3C91"), ("t-us", "\(expected.timeUnitMicros)"), ("repeats", "\(expected.repeats)"),
                ("jitter-us", "\(expected.jitterMicros)"), ("presses", "\(expected.presses)"), ("gap-ms", "\(expected.gapMillis)"),
                ("seed", "\(expected.seed)"), ("protocol", "\(expected.rcSwitchProtocol)"), ("noise-per-second", "\(expected.noisePerSecond)"),
            ]
            if expected.syncLast { options.append(("sync-last", nil)) }
            if expected.vcd { options.append(("vcd", nil)) }
            let order = options.indices.sorted { (picks[10 + $0], $0) < (picks[10 + $1], $1) }
            var words = ["encode-ook"]
            for (k, i) in order.enumerated() {
                let (name, value) = options[i]
                if let value {
                    words += picks[23] >> (k % 16) & 1 == 0 ? ["--\(name)", value] : ["--\(name)=\(value)"]
                } else {
                    words.append("--\(name)")
                }
            }
            #expect((try? Self.command(words)) == .encodeOOK(expected), "\(words)")
        }
    }
}
