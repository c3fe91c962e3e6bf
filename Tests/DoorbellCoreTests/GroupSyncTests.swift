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
    /// A 2xx for a row whose fsync runs is handed over: the row is held (not sent again) until
    /// the acknowledgement is applied, which the fsync's return releases; a row already durable
    /// is acknowledged at once (mutation: releasing owed acknowledgements whose ticket is past
    /// `settled` gives 11 back after 10's fsync).
    @Test func anAcknowledgementBeforeItsFsyncIsHeldAndReleasedByIt() {
        var g = GroupSync<Int>()
        let a = g.commit()
        _ = g.startSync()
        let b = g.commit()
        let now = [g.acknowledge(10, ticket: a), g.acknowledge(11, ticket: b), g.acknowledge(10, ticket: a), g.acknowledge(3, ticket: 0)]
        #expect(now == [false, false, false, true], "10 and 11 wait for their fsync, 10 held is not acknowledged twice, 3 is durable")
        #expect(g.isHeld(10) && g.isHeld(11) && !g.isHeld(3))
        let early = g.takeAcknowledgements()
        #expect(early.isEmpty, "nothing released before an fsync returned")
        _ = g.finishSync(ok: true)
        let first = g.takeAcknowledgements()
        #expect(first == [10])
        #expect(g.isHeld(10), "held until applied")
        g.applied([10])
        #expect(!g.isHeld(10) && g.owesAcknowledgements)
        _ = g.startSync()
        _ = g.finishSync(ok: false)
        let second = g.takeAcknowledgements()
        #expect(second == [11], "a failed fsync releases it too (the row stays, is delivered)")
        g.applied([11])
        #expect(!g.owesAcknowledgements)
    }

    /// Any interleaving of commits (each a row), fsync starts and returns, sends of rows the
    /// queue offers, 2xx answers handed over, and the shell taking and applying what an fsync
    /// released: a row whose 2xx is in hand is never sent again before its acknowledgement is
    /// applied; an acknowledgement is never released before an fsync started after its row's
    /// commit returned; every release is taken at the first take after it, and a clean stop
    /// (fsyncs until idle, take, apply) leaves nothing owed and every answered row removed.
    @Test func aHandedOverAcknowledgementIsNeverSentAgainNorAppliedBeforeItsFsync() async {
        await propertyCheck(count: 500, input: Gen.int(in: 0...7).array(of: 0...150)) { steps in
            var g = GroupSync<UInt64>()
            var fsynced: Set<UInt64> = [] // rows an fsync started after their commit returned for
            var running: UInt64?
            var queue: [UInt64] = [] // rows in the table
            var inFlight: [UInt64] = []
            var answered: Set<UInt64> = [] // 2xx in hand, not applied
            var taken: [Int64] = []
            func finish(ok: Bool) {
                _ = g.finishSync(ok: ok)
                if let covered = running, covered > 0 { for t in 1...covered { fsynced.insert(t) } }
                running = nil
            }
            func apply(_ ids: [Int64]) {
                for id in ids {
                    let row = UInt64(id)
                    queue.removeAll { $0 == row }
                    answered.remove(row)
                }
                g.applied(ids)
            }
            func take() {
                let ids = g.takeAcknowledgements()
                for id in ids { #expect(fsynced.contains(UInt64(id)), "applied before its fsync returned: \(id)") }
                let owedReleased = answered.filter { fsynced.contains($0) && !taken.contains(Int64($0)) }
                #expect(Set(ids) == Set(owedReleased.map { Int64($0) }), "every released acknowledgement taken")
                taken += ids
            }
            for step in steps {
                switch step {
                case 0: queue.append(g.commit(g.committed + 1))
                case 1: if g.startSync() != nil { running = g.committed }
                case 2: finish(ok: true)
                case 3: finish(ok: false)
                case 4:
                    // The uplink reads the queue (skipping held rows) and sends the first it may.
                    guard let row = queue.first(where: { !g.isHeld(Int64($0)) && !inFlight.contains($0) }) else { continue }
                    #expect(!answered.contains(row), "sent again while its 2xx waits: \(row)")
                    inFlight.append(row)
                case 5:
                    guard !inFlight.isEmpty else { continue }
                    let row = inFlight.removeFirst()
                    answered.insert(row)
                    if g.acknowledge(Int64(row), ticket: row) {
                        #expect(fsynced.contains(row), "applied at once before its fsync: \(row)")
                        apply([Int64(row)])
                    }
                case 6: take() // under the lock, after an fsync returned
                default:
                    apply(taken) // its transaction, later, on the syncer's thread
                    taken = []
                }
            }
            // A clean stop: fsyncs until idle, then what they released applied.
            for _ in 0..<2 where !g.isIdle {
                if g.startSync() != nil { running = g.committed }
                finish(ok: true)
            }
            take()
            apply(taken)
            #expect(!g.owesAcknowledgements)
            #expect(answered.isEmpty, "every acknowledgement applied: \(answered)")
        }
    }
}
