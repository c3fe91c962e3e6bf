import DoorbellCore
import Glibc

// Storage full: events are held in memory (bounded; the outbox's `EvictionPolicy` chooses what
// goes) and a thread retries them, oldest first, until the outbox takes them.

extension Agent {
    /// Holds events in memory (storage is full) and wakes the retry thread.
    func spillInMemory(_ events: [AgentEvent]) {
        let dropped = counters.withLock { c -> [AgentEvent] in
            c.spilled.append(contentsOf: events)
            var dropped: [AgentEvent] = []
            while let d = Self.trimSpill(&c) { dropped.append(d) }
            return dropped
        }
        for d in dropped { log.error("memory.evicted", [("type", d.type.rawValue), ("device", d.device.id), ("hint", "storage has been full too long")]) }
        spillWake.signal()
    }

    /// Memory is bounded too: past this many held events, the oldest of the lowest tier goes
    /// (counted and logged), by the same policy as the outbox.
    static let maxHeldInMemory = 5_000

    static func trimSpill(_ c: inout AgentCounters, bound: Int = maxHeldInMemory) -> AgentEvent? {
        guard c.spilled.count > bound,
              let victim = EvictionPolicy().victim(amongOldestFirst: c.spilled.lazy.map(\.type.rawValue)) else { return nil }
        c.evicted += 1
        return c.spilled.remove(at: victim)
    }

    /// Retries events held in memory while storage was full, oldest first, until they are stored.
    func runSpillRetries() throws(ThreadStartError) {
        let heartbeat = loops.heartbeat("spill", periodMicros: Self.spillHeartbeatMicros)
        try startLoop(heartbeat, thread: "spill") { [self] in
            while !spillStopping.snapshot {
                let first = counters.withLock { $0.spilled.first }
                guard let event = first else {
                    heartbeat.wait(spillWake, timeoutMicros: nil)
                    continue
                }
                heartbeat.beat()
                if case .stored = store([event], waitForStorage: true) {
                    let left = counters.withLock { c -> Int in c.spilled.removeFirst(); return c.spilled.count }
                    if left == 0 { log.notice("outbox.recovered", [("hint", "storage has space again; every held event is stored")]) }
                    continue
                }
                heartbeat.wait(spillWake, timeoutMicros: 2_000_000)
            }
            heartbeat.stopped()
        }
    }

    /// The spill loop beats at least this often while it waits; a store stuck longer than two of
    /// these and the grace is a stuck loop.
    static let spillHeartbeatMicros: Int64 = 30_000_000
}
