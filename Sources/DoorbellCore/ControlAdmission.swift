// The control socket's admission: thread and descriptor bounds as a value (the shell counts).

/// How many control connections are served at once. A request holds a thread for at most its
/// 2 s read and write timeouts; a follower (`events --follow`, `capture`) for as long as it stays.
/// Beyond either cap a connection is refused with a message that says so, so a flood of clients
/// cannot take every thread and descriptor, and `status` keeps its own slot free.
public struct ControlAdmission: Sendable, Equatable {
    public enum Slot: Sendable, Equatable { case request, follower }

    public let maxRequests: Int
    public let maxFollowers: Int
    public private(set) var requests = 0
    public private(set) var followers = 0

    public init(maxRequests: Int = 16, maxFollowers: Int = 8) {
        self.maxRequests = maxRequests
        self.maxFollowers = maxFollowers
    }

    /// nil: admitted (release it later); else the refusal for the client.
    public mutating func admit(_ slot: Slot) -> String? {
        switch slot {
        case .request:
            guard requests < maxRequests else {
                return "the agent is already serving \(maxRequests) control connections (a client that sends nothing is dropped after 2 s); try again in a moment"
            }
            requests += 1
        case .follower:
            guard followers < maxFollowers else {
                return "\(maxFollowers) followers (agentctl events --follow, agentctl capture) are already connected, the most the agent serves; stop one of them and try again"
            }
            followers += 1
        }
        return nil
    }

    public mutating func release(_ slot: Slot) {
        switch slot {
        case .request: requests = max(0, requests - 1)
        case .follower: followers = max(0, followers - 1)
        }
    }

    /// A request turned out to be a stream: its request slot is freed either way; nil when it
    /// got a follower slot.
    public mutating func promote() -> String? {
        release(.request)
        return admit(.follower)
    }
}
