// The help texts of a CommandLineSpec, in swift-argument-parser's layout (OVERVIEW:, USAGE:,
// ARGUMENTS:, OPTIONS:, SUBCOMMANDS:): make-deb.sh takes the first line's OVERVIEW text as the man
// page's name and help2man turns the rest into the man page.

extension CommandLineSpec {
    static let width = 80
    static let column = 26

    /// The program's help (nil) or one subcommand's.
    public func help(command: String?) -> String {
        guard let command, let spec = self.command(named: command) else { return programHelp() }
        var lines = Self.wrap("OVERVIEW: " + spec.abstract, indent: 0)
        for paragraph in Self.paragraphs(spec.discussion) {
            lines += [""] + Self.wrap(paragraph, indent: 0)
        }
        lines += ["", "USAGE: " + usage(of: spec)]
        if !spec.arguments.isEmpty {
            lines += ["", "ARGUMENTS:"]
            for a in spec.arguments {
                lines += Self.row("<\(a.name)>", a.help + (a.defaultValue.map { " (default: \($0))" } ?? ""))
            }
        }
        lines += ["", "OPTIONS:"]
        for o in spec.options {
            lines += Self.row(label(o), o.help + (o.takesValue ? o.defaultValue.map { " (default: \($0))" } ?? "" : ""))
        }
        lines += Self.builtInRows
        return lines.joined(separator: "\n") + "\n"
    }

    private func programHelp() -> String {
        var lines = Self.wrap("OVERVIEW: " + overview, indent: 0)
        lines += ["", "USAGE: \(name) <subcommand>", "", "OPTIONS:"] + Self.builtInRows
        lines += ["", "SUBCOMMANDS:"]
        for c in commands {
            lines += Self.row(c.name + (c.name == defaultCommand ? " (default)" : ""), c.abstract)
        }
        lines += ["", "  See '\(name) help <subcommand>' for detailed help."]
        return lines.joined(separator: "\n") + "\n"
    }

    /// The lines after "Error: message" on a usage error.
    public func usageHint(command: String?) -> String {
        guard let command, let spec = self.command(named: command) else {
            return "Usage: \(name) <subcommand>\n  See '\(name) --help' for more information.\n"
        }
        return "Usage: \(usage(of: spec))\n  See '\(name) \(spec.name) --help' for more information.\n"
    }

    private static let builtInRows = row("--version", "Show the version.") + row("-h, --help", "Show help information.")

    /// A label at column 2 and its text at `column`, wrapped; a label too wide for its column
    /// puts the text on the next line.
    static func row(_ label: String, _ text: String) -> [String] {
        let head = "  " + label
        let body = wrap(text, indent: column)
        guard head.count < column, let first = body.first else { return [head] + body }
        // Built in steps: Swift 6.2's type checker gives up on this as one expression.
        let padded = head + String(repeating: " ", count: column - head.count) + String(first.dropFirst(column))
        return [padded] + Array(body.dropFirst())
    }

    static func wrap(_ text: String, indent: Int) -> [String] {
        let pad = String(repeating: " ", count: indent)
        var lines: [String] = []
        var line = ""
        for word in text.split(separator: " ") {
            if !line.isEmpty, indent + line.count + 1 + word.count > width {
                lines.append(pad + line)
                line = ""
            }
            line += (line.isEmpty ? "" : " ") + word
        }
        if !line.isEmpty { lines.append(pad + line) }
        return lines
    }

    /// Paragraphs of a discussion, each joined into one line.
    static func paragraphs(_ text: String) -> [String] {
        var result: [String] = []
        var current: [Substring] = []
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.allSatisfy({ $0 == " " }) {
                if !current.isEmpty { result.append(current.joined(separator: " ")) }
                current = []
            } else {
                current.append(line)
            }
        }
        if !current.isEmpty { result.append(current.joined(separator: " ")) }
        return result
    }
}
