import DoorbellCore
import Glibc

// A press sent while its fsync runs, and the next press committed while the last one's runs.
// The durable commit (device fdatasync p50 4 ms, p99 56 ms on a loaded box) used to come
// before the uplink even saw the press, and later still held the ingest thread before it read
// the next radio line. Now the append commits without its fsync and wakes the uplink, which
// signs and POSTs at once; a syncer thread of its own makes the fsyncs, one at a time, each
// covering every commit made before it started (group commit: a burst of presses shares one),
// and an event counts as stored only when the fsync covering it has returned. Who may do what
// when is GroupSync's (DoorbellCore); this file is its shell. Why sending first is safe:
// - a crash of the process after COMMIT keeps the row (it is in the page cache): the press is
//   sent again with the same id and the cloud, which deduplicates by event id, rings once;
// - a power cut before the fsync returned may lose the row: the press was made but never
//   counted as stored (that was always possible before its fsync), and whatever copy reached
//   the cloud is the only one — nothing is sent again, nothing rings twice. Its sequence is
//   never given to another event: sequences are reserved ahead, durably, 1,024 at a time
//   (`reserveSequences`), and after an unclean reboot the agent goes on after the reservation
//   (a gap, as the protocol allows, never a sequence seen twice with two ids);
// - an acknowledgement is applied only after the fsync of the appends that stored its rows
//   (`settle` asks GroupSync with their tickets), so a row never leaves before the commit that
//   stored it is on the device. The uplink does not wait for that fsync: it hands the
//   acknowledgement over and sends the next press; whoever makes the fsync (the syncer) applies
//   it once it returned, and until then the queue's reads skip the row (it is not sent again; a
//   crash meanwhile sends it again under its id, and the cloud deduplicates).
// What follows "stored" (the event.created log, counters, the MQTT sink's wake-up, the event
// feed, the phone's receipt) runs when the fsync returns, on the syncer thread: the house's MQTT
// subscribers do not deduplicate. Without a syncer thread (tools, tests) whoever waits for an
// fsync makes it; a clean close makes every fsync still owed.

/// One deferred commit's wait for its fsync: the batch it stored, then the errno the fsync
/// returned (0: stored), and what to do then (on the thread that made the fsync).
final class SyncWaiter: @unchecked Sendable {
    var result = OutboxBatchResult(entries: [], evicted: [], report: nil)
    /// Set under the outbox's lock when the fsync covering the commit returned.
    var rc: Int32?
    let then: ((OutboxBatchResult, OutboxError?) -> Void)?
    init(then: ((OutboxBatchResult, OutboxError?) -> Void)? = nil) { self.then = then }
}

extension Outbox {
    /// Group commit as `append(_:memory:bounds:report:)`, but `whileSyncing` (waking the uplink)
    /// runs between COMMIT and its fsync. Returns once the fsync has; throws `.io` if it failed
    /// (the rows stay in the table and are delivered, but may not survive a power cut).
    public func append(_ events: [OutboxNewEvent], memory: [String: BTHomeButtonTracker.DeviceMemory] = [:], bounds: OutboxBounds?,
                       report: ((Int64, [EvictedEvent]) -> (id: String, type: String, body: [UInt8]))?,
                       whileSyncing: () -> Void) throws(OutboxError) -> OutboxBatchResult {
        guard !events.isEmpty || !memory.isEmpty else { return OutboxBatchResult(entries: [], evicted: [], report: nil) }
        let waiter = SyncWaiter()
        let (result, reserved) = try append(events, memory: memory, bounds: bounds, report: report, deferringSync: waiter)
        // A new reservation is on the device before any sequence of it is sent (1 press in
        // 1,024: that press waits for its fsync as before, and is then stored).
        if !reserved { whileSyncing() }
        wakeSyncer()
        let rc = waitSynced(waiter)
        if reserved && rc == 0 { whileSyncing() }
        if let error = Self.syncError(rc, path: path) { throw error }
        return result
    }

    /// Group commit without waiting for the fsync: returns once committed and handed on
    /// (`handOff`, waking the uplink, runs right after COMMIT — after the fsync for a commit that
    /// moved the sequence reservation); `whenSynced` runs when the fsync covering the events has
    /// returned — on the syncer thread, or here before returning when none runs — with the
    /// error if it failed. `beforeCommit` gets the bodies as soon as they are made, under the
    /// outbox's lock, so the uplink can sign them while the commit runs; nothing may be sent
    /// before `handOff`.
    public func append(_ events: [OutboxNewEvent], memory: [String: BTHomeButtonTracker.DeviceMemory] = [:], bounds: OutboxBounds?,
                       report: ((Int64, [EvictedEvent]) -> (id: String, type: String, body: [UInt8]))?, handOff: (OutboxBatchResult) -> Void = { _ in },
                       beforeCommit: (([(id: String, body: [UInt8])]) -> Void)? = nil,
                       whenSynced: @escaping (OutboxBatchResult, OutboxError?) -> Void) throws(OutboxError) -> OutboxBatchResult {
        guard !events.isEmpty || !memory.isEmpty else { return OutboxBatchResult(entries: [], evicted: [], report: nil) }
        let waiter = SyncWaiter(then: whenSynced)
        let (result, reserved) = try append(events, memory: memory, bounds: bounds, report: report, deferringSync: waiter,
                                            beforeCommit: beforeCommit)
        if reserved {
            wakeSyncer()
            if waitSynced(waiter) == 0 { handOff(result) }
            return result
        }
        // The uplink first: on two cores the syncer's wake-up would otherwise run ahead of it.
        handOff(result)
        if !wakeSyncer() { _ = waitSynced(waiter) }
        return result
    }

    /// Wakes the syncer for a commit made; false when none runs (the caller makes the fsync).
    @discardableResult
    func wakeSyncer() -> Bool {
        var running = false
        locked { running = syncerRunning }
        if running { syncWake.signal() }
        return running
    }

    static func syncError(_ rc: Int32, path: String) -> OutboxError? {
        guard rc != 0 else { return nil }
        return OutboxError(code: .io, message: "outbox \(path): the event was written but could not be flushed to the device "
            + "(\(String(cString: strerror(rc)))); it is delivered but may not survive a power cut. Check the storage device (dmesg).")
    }

    /// Waits until the fsync covering `waiter`'s commit has returned, making it when no syncer
    /// runs and no fsync is under way; returns its errno (0: stored).
    func waitSynced(_ waiter: SyncWaiter) -> Int32 {
        syncUntil { waiter.rc != nil }
        // Set once, under the lock, before syncUntil saw it.
        return waiter.rc ?? 0
    }

    /// Every fsync still owed, made (by the syncer if it runs, else here), and every
    /// acknowledgement it released applied: before a clean close.
    func syncPending() {
        syncUntil { group.isIdle }
        // Bounded: whoever took them applies them at once and broadcasts.
        pthread_mutex_lock(mutex)
        while group.owesAcknowledgements { pthread_cond_wait(syncedCondition, mutex) }
        pthread_mutex_unlock(mutex)
    }

    /// Waits until `done` (asked under the lock) holds, making the fsyncs itself when no syncer
    /// runs and none is under way.
    func syncUntil(_ done: () -> Bool) {
        var ready = SyncOutcome()
        pthread_mutex_lock(mutex)
        while !done() {
            if syncerRunning || group.syncing != nil {
                pthread_cond_wait(syncedCondition, mutex)
            } else {
                let more = syncOnce()
                ready.waiters += more.waiters
                ready.acknowledgements += more.acknowledgements
            }
        }
        pthread_mutex_unlock(mutex)
        run(ready)
    }

    /// What an fsync's return leaves to do once the lock is released: the settled waiters with
    /// something to run, and the acknowledgements it released.
    struct SyncOutcome {
        var waiters: [SyncWaiter] = []
        var acknowledgements: [Int64] = []
    }

    /// One fsync covering every commit so far, if GroupSync starts one. Called and returns with
    /// `mutex` held; the fsync itself runs without it, so appends and the uplink go on. Returns
    /// what is left to do, to be run once the lock is released.
    func syncOnce() -> SyncOutcome {
        guard group.startSync() != nil else { return SyncOutcome() }
        let acknowledged = acknowledgementsCommitted
        pthread_mutex_unlock(mutex)
        let rc = flushWriteAheadLog()
        pthread_mutex_lock(mutex)
        // It made the acknowledgements committed before it durable too: the next synced one (an
        // fsync under the lock, in the radio's way) comes 256 unsynced ones after it, not before.
        if rc == 0 { acknowledgementsDurable = max(acknowledgementsDurable, acknowledged) }
        let done = group.finishSync(ok: rc == 0)
        if !unsyncedRows.isEmpty { unsyncedRows = unsyncedRows.filter { $0.value > group.settled } }
        for (waiter, stored) in done { waiter.rc = stored ? 0 : (rc == 0 ? EIO : rc) }
        pthread_cond_broadcast(syncedCondition)
        return SyncOutcome(waiters: done.map(\.waiter).filter { $0.then != nil }, acknowledgements: group.takeAcknowledgements())
    }

    /// Acknowledgements first: the next fsync need not wait for the "stored" follow-ups.
    func run(_ ready: SyncOutcome) {
        applyAcknowledgements(ready.acknowledgements)
        for waiter in ready.waiters { waiter.then?(waiter.result, Self.syncError(waiter.rc ?? 0, path: path)) }
    }

    /// Applies acknowledgements GroupSync released (their rows' fsync returned): one transaction
    /// without an fsync of its own, as the uplink's. If it fails the rows stay and are sent again
    /// (the receiver deduplicates), as after a crash.
    func applyAcknowledgements(_ sequences: [Int64]) {
        guard !sequences.isEmpty else { return }
        _ = try? transaction(acknowledgements: sequences.count) { () throws(OutboxError) in try removeDelivered(sequences) }
        locked {
            group.applied(sequences)
            pthread_cond_broadcast(syncedCondition)
        }
    }

    /// Starts the syncer thread: it makes the fsyncs the appends owe, one at a time, beating
    /// `heartbeat` while it waits (a fsync stuck beyond the heartbeat's deadline withholds the
    /// watchdog). `stopSyncer` ends it once every fsync owed is made.
    public func startSyncer(_ heartbeat: Heartbeat) throws(ThreadStartError) {
        locked {
            syncerRunning = true
            syncerStopping = false
        }
        takeOverCheckpoints()
        do {
            try startLoop(heartbeat, thread: "outbox-sync") { [self] in runSyncer(heartbeat) }
        } catch {
            locked { syncerRunning = false }
            handBackCheckpoints()
            throw error
        }
    }

    func runSyncer(_ heartbeat: Heartbeat) {
        while true {
            pthread_mutex_lock(mutex)
            var synced = false
            if group.needsSync {
                let ready = syncOnce()
                pthread_mutex_unlock(mutex)
                heartbeat.beat()
                run(ready)
                synced = true
            } else {
                pthread_mutex_unlock(mutex)
            }
            // After each fsync, not only when none is owed: a steady stream of commits would
            // otherwise never leave room for one, and the log would grow without end.
            if checkpointIfDue() { heartbeat.beat() }
            if synced { continue }
            pthread_mutex_lock(mutex)
            if group.needsSync {
                pthread_mutex_unlock(mutex)
                continue
            }
            if syncerStopping && group.isIdle {
                syncerRunning = false
                pthread_cond_broadcast(syncedCondition)
                pthread_mutex_unlock(mutex)
                heartbeat.stopped()
                return
            }
            pthread_mutex_unlock(mutex)
            heartbeat.wait(syncWake, timeoutMicros: nil)
        }
    }

    /// A clean stop: the syncer makes every fsync still owed, then ends; returns when it has.
    public func stopSyncer() {
        pthread_mutex_lock(mutex)
        syncerStopping = true
        pthread_mutex_unlock(mutex)
        syncWake.signal()
        pthread_mutex_lock(mutex)
        while syncerRunning { pthread_cond_wait(syncedCondition, mutex) }
        pthread_mutex_unlock(mutex)
        handBackCheckpoints()
    }

    /// Commits whose fsync has not returned yet.
    var unsyncedAppends: Int {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return Int(group.committed - group.settled)
    }

    /// Sequences up to `sequence` may now be sent before their fsync: unless the durable
    /// reservation covers them, it moves `sequenceReserve` ahead, tagged with this boot, in the
    /// append's transaction (inside it). Returns whether it moved.
    func reserveSequences(through sequence: Int64) throws(OutboxError) -> Bool {
        let row = try queryInts(Self.reservationQuery) ?? []
        if row.count == 2, let through = row[0], through >= sequence, row[1] == Self.bootTag { return false }
        try run("INSERT INTO meta (key, value) VALUES ('reserved_sequence', ?), ('reserved_boot', ?) "
                + "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                [.int(sequence + Self.sequenceReserve), .int(Self.bootTag)])
        return true
    }

    static let reservationQuery = "SELECT value, (SELECT value FROM meta WHERE key = 'reserved_boot') FROM meta WHERE key = 'reserved_sequence'"

    static let sequenceReserve: Int64 = 1024

    /// This boot, as a meta value (FNV-1a of /proc's boot id).
    static let bootTag: Int64 = {
        var h: UInt64 = 0xcbf29ce484222325
        for b in Clocks.bootID.utf8 { h = (h ^ UInt64(b)) &* 0x100000001b3 }
        return Int64(bitPattern: h >> 1)
    }()

    /// At open: after an unclean reboot (a power cut) sequences up to the reservation may have
    /// been sent and lost with their rows, so the next one comes after it. A crash of the process
    /// alone (same boot) lost no row: nothing to skip. A clean close drops the reservation.
    func skipSequencesSentAhead() throws(OutboxError) {
        guard let row = try queryInts(Self.reservationQuery), row.count == 2, let through = row[0], row[1] != Self.bootTag else { return }
        try exec("BEGIN IMMEDIATE; UPDATE meta SET value = MAX(value, \(through)) WHERE key = 'last_sequence'; "
                 + "DELETE FROM meta WHERE key IN ('reserved_sequence', 'reserved_boot'); COMMIT;")
    }

    /// At a clean close every append's fsync has returned: nothing was sent ahead of one.
    func dropSequenceReservation() {
        try? exec("DELETE FROM meta WHERE key IN ('reserved_sequence', 'reserved_boot')")
    }

    /// fdatasync of the WAL through a descriptor of our own (any descriptor of the file flushes
    /// its pages), outside the lock so the uplink reads and settles meanwhile. A WAL file new
    /// since the last time (created at open) also gets its directory entry synced, as SQLite
    /// does when it syncs a new journal. No WAL file: everything is in the database (a
    /// checkpoint at close), synced by SQLite.
    func flushWriteAheadLog() -> Int32 {
        let wal = path + "-wal"
        let fd = open(wal, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return errno == ENOENT ? 0 : errno }
        defer { Glibc.close(fd) }
        let rc = flushLog(fd)
        guard rc == 0 else { return rc }
        var st = stat()
        guard fstat(fd, &st) == 0 else { return errno }
        var known = false
        locked {
            known = syncedLogInode == st.st_ino
            syncedLogInode = st.st_ino
        }
        guard !known else { return 0 }
        let slash = path.lastIndex(of: "/")
        let directory = slash.map { $0 == path.startIndex ? "/" : String(path[..<$0]) } ?? "."
        let dfd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard dfd >= 0 else { return errno }
        defer { Glibc.close(dfd) }
        return fsync(dfd) == 0 ? 0 : errno
    }

    /// The real flush: fdatasync (what SQLite itself uses for the WAL on Linux).
    static let fdatasyncFile: @Sendable (Int32) -> Int32 = { fd in fdatasync(fd) == 0 ? 0 : errno }
}
