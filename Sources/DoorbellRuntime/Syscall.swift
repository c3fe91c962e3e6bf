import CDescriptors
import CLinux
import Synchronization
import DoorbellCore
import Glibc

// The few OS facts the shells need, each behind one small function (as swift-system does):
// errno to text, EINTR retries, clocks.

public func errnoText(_ code: Int32 = errno) -> String {
    guard let s = strerror(code) else { return "errno \(code)" }
    return String(cString: s)
}

/// Retries a syscall interrupted by a signal; returns the result or -1 with errno set.
@inline(__always)
public func retryingEINTR<T: FixedWidthInteger>(_ body: () -> T) -> T {
    while true {
        let r = body()
        if r == -1 && errno == EINTR { continue }
        return r
    }
}

public enum Clocks {
    public static func monotonicMicros() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Int64(ts.tv_sec) * 1_000_000 + Int64(ts.tv_nsec) / 1_000
    }

    public static func wallMicros() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1_000_000 + Int64(ts.tv_nsec) / 1_000
    }

    public static func wallSeconds() -> Int64 { wallMicros() / 1_000_000 }

    /// A Pi has no RTC: until NTP syncs, the wall clock may be 1970 or a stale fake-hwclock time.
    /// The answer is kept for a second: every press and every uplink turn asks, and asking is two
    /// system calls and a path walk (9 % of the radio thread's time per press, measured in #28).
    /// Synchronization changes once a boot or two: an event stamped in that second is corrected
    /// from its monotonic time as any unsynchronized one, and a hold ends a second later.
    public static func isWallClockSynchronized(_ settings: ClockSettings = ClockSettings()) -> Bool {
        let now = monotonicMicros()
        if let known = syncAnswer.withLock({ a in a.flatMap { $0.settings == settings && now - $0.atMicros < syncAnswerMicros ? $0.synced : nil } }) {
            return known
        }
        let synced = wallClockState(settings).synchronized
        syncAnswer.withLock { $0 = (settings, now, synced) }
        return synced
    }

    static let syncAnswerMicros: Int64 = 1_000_000
    private static let syncAnswer = Locked<(settings: ClockSettings, atMicros: Int64, synced: Bool)?>(nil)

    /// Whether the wall clock is synchronized, and what said so (shown by `agentctl status`).
    public static func wallClockState(_ settings: ClockSettings = ClockSettings()) -> ClockState {
        let kernel: KernelNTPState
        switch settings.kernelCheck ? doorbell_clock_ntp_state() : 0 {
        case 0: kernel = .synchronized
        case 1: kernel = .unsynchronized
        case let e: kernel = .unreadable(errnoText(-e))
        }
        return ClockState.decide(flagFile: settings.syncFile, flagPresent: access(settings.syncFile, F_OK) == 0,
                                 kernelCheck: settings.kernelCheck, kernel: kernel)
    }

    /// This boot's id: monotonic times are comparable only within one boot. The kernel's file
    /// first; under the unit's ProcSubset=pid /proc/sys is hidden, so the unit hands systemd's
    /// own reading of it (`%b`) over in DOORBELL_BOOT_ID. "unknown" never matches (ClockCorrection).
    public static let bootID: String = BootID.resolve(procFile: readFile("/proc/sys/kernel/random/boot_id", maxBytes: 64),
                                                      environment: getenv("DOORBELL_BOOT_ID").map { String(cString: $0) })
}

public func isReadableFile(_ path: String) -> Bool {
    var st = stat()
    return stat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFREG && access(path, R_OK) == 0
}

public func readFile(_ path: String, maxBytes: Int = 1 << 20) -> [UInt8]? {
    let fd = retryingEINTR { open(path, O_RDONLY | O_CLOEXEC) }
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var out: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 4096)
    while out.count < maxBytes {
        let n = chunk.withUnsafeMutableBytes { buf in retryingEINTR { read(fd, buf.baseAddress, buf.count) } }
        if n < 0 { return nil }
        if n == 0 { break }
        out.append(contentsOf: chunk[0..<n])
    }
    return out
}

/// Starts a detached OS thread. The pipeline's loops block in the kernel (read, accept,
/// condition waits), which is what a thread is for. Returns false (nothing started) when the
/// system has no thread to give (EAGAIN: no memory for its stack, or a task limit); callers decide
/// what that costs — never a crash on the press path.
@discardableResult
public func startThread(name: String, _ body: @escaping @Sendable () -> Void) -> Bool {
    final class Box: @unchecked Sendable {
        let body: @Sendable () -> Void
        let name: String
        init(_ body: @escaping @Sendable () -> Void, _ name: String) { self.body = body; self.name = name }
    }
    let box = Unmanaged.passRetained(Box(body, name)).toOpaque()
    var tid = pthread_t()
    let rc = pthread_create(&tid, nil, { arg in
        guard let arg else { return nil }
        let box = Unmanaged<AnyObject>.fromOpaque(arg).takeRetainedValue()
        guard let box = box as? Box else { return nil }
        // `top -H`, `ps -L` and perf name the thread (the kernel keeps 15 bytes).
        _ = doorbell_set_thread_name(String(decoding: box.name.utf8.prefix(15), as: UTF8.self))
        box.body()
        return nil
    }, box)
    guard rc == 0 else {
        Unmanaged<AnyObject>.fromOpaque(box).release()
        threadStartFailures.withLock { $0 += 1 }
        lastThreadStartError.withLock { $0 = "cannot start thread \(name): \(errnoText(rc))" }
        return false
    }
    pthread_detach(tid)
    return true
}

/// Threads that could not be started since the process began, and why the last one failed.
public let threadStartFailures = Locked(0)
public let lastThreadStartError = Locked<String?>(nil)

/// A condition variable with a mutex, for "sleep until there is work or a deadline".
public final class WakeSignal: @unchecked Sendable {
    // On the heap: a pthread object must not move, and `&` on a stored property promises no fixed address.
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let cond = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var pending = false

    public init() {
        pthread_mutex_init(mutex, nil)
        var attr = pthread_condattr_t()
        pthread_condattr_init(&attr)
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC)
        pthread_cond_init(cond, &attr)
        pthread_condattr_destroy(&attr)
    }

    deinit {
        pthread_cond_destroy(cond)
        cond.deallocate()
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    public func signal() {
        pthread_mutex_lock(mutex)
        pending = true
        pthread_cond_broadcast(cond)
        pthread_mutex_unlock(mutex)
    }

    /// Waits until signalled or `timeoutMicros` passes (nil: forever). Returns true if signalled.
    @discardableResult
    public func wait(timeoutMicros: Int64?) -> Bool {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        if let timeoutMicros {
            let deadline = Clocks.monotonicMicros() + max(0, timeoutMicros)
            var ts = timespec(tv_sec: Int(deadline / 1_000_000), tv_nsec: Int(deadline % 1_000_000) * 1_000)
            while !pending {
                if pthread_cond_timedwait(cond, mutex, &ts) == ETIMEDOUT { break }
            }
        } else {
            while !pending { pthread_cond_wait(cond, mutex) }
        }
        let was = pending
        pending = false
        return was
    }
}

/// A value guarded by a mutex; small and explicit instead of actors, since the callers are OS threads.
public final class Locked<Value: Sendable>: Sendable {
    // The standard library's lock: no pthread object to keep in place by hand.
    private let mutex: Mutex<Value>

    public init(_ value: Value) { mutex = Mutex(value) }

    public func withLock<R: Sendable, E: Error>(_ body: (inout Value) throws(E) -> R) throws(E) -> R {
        try mutex.withLock { (value: inout sending Value) throws(E) -> sending R in try body(&value) }
    }

    public var snapshot: Value { withLock { $0 } }
}

/// A pipe that is close-on-exec from birth (pipe2): setting FD_CLOEXEC afterwards races with an
/// action spawned meanwhile, which would inherit the pipe (and could keep rtl_433's stdout open, or
/// block on a pipe nobody reads). nil with errno set when the process has no descriptor to give.
public func makePipe(nonblocking: Bool = false) -> (read: Int32, write: Int32)? {
    var fds: [Int32] = [-1, -1]
    let rc = doorbell_pipe_cloexec(&fds, nonblocking ? 1 : 0)
    guard rc == 0 else { errno = -rc; return nil }
    return (fds[0], fds[1])
}

/// Writes a small file in one go (pid files); not durable, not atomic, on purpose.
public func writeSmallFile(_ path: String, _ text: String) throws(SpawnError) {
    let fd = retryingEINTR { open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644) }
    guard fd >= 0 else { throw SpawnError(program: path, code: errno) }
    defer { close(fd) }
    let bytes = Array(text.utf8)
    _ = bytes.withUnsafeBytes { buf in retryingEINTR { write(fd, buf.baseAddress, buf.count) } }
}

/// A stop request that poll() loops wait on beside their own descriptors (a pipe: no timers, no
/// polling), plus the flag their loop conditions read. One per thread that runs until stopped.
public final class PollableStop: @unchecked Sendable {
    public let fd: Int32
    private let writeFD: Int32
    private let flag = Locked(false)

    public init() {
        let fds = makePipe()
        fd = fds?.read ?? -1
        writeFD = fds?.write ?? -1
    }

    // Closed only when the last user is gone: never under a thread still polling it.
    deinit {
        if fd >= 0 { close(fd) }
        if writeFD >= 0 { close(writeFD) }
    }

    public var isSet: Bool { flag.snapshot }

    public func set() {
        flag.withLock { $0 = true }
        if writeFD >= 0 { var b: UInt8 = 1; _ = write(writeFD, &b, 1) }
    }

    /// Sleeps up to `micros`, or until set; true when set. A deadline already past (`micros` < 0,
    /// as `until - now` is when the thread ran late) is no wait: poll's negative timeout is forever.
    public func pause(micros: Int64) -> Bool {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        _ = poll(&p, 1, Int32(clamping: max(micros, 0) / 1000))
        return isSet
    }
}
