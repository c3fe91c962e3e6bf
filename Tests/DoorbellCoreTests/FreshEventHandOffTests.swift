import DoorbellCore
import PropertyBased
import Testing

/// The hand-off lets an idle uplink send just-committed events without reading the outbox. The
/// rule it must keep: every event is sent exactly once — never one a read already gave the
/// uplink, never one lost because it was neither read nor handed over.
@Suite struct FreshEventHandOffTests {
    @Test func anIdleUplinkGetsWhatWasCommittedAfterItsReadAndNothingElse() {
        var box = FreshEventHandOff<Int>()
        #expect(box.take() == nil, "closed: read the outbox")
        box.open(readAfterCommit: 4)
        #expect(box.awaitsCommit, "open and empty: an append told of ahead is worth waiting for")
        box.committed([50], commit: 4) // the read saw commit 4 already
        box.committed([60, 61], commit: 6) // two radios' threads: 6 handed over before 5
        box.committed([55], commit: 5)
        #expect(!box.awaitsCommit)
        #expect(box.take() == [60, 61, 55])
        #expect(!box.awaitsCommit, "closed")
        #expect(box.take() == nil, "taking closes it: the next turn reads")
        box.committed([70], commit: 7)
        #expect(box.take() == nil, "handed over while closed: only a read finds it")
    }

    @Test func aCommitHandedOverBetweenTheReadAndTheOpeningSpoilsIt() {
        var box = FreshEventHandOff<Int>()
        box.committed([10], commit: 3) // after the read of commit 2, before the uplink opened
        box.open(readAfterCommit: 2)
        box.committed([11], commit: 4)
        #expect(box.take() == nil, "10 was not kept: the uplink reads and finds both")
    }

    @Test func anythingElseThatChangesTheOutboxOrABurstMakesTheUplinkRead() {
        var box = FreshEventHandOff<Int>()
        box.open(readAfterCommit: 0)
        box.committed([1], commit: 1)
        box.spoil() // a dead letter requeued, an eviction
        box.committed([2], commit: 2)
        #expect(box.take() == nil)
        box.open(readAfterCommit: 2)
        box.committed(Array(0..<FreshEventHandOff<Int>.capacity), commit: 3)
        box.committed([99], commit: 4)
        #expect(box.take() == nil, "more than the capacity: a read")
        box.open(readAfterCommit: 4)
        box.committed([5], commit: 5)
        #expect(box.take() == [5], "a spoiled turn does not carry over once read")
    }

    /// The outbox, its writers and the uplink's turn (take, else note the commit count, read,
    /// and open when the read found nothing), with every step of each interleaved at random
    /// and hand-overs arriving late and out of order: each event is sent once, and a final
    /// quiet turn leaves nothing unsent.
    @Test func whateverTheInterleavingEveryEventIsSentExactlyOnce() async {
        await propertyCheck(input: Gen.int(in: 0...9).array(of: 1...120)) { steps in
            var model = Model()
            for step in steps { model.step(step) }
            model.settle()
            #expect(model.sentTwice.isEmpty, "sent twice: \(model.sentTwice)")
            #expect(model.unsent.isEmpty, "never sent: \(model.unsent)")
        }
    }

    struct Model {
        var box = FreshEventHandOff<Int>()
        var commits: Int64 = 0
        var nextEvent = 0
        /// Committed and not yet sent (what a read returns).
        var outbox: Set<Int> = []
        var created: Set<Int> = []
        var sent: [Int: Int] = [:]
        /// Hand-overs and spoils not yet made (the writer's thread is late).
        var handOffs: [(commit: Int64, events: [Int])] = []
        var spoils = 0
        enum Phase { case top, counted(Int64), readEmpty(Int64), waiting }
        var phase = Phase.top

        var sentTwice: [Int] { sent.filter { $0.value > 1 }.map(\.key) }
        var unsent: Set<Int> { created.subtracting(sent.keys) }

        mutating func send(_ events: some Sequence<Int>) {
            for e in events {
                sent[e, default: 0] += 1
                outbox.remove(e)
            }
        }

        /// An append: one commit of one or two events, handed over later.
        mutating func append(_ count: Int) {
            commits += 1
            let events = Array(nextEvent..<nextEvent + count)
            nextEvent += count
            created.formUnion(events)
            outbox.formUnion(events)
            handOffs.append((commits, events))
        }

        /// A writer that is not an append (a dead letter requeued): uncounted, spoils later.
        mutating func requeue() {
            let e = nextEvent
            nextEvent += 1
            created.insert(e)
            outbox.insert(e)
            spoils += 1
        }

        mutating func uplinkStep() {
            switch phase {
            case .top, .waiting:
                if let handed = box.take() {
                    send(handed)
                    phase = .top
                } else {
                    phase = .counted(commits)
                }
            case let .counted(g):
                if outbox.isEmpty {
                    phase = .readEmpty(g)
                } else {
                    send(outbox)
                    phase = .top
                }
            case let .readEmpty(g):
                box.open(readAfterCommit: g)
                phase = .waiting
            }
        }

        mutating func step(_ code: Int) {
            switch code {
            case 0, 1: append(code + 1)
            case 2: requeue()
            case 3, 4: // the oldest late hand-over, or one out of order
                if !handOffs.isEmpty {
                    let h = handOffs.remove(at: code == 3 ? 0 : handOffs.count - 1)
                    box.committed(h.events, commit: h.commit)
                }
            case 5:
                if spoils > 0 {
                    spoils -= 1
                    box.spoil()
                }
            default: uplinkStep()
            }
        }

        /// Every writer finishes, then the uplink turns until it waits with nothing left.
        mutating func settle() {
            for h in handOffs { box.committed(h.events, commit: h.commit) }
            handOffs = []
            for _ in 0..<spoils { box.spoil() }
            spoils = 0
            for _ in 0..<12 { uplinkStep() }
        }
    }
}
