import DoorbellCore
import Glibc

// A press sent while its fsync runs. The durable commit (p50 2.7 ms, p99 12 ms on a loaded
// box) used to come before the uplink even saw the press; now the append commits without its
// fsync, the uplink is woken and signs and POSTs while this thread makes the fsync, and the
// event counts as stored only when the fsync has returned. Why sending first is safe:
// - a crash of the process after COMMIT keeps the row (it is in the page cache): the press is
//   sent again with the same id and the cloud, which deduplicates by event id, rings once;
// - a power cut before the fsync returned may lose the row: the press was made but never
//   counted as stored (that was always possible before its fsync), and whatever copy reached
//   the cloud is the only one — nothing is sent again, nothing rings twice. Its sequence is
//   never given to another event: sequences are reserved ahead, durably, 1,024 at a time
//   (`reserveSequences`), and after an unclean reboot the agent goes on after the reservation
//   (a gap, as the protocol allows, never a sequence seen twice with two ids);
// - an acknowledgement is applied only after the fsync (`settle` waits on `unsyncedAppends`),
//   so a row never leaves before the commit that stored it is on the device.
// The MQTT sink is still woken only after the fsync: the house's subscribers do not deduplicate.

extension Outbox {
    /// Group commit as `append(_:memory:bounds:report:)`, but `whileSyncing` (waking the uplink)
    /// runs between COMMIT and its fsync. Returns once the fsync has; throws `.io` if it failed
    /// (the rows stay in the table and are delivered, but may not survive a power cut).
    public func append(_ events: [OutboxNewEvent], memory: [String: BTHomeButtonTracker.DeviceMemory] = [:], bounds: OutboxBounds?,
                       report: ((Int64, [EvictedEvent]) -> (id: String, type: String, body: [UInt8]))?,
                       whileSyncing: () -> Void) throws(OutboxError) -> OutboxBatchResult {
        guard !events.isEmpty || !memory.isEmpty else { return OutboxBatchResult(entries: [], evicted: [], report: nil) }
        let (result, reserved) = try append(events, memory: memory, bounds: bounds, report: report, deferringSync: true)
        // A new reservation is on the device before any sequence of it is sent (1 press in
        // 1,024: that press waits for its fsync as before, and is then stored).
        let rc: Int32
        if reserved {
            rc = flushWriteAheadLog()
            if rc == 0 { whileSyncing() }
        } else {
            whileSyncing()
            rc = flushWriteAheadLog()
        }
        locked {
            unsyncedAppends -= 1
            pthread_cond_broadcast(syncedCondition)
        }
        guard rc == 0 else {
            throw OutboxError(code: .io, message: "outbox \(path): the event was written but could not be flushed to the device "
                + "(\(String(cString: strerror(rc)))); it is delivered but may not survive a power cut. Check the storage device (dmesg).")
        }
        return result
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
