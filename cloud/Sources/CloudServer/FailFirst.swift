import Synchronization

/// Test aid behind `--fail-first N`: the first N deliveries are answered 503 before any check.
public final class FailFirst: Sendable {
    public let total: Int
    private let seen = Atomic<Int>(0)

    public init(total: Int) {
        self.total = total
    }

    /// The 1-based number of this failed attempt, or nil once `total` have been failed.
    func nextFailure() -> Int? {
        guard total > 0 else { return nil }
        let attempt = seen.add(1, ordering: .relaxed).newValue
        return attempt <= total ? attempt : nil
    }
}
