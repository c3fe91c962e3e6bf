// BTHome button adverts → presses. A button repeats one press in many adverts with the same
// packet id; one packet id is one press however often and however late it is re-sent (devices
// re-broadcast their last packet, some minutes or hours later), so the last id per device is kept
// — and persisted by the caller, so a reboot does not turn a re-broadcast into a press. For an
// encrypted device the counter must also increase: an older or equal counter is a replay.

public struct BTHomeButtonTracker: Sendable {
    public struct DeviceMemory: Sendable, Equatable, Codable {
        public var packetID: UInt8?
        public var counter: UInt32?
        public init(packetID: UInt8? = nil, counter: UInt32? = nil) { self.packetID = packetID; self.counter = counter }
    }

    public enum Verdict: Sendable, Equatable {
        /// A new press: one entry per button object, index and event (`none` entries left out).
        case press([(index: Int, event: BTHomeButtonEvent)])
        case repeated
        case replay(lastCounter: UInt32)
        /// A new packet without any button event (battery, heartbeat).
        case noEvent

        public static func == (a: Verdict, b: Verdict) -> Bool {
            switch (a, b) {
            case let (.press(x), .press(y)): x.map(\.index) == y.map(\.index) && x.map(\.event) == y.map(\.event)
            case (.repeated, .repeated), (.noEvent, .noEvent): true
            case let (.replay(x), .replay(y)): x == y
            default: false
            }
        }
    }

    public private(set) var memory: [String: DeviceMemory]
    /// Addresses whose memory changed since `takeChanges()`: they go into the same outbox
    /// transaction as the events they produced.
    private var dirty: Set<String> = []
    public var changed: Bool { !dirty.isEmpty }

    public init(memory: [String: DeviceMemory] = [:]) { self.memory = memory }

    public mutating func observe(device: String, packet: BTHomePacket) -> Verdict {
        var m = memory[device] ?? DeviceMemory()
        if let counter = packet.counter, let last = m.counter, counter <= last {
            // The same packet re-sent carries the same counter: a repeat, not an attack.
            if counter == last && packet.packetID == m.packetID { return .repeated }
            return .replay(lastCounter: last)
        }
        if let id = packet.packetID, id == m.packetID {
            // The same press re-sent (re-encrypted with a newer counter, or plain).
            if let c = packet.counter { m.counter = c; memory[device] = m; dirty.insert(device) }
            return .repeated
        }
        // Without a packet id, an encrypted counter is the press identity; plain packets without
        // either cannot be told apart and count once per change of content (not done here).
        if packet.packetID == nil && packet.counter == nil { return .repeated }
        m.packetID = packet.packetID
        m.counter = packet.counter ?? m.counter
        memory[device] = m
        dirty.insert(device)
        let buttons = packet.buttons.enumerated().filter { $0.element != .none }.map { (index: $0.offset, event: $0.element) }
        return buttons.isEmpty ? .noEvent : .press(buttons)
    }

    /// What changed since the last call, for the caller to store; forgets that it changed.
    public mutating func takeChanges() -> [String: DeviceMemory] {
        defer { dirty.removeAll() }
        var out: [String: DeviceMemory] = [:]
        for address in dirty { out[address] = memory[address] }
        return out
    }
}
