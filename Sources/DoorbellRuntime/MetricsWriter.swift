import DoorbellCore
import Glibc

// Prometheus text format, written to a file every N seconds by write-temp-then-rename, which is
// node_exporter's textfile collector convention: a scrape never sees half a file.

public final class MetricsWriter: @unchecked Sendable {
    let settings: MetricsSettings
    let log: Logger
    let render: @Sendable () -> String
    /// Beats while it waits between writes; a write (the status behind it) stuck longer than
    /// two periods and the grace is a stuck loop.
    public let heartbeat: Heartbeat
    public static let heartbeatPeriodMicros: Int64 = 30_000_000
    private let wake = WakeSignal()
    private let done = WakeSignal()
    private let stopping = Locked(false)

    public init(settings: MetricsSettings, log: Logger, heartbeat: Heartbeat? = nil, render: @escaping @Sendable () -> String) {
        self.settings = settings
        self.log = log
        self.heartbeat = heartbeat ?? .unmonitored("metrics", periodMicros: Self.heartbeatPeriodMicros)
        self.render = render
    }

    public func start() throws(ThreadStartError) {
        try startLoop(heartbeat, thread: "metrics") { [self] in
            var lastError: String?
            while !stopping.snapshot {
                heartbeat.beat()
                let error = writeOnce()
                if error != lastError {
                    if let error { log.warning("metrics.write_failed", [("file", settings.file), ("error", error)]) }
                    lastError = error
                }
                heartbeat.wait(wake, timeoutMicros: Int64(settings.intervalSeconds) * 1_000_000)
            }
            done.signal()
        }
    }

    public func stop() {
        stopping.withLock { $0 = true }
        heartbeat.stopped()
        wake.signal()
        done.wait(timeoutMicros: 2_000_000)
    }

    /// Returns nil on success, else what went wrong.
    func writeOnce() -> String? {
        let bytes = Array(render().utf8)
        let tmp = settings.file + ".tmp"
        let fd = retryingEINTR { open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644) }
        guard fd >= 0 else { return "cannot create \(tmp): \(errnoText())" }
        let written = bytes.withUnsafeBytes { buf in retryingEINTR { write(fd, buf.baseAddress, buf.count) } }
        close(fd)
        guard written == bytes.count else { unlink(tmp); return "cannot write \(tmp): \(errnoText())" }
        guard rename(tmp, settings.file) == 0 else { unlink(tmp); return "cannot rename to \(settings.file): \(errnoText())" }
        return nil
    }
}

extension String {
    func replacingOccurrences(of target: String, with replacement: String) -> String {
        guard !target.isEmpty else { return self }
        var out = ""
        var rest = Substring(self)
        while let r = rest.range(of: target) {
            out += rest[..<r.lowerBound]
            out += replacement
            rest = rest[r.upperBound...]
        }
        return out + rest
    }
}

extension Substring {
    func range(of target: String) -> Range<Substring.Index>? {
        guard !target.isEmpty, count >= target.count else { return nil }
        var i = startIndex
        while i < endIndex {
            if self[i...].hasPrefix(target) { return i..<index(i, offsetBy: target.count) }
            i = index(after: i)
        }
        return nil
    }
}

public enum ProcessMemory {
    /// Resident set size in bytes, from /proc/self/statm.
    public static func residentBytes() -> Int? {
        guard let bytes = readFile("/proc/self/statm", maxBytes: 256) else { return nil }
        let fields = String(decoding: bytes, as: UTF8.self).split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return nil }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}
