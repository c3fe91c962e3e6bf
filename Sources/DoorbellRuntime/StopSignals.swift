import Glibc

/// Blocks the stop signals in every thread (call first thing in main) and waits for one.
public enum StopSignals {
    public static func block() {
        var set = sigset_t()
        sigemptyset(&set)
        for s in [SIGTERM, SIGINT, SIGHUP] { sigaddset(&set, s) }
        pthread_sigmask(SIG_BLOCK, &set, nil)
        signal(SIGPIPE, SIG_IGN)
    }

    /// Returns the signal that arrived, or nil when `timeoutMicros` passed first.
    public static func wait(timeoutMicros: Int64?) -> Int32? {
        var set = sigset_t()
        sigemptyset(&set)
        for s in [SIGTERM, SIGINT, SIGHUP] { sigaddset(&set, s) }
        guard let timeoutMicros else {
            var sig: Int32 = 0
            while sigwait(&set, &sig) != 0 {}
            return sig
        }
        // sigtimedwait fails with EINTR when the process is stopped and continued (SIGSTOP, a
        // debugger) even without handlers; waiting the whole timeout again from there delayed the
        // watchdog ping past systemd's deadline after a 10 s stop. Wait only for what is left.
        let deadline = Clocks.monotonicMicros() + timeoutMicros
        while true {
            let left = max(0, deadline - Clocks.monotonicMicros())
            var ts = timespec(tv_sec: Int(left / 1_000_000), tv_nsec: Int(left % 1_000_000) * 1_000)
            let sig = sigtimedwait(&set, nil, &ts)
            if sig > 0 { return sig }
            if errno == EINTR && left > 0 { continue }
            return nil
        }
    }
}
