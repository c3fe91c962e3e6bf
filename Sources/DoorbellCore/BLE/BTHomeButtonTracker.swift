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

    /// The last packet per device, by its name (the address text the caller persists it under).
    public var memory: [String: DeviceMemory] {
        var out: [String: DeviceMemory] = [:]
        for e in entries where e.stored { out[e.name] = e.memory }
        return out
    }
    /// `stored`: given to init or written since (a device only looked up has no memory yet).
    private var entries: [(name: String, memory: DeviceMemory, stored: Bool)] = []
    private var byName: [String: Int] = [:]
    /// The hot path's way in: a report's 48-bit address → its entry, so an advert costs no
    /// address text and no string hashing once its device has been seen.
    private var byAddress: [UInt64: Int] = [:]
    /// Entries whose memory changed since `takeChanges()`: they go into the same outbox
    /// transaction as the events they produced.
    private var dirty: Set<Int> = []
    public var changed: Bool { !dirty.isEmpty }

    public init(memory: [String: DeviceMemory] = [:]) {
        for (name, m) in memory { byName[name] = entries.count; entries.append((name, m, true)) }
    }

    public mutating func observe(device: String, packet: BTHomePacket) -> Verdict {
        observe(slot: slot(named: device), packet: packet)
    }

    /// The same for the device at `address`, named `name` (made only the first time the address
    /// is seen): one address must always have the same name.
    public mutating func observe(address: UInt64, name: @autoclosure () -> String, packet: BTHomePacket) -> Verdict {
        let slot: Int
        if let s = byAddress[address] {
            slot = s
        } else {
            slot = self.slot(named: name())
            byAddress[address] = slot
        }
        return observe(slot: slot, packet: packet)
    }

    private mutating func slot(named name: String) -> Int {
        if let s = byName[name] { return s }
        byName[name] = entries.count
        entries.append((name, DeviceMemory(), false))
        return entries.count - 1
    }

    private mutating func observe(slot: Int, packet: BTHomePacket) -> Verdict {
        var m = entries[slot].memory
        if let counter = packet.counter, let last = m.counter, counter <= last {
            // The same packet re-sent carries the same counter: a repeat, not an attack.
            if counter == last && packet.packetID == m.packetID { return .repeated }
            return .replay(lastCounter: last)
        }
        if let id = packet.packetID, id == m.packetID {
            // The same press re-sent (re-encrypted with a newer counter, or plain).
            if let c = packet.counter { m.counter = c; entries[slot].memory = m; entries[slot].stored = true; dirty.insert(slot) }
            return .repeated
        }
        // Without a packet id, an encrypted counter is the press identity; plain packets without
        // either cannot be told apart and count once per change of content (not done here).
        if packet.packetID == nil && packet.counter == nil { return .repeated }
        m.packetID = packet.packetID
        m.counter = packet.counter ?? m.counter
        entries[slot].memory = m
        entries[slot].stored = true
        dirty.insert(slot)
        let buttons = packet.buttons.enumerated().filter { $0.element != .none }.map { (index: $0.offset, event: $0.element) }
        return buttons.isEmpty ? .noEvent : .press(buttons)
    }

    /// What changed since the last call, for the caller to store; forgets that it changed.
    public mutating func takeChanges() -> [String: DeviceMemory] {
        defer { dirty.removeAll() }
        var out: [String: DeviceMemory] = [:]
        for slot in dirty { out[entries[slot].name] = entries[slot].memory }
        return out
    }
}
