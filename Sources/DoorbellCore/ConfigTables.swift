// How agent.toml is read: tables that track which keys were asked for (the rest are unknown,
// with a "did you mean"), issues collected with their line and column, and the key paths.

extension StringProtocol {
    func trimmingCharacters(in set: String) -> String {
        let chars = Set(set)
        var sub = Substring(self)
        while let f = sub.first, chars.contains(f) { sub = sub.dropFirst() }
        while let l = sub.last, chars.contains(l) { sub = sub.dropLast() }
        return String(sub)
    }
}

// MARK: - Reading tables with key tracking

enum PathComponent: Equatable { case key(String), index(Int) }

final class IssueSink {
    let file: String
    let locator: SourceLocator
    var issues: [ConfigIssue] = []
    /// Every key the loader looked for, as a dotted path without indexes ("device.bindkey").
    var asked: Set<String> = []
    init(file: String, locator: SourceLocator) { self.file = file; self.locator = locator }

    func report(path: [PathComponent], _ message: String) {
        let pos = locator.locate(path)
        issues.append(ConfigIssue(file: file, line: pos?.line, column: pos?.column, key: render(path), message: message))
    }

    func render(_ path: [PathComponent]) -> String {
        var out = ""
        for c in path {
            switch c {
            case let .key(k): out += out.isEmpty ? k : "." + k
            case let .index(i): out += "[\(i)]"
            }
        }
        return out
    }
}

final class TableReader {
    let members: [(String, TOMLNode)]
    let path: [PathComponent]
    let sink: IssueSink
    private var used: Set<String> = []

    init(_ members: [(String, TOMLNode)], path: [PathComponent], sink: IssueSink) {
        self.members = members
        self.path = path
        self.sink = sink
    }

    func markUsed(_ key: String) { used.insert(key); noteAsked(key) }

    /// Already answered by the caller (no "unknown key"), but not a key the loader reads here.
    func excuse(_ key: String) { used.insert(key) }

    func isUsed(_ key: String) -> Bool { used.contains(key) }

    private func noteAsked(_ key: String) {
        let section = path.compactMap { if case let .key(k) = $0 { k } else { nil } }
        sink.asked.insert((section + [key]).joined(separator: "."))
    }

    func has(_ key: String) -> Bool { members.contains { $0.0 == key } }

    func report(_ key: String, _ message: String) {
        sink.report(path: key.isEmpty ? path : path + [.key(key)], message)
    }

    private func value(_ key: String) -> TOMLNode? {
        used.insert(key)
        noteAsked(key)
        return members.first(where: { $0.0 == key })?.1
    }

    private func wrongType(_ key: String, _ node: TOMLNode, expected: String, example: String) {
        report(key, "must be \(expected), found \(node.typeName); e.g. \(key) = \(example)")
    }

    func string(_ key: String, required: Bool = true, hint: String = "") -> String? {
        guard let node = value(key) else {
            if required { report(key, "is required" + (hint.isEmpty ? "" : ": " + hint)) }
            return nil
        }
        guard case let .string(s) = node else { wrongType(key, node, expected: "a string", example: "\"...\""); return nil }
        if s.isEmpty { report(key, "must not be empty"); return nil }
        return s
    }

    func int(_ key: String, in range: ClosedRange<Int>) -> Int? {
        guard let node = value(key) else { return nil }
        guard case let .int(v) = node else {
            wrongType(key, node, expected: "an integer", example: "\(range.lowerBound)")
            return nil
        }
        guard v >= Int64(range.lowerBound), v <= Int64(range.upperBound) else {
            report(key, "\(v) is out of range; use a value from \(range.lowerBound) to \(range.upperBound)")
            return nil
        }
        return Int(v)
    }

    func bool(_ key: String) -> Bool? {
        guard let node = value(key) else { return nil }
        guard case let .bool(b) = node else { wrongType(key, node, expected: "true or false", example: "true"); return nil }
        return b
    }

    func stringArray(_ key: String) -> [String]? {
        guard let node = value(key) else { return nil }
        guard case let .array(items) = node else { wrongType(key, node, expected: "an array of strings", example: "[\"...\"]"); return nil }
        var out: [String] = []
        for item in items {
            guard case let .string(s) = item else {
                report(key, "every element must be a string, found \(item.typeName)")
                return nil
            }
            out.append(s)
        }
        return out
    }

    func intArray(_ key: String) -> [Int]? {
        guard let node = value(key) else { return nil }
        guard case let .array(items) = node else { wrongType(key, node, expected: "an array of integers", example: "[1, 2]"); return nil }
        var out: [Int] = []
        for item in items {
            guard case let .int(v) = item, let i = Int(exactly: v) else {
                report(key, "every element must be an integer, found \(item.typeName)")
                return nil
            }
            out.append(i)
        }
        return out
    }

    func table(_ key: String, required: Bool = false, hint: String = "") -> TableReader? {
        guard let node = value(key) else {
            if required { report(key, "is required" + (hint.isEmpty ? "" : ": " + hint)) }
            return nil
        }
        guard case let .table(members) = node else {
            report(key, "must be a table ([\(key)] section or { ... }), found \(node.typeName)")
            return nil
        }
        return TableReader(members, path: path + [.key(key)], sink: sink)
    }

    func tableArray(_ key: String) -> [TableReader] {
        guard let node = value(key) else { return [] }
        guard case let .array(items) = node else {
            report(key, "must be written as [[\(key)]] sections, found \(node.typeName)")
            return []
        }
        var out: [TableReader] = []
        for (i, item) in items.enumerated() {
            guard case let .table(members) = item else {
                sink.report(path: path + [.key(key), .index(i)], "must be a table, found \(item.typeName)")
                continue
            }
            out.append(TableReader(members, path: path + [.key(key), .index(i)], sink: sink))
        }
        return out
    }

    /// Reports every key nobody asked for, with the closest known key (asked for, or one of
    /// `alsoKnown`) as a suggestion.
    func finish(alsoKnown: [String] = []) {
        let known = Array(used) + alsoKnown.filter { !used.contains($0) }
        for (key, _) in members where !used.contains(key) {
            var message = "unknown key"
            if let guess = closest(to: key, in: known) { message += "; did you mean \"\(guess)\"?" }
            report(key, message)
        }
    }
}

func closest(to word: String, in candidates: [String]) -> String? {
    var best: (String, Int)?
    for c in candidates {
        let d = editDistance(word, c)
        if d <= max(2, word.count / 3), d < (best?.1 ?? Int.max) { best = (c, d) }
    }
    return best?.0
}

func editDistance(_ a: String, _ b: String) -> Int {
    let a = Array(a), b = Array(b)
    if a.isEmpty { return b.count }
    if b.isEmpty { return a.count }
    var prev = Array(0...b.count)
    var cur = [Int](repeating: 0, count: b.count + 1)
    for i in 1...a.count {
        cur[0] = i
        for j in 1...b.count {
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
        }
        swap(&prev, &cur)
    }
    return prev[b.count]
}

// MARK: - Finding a key's line in the source text

/// The value tree carries no positions (TOMLReader has them only for syntax errors), so semantic
/// errors are located by scanning the text for the table header and the key. Good enough for
/// hand-written configs.
struct SourceLocator {
    let lines: [Substring]

    init(text: String) { lines = text.split(separator: "\n", omittingEmptySubsequences: false) }

    func locate(_ path: [PathComponent]) -> (line: Int, column: Int)? {
        guard !path.isEmpty else { return nil }
        // Try the full path as "table + key", then shorter prefixes (inline tables, missing keys).
        var candidate = path
        while !candidate.isEmpty {
            if case let .key(key) = candidate.last, let hit = find(table: Array(candidate.dropLast()), key: key) { return hit }
            if let header = findHeader(candidate) { return header }
            candidate.removeLast()
        }
        return nil
    }

    private func headerPath(_ line: Substring, counters: inout [String: Int]) -> [PathComponent]? {
        let t = line.trimmingCharacters(in: " \t")
        guard t.hasPrefix("[") else { return nil }
        let isArray = t.hasPrefix("[[")
        guard let close = t.firstIndex(of: "]") else { return nil }
        let inner = t[t.index(t.startIndex, offsetBy: isArray ? 2 : 1)..<close]
        let parts = inner.split(separator: ".").map { String($0).trimmingCharacters(in: " \t\"") }
        var out: [PathComponent] = []
        var prefix = ""
        for (i, part) in parts.enumerated() {
            prefix += (prefix.isEmpty ? "" : ".") + part
            out.append(.key(part))
            if isArray && i == parts.count - 1 {
                let n = (counters[prefix] ?? -1) + 1
                counters[prefix] = n
                out.append(.index(n))
            } else if let n = counters[prefix] {
                out.append(.index(n))
            }
        }
        return out
    }

    private func findHeader(_ target: [PathComponent]) -> (line: Int, column: Int)? {
        var counters: [String: Int] = [:]
        for (i, line) in lines.enumerated() {
            if let h = headerPath(line, counters: &counters), h == target { return (i + 1, 1) }
        }
        return nil
    }

    private func find(table: [PathComponent], key: String) -> (line: Int, column: Int)? {
        var counters: [String: Int] = [:]
        var current: [PathComponent] = []
        for (i, line) in lines.enumerated() {
            if let h = headerPath(line, counters: &counters) { current = h; continue }
            guard current == table else { continue }
            let stripped = line.drop(while: { $0 == " " || $0 == "\t" })
            let column = line.count - stripped.count + 1
            guard stripped.hasPrefix(key) else { continue }
            let rest = stripped.dropFirst(key.count).drop(while: { $0 == " " || $0 == "\t" })
            if rest.hasPrefix("=") || rest.hasPrefix(".") { return (i + 1, column) }
        }
        return nil
    }
}

extension AgentConfig {
    func with(_ change: (inout AgentConfig) -> Void) -> AgentConfig {
        var copy = self
        change(&copy)
        return copy
    }
}
