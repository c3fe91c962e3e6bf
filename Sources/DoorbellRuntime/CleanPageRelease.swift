import CDescriptors
import DoorbellCore
import Glibc

// The shell of `[memory] release_clean_pages`: reads /proc/self/smaps, lets ProcessMappings say
// which mappings hold only clean file pages, and has the loader-locked C helper unmap those
// parts of the loaded objects' read-only segments. PageReleaseSchedule says when (on the main
// thread's loop, Agent.runUntilStopped).

public enum CleanPageRelease {
    public struct Outcome: Sendable, Equatable {
        /// Address space unmapped (resident or not).
        public var unmappedKiB: Int
        public var residentBeforeKiB: Int
        public var residentAfterKiB: Int
        /// madvise calls that failed; -1: the loaded objects changed during the release and
        /// nothing was unmapped (tried again after the next burst of work, like any release).
        public var failures: Int
    }

    /// Gives the clean pages back; nil when smaps cannot be read (then nothing is touched).
    public static func run() -> Outcome? {
        guard let before = residentKiB(), let smaps = readFile("/proc/self/smaps", maxBytes: 8 << 20) else { return nil }
        let clean = ProcessMappings.releasable(ProcessMappings.parse(smaps: smaps))
        var ranges: [CUnsignedLongLong] = []
        ranges.reserveCapacity(clean.count * 2)
        for m in clean { ranges += [CUnsignedLongLong(m.start), CUnsignedLongLong(m.end)] }
        var unmapped: CUnsignedLongLong = 0
        let failures = ranges.withUnsafeBufferPointer { doorbell_release_clean_segments($0.baseAddress, CUnsignedLong(clean.count), &unmapped) }
        return Outcome(unmappedKiB: Int(unmapped / 1024), residentBeforeKiB: before,
                       residentAfterKiB: residentKiB() ?? before, failures: failures < 0 ? -1 : Int(failures))
    }

    /// VmRSS in KiB, from /proc/self/statm.
    public static func residentKiB() -> Int? {
        ProcessMemory.residentBytes().map { $0 / 1024 }
    }
}
