// Events just committed, handed to an idle uplink in memory so a press goes out without the
// uplink reading the outbox first (two indexed queries and the outbox's lock, ≈ 0.1 ms of the
// press → receiver path, measured with uprobes in #28).
// When is that safe? Only when the uplink's last read found nothing it could send and nothing
// backing off, and only for events committed after that read: then what the read would return
// now is exactly what was handed over. So the hand-off opens when the uplink is about to wait
// for work after such a read, keeps what appends hand it while open, and closes when the uplink
// takes it. Anything else that changes the outbox (an eviction, a dead letter requeued, an
// append handed over after the read but before the opening) wakes the uplink and spoils what
// was kept: the uplink reads the outbox again, which sees those events too. Never both: an event is either in a read
// or taken from here, so none is sent twice, and none is lost (a read follows whatever was not
// handed over).

public struct FreshEventHandOff<Entry>: Sendable where Entry: Sendable {
    /// More than this many events while the uplink sleeps is a burst: it reads the outbox.
    public static var capacity: Int { 32 }

    public private(set) var isOpen = false
    /// The commit the uplink's last read came after: only later commits are kept.
    public private(set) var openedAfter: Int64 = 0
    /// Kept since it opened.
    public private(set) var kept: [Entry] = []
    /// Something changed the outbox that only a read sees: the next take says read.
    public private(set) var spoiled = false
    /// The newest commit handed over, open or not (commits are numbered by the outbox).
    public private(set) var newestCommit: Int64 = 0

    public init() {}

    /// The uplink read the outbox after commit `readAfterCommit` (every commit up to it is in
    /// what it read, a later one may be), found nothing to send now or later, and waits for work.
    /// A later commit handed over before this (while closed) was not kept: spoiled.
    public mutating func open(readAfterCommit: Int64) {
        isOpen = true
        openedAfter = readAfterCommit
        kept.removeAll(keepingCapacity: true)
        if newestCommit > readAfterCommit { spoiled = true }
    }

    /// The events of commit number `commit`, an append that evicted nothing. Commits may be
    /// handed over out of order (two radios' threads): one the read already saw is not kept.
    public mutating func committed(_ entries: [Entry], commit: Int64) {
        newestCommit = max(newestCommit, commit)
        guard isOpen, !spoiled, commit > openedAfter else { return }
        if kept.count + entries.count > Self.capacity {
            spoil()
        } else {
            kept.append(contentsOf: entries)
        }
    }

    /// The outbox changed in a way only a read sees (open or not).
    public mutating func spoil() {
        spoiled = true
        kept.removeAll(keepingCapacity: true)
    }

    /// Open, nothing spoiled and nothing kept yet: a commit the uplink was told of ahead (to sign
    /// its events meanwhile) has not been handed over yet.
    public var awaitsCommit: Bool { isOpen && !spoiled && kept.isEmpty }

    /// What the uplink may send without reading; nil: read the outbox. Closes the hand-off (the
    /// uplink takes at the top of every turn, so nothing is kept across a read).
    public mutating func take() -> [Entry]? {
        let handed = isOpen && !spoiled && !kept.isEmpty ? kept : nil
        isOpen = false
        spoiled = false
        kept.removeAll(keepingCapacity: true)
        return handed
    }
}
