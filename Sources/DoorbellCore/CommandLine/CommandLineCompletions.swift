// Shell completion scripts made from the same CommandLineSpec the parser reads: subcommands,
// their options, suggested values, and files where an option or argument is a path. The program
// without a subcommand also offers its default subcommand's options (`doorbell-agent --config`).

extension CommandLineSpec {
    public func completionScript(for shell: CompletionShell) -> String {
        switch shell {
        case .bash: bashCompletion()
        case .zsh: zshCompletion()
        case .fish: fishCompletion()
        }
    }

    private var functionName: String { "_" + Self.identifier(name) }

    /// A shell function name part: `encode-ook` → `encode_ook`.
    private static func identifier(_ word: String) -> String {
        String(word.map { $0.isLetter || $0.isNumber ? $0 : "_" })
    }

    private var defaultSpec: CommandSpec? { defaultCommand.flatMap(command(named:)) }

    // MARK: bash

    private func bashCompletion() -> String {
        let f = functionName
        let names = commands.map(\.name).joined(separator: " ")
        var s = """
        #!/bin/bash

        \(f)() {
            local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}" sub="" i
            for ((i = 1; i < COMP_CWORD; i++)); do
                case "${COMP_WORDS[i]}" in
                    \(commands.map(\.name).joined(separator: "|"))|help) sub="${COMP_WORDS[i]}"; break ;;
                esac
            done
            case "$sub" in
                help) COMPREPLY=($(compgen -W "\(names)" -- "$cur")); return ;;

        """
        for c in commands {
            s += "        \(c.name)) \(f)_\(bashName(c)); return ;;\n"
        }
        s += """
            esac
            if [[ $prev == --generate-completion-script ]]; then
                COMPREPLY=($(compgen -W "\(CompletionShell.allCases.map(\.rawValue).joined(separator: " "))" -- "$cur")); return
            fi

        """
        if let d = defaultSpec {
            s += "    \(f)_value_of_\(bashName(d)) && return\n"
        }
        let top = ["--version", "--help", "-h", "--generate-completion-script"] + (defaultSpec?.options.map { "--" + $0.name } ?? [])
        s += """
            if [[ $cur == -* ]]; then
                COMPREPLY=($(compgen -W "\(top.joined(separator: " "))" -- "$cur"))
            else
                COMPREPLY=($(compgen -W "\(names) help" -- "$cur"))
            fi
        }


        """
        for c in commands {
            s += bashSubcommand(c)
        }
        s += "complete -F \(f) \(name)\n"
        return s
    }

    private func bashName(_ c: CommandSpec) -> String { Self.identifier(c.name) }

    /// Two functions per subcommand: the value of the option just typed (status 0 when it
    /// completed one), and the subcommand's words.
    private func bashSubcommand(_ c: CommandSpec) -> String {
        let f = functionName + "_" + bashName(c)
        var s = "\(functionName)_value_of_\(bashName(c))() {\n    case \"$prev\" in\n"
        for o in c.options where o.takesValue {
            let action: String
            if o.kind == .file {
                action = "COMPREPLY=($(compgen -f -- \"$cur\"))"
            } else if !o.suggestions.isEmpty {
                action = "COMPREPLY=($(compgen -W \"\(o.suggestions.joined(separator: " "))\" -- \"$cur\"))"
            } else {
                action = "COMPREPLY=()"
            }
            s += "        --\(o.name)) \(action); return 0 ;;\n"
        }
        s += "    esac\n    return 1\n}\n\n"
        let words = (c.options.map { "--" + $0.name } + ["--help", "-h"]).joined(separator: " ")
        s += "\(f)() {\n    \(functionName)_value_of_\(bashName(c)) && return\n"
        s += "    if [[ $cur == -* ]]; then\n        COMPREPLY=($(compgen -W \"\(words)\" -- \"$cur\"))\n"
        if c.arguments.contains(where: \.isFile) {
            s += "    else\n        COMPREPLY=($(compgen -f -- \"$cur\"))\n"
        } else {
            s += "    else\n        COMPREPLY=()\n"
        }
        s += "    fi\n}\n\n"
        return s
    }

    // MARK: zsh

    private func zshCompletion() -> String {
        let f = "_" + name
        var s = "#compdef \(name)\n\n\(f)() {\n    local context state state_descr line\n    local -A opt_args\n"
        s += "    _arguments -C \\\n"
        for spec in zshBuiltIns + (defaultSpec?.options.map(zshOption) ?? []) {
            s += "        \(spec) \\\n"
        }
        s += "        '--generate-completion-script=[Print a completion script.]:shell:(\(CompletionShell.allCases.map(\.rawValue).joined(separator: " ")))' \\\n"
        s += "        '1: :->subcommand' \\\n        '*:: :->args'\n"
        s += "    case $state in\n        subcommand)\n            local -a subcommands=(\n"
        for c in commands {
            s += "                \(zshQuote(c.name + ":" + c.abstract))\n"
        }
        s += "                'help:Show help of a subcommand.'\n            )\n"
        s += "            _describe 'subcommand' subcommands ;;\n        args)\n            case $line[1] in\n"
        for c in commands {
            s += "                \(c.name)) \(f)_\(bashName(c)) ;;\n"
        }
        s += "                help) _values 'subcommand' \(commands.map(\.name).joined(separator: " ")) ;;\n"
        s += "            esac ;;\n    esac\n}\n\n"
        for c in commands {
            s += "\(f)_\(bashName(c))() {\n    _arguments \\\n"
            let specs = c.options.map(zshOption) + zshBuiltIns + c.arguments.map(zshArgument)
            s += specs.map { "        " + $0 }.joined(separator: " \\\n") + "\n}\n\n"
        }
        s += "\(f) \"$@\"\n"
        return s
    }

    private var zshBuiltIns: [String] {
        ["'--version[Show the version.]'", "'(-h --help)'{-h,--help}'[Show help information.]'"]
    }

    private func zshOption(_ o: OptionSpec) -> String {
        let help = zshEscape(o.help)
        guard o.takesValue else { return zshQuote("--\(o.name)[\(help)]") }
        let action = o.kind == .file ? "_files" : o.suggestions.isEmpty ? " " : "(\(o.suggestions.joined(separator: " ")))"
        return zshQuote("--\(o.name)=[\(help)]:\(o.name):\(action)")
    }

    private func zshArgument(_ a: ArgumentSpec) -> String {
        let action = a.isFile ? "_files" : " "
        let prefix = a.isRepeating ? "*:" : a.defaultValue == nil ? ":" : "::"
        return zshQuote("\(prefix)\(a.name):\(action)")
    }

    private func zshEscape(_ text: String) -> String {
        var out = ""
        for ch in text {
            if ch == "[" || ch == "]" || ch == "\\" { out.append("\\") }
            out.append(ch)
        }
        return out
    }

    private func zshQuote(_ text: String) -> String {
        "'" + text.split(separator: "'", omittingEmptySubsequences: false).joined(separator: "'\\''") + "'"
    }

    // MARK: fish

    private func fishCompletion() -> String {
        let c0 = "complete -c \(name)"
        let names = commands.map(\.name).joined(separator: " ")
        var s = "# fish completion for \(name)\n\(c0) -f\n"
        s += "\(c0) -n '__fish_use_subcommand' -l version -d 'Show the version.'\n"
        s += "\(c0) -s h -l help -d 'Show help information.'\n"
        s += "\(c0) -n '__fish_use_subcommand' -l generate-completion-script -x -a '\(CompletionShell.allCases.map(\.rawValue).joined(separator: " "))' -d 'Print a completion script.'\n"
        for c in commands {
            s += "\(c0) -n '__fish_use_subcommand' -a \(c.name) -d \(fishQuote(c.abstract))\n"
        }
        s += "\(c0) -n '__fish_use_subcommand' -a help -d 'Show help of a subcommand.'\n"
        s += "\(c0) -n '__fish_seen_subcommand_from help' -a '\(names)'\n"
        if let d = defaultSpec {
            for o in d.options { s += fishOption(o, condition: "__fish_use_subcommand") }
        }
        for c in commands {
            let condition = "__fish_seen_subcommand_from \(c.name)"
            for o in c.options { s += fishOption(o, condition: condition) }
            if c.arguments.contains(where: \.isFile) { s += "\(c0) -n '\(condition)' -F\n" }
        }
        return s
    }

    private func fishOption(_ o: OptionSpec, condition: String) -> String {
        var s = "complete -c \(name) -n '\(condition)' -l \(o.name)"
        if o.kind == .file {
            s += " -r -F"
        } else if o.takesValue {
            s += " -x" + (o.suggestions.isEmpty ? "" : " -a '\(o.suggestions.joined(separator: " "))'")
        }
        return s + " -d \(fishQuote(o.help))\n"
    }

    private func fishQuote(_ text: String) -> String {
        "'" + text.replacingOccurrences("\\", "\\\\").replacingOccurrences("'", "\\'") + "'"
    }
}

extension String {
    fileprivate func replacingOccurrences(_ target: Character, _ replacement: String) -> String {
        var out = ""
        for ch in self { if ch == target { out += replacement } else { out.append(ch) } }
        return out
    }
}
