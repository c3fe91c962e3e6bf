// When the outbox's syncer checkpoints the write-ahead log (Outbox+Checkpoint.swift). SQLite's
// automatic checkpoint ran inside the commit that took the log past 1,000 frames — under the
// outbox's lock, with an fsync of the log and one of the database — so every ≈ 60 presses a
// press (or the next one, waiting for the lock) waited for both. The syncer checkpoints instead,
// through a connection of its own, and this value says when:
// - PASSIVE once the log holds `passiveFrames`: it runs beside the writers, which never wait
//   for it. It copies the frames committed before it started; SQLite starts the log over (the
//   next commit writes from its beginning) only once every frame is in the database;
// - a commit made while a PASSIVE runs (likely when an fsync takes longer than the gap between
//   presses) leaves the log's tail behind, so under a steady stream the log would grow for
//   ever: another PASSIVE once `retryFrames` more came, and past `limitFrames` a TRUNCATE with
//   the writers held (the shell holds the outbox's lock), which empties the file. That one
//   stalls the writers for its fsyncs, once per `limitFrames` frames at most;
// - a checkpoint that failed (busy, an I/O error) is tried again after `retryFrames` more, never
//   in a loop.

public struct CheckpointPlan: Sendable, Equatable {
    public enum Step: Sendable, Equatable { case passive, truncate }

    public let passiveFrames: Int
    public let retryFrames: Int
    public let limitFrames: Int
    /// Frames in the log after the last commit (SQLite's WAL hook).
    public private(set) var frames = 0
    /// Frames in the log when the last checkpoint started; 0 once the log started over.
    public private(set) var tried = 0

    /// 4,000 frames (SQLite's own checkpoint ran at 1,000): a checkpoint writes each page the
    /// cycle changed back once, so a longer cycle rewrites the hot pages (the table's last
    /// interior page, the priority index's) fewer times per press — 8,290 → 8,093 bytes written
    /// per stored press, measured 2026-11-28 (docs/benchmarks.md) — and makes the one fsync a
    /// cycle costs under the lock four times rarer. 8,000 frames of 1 KiB pages still bound the
    /// file at ≈ 8.4 MB.
    public init(passiveFrames: Int = 4_000, retryFrames: Int = 250, limitFrames: Int = 8_000) {
        self.passiveFrames = passiveFrames
        self.retryFrames = max(1, retryFrames)
        self.limitFrames = max(passiveFrames, limitFrames)
    }

    /// A commit left `frames` in the log. Fewer than before: the log started over.
    public mutating func committed(frames: Int) {
        if frames < self.frames { tried = 0 }
        self.frames = frames
    }

    /// What the syncer should do now, if anything: `retryFrames` since the last try at least.
    public var next: Step? {
        guard frames - tried >= retryFrames else { return nil }
        if frames >= limitFrames { return .truncate }
        return frames >= passiveFrames ? .passive : nil
    }

    /// The syncer starts the checkpoint due (nil: none is).
    public mutating func start() -> Step? {
        guard let step = next else { return nil }
        tried = frames
        return step
    }

    /// A checkpoint returned. `ok`: it ran; `log`: SQLite's count of frames left in the log (0
    /// after a TRUNCATE that emptied it). Anything else waits for `retryFrames` more.
    public mutating func finished(_ step: Step, ok: Bool, log: Int) {
        if step == .truncate && ok && log == 0 {
            frames = 0
            tried = 0
        }
    }
}
