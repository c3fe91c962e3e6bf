import DoorbellCore
import PropertyBased
import Testing

/// Group commit (GroupSync): commits made without their fsync, one fsync at a time covering
/// every commit before it started; stored and acknowledgements follow what has returned.
@Suite struct GroupSyncTests {
    /// A commit made while an fsync runs is not covered by it: it waits for the next one, which
    /// covers every commit made meanwhile (mutation: taking the target when the fsync returns
    /// instead of when it starts reports ticket 2 stored by the first fsync).
    @Test func aCommitDuringAnFsyncWaitsForTheNextOneWhichCoversAllOfThem() {
        var g = GroupSync<Int>()
        #expect(g.commit(1) == 1)
        #expect(g.startSync() == 1)
        #expect(g.startSync() == nil, "one fsync at a time")
        #expect(g.commit(2) == 2)
        #expect(g.commit(3) == 3)
        #expect(!g.acknowledgementMayApply(readAt: 1))
        let first = g.finishSync(ok: true)
        #expect(first.map(\.waiter) == [1] && first.allSatisfy(\.stored))
        #expect(g.acknowledgementMayApply(readAt: 1))
        #expect(!g.acknowledgementMayApply(readAt: 3))
        #expect(g.needsSync)
        #expect(g.startSync() == 3)
        #expect(g.finishSync(ok: true).map(\.waiter) == [2, 3], "one fsync for both")
        #expect(g.isIdle)
        #expect(g.startSync() == nil)
    }

    /// A failed fsync tells its commits they are not stored, releases the acknowledgements (the
    /// rows stay and are delivered), and a later fsync does not make them stored.
    @Test func aFailedFsyncIsNotStoredAndReleasesAcknowledgements() {
        var g = GroupSync<Int>()
        _ = g.commit(1)
        _ = g.startSync()
        #expect(g.finishSync(ok: false).map(\.stored) == [false])
        #expect(g.acknowledgementMayApply(readAt: 1))
        _ = g.commit(2)
        _ = g.startSync()
        #expect(g.finishSync(ok: true).map { "\($0.waiter) \($0.stored)" } == ["2 true"])
        #expect(g.finishSync(ok: true).isEmpty, "no fsync runs: nothing settles")
    }

    /// Any interleaving of commits (the ingest), fsync starts and returns (the syncer, some
    /// failing), reads of the queue and their 2xx answers (the uplink): an acknowledgement is
    /// applied only after every commit its read could see has had an fsync started after it
    /// return; a commit is reported stored only when the first fsync started after it returned
    /// successfully; every waiter is told exactly once, and a drain settles everything in a
    /// bounded number of fsyncs.
    @Test func neverAnAcknowledgementOrStoredBeforeItsFsync() async {
        await propertyCheck(count: 500, input: Gen.int(in: 0...5).array(of: 0...120)) { steps in
            var g = GroupSync<UInt64>()
            // The truth: per commit, the outcome of the first fsync that started after it and returned.
            var truth: [UInt64: Bool] = [:]
            var running: UInt64? // commits made before the running fsync started
            var told: [UInt64: Bool] = [:]
            var reads: [UInt64] = []
            func finish(ok: Bool) {
                let out = g.finishSync(ok: ok)
                if let covered = running, covered > 0 {
                    for t in 1...covered where truth[t] == nil { truth[t] = ok }
                }
                running = nil
                for (ticket, stored) in out {
                    #expect(told[ticket] == nil, "told once: \(ticket)")
                    told[ticket] = stored
                    #expect(truth[ticket] != nil, "settled before an fsync started after it returned: \(ticket)")
                    if stored { #expect(truth[ticket] == true, "reported stored without a successful fsync: \(ticket)") }
                }
            }
            for step in steps {
                switch step {
                case 0: _ = g.commit(g.committed + 1)
                case 1: if let target = g.startSync() { #expect(target == g.committed); running = g.committed }
                case 2: finish(ok: true)
                case 3: finish(ok: false)
                case 4: reads.append(g.committed)
                default:
                    guard let readAt = reads.first else { continue }
                    if g.acknowledgementMayApply(readAt: readAt) {
                        for t in stride(from: 1, through: readAt, by: 1) {
                            #expect(truth[t] != nil, "acknowledgement applied before commit \(t)'s fsync returned")
                        }
                        reads.removeFirst()
                    }
                }
            }
            // A clean stop: every commit settles within two fsyncs.
            for _ in 0..<2 where !g.isIdle {
                if g.startSync() != nil { running = g.committed }
                finish(ok: true)
            }
            #expect(g.isIdle)
            #expect(told.count == Int(g.committed), "every waiter told")
            #expect(reads.allSatisfy { g.acknowledgementMayApply(readAt: $0) })
        }
    }
}
