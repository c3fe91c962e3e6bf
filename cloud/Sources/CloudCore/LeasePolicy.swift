/// How long a claimed push belongs to the fan-out that claimed it, and so how late a ring can be
/// after a crash. Pure numbers; the store applies them (`claimDue`, `reclaimLeases`).
///
/// - A fan-out claims a batch for `leaseMilliseconds`; nobody else sends those pushes meanwhile.
/// - The same instance restarted (same `--instance-id`) takes its own expired work back at once:
///   the delay is the restart time.
/// - Another process takes them when the lease runs out: at most `leaseMilliseconds` late.
/// - A graceful stop lets pushes on the wire finish (at most `drainMilliseconds`) and releases
///   the claimed ones it did not start, so neither case waits for a lease.
public struct LeasePolicy: Sendable, Equatable {
    public let requestTimeoutMilliseconds: Int64

    public init(requestTimeoutSeconds: Int64) {
        requestTimeoutMilliseconds = max(requestTimeoutSeconds, 1) * 1000
    }

    /// Outlasts a batch's worst case (every push timing out once), so nobody else takes a push
    /// while its claimer is still sending it.
    public var leaseMilliseconds: Int64 { requestTimeoutMilliseconds * 2 + 30_000 }

    /// How long a graceful stop waits for pushes already sent: one request timeout, after which
    /// an unanswered push is recorded as not sent (and sent again later).
    public var drainMilliseconds: Int64 { requestTimeoutMilliseconds + 2_000 }

    /// The longest an idle fan-out sleeps before it looks at the queue again. Other servers on
    /// the same database queue pushes (their ingests wake only themselves) and leave pushes
    /// behind when they die (due when their lease runs out): a server that slept until its own
    /// next due push would miss both. A tenth of the lease, so a dead server's pushes are taken
    /// within `leaseMilliseconds + idleCheckMilliseconds` of their claim; at least 1 s, so an
    /// idle server costs one indexed `MIN()` a second at most.
    public var idleCheckMilliseconds: Int64 { max(leaseMilliseconds / 10, 1_000) }

    /// The most outcomes the fan-out holds before writing them (one transaction), and the
    /// longest it holds one. A push APNs answered but whose outcome is not yet written is sent
    /// again if the process is killed: these two bound those duplicates beyond the pushes
    /// truly in flight (sent, not yet answered), while still sharing one commit among several.
    public static let outcomeGroupLimit = 8
    public static let outcomeDelayMilliseconds: Int64 = 20

    /// The longest a claimed push waits, beyond its due time, after its process died.
    public func worstCaseDelayAfterCrash(restartedAsSameInstance: Bool, restartMilliseconds: Int64) -> Int64 {
        restartedAsSameInstance ? min(restartMilliseconds, leaseMilliseconds) : leaseMilliseconds
    }
}
