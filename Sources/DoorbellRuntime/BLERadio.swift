import DoorbellCore
import Glibc

// The Bluetooth LE radio's shell: opens the HCI transport, polls it, and does what the core's
// HCIHost says (write a command, deliver reports, the controller is up, it stalled, give up).
// The host decides the bring-up (scanning with duplicate filtering OFF — controller
// de-duplication is how BlueZ users lose button presses — and the optional own iBeacon), the
// command credits and timeouts and the stall reset; the RadioSupervisor decides the backoff. A
// stalled controller shows `degraded` until reports flow again.
// With `[radio.ble] ancs` the host also serves the owner's phone (connectable ANCS solicitation,
// one connection, GATT discovery of ANCS): its link actions go to `PhoneLink` (pairing, bonds,
// reading the phone's notifications), whose answers are written to the controller here.

public enum BLERadioInput: Sendable {
    /// The advertising reports of one read from the controller (one or more HCI events):
    /// their events are stored together (group commit).
    case reports([BLEAdvertisingReport])
    /// A replayed report, on the capture's timeline placed after the agent's start.
    case replayed(BLEAdvertisingReport, monoMicros: Int64)
    /// Periodic while the radio runs: lets presence time out.
    case tick
    /// The scanner stalled (false) or delivers again (true).
    case health(Bool)
    /// From the phone link: a receipt, a phone notification, a bond's change.
    case phoneEvent(type: String, data: JSONValue)
}

public final class BLERadio: @unchecked Sendable {
    let settings: BLERadioSettings
    let log: Logger
    let sink: @Sendable (BLERadioInput) -> Void
    public let status = Locked(RadioStatus(name: "ble"))
    public let controller = Locked<BLEControllerInfo?>(nil)
    public let degraded = Locked(false)
    private let stopSignal = PollableStop()
    private let done = WakeSignal()
    /// State, backoff and restarts; used on the radio thread only.
    private var supervisor = RadioSupervisor(policy: RadioSupervisor.Policy(backoff: FullJitterBackoff(initialMillis: 500, capMillis: 30_000),
                                                                            floorMillis: 200))
    /// Every H4 packet in (true) and out (false), for `agentctl capture`; nil when nobody captures.
    public let tap = Locked<(@Sendable ([UInt8], Bool) -> Void)?>(nil)
    /// The presence tick: once a second while the radio runs (cheap; no I/O).
    static let tickMicros: Int64 = 1_000_000

    /// The owner's phones (`[radio.ble] ancs`); nil without.
    public let phones: PhoneLink?

    /// Beats at every presence tick; a bring-up (HCI reset, a serial controller's answers) may
    /// take several seconds.
    public let heartbeat: Heartbeat

    public init(settings: BLERadioSettings, log: Logger, phones: PhoneLink? = nil, heartbeat: Heartbeat? = nil,
                sink: @escaping @Sendable (BLERadioInput) -> Void) {
        self.heartbeat = heartbeat ?? .unmonitored("radio ble", periodMicros: RTL433Radio.wakeMicros)
        self.settings = settings
        self.log = log
        self.phones = phones
        self.sink = sink
    }

    public func start() throws(ThreadStartError) {
        try startLoop(heartbeat, thread: "radio-ble") { [self] in
            if case let .replay(files) = settings.transport {
                replay(files)
                heartbeat.stopped()
            } else {
                supervise()
            }
            done.signal()
        }
    }

    public func stop(graceMicros: Int64 = 3_000_000) {
        heartbeat.stopped()
        stopSignal.set()
        done.wait(timeoutMicros: graceMicros)
        status.withLock { $0.state = .stopped }
    }

    private var isStopping: Bool { stopSignal.isSet }

    private func supervise() {
        var rng = SystemRandomNumberGenerator()
        while !isStopping {
            supervisor.starting()
            status.withLock { $0.show(supervisor) }
            do throws(HCIError) {
                let transport = try HCITransport.open(settings.transport)
                try run(transport)
            } catch {
                if isStopping { break }
                let retry = supervisor.failed(error.description, absent: error.meansAbsent, at: Clocks.monotonicMicros(), random: &rng)
                status.withLock { $0.show(supervisor) }
                degraded.withLock { $0 = true }
                if retry.isNews { log.error("radio.ble_failed", [("radio", "ble"), ("error", error.description)]) }
                sink(.health(false))
                if heartbeat.pause(stopSignal, micros: retry.afterMicros) { break }
            }
        }
    }

    /// One transport's life: the host's bring-up, then scanning, until the host gives up or a
    /// read or write fails (both throw to `supervise`).
    private func run(_ t: HCITransport) throws(HCIError) {
        var host = HCIHost(settings: settings, transportName: t.name)
        var up = false
        defer { phones?.end() }
        func perform(_ actions: [HCIHost.Action]) throws(HCIError) {
            for action in actions {
                switch action {
                case let .send(packet):
                    tap.snapshot?(packet, false)
                    try t.write(packet)
                case let .received(packet):
                    tap.snapshot?(packet, true)
                case let .reports(reports):
                    deliver(reports)
                case let .scanning(info, extended):
                    controller.withLock { $0 = info }
                    if !up {
                        up = true
                        supervisor.running(at: Clocks.monotonicMicros())
                        status.withLock { $0.show(supervisor) }
                    }
                    log.info("radio.started", [("radio", "ble"), ("transport", t.name), ("hci_version", String(info.hciVersion)),
                                               ("scan", extended ? "extended" : "legacy"),
                                               ("own_beacon", settings.beacon.map { "\($0.beacon.uuidString)/\($0.beacon.major)/\($0.beacon.minor)" } ?? "off")])
                    if let phones { try perform(phones.handle(action, host: &host)) }
                case .stalled:
                    degraded.withLock { $0 = true }
                    supervisor.resetInPlace("no advertising reports for \(settings.stallSeconds) s: resetting the controller", at: Clocks.monotonicMicros())
                    status.withLock { $0.show(supervisor) } // the reason shows until reports flow again
                    log.warning("radio.ble_stalled", [("radio", "ble"), ("stall_s", String(settings.stallSeconds))])
                    sink(.health(false))
                case .scanRearmed:
                    degraded.withLock { $0 = true }
                    log.warning("radio.ble_scan_rearmed", [("radio", "ble"), ("stall_s", String(settings.stallSeconds)),
                                                          ("why", "no advertising reports while a phone is connected; scan switched off and on (a reset would drop the phone)")])
                    sink(.health(false))
                case let .connected(c):
                    log.info("ble.connected", [("peer", c.peerAddress.map { Hex.encode([$0], uppercase: true) }.joined(separator: ":")),
                                               ("handle", String(c.handle))])
                    if let phones { try perform(phones.handle(action, host: &host)) }
                case let .disconnected(handle, reason):
                    log.info("ble.disconnected", [("handle", String(handle)), ("reason", "0x" + String(reason, radix: 16))])
                    if let phones { try perform(phones.handle(action, host: &host)) }
                case .smp, .longTermKeyRequested, .encryptionChanged, .gatt:
                    if case let .gatt(event) = action {
                        if case .notification = event {} else { log.info("ble.gatt", [("event", "\(event)")]) }
                    }
                    if let phones {
                        try perform(phones.handle(action, host: &host))
                    } else if case .smp = action {
                        // No phone link configured: Pairing Failed, "Pairing Not Supported".
                        try perform(host.send(smp: [0x05, 0x05], at: Clocks.monotonicMicros()))
                    } else if case .longTermKeyRequested = action {
                        try perform(host.replyLongTermKey(nil, at: Clocks.monotonicMicros()))
                    }
                case let .failed(failure):
                    let code: HCIError.Code = switch failure.code {
                    case .noCredit, .timeout: .timeout
                    case .refused: .commandRefused
                    case .hardwareError: .hardwareError
                    }
                    throw HCIError(code, failure.description)
                }
            }
        }
        try perform(host.start(at: Clocks.monotonicMicros()))
        if let phones { try perform(phones.begin(host: &host)) }
        var nextTick = Clocks.monotonicMicros() + Self.tickMicros
        while !isStopping {
            heartbeat.beat()
            var now = Clocks.monotonicMicros()
            if now >= nextTick {
                if up { sink(.tick) }
                nextTick = now + Self.tickMicros
            }
            var until = min(nextTick, host.nextDeadline ?? nextTick)
            if let wait = phones?.untilDeadline { until = min(until, now + wait) }
            var fds = [pollfd(fd: t.fd, events: Int16(POLLIN), revents: 0), pollfd(fd: stopSignal.fd, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: phones?.wake.fd ?? -1, events: Int16(POLLIN), revents: 0)]
            let n = poll(&fds, 3, Int32(clamping: max(0, until - now) / 1000 + 1))
            if n < 0 && errno == EINTR { continue }
            if isStopping { break }
            now = Clocks.monotonicMicros()
            if n > 0 && fds[0].revents != 0 {
                try perform(host.received(try t.read(), at: now, tapping: tap.snapshot != nil))
            }
            try perform(host.tick(at: now))
            if let phones { try perform(phones.service(host: &host)) }
        }
    }

    private func deliver(_ reports: [BLEAdvertisingReport]) {
        status.withLock { $0.lines += reports.count }
        if degraded.snapshot {
            degraded.withLock { $0 = false }
            supervisor.recovered()
            status.withLock { $0.show(supervisor) }
            log.notice("radio.ble_recovered", [("radio", "ble")])
            sink(.health(true))
        }
        sink(.reports(reports))
    }

    // MARK: Replay

    /// btsnoop captures: every received advertising report, on the capture's own timing, placed
    /// a minute apart per file so visits and presses of different captures never merge.
    private func replay(_ files: [String]) {
        status.withLock { $0.state = .running }
        var timeline = RecordingTimeline(start: Clocks.monotonicMicros())
        for file in files {
            if isStopping { return }
            heartbeat.beat()
            guard let recording = Recording.load(file, kind: .ble, status: status, log: log, radio: "ble") else { continue }
            let base = timeline.place(recording)
            var last: Int64 = 0 // a capture's clock can step back; the trackers' must not
            for case let .ble(reports, at, _) in recording.inputs {
                last = max(last, at)
                status.withLock { $0.lines += reports.count }
                for report in reports { sink(.replayed(report, monoMicros: base + last)) }
            }
            log.info("radio.replayed", [("radio", "ble"), ("file", file), ("events", String(recording.inputs.count))])
        }
        status.withLock { $0.state = .finished }
        log.info("radio.replay_finished", [("radio", "ble")])
    }
}
