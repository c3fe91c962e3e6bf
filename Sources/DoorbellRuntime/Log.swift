import DoorbellCore
import Glibc

// One line per notable thing: a constant message plus key=value metadata. When stderr is the
// journal ($JOURNAL_STREAM names our stderr) each line gets a <N> syslog priority prefix.

public struct Logger: Sendable {
    /// Shared by every copy, so a config reload changes the level everywhere at once.
    private let levelBox: Locked<LogLevel>
    public var level: LogLevel {
        get { levelBox.snapshot }
        nonmutating set { levelBox.withLock { $0 = newValue } }
    }
    let journal: Bool
    let sink: @Sendable (String) -> Void

    public init(level: LogLevel, sink: (@Sendable (String) -> Void)? = nil) {
        self.levelBox = Locked(level)
        self.journal = Logger.stderrIsJournal()
        self.sink = sink ?? { line in
            var bytes = Array(line.utf8)
            bytes.append(0x0A)
            bytes.withUnsafeBytes { _ = write(2, $0.baseAddress, $0.count) }
        }
    }

    static func stderrIsJournal() -> Bool {
        guard let env = getenv("JOURNAL_STREAM") else { return false }
        let parts = String(cString: env).split(separator: ":")
        var st = stat()
        guard parts.count == 2, fstat(2, &st) == 0 else { return false }
        return String(st.st_dev) == parts[0] && String(st.st_ino) == parts[1]
    }

    public func log(_ level: LogLevel, _ message: String, _ metadata: [(String, String)] = []) {
        guard level >= self.level else { return }
        var line = journal ? "<\(level.syslogPriority)>" : "\(level.rawValue): "
        line += message
        for (k, v) in metadata {
            line += " \(k)="
            line += v.contains(" ") || v.contains("\"") || v.isEmpty ? JSONWriter.string(.string(v)) : v
        }
        sink(line)
    }

    public func debug(_ m: String, _ md: [(String, String)] = []) { log(.debug, m, md) }
    public func info(_ m: String, _ md: [(String, String)] = []) { log(.info, m, md) }
    public func notice(_ m: String, _ md: [(String, String)] = []) { log(.notice, m, md) }
    public func warning(_ m: String, _ md: [(String, String)] = []) { log(.warning, m, md) }
    public func error(_ m: String, _ md: [(String, String)] = []) { log(.error, m, md) }
}

extension String {
    /// Multi-line messages (all config issues at once) as one log line.
    func replacingNewlines() -> String { split(separator: "\n").joined(separator: " | ") }
}
