import CSQLite
import DoorbellCore
import Glibc

// Checkpoints of the write-ahead log, off the outbox's lock. SQLite's automatic checkpoint ran
// inside the commit that crossed 1,000 frames (every ≈ 60 presses), with an fsync of the log and
// one of the database, while that commit held the outbox's lock: a press waited for both. While
// the syncer runs, the outbox's connection makes no checkpoint of its own (its WAL hook only
// counts the frames) and the syncer checkpoints through a connection of its own, as
// CheckpointPlan (DoorbellCore) decides: PASSIVE beside the writers, TRUNCATE with them held only
// when the log must be bounded. Durability is SQLite's: a checkpoint syncs the log before it
// copies a frame and the database before the log may start over; a row still counts as stored
// only when the syncer's fsync of the log covering its commit returned.

extension Outbox {
    /// Opens the syncer's own connection and hands checkpoints over to it. Without that
    /// connection SQLite keeps checkpointing by itself, as before.
    func takeOverCheckpoints() {
        var handle: OpaquePointer?
        guard sqlite3_open_v2(path, &handle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nil) == SQLITE_OK, let handle,
              // Reads the schema: the connection knows the file is in WAL mode before it checkpoints.
              sqlite3_exec(handle, "PRAGMA journal_mode=WAL", nil, nil, nil) == SQLITE_OK else {
            sqlite3_close(handle)
            return
        }
        // A TRUNCATE waits this long for another process's reader (agentctl) before it gives up.
        sqlite3_busy_timeout(handle, 100)
        locked {
            guard let db else { return }
            checkpointer = handle
            checkpoints = CheckpointPlan(passiveFrames: checkpoints.passiveFrames, retryFrames: checkpoints.retryFrames,
                                         limitFrames: checkpoints.limitFrames)
            // Replaces the automatic checkpoint (itself a WAL hook). Called by the outbox's
            // connection inside COMMIT, under the outbox's lock.
            sqlite3_wal_hook(db, { context, _, _, frames in
                guard let context else { return SQLITE_OK }
                Unmanaged<Outbox>.fromOpaque(context).takeUnretainedValue().logGrew(to: Int(frames))
                return SQLITE_OK
            }, Unmanaged.passUnretained(self).toOpaque())
            // After a checkpoint the log starts over; a file grown past this is cut back to it then.
            try? exec("PRAGMA journal_size_limit=\(Int64(checkpoints.passiveFrames + checkpoints.retryFrames) * (Self.pageSize + 24))")
        }
    }

    /// SQLite checkpoints by itself again (the syncer stopped), and the syncer's connection closes.
    func handBackCheckpoints() {
        locked {
            if let db { sqlite3_wal_autocheckpoint(db, 1_000) }
            if let checkpointer { sqlite3_close(checkpointer) }
            checkpointer = nil
        }
    }

    /// Under the lock (inside a commit): wakes the syncer when a checkpoint is due.
    func logGrew(to frames: Int) {
        checkpoints.committed(frames: frames)
        if checkpoints.next != nil { syncWake.signal() }
    }

    /// The checkpoint due, if any, on the syncer's thread. A TRUNCATE holds the outbox's lock, so
    /// no commit slips in while it runs and the log is empty after it.
    func checkpointIfDue() -> Bool {
        pthread_mutex_lock(mutex)
        guard let connection = checkpointer, !syncerStopping, let step = checkpoints.start() else {
            pthread_mutex_unlock(mutex)
            return false
        }
        var log: Int32 = -1
        var copied: Int32 = -1
        let rc: Int32
        switch step {
        case .passive:
            pthread_mutex_unlock(mutex)
            rc = sqlite3_wal_checkpoint_v2(connection, nil, SQLITE_CHECKPOINT_PASSIVE, &log, &copied)
            pthread_mutex_lock(mutex)
        case .truncate:
            rc = sqlite3_wal_checkpoint_v2(connection, nil, SQLITE_CHECKPOINT_TRUNCATE, &log, &copied)
        }
        checkpoints.finished(step, ok: rc == SQLITE_OK, log: Int(log))
        pthread_mutex_unlock(mutex)
        return true
    }
}
