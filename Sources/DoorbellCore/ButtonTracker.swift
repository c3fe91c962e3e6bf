// Turns a stream of button frames into presses.
//
// One press repeats its code many times (4–70 words over up to ~2 s). The first frame of a
// press produces `pressed` at once — ringing must not wait for the burst to end. Frames closer
// than `repeatGap` to the previous frame of the same device belong to the same press; a burst
// still going after `holdAfter` adds one `held`. A new press within `cooldown` of the last
// forwarded press is counted (and reported with the next forwarded one) but not forwarded.
// State is per device, so two buttons interleaving never confuse each other.
//
// Buttons that announce each press as one message (BTHome: a new packet id is a new press) go
// through `observeDiscrete`: no burst to merge, but the same cooldown, counters and `suppressed`
// as RF, so `cooldown_ms` means the same on both radios.
//
// Pure: time comes in with each frame (microseconds, any monotonic origin).

public struct ButtonTracker: Sendable {
    public struct Settings: Sendable, Equatable {
        public var repeatGapMicros: Int64 = 300_000
        public var holdAfterMicros: Int64 = 1_500_000
        public var cooldownMicros: Int64 = 3_000_000
        public init(repeatGapMicros: Int64 = 300_000, holdAfterMicros: Int64 = 1_500_000, cooldownMicros: Int64 = 3_000_000) {
            self.repeatGapMicros = repeatGapMicros
            self.holdAfterMicros = holdAfterMicros
            self.cooldownMicros = cooldownMicros
        }
    }

    public enum Output: Sendable, Equatable {
        /// A new press to forward. `suppressed` counts presses swallowed by the cooldown since the
        /// previous forwarded press.
        case pressed(device: String, at: Int64, suppressed: Int)
        /// The press that started at `pressStartedAt` is still going after `holdAfter`.
        case held(device: String, at: Int64, pressStartedAt: Int64)
    }

    /// A tracked device: a name (RF codes, configured devices, `id#N` for their other buttons),
    /// or a learned BLE button by its 48-bit address and button index, so a busy street's presses
    /// cost no text and no string hashing here.
    public enum Key: Hashable, Sendable {
        case name(String)
        case address(UInt64, button: Int)
    }

    /// What a frame of a `Key` did (`Output` without the device's name).
    public enum Decision: Sendable, Equatable {
        case pressed(at: Int64, suppressed: Int)
        case held(at: Int64, pressStartedAt: Int64)

        func output(device: String) -> Output {
            switch self {
            case let .pressed(at, suppressed): .pressed(device: device, at: at, suppressed: suppressed)
            case let .held(at, startedAt): .held(device: device, at: at, pressStartedAt: startedAt)
            }
        }
    }

    public struct Counters: Sendable, Equatable {
        public var frames = 0
        public var presses = 0
        public var forwarded = 0
        public var suppressed = 0
        public var held = 0
    }

    struct DeviceState {
        var pressStartedAt: Int64
        var lastFrameAt: Int64
        var pressForwarded: Bool
        var heldEmitted: Bool
        var lastForwardedAt: Int64?
        var suppressedSinceForward: Int
    }

    /// Why a frame forwarded no press (`agentctl inject press` says which).
    public enum Swallowed: Sendable, Equatable {
        /// Within `repeatGap` of the device's previous frame (or a hold packet): the press still going.
        case samePress
        /// A new press within `cooldown` of the last forwarded one: counted as suppressed.
        case cooldown
    }

    public let settings: Settings
    public private(set) var counters = Counters()
    /// Why the last frame forwarded no press; nil when it forwarded one (or started a hold).
    public private(set) var lastSwallowed: Swallowed?
    /// The tracked devices: states in a flat array (the eviction scan reads times, no keys),
    /// found by key through `slots`.
    private var keys: [Key] = []
    private var states: [DeviceState] = []
    /// Each state's `lastFrameAt` again, packed: what the eviction scans (8 bytes a device, not
    /// a whole state), kept equal to the states' by every write below.
    private var frameTimes: [Int64] = []
    private var slots: [Key: Int] = [:]

    /// Unknown codes create state too (noise, neighbours' remotes); past this many we forget the
    /// idle ones so memory stays bounded.
    public static let maxTrackedDevices = 256

    public init(settings: Settings = Settings()) { self.settings = settings }

    public var trackedDevices: Int { states.count }

    public mutating func observe(device: String, at rawTime: Int64) -> Output? {
        counters.frames += 1
        guard let slot = slots[.name(device)] else { return firstPress(.name(device), at: rawTime).output(device: device) }
        var state = states[slot]
        // A clock that steps back (replays of several files) must not split or merge presses oddly.
        let at = max(rawTime, state.lastFrameAt)
        defer { states[slot] = state; frameTimes[slot] = state.lastFrameAt }

        if at - state.lastFrameAt <= settings.repeatGapMicros {
            state.lastFrameAt = at
            lastSwallowed = .samePress
            if state.pressForwarded, !state.heldEmitted, at - state.pressStartedAt >= settings.holdAfterMicros {
                state.heldEmitted = true
                counters.held += 1
                return .held(device: device, at: at, pressStartedAt: state.pressStartedAt)
            }
            return nil
        }

        state.lastFrameAt = at
        return newPress(&state, at: at)?.output(device: device)
    }

    /// One press that the button reported as one message. `continuation` is a press still going
    /// (BTHome hold_press): it follows its press, forwarded as `held` only if that press was.
    public mutating func observeDiscrete(device: String, at rawTime: Int64, continuation: Bool = false) -> Output? {
        observeDiscrete(key: .name(device), at: rawTime, continuation: continuation)?.output(device: device)
    }

    /// The same by key: one table for both ways in, so a configured device's injected press and
    /// its real ones share a cooldown whichever way they come.
    public mutating func observeDiscrete(key: Key, at rawTime: Int64, continuation: Bool = false) -> Decision? {
        counters.frames += 1
        guard let slot = slots[key] else { return firstPress(key, at: rawTime) }
        var state = states[slot]
        let at = max(rawTime, state.lastFrameAt)
        defer { states[slot] = state; frameTimes[slot] = state.lastFrameAt }
        state.lastFrameAt = at
        if continuation {
            lastSwallowed = .samePress
            // Once per press, like a long RF burst: later hold packets of the same press add nothing.
            guard state.pressForwarded, !state.heldEmitted else { return nil }
            state.heldEmitted = true
            counters.held += 1
            return .held(at: at, pressStartedAt: state.pressStartedAt)
        }
        return newPress(&state, at: at)
    }

    private mutating func firstPress(_ key: Key, at: Int64) -> Decision {
        lastSwallowed = nil
        makeRoom(now: at)
        counters.presses += 1
        counters.forwarded += 1
        slots[key] = states.count
        keys.append(key)
        frameTimes.append(at)
        states.append(DeviceState(pressStartedAt: at, lastFrameAt: at, pressForwarded: true,
                                  heldEmitted: false, lastForwardedAt: at, suppressedSinceForward: 0))
        return .pressed(at: at, suppressed: 0)
    }

    /// A press that is not part of the previous one: forwarded, or counted within the cooldown.
    private mutating func newPress(_ state: inout DeviceState, at: Int64) -> Decision? {
        counters.presses += 1
        state.pressStartedAt = at
        state.heldEmitted = false
        if let last = state.lastForwardedAt, at - last < settings.cooldownMicros {
            lastSwallowed = .cooldown
            state.pressForwarded = false
            state.suppressedSinceForward += 1
            counters.suppressed += 1
            return nil
        }
        let suppressed = state.suppressedSinceForward
        lastSwallowed = nil
        state.pressForwarded = true
        state.lastForwardedAt = at
        state.suppressedSinceForward = 0
        counters.forwarded += 1
        return .pressed(at: at, suppressed: suppressed)
    }

    private mutating func makeRoom(now: Int64) {
        guard states.count >= Self.maxTrackedDevices else { return }
        let horizon = max(settings.cooldownMicros, settings.repeatGapMicros, settings.holdAfterMicros)
        // One look first: on a busy street every tracked device is recent, and rebuilding the
        // table to drop none cost more than the rest of a press (replay of 4096 buttons). The
        // look reads the packed times: no key is copied or hashed.
        if let oldest = oldestSlot(now: now, horizon: horizon) { remove(slot: oldest); return }
        var kept = 0
        for i in frameTimes.indices where now - frameTimes[i] <= horizon {
            keys.swapAt(kept, i)
            states.swapAt(kept, i)
            frameTimes.swapAt(kept, i)
            kept += 1
        }
        keys.removeLast(keys.count - kept)
        states.removeLast(states.count - kept)
        frameTimes.removeLast(frameTimes.count - kept)
        slots.removeAll(keepingCapacity: true)
        for (i, key) in keys.enumerated() { slots[key] = i }
        if states.count >= Self.maxTrackedDevices, let oldest = oldestSlot(now: now, horizon: nil) { remove(slot: oldest) }
    }

    /// The least recently heard device; nil when it is older than `horizon` (then every stale
    /// one goes). Equal times: the first in the array (the dictionary before had no defined order
    /// either). One pass over the times, no branch but the minimum's.
    private func oldestSlot(now: Int64, horizon: Int64?) -> Int? {
        let (oldest, oldestAt): (Int, Int64) = frameTimes.withUnsafeBufferPointer { times in
            guard let first = times.first else { return (-1, 0) }
            var oldest = 0, oldestAt = first
            for i in times.indices where times[i] < oldestAt { (oldest, oldestAt) = (i, times[i]) }
            return (oldest, oldestAt)
        }
        guard oldest >= 0 else { return nil }
        if let horizon, now - oldestAt > horizon { return nil }
        return oldest
    }

    /// Swap-remove: the last device takes the slot.
    private mutating func remove(slot: Int) {
        slots[keys[slot]] = nil
        let last = states.count - 1
        if slot != last {
            keys.swapAt(slot, last)
            states.swapAt(slot, last)
            frameTimes.swapAt(slot, last)
            slots[keys[slot]] = slot
        }
        keys.removeLast()
        states.removeLast()
        frameTimes.removeLast()
    }
}
