import DoorbellCore
import Glibc

// The SDR radio: runs rtl_433, reads its JSON lines, and keeps it running. A child that dies is
// restarted with backoff; a missing binary is a clear status, not a crash loop in the log.

public enum RadioState: String, Sendable {
    case starting, running, restarting, missing, finished, stopped
}

public struct RadioStatus: Sendable, Equatable {
    public var name: String
    public var state: RadioState = .starting
    public var lines = 0
    public var restarts = 0
    public var pid: Int32?
    public var lastError: String?
    public var lastStderr: String?
}

public final class RTL433Radio: @unchecked Sendable {
    let settings: RTL433Settings
    let log: Logger
    let onLine: @Sendable (String) -> Void
    let status: Locked<RadioStatus>
    private let stopping = Locked(false)
    private let child = Locked<ChildProcess?>(nil)
    private let wake = WakeSignal()
    private let done = WakeSignal()

    /// A child that ran this long was healthy; its next failure starts the backoff again.
    static let healthyRunMicros: Int64 = 30_000_000

    public init(settings: RTL433Settings, log: Logger, onLine: @escaping @Sendable (String) -> Void) {
        self.settings = settings
        self.log = log
        self.onLine = onLine
        self.status = Locked(RadioStatus(name: "rtl433"))
    }

    public func start() {
        startThread(name: "radio-rtl433") { [self] in
            supervise()
            done.signal()
        }
    }

    /// Stops the child (SIGTERM, then SIGKILL after `graceMicros`) and the supervisor.
    public func stop(graceMicros: Int64 = 2_000_000) {
        stopping.withLock { $0 = true }
        wake.signal()
        let current = child.snapshot
        current?.terminate()
        if !done.wait(timeoutMicros: graceMicros), let current {
            kill(current.pid, SIGKILL)
            done.wait(timeoutMicros: graceMicros)
        }
        status.withLock { $0.state = .stopped; $0.pid = nil }
    }

    private var isStopping: Bool { stopping.snapshot }

    private func supervise() {
        let backoff = FullJitterBackoff(initialMillis: settings.restartInitialMs, capMillis: settings.restartMaxMs)
        var rng = SystemRandomNumberGenerator()
        var attempt = 0
        while !isStopping {
            status.withLock { $0.state = .starting }
            let process: ChildProcess
            do {
                process = try ChildProcess(program: settings.binary, arguments: settings.arguments)
            } catch {
                let missing = error.code == ENOENT
                status.withLock { $0.state = missing ? .missing : .restarting; $0.lastError = error.description }
                log.error("radio.start_failed", [("radio", "rtl433"), ("error", error.description)])
                // Half the ceiling at least: a missing binary should not be retried in a tight loop.
                wake.wait(timeoutMicros: Int64(max(backoff.delay(attempt: attempt, random: &rng), backoff.ceiling(attempt: attempt) / 2)) * 1000)
                attempt += 1
                continue
            }
            child.withLock { $0 = process }
            let started = Clocks.monotonicMicros()
            status.withLock { $0.state = .running; $0.pid = process.pid }
            log.info("radio.started", [("radio", "rtl433"), ("pid", String(process.pid)), ("argv", ([settings.binary] + settings.arguments).joined(separator: " "))])

            let stderrDone = WakeSignal()
            startThread(name: "rtl433-stderr") { [self] in
                readLines(fd: process.stderrFD) { line in
                    guard !line.isEmpty else { return }
                    status.withLock { $0.lastStderr = line }
                    log.debug("radio.stderr", [("radio", "rtl433"), ("line", line)])
                }
                stderrDone.signal()
            }
            readLines(fd: process.stdoutFD) { line in
                status.withLock { $0.lines += 1 }
                onLine(line)
            }
            let exit = process.wait()
            stderrDone.wait(timeoutMicros: 1_000_000)
            child.withLock { $0 = nil }
            status.withLock { $0.pid = nil }
            if isStopping { break }
            if !settings.replay.isEmpty && exit.code == 0 {
                status.withLock { $0.state = .finished }
                log.info("radio.replay_finished", [("radio", "rtl433")])
                break
            }
            if Clocks.monotonicMicros() - started >= Self.healthyRunMicros { attempt = 0 }
            let detail = status.withLock { s -> String in
                s.restarts += 1
                s.state = .restarting
                let message = "rtl_433 \(exit.description)" + (s.lastStderr.map { ": \($0)" } ?? "")
                s.lastError = message
                return message
            }
            log.warning("radio.exited", [("radio", "rtl433"), ("error", detail), ("attempt", String(attempt))])
            wake.wait(timeoutMicros: Int64(backoff.delay(attempt: attempt, random: &rng)) * 1000)
            attempt += 1
        }
    }
}
