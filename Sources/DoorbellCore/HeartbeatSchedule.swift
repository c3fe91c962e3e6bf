// The uplink's heartbeat: a small signed request (`POST <cloud>/heartbeat`, docs/protocol.md
// "Heartbeat") that proves the gateway runs, holds its key and reaches the cloud without an
// event — what a slot on trial after a night-time update needs in a quiet house. Heartbeats are
// not events: never in the outbox, never ahead of or instead of a press. This value decides when
// one is due, given the monotonic clock and the uplink's state; the shell (Deliverer) only sends.
//
// Rules: one at start-up, then every `interval`. Any 2xx from the cloud (an event's too) counts
// as one, so a busy uplink sends none. Due while the uplink has events to send, or while it is
// held for the clock: skipped (looked at again after `backoff.initialMillis`, or when the machine
// next looks at the clock), not queued. Due
// while the receiver backs off after failed events: waits for the end of that backoff. A failed
// heartbeat waits out its own full-jitter backoff (as an event would), never longer than
// `interval`, and changes nothing for events.

public struct HeartbeatSchedule: Sendable {
    /// What the uplink is doing when a heartbeat may be due.
    public enum Uplink: Sendable, Equatable {
        /// Nothing to send now (an empty outbox, or events waiting out their own backoff).
        case idle
        /// Events to send now: they go, the heartbeat does not.
        case busy
        /// The receiver failed the last window: nothing before this monotonic time.
        case backingOff(untilMonoMicros: Int64)
        /// Delivery waits for the wall clock (a heartbeat's timestamp would be wrong too), or
        /// the endpoint is gone.
        case held
    }

    public enum Decision: Sendable, Equatable {
        /// `heartbeat_interval_s = 0`.
        case off
        /// Send one now, then call `finished`.
        case send
        /// Look again at this monotonic time (or sooner, when the uplink wakes for events).
        case wait(untilMonoMicros: Int64)
    }

    /// 0: no heartbeats.
    public let intervalMicros: Int64
    public let backoff: FullJitterBackoff
    /// The next heartbeat is due at this monotonic time; 0 at start-up (due at once).
    public private(set) var dueMonoMicros: Int64 = 0
    /// Heartbeats failed in a row (their backoff grows with it).
    public private(set) var failures = 0

    public init(intervalSeconds: Int, backoff: FullJitterBackoff) {
        intervalMicros = Int64(max(0, intervalSeconds)) * 1_000_000
        self.backoff = backoff
    }

    public mutating func next(nowMonoMicros now: Int64, uplink: Uplink) -> Decision {
        guard intervalMicros > 0 else { return .off }
        guard dueMonoMicros <= now else { return .wait(untilMonoMicros: dueMonoMicros) }
        switch uplink {
        case .idle:
            return .send
        case .busy:
            dueMonoMicros = now + Int64(max(1, backoff.initialMillis)) * 1000
            return .wait(untilMonoMicros: dueMonoMicros)
        case .held:
            // As often as the machine looks at the clock for held events, no more.
            dueMonoMicros = now + UplinkMachine.clockRecheckMicros
            return .wait(untilMonoMicros: dueMonoMicros)
        case let .backingOff(until) where until > now:
            dueMonoMicros = until
            return .wait(untilMonoMicros: until)
        case .backingOff:
            return .send
        }
    }

    /// The uplink's state as the schedule sees it, from what the machine decided for events.
    public static func uplink(_ action: UplinkMachine.Action, receiverNotBeforeMono: Int64, nowMonoMicros now: Int64,
                              requireClockSync: Bool, clockSynced: () -> Bool) -> Uplink {
        switch action {
        case .send: return .busy
        case .holdForClock, .endpointGone: return .held
        case .waitForWork, .sleep:
            if requireClockSync && !clockSynced() { return .held }
            return receiverNotBeforeMono > now ? .backingOff(untilMonoMicros: receiverNotBeforeMono) : .idle
        }
    }

    /// The heartbeat sent after `.send` came back: a 2xx (`accepted`) or anything else.
    public mutating func finished(accepted: Bool, nowMonoMicros now: Int64, random: inout some RandomNumberGenerator) {
        guard !accepted else { return cloudAnswered(nowMonoMicros: now) }
        let delay = Int64(backoff.delay(attempt: failures, random: &random)) * 1000
        failures += 1
        dueMonoMicros = now + max(1_000, min(delay, intervalMicros))
    }

    /// The cloud answered 2xx (to an event or a heartbeat): the next heartbeat is an interval away.
    public mutating func cloudAnswered(nowMonoMicros now: Int64) {
        failures = 0
        dueMonoMicros = now + intervalMicros
    }
}

/// What a heartbeat says, and where it goes.
public enum HeartbeatRequest {
    public static let type = "gateway.heartbeat"

    /// `uplink.url` with its last path segment replaced: `https://cloud/events` →
    /// `https://cloud/heartbeat`, `https://cloud/gw/v1/events?x=1` → `https://cloud/gw/v1/heartbeat`.
    /// A URL with no path gets `/heartbeat`.
    public static func url(forEventsURL url: String) -> String {
        let base = String(url.prefix { $0 != "?" && $0 != "#" })
        var host = base.startIndex
        if let colon = base.firstIndex(of: ":"), base[colon...].hasPrefix("://") { host = base.index(colon, offsetBy: 3) }
        guard let slash = base[host...].firstIndex(of: "/") else { return base + "/heartbeat" }
        let last = base[slash...].lastIndex(of: "/") ?? slash
        return String(base[...last]) + "heartbeat"
    }

    /// The body, signed like an event with `id` as `webhook-id` and `sentAt` as `webhook-timestamp`.
    public static func body(id: String, gatewayID: String, agentVersion: String, bootSlot: String?, sentAt: Int64) -> [UInt8] {
        JSONWriter.encode(.object([
            ("id", .string(id)), ("type", .string(type)), ("gateway_id", .string(gatewayID)),
            ("agent_version", .string(agentVersion)), ("boot_slot", bootSlot.map(JSONValue.string) ?? .null),
            ("sent_at", .number(Double(sentAt))),
        ]))
    }

    /// A fresh id for each heartbeat: the cloud refuses an id it has seen (its replay guard).
    public static func makeID(unixMillis: Int64, random: inout some RandomNumberGenerator) -> String {
        "hb-" + UUIDv7.make(unixMillis: unixMillis, random: &random)
    }

    /// The RAUC slot the kernel was booted from, from its command line (`rauc.slot=A`), if said.
    public static func bootSlot(kernelCommandLine: String) -> String? {
        for word in kernelCommandLine.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "\t" }) where word.hasPrefix("rauc.slot=") {
            let slot = word.dropFirst("rauc.slot=".count)
            if (1...16).contains(slot.count) && slot.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "." || $0 == "_" || $0 == "-" }) {
                return String(slot)
            }
        }
        return nil
    }
}
