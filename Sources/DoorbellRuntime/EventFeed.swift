import DoorbellCore

// Recent events and live followers (`agentctl events [--follow]`). Followers never slow the
// pipeline: each has a bounded queue, and a follower that falls behind loses the oldest lines
// and is told how many.

public final class EventFeed: @unchecked Sendable {
    final class Follower: @unchecked Sendable {
        let signal = WakeSignal()
        let queue = Locked<(items: [JSONValue], dropped: Int, closed: Bool)>(([], 0, false))
    }

    static let recentLimit = 100
    static let followerLimit = 1_000
    private let state = Locked<(recent: [JSONValue], followers: [ObjectIdentifier: Follower])>(([], [:]))

    public init() {}

    public func publish(_ event: JSONValue) {
        let followers = state.withLock { s -> [Follower] in
            s.recent.append(event)
            if s.recent.count > Self.recentLimit { s.recent.removeFirst(s.recent.count - Self.recentLimit) }
            return Array(s.followers.values)
        }
        for f in followers {
            f.queue.withLock { q in
                q.items.append(event)
                if q.items.count > Self.followerLimit { q.items.removeFirst(); q.dropped += 1 }
            }
            f.signal.signal()
        }
    }

    public var recent: [JSONValue] { state.snapshot.recent }

    public var hasFollowers: Bool { !state.snapshot.followers.isEmpty }

    /// Streams recent events (unless `includeRecent` is false), then live ones, until `write`
    /// fails (client gone) or `close()`.
    public func follow(includeRecent: Bool = true, _ write: (JSONValue) -> Bool) {
        let follower = Follower()
        let recent = state.withLock { s -> [JSONValue] in
            s.followers[ObjectIdentifier(follower)] = follower
            return includeRecent ? s.recent : []
        }
        defer { _ = state.withLock { $0.followers.removeValue(forKey: ObjectIdentifier(follower)) } }
        for e in recent where !write(e) { return }
        while true {
            // A heartbeat every 10 s finds clients that went away without a word (each holds a
            // descriptor and a thread until then).
            follower.signal.wait(timeoutMicros: 10_000_000)
            let (items, dropped, closed) = follower.queue.withLock { q -> ([JSONValue], Int, Bool) in
                defer { q.items.removeAll(); q.dropped = 0 }
                return (q.items, q.dropped, q.closed)
            }
            if closed { return }
            if dropped > 0, !write(ControlStreamLine.dropped(dropped).json) { return }
            if items.isEmpty, !write(ControlStreamLine.heartbeat.json) { return }
            for e in items where !write(e) { return }
        }
    }

    /// Ends every follow stream (agent stopping).
    public func close() {
        for f in state.snapshot.followers.values {
            f.queue.withLock { $0.closed = true }
            f.signal.signal()
        }
    }
}
