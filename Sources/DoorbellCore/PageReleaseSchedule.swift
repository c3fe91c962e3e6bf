// When the agent gives back its clean file pages (ProcessMappings: code and read-only data it
// mapped and no longer runs). Once shortly after start-up — what ld.so, the library constructors,
// the config, the outbox's migration and the first TLS set-up touched is most of a fresh VmRSS —
// and again after a burst of work (a drain, a storm of presses: `burstWork` events stored or
// sent since the last release) once no work has come for `quietMicros`.
// Never on a timer alone: what the idle loops run comes straight back (measured: releasing
// whenever VmRSS had grown by 1 MiB unmapped and re-faulted the same ≈ 2–3 MiB every 80 s), and
// each release costs the next press its code mapped again from the page cache (≈ 0.15 ms once).

public struct PageReleaseSchedule: Sendable, Equatable {
    public static let afterStartMicros: Int64 = 1_000_000
    public static let quietMicros: Int64 = 60_000_000
    public static let burstWork = 100

    public let startedAtMicros: Int64
    public private(set) var hasReleased = false
    /// The work counter (events stored + requests answered) at the last release.
    public private(set) var workAtRelease = 0
    /// The last work counter seen, and when it last moved.
    public private(set) var lastWork = 0
    public private(set) var workMovedAtMicros: Int64

    public init(startedAtMicros: Int64) {
        self.startedAtMicros = startedAtMicros
        workMovedAtMicros = startedAtMicros
    }

    /// Whether to release now, given the monotonic time and the work counter. A counter that
    /// went back (a reload made a new uplink, whose count starts at 0) is a new base, not a loss.
    public mutating func look(nowMicros now: Int64, work: Int) -> Bool {
        if work < workAtRelease { workAtRelease = work }
        if work != lastWork {
            lastWork = work
            workMovedAtMicros = now
        }
        guard hasReleased else { return now >= startedAtMicros + Self.afterStartMicros }
        return work - workAtRelease >= Self.burstWork && now - workMovedAtMicros >= Self.quietMicros
    }

    /// After a release (or a failed one: it is not tried again for the same work).
    public mutating func released(nowMicros now: Int64, work: Int) {
        hasReleased = true
        workAtRelease = work
        lastWork = work
        workMovedAtMicros = now
    }

    /// When to look next: the first release's time; then, after a burst, the end of its quiet
    /// period; otherwise often enough to notice one.
    public func nextLookMicros(nowMicros now: Int64) -> Int64 {
        guard hasReleased else { return max(now, startedAtMicros + Self.afterStartMicros) }
        if lastWork - workAtRelease >= Self.burstWork { return max(now, workMovedAtMicros + Self.quietMicros) }
        return now + Self.quietMicros / 4
    }
}
