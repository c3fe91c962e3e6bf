// The agent's status as one value: what `agentctl status` prints, what the control socket
// answers (`status` JSON) and what the Prometheus file holds are three renderings of it
// (`json`, `StatusTable.render`, `prometheusText`). The runtime only fills it from snapshots;
// which conditions are problems an installer must act on is decided here, once.

public struct AgentStatusReport: Sendable, Equatable {
    public var version: String
    public var gatewayID: String
    public var pid: Int64
    public var uptimeSeconds: Int64
    public var clock: Clock
    public var radios: [Radio] = []
    /// Events created, by type, in `EventType` order.
    public var eventsByType: [Count] = []
    public var pressesForwarded: Int64 = 0
    public var pressesSuppressed: Int64 = 0
    public var unknownTransmitters: [UnknownTransmitter] = []
    public var outbox: Outbox
    public var uplink: Uplink?
    public var mqtt: MQTT?
    /// The last reload's outcome as the reload reported it (`null` before the first).
    public var configReload: JSONValue = .null
    public var actions: [Action] = []
    /// The owner's phones (`[radio.ble] ancs`); nil without the phone link.
    public var phones: Phones?
    /// The phone link could not start, or its bonds file was damaged and set aside.
    public var phoneProblem: String?
    /// The running config differs from the file because the file was refused (start or reload).
    public var configProblem: String?
    public var threadStartFailures: Int64 = 0
    public var lastThreadStartError: String?
    /// The long-lived loops the watchdog ping watches (LoopHeartbeats), running, stuck or ended.
    public var loops: [LoopHeartbeats.State] = []
    /// Not in the JSON: the metrics file's alone.
    public var residentBytes: Int64?

    public init(version: String, gatewayID: String, pid: Int64, uptimeSeconds: Int64, clock: Clock, outbox: Outbox) {
        self.version = version
        self.gatewayID = gatewayID
        self.pid = pid
        self.uptimeSeconds = uptimeSeconds
        self.clock = clock
        self.outbox = outbox
    }

    public struct Count: Sendable, Equatable {
        public var key: String
        public var value: Int64
        public init(_ key: String, _ value: Int64) { self.key = key; self.value = value }
    }

    public struct Clock: Sendable, Equatable {
        public var synchronized: Bool
        public var reason: String
        public var requireSync: Bool
        public var deliveryHeld: Bool
        public var bootID: String
        public var nowWallMicros: Int64
        public init(synchronized: Bool, reason: String, requireSync: Bool, deliveryHeld: Bool, bootID: String, nowWallMicros: Int64) {
            self.synchronized = synchronized
            self.reason = reason
            self.requireSync = requireSync
            self.deliveryHeld = deliveryHeld
            self.bootID = bootID
            self.nowWallMicros = nowWallMicros
        }
    }

    /// One radio: its counters come in the order its `RadioDescriptor` declares them.
    public struct Radio: Sendable, Equatable {
        public var name: String
        /// `RadioLifecycle` state, or "degraded" (BLE controller that scans badly).
        public var state: String
        public var counters: [Count] = []
        public var restarts: Int64 = 0
        public var lastError: String?
        /// OOK: where pulses come from, and the GPIO line when it is one.
        public var source: String?
        public var gpio: String?
        public var ble: BLEDetails?
        public init(name: String, state: String) { self.name = name; self.state = state }

        public func counter(_ key: String) -> Int64? { counters.first { $0.key == key }?.value }
        public var isDown: Bool { state == "missing" || state == "restarting" || state == "degraded" }
        public var isUp: Bool { state == "running" || state == "finished" }
    }

    public struct BLEDetails: Sendable, Equatable {
        public var inside: [String] = []
        public var decoders: [DecoderCounts] = []
        /// Observations by kind (`BLEObservationKind` names).
        public var observations: [Count] = []
        public var lastRefused: String?
        public var presenceClockRunning = true
        public var silentSeconds: Int64 = 0
        public var exitsOnHold: String?
        public var controller: BLEControllerInfo?
        public init() {}
    }

    public struct DecoderCounts: Sendable, Equatable {
        public var decoder: String
        public var seen: Int64
        public var corrupt: Int64
        public var implausible: Int64
        public init(decoder: String, seen: Int64, corrupt: Int64, implausible: Int64) {
            self.decoder = decoder
            self.seen = seen
            self.corrupt = corrupt
            self.implausible = implausible
        }
    }

    public struct UnknownTransmitter: Sendable, Equatable {
        public var identity: String
        public var model: String
        public var frames: Int64
        public var lastSeenWallMicros: Int64
        public init(identity: String, model: String, frames: Int64, lastSeenWallMicros: Int64) {
            self.identity = identity
            self.model = model
            self.frames = frames
            self.lastSeenWallMicros = lastSeenWallMicros
        }
    }

    public struct Outbox: Sendable, Equatable {
        /// nil when the database could not be read (then `readError` says why).
        public var stats: Stats?
        public var readError: String?
        public var lastError: String?
        public var storageFull = false
        public var heldInMemory: Int64 = 0
        public var movedAside: String?
        public var stateDir: String
        public init(stateDir: String) { self.stateDir = stateDir }

        public struct Stats: Sendable, Equatable {
            public var depth: Int64
            public var dead: Int64
            public var lastSequence: Int64
            public var evicted: Int64
            public var bytes: Int64
            public var oldestAgeSeconds: Int64?
            public var mqttPending: Int64
            public init(depth: Int64, dead: Int64, lastSequence: Int64, evicted: Int64, bytes: Int64, oldestAgeSeconds: Int64?, mqttPending: Int64) {
                self.depth = depth
                self.dead = dead
                self.lastSequence = lastSequence
                self.evicted = evicted
                self.bytes = bytes
                self.oldestAgeSeconds = oldestAgeSeconds
                self.mqttPending = mqttPending
            }
        }
    }

    public struct Uplink: Sendable, Equatable {
        public var url: String
        public var delivered: Int64 = 0
        public var failedAttempts: Int64 = 0
        public var lastSuccessWallMicros: Int64?
        public var lastError: String?
        public var lastErrorWallMicros: Int64?
        public var endpointGone = false
        /// Failed attempts by reason, sorted by reason.
        public var failuresByReason: [Count] = []
        /// Press → receiver's 2xx.
        public var deliveredLatency = LatencyHistogram()
        /// The last 2xx from the cloud, to an event or a heartbeat.
        public var last2xxWallMicros: Int64?
        /// The cloud answered 2xx (event or heartbeat) since the uplink started: what a slot on
        /// trial needs (scripts/image/.../slot-check).
        public var cloudReachedSinceStart = false
        public var heartbeatsAccepted: Int64 = 0
        public var heartbeatsFailed: Int64 = 0
        public init(url: String) { self.url = url }
    }

    public struct MQTT: Sendable, Equatable {
        public var broker: String
        public var connected = false
        public var acknowledged: Int64 = 0
        public var lastAckWallMicros: Int64?
        public var connects: Int64 = 0
        public var lastError: String?
        public var lastErrorWallMicros: Int64?
        public var discoveryMessages: Int64 = 0
        public var discoveryPublishedWallMicros: Int64?
        /// Whether events wait for Home Assistant (MQTTSession.HomeAssistant); nil when they never do.
        public var homeAssistant: String?
        /// Ignored messages on subscribed topics, by reason, sorted by reason.
        public var ignored: [Count] = []
        public init(broker: String) { self.broker = broker }
    }

    public struct Phones: Sendable, Equatable {
        public var bonded: Int64 = 0
        public var connected: Int64 = 0
        public var connectedPhone: String?
        public var readingNotifications = false
        public var pairingOpenUntilWallMicros: Int64?
        public var notificationsRead: Int64 = 0
        public var lastError: String?
        public init() {}
    }

    public struct Action: Sendable, Equatable {
        public var name: String
        /// `exec`, `gpio_pulse`, both (`gpio_pulse + exec`) or `answer_phones`; empty from an older agent.
        public var does = ""
        public var runs: Int64 = 0
        public var failures: Int64 = 0
        public var timeouts: Int64 = 0
        public var skippedBusy: Int64 = 0
        public var running: Int64 = 0
        public var lastError: String?
        public init(name: String) { self.name = name }
    }

    public var health: String { problems.isEmpty ? "ok" : "degraded" }

    /// What an installer should act on, each with what to do, most fundamental first.
    public var problems: [String] {
        var out: [String] = []
        for r in radios {
            if r.isDown { out.append("radio \(r.name) \(r.state): \(r.lastError ?? "")") }
            if let b = r.ble, let hold = b.exitsOnHold, !b.inside.isEmpty, r.state == "running" { out.append("presence: \(hold)") }
        }
        if let s = outbox.stats, s.dead > 0 {
            out.append("outbox: \(s.dead) event(s) parked as dead letters (refused by the receiver, or failing while it took others); see agentctl queue list --dead, then agentctl queue retry")
        }
        if let e = outbox.readError { out.append("outbox: \(e)") }
        if let e = outbox.lastError { out.append("outbox: \(e)") }
        if outbox.storageFull || outbox.heldInMemory > 0 {
            out.append("storage: full — \(outbox.heldInMemory) event(s) held in memory until space returns; free space in \(outbox.stateDir)")
        }
        if let aside = outbox.movedAside {
            out.append("outbox: the database was damaged at start and moved to \(aside); a new one is in use (send the old one to support)")
        }
        if let u = uplink {
            if u.endpointGone {
                out.append("uplink: the receiver answered 410 Gone for \(u.url): delivery is stopped, events are kept; fix uplink.url and reload")
            } else if let err = u.lastErrorWallMicros, err > max(u.lastSuccessWallMicros ?? 0, u.last2xxWallMicros ?? 0) {
                out.append("uplink: \(u.lastError ?? "")")
            }
        }
        if let q = mqtt, !q.connected, let e = q.lastError { out.append("mqtt: \(e)") }
        for a in actions { if let e = a.lastError { out.append("action \(a.name): \(e)") } }
        if let p = phoneProblem { out.append("phones: \(p)") }
        if let p = configProblem { out.append("config: \(p)") }
        if threadStartFailures > 0 {
            out.append("threads: \(threadStartFailures) could not be started (last: \(lastThreadStartError ?? "?")); the system is out of memory or at its task limit")
        }
        for p in loops.compactMap(\.problem) {
            out.append("loop \(p); the watchdog ping is withheld, so systemd restarts the agent (WatchdogSec= in the unit; without it, restart it yourself)")
        }
        if clock.deliveryHeld {
            out.append("clock: not synchronized yet (\(clock.reason)); delivery is held so the cloud gets no timestamps from 1970 (check NTP: timedatectl)")
        }
        return out
    }
}

/// Press → delivered latency in Prometheus's cumulative buckets.
public struct LatencyHistogram: Sendable, Equatable {
    public static let bounds: [Double] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 3600]
    public var counts = [Int](repeating: 0, count: LatencyHistogram.bounds.count + 1)
    public var sum: Double = 0
    public var count = 0
    public init() {}
    public mutating func observe(_ seconds: Double) {
        let i = Self.bounds.firstIndex { seconds <= $0 } ?? Self.bounds.count
        counts[i] += 1
        sum += seconds
        count += 1
    }
}
