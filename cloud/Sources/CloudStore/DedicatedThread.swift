import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A thread of its own that runs the jobs of the tasks that prefer it
/// (`withTaskExecutorPreference`), in arrival order: SQLite's thread, and the fan-out's.
public final class DedicatedThreadExecutor: TaskExecutor, @unchecked Sendable {
    private let condition = NSCondition()
    /// Guarded by `condition`.
    private var jobs: [UnownedJob] = []
    private var stopping = false

    /// `niceness` > 0 runs the thread at a lower priority than the rest of the process (Linux),
    /// so that work on it takes the CPU only when the request threads leave it free.
    public init(name: String, niceness: Int32 = 0) {
        let thread = Thread { [self] in
            ThreadPriority.lowerCurrentThread(by: niceness)
            run()
        }
        thread.name = name
        thread.start()
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    /// Ends the thread once the jobs queued so far have run.
    public func stop() {
        condition.lock()
        stopping = true
        condition.signal()
        condition.unlock()
    }

    private func run() {
        while true {
            condition.lock()
            while jobs.isEmpty && !stopping { condition.wait() }
            let batch = jobs
            jobs.removeAll(keepingCapacity: true)
            condition.unlock()
            if batch.isEmpty { return }
            for job in batch { job.runSynchronously(on: asUnownedTaskExecutor()) }
        }
    }
}

public enum ThreadPriority {
    /// Raises the calling thread's nice value by `niceness` (Linux: nice is per thread); a no-op
    /// elsewhere, or when `niceness` is 0.
    public static func lowerCurrentThread(by niceness: Int32) {
        #if os(Linux)
        guard niceness > 0 else { return }
        // PRIO_PROCESS (0) and who 0: on Linux the calling thread only (nice is per thread there).
        // Failure leaves the default priority.
        _ = setpriority(__priority_which_t(0), 0, getpriority(__priority_which_t(0), 0) + niceness)
        #endif
    }
}
