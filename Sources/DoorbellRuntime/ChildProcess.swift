import CDescriptors
import Glibc

// A child with its stdout and stderr on pipes (rtl_433 today; chime programs later).
// Signals the daemon blocks for sigwait are unblocked in the child, so SIGTERM reaches it.

public struct SpawnError: Error, Sendable, CustomStringConvertible {
    public let program: String
    public let code: Int32
    public var description: String {
        if code == ENOENT {
            return "\(program): program not found. Install it (for rtl_433: apt-get install rtl-433) or give its full path in the config."
        }
        if code == EACCES { return "\(program): permission denied; check that it is executable by the doorbell-agent user." }
        return "\(program): cannot start: \(errnoText(code))"
    }
}

public final class ChildProcess: @unchecked Sendable {
    public let pid: pid_t
    public let stdoutFD: Int32
    public let stderrFD: Int32

    /// `environment` nil: the agent's own; otherwise exactly these `KEY=value` entries.
    public init(program: String, arguments: [String], environment: [String]? = nil) throws(SpawnError) {
        guard let outPipe = makePipe() else { throw SpawnError(program: program, code: errno) }
        guard let errPipe = makePipe() else {
            let e = errno
            close(outPipe.read); close(outPipe.write)
            throw SpawnError(program: program, code: e)
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, outPipe.write, 1)
        posix_spawn_file_actions_adddup2(&actions, errPipe.write, 2)
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        // Nothing else crosses: our own descriptors are close-on-exec from birth, and this also
        // keeps out what libraries open without it (libcurl's and libmosquitto's sockets).
        let closing = doorbell_spawn_close_from(&actions, 3)
        guard closing == 0 else {
            [outPipe.read, outPipe.write, errPipe.read, errPipe.write].forEach { close($0) }
            throw SpawnError(program: program, code: closing)
        }

        var attr = posix_spawnattr_t()
        posix_spawnattr_init(&attr)
        defer { posix_spawnattr_destroy(&attr) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for s in [SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGCHLD] { sigaddset(&defaults, s) }
        posix_spawnattr_setsigmask(&attr, &noSignals)
        posix_spawnattr_setsigdefault(&attr, &defaults)
        // Its own process group, so a stop reaches whatever it started too (a shell's children
        // would otherwise keep its pipes open).
        posix_spawnattr_setpgroup(&attr, 0)
        posix_spawnattr_setflags(&attr, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP))

        let argv = ([program] + arguments).map { strdup($0) }
        defer { argv.forEach { free($0) } }
        var cArgv = argv + [nil]
        let envCopies = environment?.map { strdup($0) }
        defer { envCopies?.forEach { free($0) } }
        var cEnv = (envCopies ?? []) + [nil]
        var child: pid_t = 0
        let rc = cArgv.withUnsafeMutableBufferPointer { buf in
            cEnv.withUnsafeMutableBufferPointer { env in
                posix_spawnp(&child, program, &actions, &attr, buf.baseAddress!, environment == nil ? environ : env.baseAddress!)
            }
        }
        close(outPipe.write)
        close(errPipe.write)
        guard rc == 0 else {
            close(outPipe.read); close(errPipe.read)
            throw SpawnError(program: program, code: rc)
        }
        pid = child
        stdoutFD = outPipe.read
        stderrFD = errPipe.read
    }

    public func terminate() { signal(SIGTERM) }

    /// Signals the child's whole process group.
    public func signal(_ sig: Int32) { kill(-pid, sig) }

    /// Reaps the child; returns a readable exit description. The pipes belong to their readers,
    /// which close them at EOF.
    public func wait() -> (code: Int32, description: String) {
        var status: Int32 = 0
        _ = retryingEINTR { waitpid(pid, &status, 0) }
        let termsig = status & 0x7f
        if termsig == 0 {
            let code = (status >> 8) & 0xff
            return (code, "exited with status \(code)")
        }
        return (128 + termsig, "killed by signal \(termsig)")
    }
}

/// Splits a byte stream into lines; a line longer than `maxLine` is cut and flagged rather than
/// growing memory without bound (a wedged child printing without newlines).
public struct LineSplitter {
    public let maxLine: Int
    private var buffer: [UInt8] = []
    public init(maxLine: Int = 64 * 1024) { self.maxLine = maxLine }

    public mutating func feed(_ bytes: UnsafeRawBufferPointer, _ emit: (String) -> Void) {
        for b in bytes {
            if b == 0x0A {
                emit(String(decoding: buffer, as: UTF8.self))
                buffer.removeAll(keepingCapacity: true)
            } else if buffer.count < maxLine {
                buffer.append(b)
            }
        }
    }

    public mutating func finish(_ emit: (String) -> Void) {
        if !buffer.isEmpty { emit(String(decoding: buffer, as: UTF8.self)) }
        buffer.removeAll()
    }
}

/// Reads `fd` until EOF, calling `onLine` per line, then closes it. Blocks in the kernel: with
/// `heartbeat`, in poll(2) for at most its period at a time, beating (a quiet radio is not stuck).
public func readLines(fd: Int32, heartbeat: Heartbeat? = nil, _ onLine: (String) -> Void) {
    defer { close(fd) }
    var splitter = LineSplitter()
    var chunk = [UInt8](repeating: 0, count: 16 * 1024)
    while true {
        if let heartbeat {
            heartbeat.beat()
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            if retryingEINTR({ poll(&p, 1, Int32(clamping: heartbeat.periodMicros / 1000)) }) == 0 { continue }
        }
        let n = chunk.withUnsafeMutableBytes { buf in retryingEINTR { read(fd, buf.baseAddress, buf.count) } }
        if n <= 0 { break }
        chunk.withUnsafeBytes { splitter.feed(UnsafeRawBufferPointer(rebasing: $0[0..<n]), onLine) }
    }
    splitter.finish(onLine)
}
