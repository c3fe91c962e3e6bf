// Group commit for the outbox: appends commit without their fsync and are handed to the uplink
// at once; one fsync at a time runs beside them and covers every commit made before it started
// (an fdatasync flushes every page of the file written until then). This value decides what may
// happen when — which commits count as stored, which acknowledgements may be applied — and the
// syncer thread (Outbox+Sync.swift) only performs it: commit, start, finish in, waiters out.
//
// The rules:
// - a commit counts as stored only when an fsync that started after it returned successfully;
// - an acknowledgement (a 2xx, a row that may now leave) is applied only once every commit the
//   acknowledger could have read has had its fsync return (failed or not: after a failed fsync
//   the row stays and is delivered; holding its acknowledgement for ever would only stall the
//   queue). A row removed before its fsync could come back from a power cut as a row never sent.
// - an acknowledgement that may not apply yet is handed over (`acknowledge`), so the uplink goes
//   straight on: the fsync covering its row releases it (`takeAcknowledgements`), and until it is
//   applied (`applied`) the row is held — the queue does not send it again (`isHeld`).
// - a failed fsync says so to every commit it covered; a later fsync that succeeds does not make
//   them stored (Linux may have dropped their pages with the error).

public struct GroupSync<Waiter>: Sendable where Waiter: Sendable {
    /// Commits made so far; a commit's ticket is the count after it.
    public private(set) var committed: UInt64 = 0
    /// Every ticket up to this has had its fsync return (successfully or not).
    public private(set) var settled: UInt64 = 0
    /// The fsync running covers tickets up to this; nil while none runs.
    public private(set) var syncing: UInt64?
    /// Who waits for which ticket, in ticket order (a waiter is given with its commit, so none
    /// can arrive after its fsync returned and miss the outcome).
    private var waiting: [(ticket: UInt64, waiter: Waiter)] = []
    /// Acknowledgements handed over before their row's fsync returned, with the row's ticket.
    private var owed: [(ticket: UInt64, sequence: Int64)] = []
    /// Rows whose 2xx is in hand but not applied yet (owed, or released and being applied).
    public private(set) var held: Set<Int64> = []

    public init() {}

    /// A commit was made (without its fsync). Returns its ticket; `waiter`, if any, is told the
    /// outcome when the fsync covering it returns.
    public mutating func commit(_ waiter: Waiter? = nil) -> UInt64 {
        committed += 1
        if let waiter { waiting.append((committed, waiter)) }
        return committed
    }

    /// Commits wait for an fsync and none runs: the syncer should start one.
    public var needsSync: Bool { syncing == nil && settled < committed }

    /// Every commit's fsync has returned and none runs (a clean stop may close now).
    public var isIdle: Bool { syncing == nil && settled == committed }

    /// Starts an fsync covering every commit so far; nil when one runs already or none is needed.
    public mutating func startSync() -> UInt64? {
        guard needsSync else { return nil }
        syncing = committed
        return committed
    }

    /// The running fsync returned. Returns the waiters it settles, in ticket order, with whether
    /// their commit is stored.
    public mutating func finishSync(ok: Bool) -> [(waiter: Waiter, stored: Bool)] {
        guard let target = syncing else { return [] }
        syncing = nil
        settled = max(settled, target)
        let done = waiting.prefix { $0.ticket <= target }
        waiting.removeFirst(done.count)
        return done.map { ($0.waiter, ok) }
    }

    /// Whether an acknowledgement may be applied now for rows whose commits' tickets are at
    /// most `readAt` (0: rows stored by a commit with its own fsync).
    public func acknowledgementMayApply(readAt: UInt64) -> Bool { settled >= readAt }

    /// A 2xx for the row with `sequence` (its key), stored by the commit with `ticket` (0: by a
    /// commit with its own fsync). True: apply it now. False: it is kept until the fsync covering
    /// `ticket` returns, and the row is held meanwhile. A row already held is not acknowledged twice.
    public mutating func acknowledge(_ sequence: Int64, ticket: UInt64) -> Bool {
        guard !held.contains(sequence) else { return false }
        guard !acknowledgementMayApply(readAt: ticket) else { return true }
        owed.append((ticket, sequence))
        held.insert(sequence)
        return false
    }

    /// The handed-over acknowledgements whose fsync has returned, to apply now (in the order they
    /// came); their rows stay held until `applied`.
    public mutating func takeAcknowledgements() -> [Int64] {
        guard owed.contains(where: { $0.ticket <= settled }) else { return [] }
        let ready = owed.filter { $0.ticket <= settled }.map(\.sequence)
        owed.removeAll { $0.ticket <= settled }
        return ready
    }

    /// The taken acknowledgements were applied (or failed to be: then their rows are sent again,
    /// as after a crash); the rows are no longer held.
    public mutating func applied(_ sequences: [Int64]) {
        for s in sequences { held.remove(s) }
    }

    /// Whether the queue must skip this row: its 2xx is in hand, not applied yet.
    public func isHeld(_ sequence: Int64) -> Bool { held.contains(sequence) }

    /// Acknowledgements handed over and not applied yet (a clean stop waits for none).
    public var owesAcknowledgements: Bool { !held.isEmpty }
}
