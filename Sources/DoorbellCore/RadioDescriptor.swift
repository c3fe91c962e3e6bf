// The radio plug-in model, as agent.toml sees it. A radio declares its `[radio.<name>]` options
// once — type, default, range or choices, help, the `source`/`transport` they belong to — and
// the loader, its "did you mean", and the README's configuration table (through
// `ConfigReference`) are all made from that declaration. Shaped like `BLEDecoderDescriptor`.
// Adding a radio: a settings type conforming to `Radio` (its descriptor and its reader, one file
// in Sources/DoorbellCore/Radios) and one line in `RadioRegistry.all`.

/// One choice of a `choice` option, with what it means when the loader has to say.
public struct RadioChoice: Sendable, Equatable {
    public var value: String
    /// Said after the value when a wrong one is refused: `"raw" (shared with bluetoothd, …)`.
    public var meaning: String
    public init(_ value: String, meaning: String = "") {
        self.value = value
        self.meaning = meaning
    }
}

/// What an option's value is, with its default where it has one.
public enum RadioOptionType: Sendable, Equatable {
    case bool(default: Bool)
    case int(ClosedRange<Int>, default: Int?)
    case string(default: String?)
    case path
    case choice([RadioChoice], default: String?)
    case strings(default: [String]?)
    case paths(default: [String]?)
    case ints(default: [Int]?)
}

public struct RadioOption: Sendable, Equatable {
    public var key: String
    public var type: RadioOptionType
    /// Required whenever it applies (`appliesTo`).
    public var required: Bool
    /// The `source`/`transport` values it is read for; empty: all of them.
    public var appliesTo: [String]
    /// The meaning, as the README's table says it.
    public var help: String

    public init(_ key: String, _ type: RadioOptionType, required: Bool = false, for appliesTo: [String] = [], help: String) {
        self.key = key
        self.type = type
        self.required = required
        self.appliesTo = appliesTo
        self.help = help
    }

    public func applies(to selected: String?) -> Bool {
        appliesTo.isEmpty || selected.map(appliesTo.contains) ?? true
    }
}

public struct RadioDescriptor: Sendable, Equatable {
    /// The section's name, `[radio.<name>]`, and what `[[device]] radio` says.
    public var name: String
    public var summary: String
    /// The key whose value picks the other keys that apply (`source`, `transport`), if any.
    public var discriminator: String?
    /// In the README's order.
    public var options: [RadioOption]
    /// What it counts, in `agentctl status`'s order: the status JSON, the table and the
    /// Prometheus file are rendered from these (`AgentStatusReport`).
    public var counters: [RadioCounterSpec]

    public init(name: String, summary: String, discriminator: String? = nil, options: [RadioOption], counters: [RadioCounterSpec] = []) {
        self.name = name
        self.summary = summary
        self.discriminator = discriminator
        self.options = options
        self.counters = counters
    }

    public func option(_ key: String) -> RadioOption? { options.first { $0.key == key } }

    /// The declared help of a key ("" for a key it does not declare).
    public func help(for key: String) -> String { option(key)?.help ?? "" }

    /// Its rows of the configuration reference.
    public var rows: [ConfigReference.Row] {
        options.map { o in
            ConfigReference.Row(key: "`[radio.\(name)] \(o.key)`", type: o.typeText, defaultValue: o.defaultText, meaning: o.help)
        }
    }
}

extension RadioOption {
    /// The README's type column: "int 100–60000", "`user`, `raw` (hci)", "`gpio`, …, required".
    var typeText: String {
        var text: String
        switch type {
        case .bool: text = "bool"
        case let .int(range, _): text = "int \(range.lowerBound)–\(range.upperBound)"
        case .string: text = "string"
        case .path: text = "path"
        case let .choice(choices, _): text = choices.map { "`\($0.value)`" }.joined(separator: ", ")
        case .strings: text = "string array"
        case .paths: text = "path array"
        case .ints: text = "int array"
        }
        if required { text += ", required" }
        if !appliesTo.isEmpty { text += " (\(appliesTo.joined(separator: ", ")))" }
        return text
    }

    var defaultText: String {
        switch type {
        case let .bool(d): "`\(d)`"
        case let .int(_, d): d.map(String.init) ?? ""
        case let .string(d), let .choice(_, d): d.map { "`\($0)`" } ?? ""
        case .path: ""
        case let .strings(d), let .paths(d): d.map { "`[\($0.map { "\"\($0)\"" }.joined(separator: ","))]`" } ?? ""
        case let .ints(d): d.map { "`[\($0.map(String.init).joined(separator: ","))]`" } ?? ""
        }
    }
}

/// A radio the agent can run, as agent.toml sees it: its declared options, how its section is
/// read, and where the settings land in `AgentConfig`.
protocol Radio: Sendable {
    static var descriptor: RadioDescriptor { get }
    static var slot: WritableKeyPath<AgentConfig, Self?> { get }
    /// Reads the section; nil when it cannot be used (the issues are reported in `section`).
    /// `enabled` and the unknown keys are the loader's.
    static func read(_ section: RadioSection, baseDir: String, checks: ConfigFileChecks) -> Self?
}

public enum RadioRegistry {
    /// In the order devices default to (`[[device]] radio`: the first one configured).
    static let all: [any Radio.Type] = [
        RTL433Settings.self,
        OOKRadioSettings.self,
        BLERadioSettings.self,
    ]

    public static let descriptors: [RadioDescriptor] = all.map { $0.descriptor }
    public static let names: [String] = descriptors.map(\.name)
}
