// A `[radio.<name>]` table read through its radio's descriptor: each option's type, range and
// default come from the declaration, and a key that belongs to another `source`/`transport`, or
// a misspelt one, is told apart. The cross-key rules stay in each radio's reader.

final class RadioSection {
    let table: TableReader
    let descriptor: RadioDescriptor
    /// The discriminator's value (`source = "gpio"`) once `select` read a valid one.
    private(set) var selected: String?

    init(_ table: TableReader, _ descriptor: RadioDescriptor) {
        self.table = table
        self.descriptor = descriptor
    }

    func has(_ key: String) -> Bool { table.has(key) }
    func report(_ key: String, _ message: String) { table.report(key, message) }

    /// The declared option, or an issue: a reader asking for a key its descriptor lacks is a bug
    /// the drift tests catch, never a crash.
    private func declared(_ key: String, _ what: String) -> RadioOption? {
        if let o = descriptor.option(key) { return o }
        table.markUsed(key)
        table.report(key, "is read as \(what) but not declared in the [radio.\(descriptor.name)] descriptor (a bug in the agent)")
        return nil
    }

    private func mistyped(_ key: String, _ what: String) {
        table.report(key, "is read as \(what) but declared otherwise in the [radio.\(descriptor.name)] descriptor (a bug in the agent)")
    }

    /// The discriminator's value as written; `selected` only when it is one of the declared
    /// choices. The caller words the refusal of another value; a missing or unknown one excuses
    /// every other key (they cannot be checked without it, so they are not also called unknown).
    func select(hint: String) -> String? {
        guard let key = descriptor.discriminator, let o = declared(key, "the discriminator") else { return nil }
        let value = table.string(key, required: o.required, hint: hint)
        if case let .choice(choices, _) = o.type, let value, choices.contains(where: { $0.value == value }) {
            selected = value
        } else {
            descriptor.options.map(\.key).forEach(table.markUsed)
        }
        return value
    }

    func bool(_ key: String) -> Bool? {
        guard let o = declared(key, "a bool") else { return nil }
        guard case let .bool(d) = o.type else { mistyped(key, "a bool"); return nil }
        return table.bool(key) ?? d
    }

    /// The value when it is in the declared range, else the default (an out-of-range value is
    /// reported with the range).
    func int(_ key: String) -> Int? {
        guard let o = declared(key, "an int") else { return nil }
        guard case let .int(range, d) = o.type else { mistyped(key, "an int"); return nil }
        if o.required && !table.has(key) { table.report(key, "is required") }
        return table.int(key, in: range) ?? d
    }

    /// A string, path or choice as written (a choice unchecked: the discriminator's caller checks).
    func string(_ key: String, hint: String = "") -> String? {
        guard let o = declared(key, "a string") else { return nil }
        let d: String?
        switch o.type {
        case let .string(v): d = v
        case .path: d = nil
        default: mistyped(key, "a string"); return nil
        }
        return table.string(key, required: o.required, hint: hint) ?? d
    }

    /// One of the declared choices, else nil with the choices (and what each means) in the issue.
    func choice(_ key: String) -> String? {
        guard let o = declared(key, "a choice") else { return nil }
        guard case let .choice(choices, d) = o.type else { mistyped(key, "a choice"); return nil }
        guard let s = table.string(key, required: o.required) else { return d }
        if choices.contains(where: { $0.value == s }) { return s }
        let listed = choices.map { "\"\($0.value)\"" + ($0.meaning.isEmpty ? "" : " (\($0.meaning))") }
        table.report(key, "must be \(ConfigLoader.orList(listed)), found \"\(s)\"")
        return nil
    }

    func strings(_ key: String) -> [String]? {
        guard let o = declared(key, "a string array") else { return nil }
        switch o.type {
        case let .strings(d), let .paths(d): return table.stringArray(key) ?? d
        default: mistyped(key, "a string array"); return nil
        }
    }

    func ints(_ key: String) -> [Int]? {
        guard let o = declared(key, "an int array") else { return nil }
        guard case let .ints(d) = o.type else { mistyped(key, "an int array"); return nil }
        return table.intArray(key) ?? d
    }

    /// A declared key of another source/transport is said to be so; other unread keys are
    /// unknown, with the closest key that applies here as the suggestion.
    func finish() {
        if let discriminator = descriptor.discriminator, let selected {
            for (key, _) in table.members where !table.isUsed(key) {
                guard let o = descriptor.option(key), !o.applies(to: selected) else { continue }
                table.excuse(key)
                table.report(key, "is for \(discriminator) = \(ConfigLoader.orList(o.appliesTo.map { "\"\($0)\"" })); this section has \(discriminator) = \"\(selected)\"")
            }
        }
        table.finish(alsoKnown: descriptor.options.filter { $0.applies(to: selected) }.map(\.key))
    }
}

extension ConfigLoader {
    /// `"a"`, `"a" or "b"`, `"a", "b" or "c"`.
    static func orList(_ items: [String]) -> String {
        guard let last = items.last else { return "" }
        return items.count == 1 ? last : items.dropLast().joined(separator: ", ") + " or " + last
    }
}
