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
    private var devices: [String: DeviceState] = [:]

    /// Unknown codes create state too (noise, neighbours' remotes); past this many we forget the
    /// idle ones so memory stays bounded.
    public static let maxTrackedDevices = 256

    public init(settings: Settings = Settings()) { self.settings = settings }

    public var trackedDevices: Int { devices.count }

    public mutating func observe(device: String, at rawTime: Int64) -> Output? {
        counters.frames += 1
        guard var state = devices[device] else { return firstPress(device: device, at: rawTime) }
        // A clock that steps back (replays of several files) must not split or merge presses oddly.
        let at = max(rawTime, state.lastFrameAt)
        defer { devices[device] = state }

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
        return newPress(&state, device: device, at: at)
    }

    /// One press that the button reported as one message. `continuation` is a press still going
    /// (BTHome hold_press): it follows its press, forwarded as `held` only if that press was.
    public mutating func observeDiscrete(device: String, at rawTime: Int64, continuation: Bool = false) -> Output? {
        counters.frames += 1
        guard var state = devices[device] else { return firstPress(device: device, at: rawTime) }
        let at = max(rawTime, state.lastFrameAt)
        defer { devices[device] = state }
        state.lastFrameAt = at
        if continuation {
            lastSwallowed = .samePress
            // Once per press, like a long RF burst: later hold packets of the same press add nothing.
            guard state.pressForwarded, !state.heldEmitted else { return nil }
            state.heldEmitted = true
            counters.held += 1
            return .held(device: device, at: at, pressStartedAt: state.pressStartedAt)
        }
        return newPress(&state, device: device, at: at)
    }

    private mutating func firstPress(device: String, at: Int64) -> Output {
        lastSwallowed = nil
        makeRoom(now: at)
        counters.presses += 1
        counters.forwarded += 1
        devices[device] = DeviceState(pressStartedAt: at, lastFrameAt: at, pressForwarded: true,
                                      heldEmitted: false, lastForwardedAt: at, suppressedSinceForward: 0)
        return .pressed(device: device, at: at, suppressed: 0)
    }

    /// A press that is not part of the previous one: forwarded, or counted within the cooldown.
    private mutating func newPress(_ state: inout DeviceState, device: String, at: Int64) -> Output? {
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
        return .pressed(device: device, at: at, suppressed: suppressed)
    }

    private mutating func makeRoom(now: Int64) {
        guard devices.count >= Self.maxTrackedDevices else { return }
        let horizon = max(settings.cooldownMicros, settings.repeatGapMicros, settings.holdAfterMicros)
        // One look first: on a busy street every tracked device is recent, and rebuilding the
        // table to drop none cost more than the rest of a press (replay of 4096 buttons).
        var stale = false
        var oldest: (key: String, at: Int64)?
        for (key, state) in devices {
            if now - state.lastFrameAt > horizon { stale = true; break }
            if oldest.map({ state.lastFrameAt < $0.at }) ?? true { oldest = (key, state.lastFrameAt) }
        }
        if stale {
            devices = devices.filter { now - $0.value.lastFrameAt <= horizon }
            oldest = devices.count >= Self.maxTrackedDevices ? devices.min(by: { $0.value.lastFrameAt < $1.value.lastFrameAt }).map { ($0.key, $0.value.lastFrameAt) } : nil
        }
        if let oldest { devices.removeValue(forKey: oldest.key) }
    }
}
