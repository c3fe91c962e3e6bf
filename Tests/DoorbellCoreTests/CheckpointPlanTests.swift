import DoorbellCore
import PropertyBased
import Testing

/// When the syncer checkpoints the outbox's write-ahead log (CheckpointPlan): PASSIVE past a
/// threshold, again only after more frames came, TRUNCATE (writers held) only past the limit.
@Suite struct CheckpointPlanTests {
    /// Nothing below the threshold; a PASSIVE at it; a PASSIVE that commits slipped past is tried
    /// again only `retryFrames` later; the log starting over (fewer frames) resets it (mutations:
    /// no retry gate starts a PASSIVE after every commit; a TRUNCATE below the limit).
    @Test func passiveAtTheThresholdAgainOnlyAfterMoreFramesAndTruncateOnlyPastTheLimit() {
        var p = CheckpointPlan(passiveFrames: 100, retryFrames: 30, limitFrames: 200)
        p.committed(frames: 99)
        #expect(p.next == nil)
        p.committed(frames: 108)
        #expect(p.start() == .passive)
        p.committed(frames: 116) // a press slipped in while it ran: the log's tail stays
        p.finished(.passive, ok: true, log: 116)
        #expect(p.next == nil, "not again after one more commit")
        p.committed(frames: 137)
        #expect(p.next == nil)
        p.committed(frames: 140)
        #expect(p.start() == .passive, "30 frames after the last try")
        p.finished(.passive, ok: true, log: 140)
        p.committed(frames: 8) // complete: the next commit started the log over
        #expect(p.next == nil)
        p.committed(frames: 199)
        #expect(p.start() == .passive, "below the limit the writers are never held")
        p.committed(frames: 229)
        #expect(p.start() == .truncate)
        p.finished(.truncate, ok: true, log: 0)
        #expect(p.frames == 0 && p.next == nil)
    }

    /// A failed checkpoint (busy: another process reads) is not tried again in a loop: after
    /// `retryFrames` more (mutation: resetting `tried` on failure starts it again at once).
    @Test func aFailedCheckpointWaitsForMoreFrames() {
        var p = CheckpointPlan(passiveFrames: 100, retryFrames: 30, limitFrames: 200)
        p.committed(frames: 250)
        #expect(p.start() == .truncate)
        p.finished(.truncate, ok: false, log: -1)
        #expect(p.start() == nil)
        p.committed(frames: 279)
        #expect(p.next == nil)
        p.committed(frames: 280)
        #expect(p.start() == .truncate)
    }

    /// A model of SQLite's log under any stream of commits (1–20 frames each) with the syncer
    /// woken after each: a PASSIVE completes or has commits slip past it (or fails); once every
    /// frame is in the database the next commit starts the log over; a TRUNCATE with the writers
    /// held empties it. The log never holds more than the limit plus one retry step plus one
    /// commit, a TRUNCATE never runs below the limit, and no two checkpoints start fewer than
    /// `retryFrames` apart without the log starting over.
    @Test func theLogStaysBoundedWhateverSlipsPastThePassives() async {
        let input = Gen.int(in: 0...99).array(of: 0...400)
        await propertyCheck(count: 300, input: input) { steps in
            var p = CheckpointPlan(passiveFrames: 100, retryFrames: 30, limitFrames: 300)
            var log = 0, copied = 0
            var lastStart: Int?
            let bound = p.limitFrames + p.retryFrames + 20
            for step in steps {
                // A commit of 1–20 frames; it starts the log over if every frame was copied.
                let size = step % 20 + 1
                if log > 0 && copied == log { log = 0; copied = 0; lastStart = nil }
                log += size
                p.committed(frames: log)
                #expect(log <= bound, "log \(log) past \(bound)")
                guard let s = p.start() else { continue }
                if let last = lastStart { #expect(log - last >= p.retryFrames, "checkpoints \(last) → \(log)") }
                lastStart = log
                switch s {
                case .truncate:
                    #expect(log >= p.limitFrames)
                    log = 0; copied = 0; lastStart = nil
                    p.finished(.truncate, ok: true, log: 0)
                case .passive:
                    // step / 20 picks the outcome: complete, a commit slipped in, or failed.
                    switch step / 20 {
                    case 0, 1: copied = log; p.finished(.passive, ok: true, log: log)
                    case 2, 3:
                        copied = log
                        log += size
                        p.committed(frames: log)
                        p.finished(.passive, ok: true, log: log)
                    default: p.finished(.passive, ok: false, log: -1)
                    }
                }
            }
        }
    }
}
