// A command line read by hand rather than with swift-argument-parser: on Linux that package pulls
// FoundationEssentials and swift-collections into the static agent (≈ 3 MiB on every gateway, and
// one dependency) for six subcommands and a dozen options. One value describes the commands; the
// same value parses, writes the help (ArgumentParser's layout: make-deb.sh's help2man reads it)
// and the shell completions, so none of them drift from the parser.

/// A program's subcommands, their options and arguments, and the texts shown about them.
public struct CommandLineSpec: Sendable {
    public var name: String
    public var overview: String
    public var version: String
    public var commands: [CommandSpec]
    /// Runs when the first word is not a subcommand: `doorbell-agent --config X` is `run`.
    public var defaultCommand: String?

    public init(name: String, overview: String, version: String, commands: [CommandSpec], defaultCommand: String? = nil) {
        self.name = name
        self.overview = overview
        self.version = version
        self.commands = commands
        self.defaultCommand = defaultCommand
    }

    public func command(named name: String) -> CommandSpec? { commands.first { $0.name == name } }
}

public struct CommandSpec: Sendable {
    public var name: String
    public var abstract: String
    /// Paragraphs separated by a blank line; lines within one are joined and wrapped again.
    public var discussion: String
    public var options: [OptionSpec]
    public var arguments: [ArgumentSpec]

    public init(_ name: String, abstract: String, discussion: String = "", options: [OptionSpec] = [], arguments: [ArgumentSpec] = []) {
        self.name = name
        self.abstract = abstract
        self.discussion = discussion
        self.options = options
        self.arguments = arguments
    }
}

/// A long option: `--name value`, `--name=value`, or a flag `--name`.
public struct OptionSpec: Sendable {
    public enum Kind: Sendable, Equatable {
        case flag, text, file, integer, unsignedInteger
    }

    public var name: String
    public var kind: Kind
    public var defaultValue: String?
    public var isRequired: Bool
    public var help: String
    /// Words the shell completions offer for the value; the parser does not restrict them.
    public var suggestions: [String]

    public init(_ name: String, _ kind: Kind, default defaultValue: String? = nil, required: Bool = false, help: String, suggestions: [String] = []) {
        self.name = name
        self.kind = kind
        self.defaultValue = defaultValue
        self.isRequired = required
        self.help = help
        self.suggestions = suggestions
    }

    public var takesValue: Bool { kind != .flag }
}

/// A positional argument; a repeating one takes every remaining word and must be last.
public struct ArgumentSpec: Sendable {
    public var name: String
    public var help: String
    public var defaultValue: String?
    public var isRepeating: Bool
    public var isFile: Bool

    public init(_ name: String, help: String, default defaultValue: String? = nil, repeating: Bool = false, file: Bool = true) {
        self.name = name
        self.help = help
        self.defaultValue = defaultValue
        self.isRepeating = repeating
        self.isFile = file
    }
}

public enum CompletionShell: String, Sendable, CaseIterable {
    case bash, zsh, fish
}

/// What the words asked for.
public enum CommandLineRequest: Equatable, Sendable {
    case command(ParsedCommand)
    /// Help of one subcommand, or of the program (nil).
    case help(command: String?)
    case version
    case completionScript(CompletionShell)
}

/// One subcommand with every option and argument filled in (given, or the spec's default).
public struct ParsedCommand: Equatable, Sendable {
    public var command: String
    /// Value options by name; an option with neither value nor default is absent.
    public var values: [String: String]
    public var flags: Set<String>
    /// Positional arguments by name; one without a value or default is absent.
    public var arguments: [String: [String]]

    public init(command: String, values: [String: String] = [:], flags: Set<String> = [], arguments: [String: [String]] = [:]) {
        self.command = command
        self.values = values
        self.flags = flags
        self.arguments = arguments
    }

    public func flag(_ name: String) -> Bool { flags.contains(name) }

    /// An integer option's value; the parser has checked it is one.
    public func integer(_ name: String) throws(CommandLineError) -> Int {
        guard let text = values[name], let value = Int(text) else {
            throw CommandLineError(.missingOption, command: command, "missing value for '--\(name)'")
        }
        return value
    }

    public func unsignedInteger(_ name: String) throws(CommandLineError) -> UInt64 {
        guard let text = values[name], let value = UInt64(text) else {
            throw CommandLineError(.missingOption, command: command, "missing value for '--\(name)'")
        }
        return value
    }
}

/// A usage error (exit 64, EX_USAGE); the message says what would work.
public struct CommandLineError: Error, Equatable, Sendable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        case unknownOption, unknownSubcommand, missingValue, missingOption, missingArgument
        case unexpectedArgument, invalidValue, flagWithValue
    }

    public var kind: Kind
    /// The subcommand whose usage the hint shows; nil for the program's.
    public var command: String?
    public var message: String

    public init(_ kind: Kind, command: String?, _ message: String) {
        self.kind = kind
        self.command = command
        self.message = message
    }

    public var description: String { message }
}

extension CommandLineSpec {
    /// Reads the words after the program name.
    public func parse(_ words: [String]) throws(CommandLineError) -> CommandLineRequest {
        var rest = words[...]
        if rest.first == "help" {
            rest.removeFirst()
            guard let word = rest.first else { return .help(command: nil) }
            guard let named = command(named: word) else { throw unknownSubcommand(word) }
            return .help(command: named.name)
        }
        if let first = rest.first, first == "--generate-completion-script" || first.hasPrefix("--generate-completion-script=") {
            return try completionRequest(rest)
        }
        var named: CommandSpec?
        if let first = rest.first, let c = command(named: first) {
            named = c
            rest.removeFirst()
        }
        // Help and version win over everything else, as in ArgumentParser.
        for word in rest.prefix(while: { $0 != "--" }) {
            if word == "--help" || word == "-h" { return .help(command: named?.name) }
            if word == "--version" { return .version }
        }
        guard let spec = named ?? defaultCommand.flatMap(command(named:)) else {
            guard let word = rest.first else {
                throw CommandLineError(.missingArgument, command: nil, "missing subcommand; use one of \(commands.map(\.name).joined(separator: ", "))")
            }
            throw unknownSubcommand(word)
        }
        return .command(try parse(rest, as: spec, named: named != nil))
    }

    private func parse(_ words: ArraySlice<String>, as spec: CommandSpec, named: Bool) throws(CommandLineError) -> ParsedCommand {
        var parsed = ParsedCommand(command: spec.name)
        var positionals: [String] = []
        var onlyPositionals = false
        var i = words.startIndex
        while i < words.endIndex {
            let word = words[i]
            i += 1
            if onlyPositionals || word == "-" || !word.hasPrefix("-") {
                positionals.append(word)
                continue
            }
            if word == "--" {
                onlyPositionals = true
                continue
            }
            let body = word.dropFirst(word.hasPrefix("--") ? 2 : 1)
            let name = String(body.prefix { $0 != "=" })
            let inline = body.firstIndex(of: "=").map { String(body[body.index(after: $0)...]) }
            guard word.hasPrefix("--"), let option = spec.options.first(where: { $0.name == name }) else {
                throw unknownOption(word, name: name, in: spec)
            }
            guard option.takesValue else {
                if inline != nil {
                    throw CommandLineError(.flagWithValue, command: spec.name, "'--\(name)' is a flag and takes no value; write '--\(name)' alone")
                }
                parsed.flags.insert(name)
                continue
            }
            let value: String
            if let inline {
                value = inline
            } else if i < words.endIndex, !(words[i].hasPrefix("-") && words[i].count > 1) {
                value = words[i]
                i += 1
            } else {
                throw CommandLineError(.missingValue, command: spec.name, "missing value for '\(label(option))'; write e.g. '--\(name) \(example(option))'")
            }
            try check(value, for: option, in: spec)
            parsed.values[name] = value
        }
        if !named, !positionals.isEmpty, spec.arguments.isEmpty {
            throw unknownSubcommand(positionals[0])
        }
        for option in spec.options where option.takesValue && parsed.values[option.name] == nil {
            if let d = option.defaultValue {
                parsed.values[option.name] = d
            } else if option.isRequired {
                throw CommandLineError(.missingOption, command: spec.name, "missing '\(label(option))': \(option.help)")
            }
        }
        var remaining = positionals[...]
        for argument in spec.arguments {
            if argument.isRepeating {
                parsed.arguments[argument.name] = Array(remaining)
                remaining = []
            } else if let word = remaining.popFirst() {
                parsed.arguments[argument.name] = [word]
            }
            if parsed.arguments[argument.name, default: []].isEmpty {
                parsed.arguments[argument.name] = nil
                if let d = argument.defaultValue {
                    parsed.arguments[argument.name] = [d]
                } else {
                    throw CommandLineError(.missingArgument, command: spec.name, "missing '<\(argument.name)>\(argument.isRepeating ? " ..." : "")': \(argument.help)")
                }
            }
        }
        if let extra = remaining.first {
            let takes = spec.arguments.isEmpty ? "no arguments" : "only " + spec.arguments.map { "<\($0.name)>" }.joined(separator: " ")
            throw CommandLineError(.unexpectedArgument, command: spec.name, "unexpected argument '\(extra)'; \(spec.name) takes \(takes)")
        }
        return parsed
    }

    private func check(_ value: String, for option: OptionSpec, in spec: CommandSpec) throws(CommandLineError) {
        let ok: Bool
        switch option.kind {
        case .integer: ok = Int(value) != nil
        case .unsignedInteger: ok = UInt64(value) != nil
        case .flag, .text, .file: ok = true
        }
        if !ok {
            let what = option.kind == .integer ? "a whole number" : "a whole number ≥ 0"
            throw CommandLineError(.invalidValue, command: spec.name, "the value '\(value)' is invalid for '\(label(option))': expected \(what), e.g. '--\(option.name) \(example(option))'")
        }
    }

    private func completionRequest(_ words: ArraySlice<String>) throws(CommandLineError) -> CommandLineRequest {
        let first = words[words.startIndex]
        let value = first.firstIndex(of: "=").map { String(first[first.index(after: $0)...]) }
            ?? words.dropFirst().first
        let shells = CompletionShell.allCases.map(\.rawValue).joined(separator: ", ")
        guard let value else {
            throw CommandLineError(.missingValue, command: nil, "missing value for '--generate-completion-script <shell>'; use one of \(shells)")
        }
        guard let shell = CompletionShell(rawValue: value) else {
            throw CommandLineError(.invalidValue, command: nil, "unknown shell '\(value)' for '--generate-completion-script'; use one of \(shells)")
        }
        return .completionScript(shell)
    }

    private func unknownSubcommand(_ word: String) -> CommandLineError {
        let names = commands.map(\.name)
        let hint = closest(to: word, in: names).map { "did you mean '\($0)'?" } ?? "use one of \(names.joined(separator: ", "))"
        return CommandLineError(.unknownSubcommand, command: nil, "unknown subcommand '\(word)'; \(hint)")
    }

    private func unknownOption(_ word: String, name: String, in spec: CommandSpec) -> CommandLineError {
        let names = spec.options.map(\.name) + ["help", "version"]
        var message = "unknown option '\(word.prefix { $0 != "=" })' for \(spec.name)"
        if let guess = closest(to: name, in: names) {
            message += "; did you mean '--\(guess)'?"
        } else if let owner = commands.first(where: { c in c.options.contains { $0.name == name } }) {
            message += "; it is an option of '\(self.name) \(owner.name)'"
        } else {
            message += spec.options.isEmpty ? "; \(spec.name) takes none but --help"
                : "; its options: " + spec.options.map { "--" + $0.name }.joined(separator: ", ")
        }
        return CommandLineError(.unknownOption, command: spec.name, message)
    }

    func label(_ option: OptionSpec) -> String {
        option.takesValue ? "--\(option.name) <\(option.name)>" : "--\(option.name)"
    }

    private func example(_ option: OptionSpec) -> String {
        if let d = option.defaultValue { return d }
        switch option.kind {
        case .integer, .unsignedInteger: return "1"
        case .file: return "FILE"
        case .flag, .text: return option.suggestions.first ?? "VALUE"
        }
    }

    /// `doorbell-agent encode-ook --code <code> [--t-us <t-us>] ... [--vcd]`
    public func usage(of spec: CommandSpec) -> String {
        var parts = [name, spec.name]
        for option in spec.options {
            parts.append(option.isRequired && option.defaultValue == nil ? label(option) : "[\(label(option))]")
        }
        for argument in spec.arguments {
            let word = "<\(argument.name)>" + (argument.isRepeating ? " ..." : "")
            parts.append(argument.defaultValue == nil ? word : "[\(word)]")
        }
        return parts.joined(separator: " ")
    }
}
