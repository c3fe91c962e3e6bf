import DoorbellCore
import Glibc

// The SDR radio: runs rtl_433, reads its JSON lines, and keeps it running. A child that dies is
// restarted with backoff; a missing binary is a clear status, not a crash loop in the log.

public struct RadioStatus: Sendable, Equatable {
    public var name: String
    public var state: RadioState = .starting
    public var lines = 0
    public var restarts = 0
    public var pid: Int32?
    public var lastError: String?
    public var lastStderr: String?

    /// What the supervisor decided, for status.
    mutating func show(_ supervisor: RadioSupervisor) {
        state = supervisor.state
        restarts = supervisor.restarts
        lastError = supervisor.lastError
    }
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

    /// Remembers the child's pid so a restart after a crash or SIGKILL of the agent (outside
    /// systemd, which kills the whole cgroup) can stop the orphan that still holds the SDR.
    let pidFile: String?

    let name: String
    /// A quiet air sends no line: the radio's thread wakes this often anyway, to beat.
    public static let wakeMicros: Int64 = 10_000_000
    public let heartbeat: Heartbeat

    public init(settings: RTL433Settings, log: Logger, pidFile: String? = nil, name: String = "rtl433",
                heartbeat: Heartbeat? = nil, onLine: @escaping @Sendable (String) -> Void) {
        self.settings = settings
        self.name = name
        self.heartbeat = heartbeat ?? .unmonitored("radio " + name, periodMicros: Self.wakeMicros)
        self.pidFile = pidFile
        self.log = log
        self.onLine = onLine
        self.status = Locked(RadioStatus(name: name))
    }

    public func start() throws(ThreadStartError) {
        stopOrphan()
        try startLoop(heartbeat, thread: "radio-" + name) { [self] in
            supervise()
            // A replay that finished is done, not dead.
            heartbeat.stopped()
            done.signal()
        }
    }

    /// Stops the child (SIGTERM, then SIGKILL after `graceMicros`) and the supervisor.
    public func stop(graceMicros: Int64 = 2_000_000) {
        stopping.withLock { $0 = true }
        heartbeat.stopped()
        wake.signal()
        let current = child.snapshot
        current?.terminate()
        if !done.wait(timeoutMicros: graceMicros), let current {
            current.signal(SIGKILL)
            done.wait(timeoutMicros: graceMicros)
        }
        status.withLock { $0.state = .stopped; $0.pid = nil }
    }

    private var isStopping: Bool { stopping.snapshot }

    static let stdbuf = "/usr/bin/stdbuf"

    /// An rtl_433 left behind by a killed agent: its agent is gone and it still runs our binary.
    private func stopOrphan() {
        guard let pidFile, let bytes = readFile(pidFile, maxBytes: 64) else { return }
        unlink(pidFile)
        let numbers = String(decoding: bytes, as: UTF8.self).split(whereSeparator: { $0 == " " || $0 == "\n" }).compactMap { Int32($0) }
        guard numbers.count == 2, numbers[0] > 1 else { return }
        let (child, oldAgent) = (numbers[0], numbers[1])
        // The agent that started it must be gone: never touch a radio another agent still runs.
        guard oldAgent != getpid(), !isRunningProcess(oldAgent),
              let cmdline = readFile("/proc/\(child)/cmdline", maxBytes: 4096) else { return }
        let args = cmdline.split(separator: 0, omittingEmptySubsequences: false).prefix(2).map { String(decoding: $0, as: UTF8.self) }
        let binaryName = settings.binary.split(separator: "/").last.map(String.init) ?? settings.binary
        // argv[0] is the program, or the interpreter with the script as argv[1].
        guard args.contains(where: { $0.hasSuffix(binaryName) }) else { return }
        kill(-child, SIGTERM)
        log.warning("radio.orphan_stopped", [("radio", name), ("pid", String(child)),
                                             ("hint", "an rtl_433 from a previous run was still holding the radio")])
    }

    private func supervise() {
        var supervisor = RadioSupervisor(policy: RadioSupervisor.Policy(
            backoff: FullJitterBackoff(initialMillis: settings.restartInitialMs, capMillis: settings.restartMaxMs),
            floorMillis: max(settings.restartInitialMs / 2, 1), healthyRunMicros: Self.healthyRunMicros))
        var rng = SystemRandomNumberGenerator()
        while !isStopping {
            supervisor.starting()
            status.withLock { $0.show(supervisor) }
            let process: ChildProcess
            do {
                // Live pulse output is written with stdio: line-buffer it, or the end of a burst
                // would sit in rtl_433's buffer until the next one.
                if settings.pulseOutput && settings.replay.isEmpty && isReadableFile(Self.stdbuf) {
                    process = try ChildProcess(program: Self.stdbuf, arguments: ["-oL", settings.binary] + settings.arguments)
                } else {
                    process = try ChildProcess(program: settings.binary, arguments: settings.arguments)
                }
            } catch {
                let retry = supervisor.failed(error.description, absent: error.code == ENOENT, at: Clocks.monotonicMicros(), random: &rng)
                status.withLock { $0.show(supervisor) }
                if retry.isNews { log.error("radio.start_failed", [("radio", name), ("error", error.description)]) }
                heartbeat.wait(wake, timeoutMicros: retry.afterMicros)
                continue
            }
            child.withLock { $0 = process }
            if let pidFile { _ = try? writeSmallFile(pidFile, "\(process.pid) \(getpid())\n") }
            supervisor.running(at: Clocks.monotonicMicros())
            status.withLock { $0.show(supervisor); $0.pid = process.pid }
            log.info("radio.started", [("radio", name), ("pid", String(process.pid)), ("argv", ([settings.binary] + settings.arguments).joined(separator: " "))])

            let stderrDone = WakeSignal()
            startThread(name: "rtl433-stderr") { [self] in
                readLines(fd: process.stderrFD) { line in
                    guard !line.isEmpty else { return }
                    status.withLock { $0.lastStderr = line }
                    log.debug("radio.stderr", [("radio", name), ("line", line)])
                }
                stderrDone.signal()
            }
            readLines(fd: process.stdoutFD, heartbeat: heartbeat) { line in
                status.withLock { $0.lines += 1 }
                onLine(line)
            }
            let exit = process.wait()
            stderrDone.wait(timeoutMicros: 1_000_000)
            child.withLock { $0 = nil }
            status.withLock { $0.pid = nil }
            if isStopping { break }
            if !settings.replay.isEmpty && exit.code == 0 {
                supervisor.finished()
                status.withLock { $0.show(supervisor) }
                log.info("radio.replay_finished", [("radio", name)])
                break
            }
            let message = "rtl_433 \(exit.description)" + (status.snapshot.lastStderr.map { ": \($0)" } ?? "")
            let retry = supervisor.failed(message, absent: false, at: Clocks.monotonicMicros(), random: &rng)
            status.withLock { $0.show(supervisor) }
            // Every exit is told (the restart count alone would hide a crash loop's reason).
            log.warning("radio.exited", [("radio", name), ("error", message), ("attempt", String(supervisor.attempt))])
            heartbeat.wait(wake, timeoutMicros: retry.afterMicros)
        }
    }
}

/// Alive and not a zombie (a killed process whose parent has not reaped it yet still answers kill 0).
func isRunningProcess(_ pid: Int32) -> Bool {
    guard kill(pid, 0) == 0 || errno == EPERM else { return false }
    guard let stat = readFile("/proc/\(pid)/stat", maxBytes: 1024) else { return false }
    let text = String(decoding: stat, as: UTF8.self)
    guard let close = text.lastIndex(of: ")") else { return true }
    let state = text[text.index(after: close)...].split(separator: " ").first
    return state != "Z" && state != "X"
}
