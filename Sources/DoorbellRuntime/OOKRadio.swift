import DoorbellCore
import Glibc

// The OOK radio: a 433 MHz receiver module on a GPIO pin, rtl_433 in pulse mode, or recorded
// timelines. Whatever the source, it hands edges (or pulses) to the agent's OOKPipeline; the
// decoding is pure code. A pin that cannot be opened is a clear status and a retry, not a crash.

public enum OOKRadioInput: Sendable {
    /// A level change; `micros` is on the tracker's monotonic clock (kernel edge time, or the
    /// replay's timeline placed after the agent's start).
    case edge(high: Bool, micros: Int64)
    /// The line has been quiet until `micros`.
    case idle(micros: Int64)
    /// A pulse rtl_433 demodulated, received now.
    case pulse(Pulse, rssi: Double?)
}

public final class OOKRadio: @unchecked Sendable {
    let settings: OOKRadioSettings
    let log: Logger
    let sink: @Sendable (OOKRadioInput) -> Void
    public let status = Locked(RadioStatus(name: "ook"))
    private let stopSignal = PollableStop()
    private let done = WakeSignal()
    /// rtl_433 in pulse mode is supervised like the JSON radio.
    private var sdr: RTL433Radio?
    private let textReader = Locked(OOKPulseTextReader())

    /// How long the line must be quiet before the last pulse of a burst is complete (the
    /// pipeline's assembler waits as long: both come from the decoder's time unit).
    var idleMicros: Int64 { settings.decoder.lineIdleMicros }

    public let heartbeat: Heartbeat

    public init(settings: OOKRadioSettings, log: Logger, pidFile: String?, heartbeat: Heartbeat? = nil,
                sink: @escaping @Sendable (OOKRadioInput) -> Void) {
        self.settings = settings
        self.log = log
        self.sink = sink
        let heartbeat = heartbeat ?? .unmonitored("radio ook", periodMicros: RTL433Radio.wakeMicros)
        self.heartbeat = heartbeat
        if settings.source == .rtl433 {
            sdr = RTL433Radio(settings: settings.rtl433, log: log, pidFile: pidFile, name: "ook", heartbeat: heartbeat) { [textReader, log] line in
                let (parsed, rssi) = textReader.withLock { r in (r.read(line: line), r.packageRSSI) }
                switch parsed {
                case let .pulse(p): sink(.pulse(p, rssi: rssi))
                case let .malformed(reason): log.warning("ook.bad_pulse_line", [("error", reason)])
                default: break
                }
            }
        }
    }

    public var currentStatus: RadioStatus {
        if let sdr { return sdr.status.snapshot }
        return status.snapshot
    }

    public func start() throws(ThreadStartError) {
        if let sdr { try sdr.start(); return }
        switch settings.source {
        case .gpio: try startLoop(heartbeat, thread: "radio-gpio") { [self] in runGPIO(); heartbeat.stopped(); done.signal() }
        case .replay: try startLoop(heartbeat, thread: "radio-replay") { [self] in runReplay(); heartbeat.stopped(); done.signal() }
        case .rtl433: break
        }
    }

    public func stop(graceMicros: Int64 = 2_000_000) {
        if let sdr { sdr.stop(graceMicros: graceMicros); return }
        heartbeat.stopped()
        stopSignal.set()
        done.wait(timeoutMicros: graceMicros)
        status.withLock { $0.state = .stopped }
    }

    private var isStopping: Bool { stopSignal.isSet }

    // MARK: GPIO

    private func runGPIO() {
        guard let ref = settings.gpio else { return }
        var supervisor = RadioSupervisor(policy: RadioSupervisor.Policy(backoff: FullJitterBackoff(initialMillis: 1_000, capMillis: 60_000),
                                                                        floorMillis: 1_000))
        var rng = SystemRandomNumberGenerator()
        while !isStopping {
            supervisor.starting()
            status.withLock { $0.show(supervisor) }
            let reader: GPIOEdgeReader
            do {
                reader = try GPIOEdgeReader(ref)
            } catch {
                let retry = supervisor.failed(error.description, absent: true, at: Clocks.monotonicMicros(), random: &rng)
                status.withLock { $0.show(supervisor) }
                if retry.isNews { log.error("radio.gpio_unavailable", [("radio", "ook"), ("line", ref.description), ("error", error.description)]) }
                if heartbeat.pause(stopSignal, micros: retry.afterMicros) { break }
                continue
            }
            supervisor.running(at: Clocks.monotonicMicros())
            status.withLock { $0.show(supervisor) }
            log.info("radio.started", [("radio", "ook"), ("source", "gpio"), ("line", ref.description)])
            sink(.edge(high: reader.initialHigh, micros: Clocks.monotonicMicros()))
            var quietPending = false
            var lastEdge: Int64 = 0
            while !isStopping {
                heartbeat.beat()
                var fds = [pollfd(fd: reader.fd, events: Int16(POLLIN), revents: 0),
                           pollfd(fd: stopSignal.fd, events: Int16(POLLIN), revents: 0)]
                // While nothing is pending an idle radio wakes only to beat.
                let timeout: Int32 = quietPending ? Int32(idleMicros / 1000) + 1 : Int32(heartbeat.periodMicros / 1000)
                let n = poll(&fds, 2, timeout)
                if n < 0 && errno == EINTR { continue }
                if isStopping { break }
                if n == 0 && !quietPending { continue }
                if n == 0 {
                    sink(.idle(micros: max(Clocks.monotonicMicros(), lastEdge + idleMicros)))
                    quietPending = false
                    continue
                }
                do {
                    let edges = try reader.read()
                    status.withLock { $0.lines += edges.count }
                    for e in edges { sink(.edge(high: e.high, micros: e.micros)) }
                    if let last = edges.last { lastEdge = last.micros; quietPending = !last.high }
                } catch {
                    // Backed off like a failed open: a line that fails at once after opening
                    // must not spin.
                    let retry = supervisor.failed(error.description, absent: false, at: Clocks.monotonicMicros(), random: &rng)
                    status.withLock { $0.show(supervisor) }
                    log.error("radio.gpio_failed", [("radio", "ook"), ("error", error.description)])
                    if heartbeat.pause(stopSignal, micros: retry.afterMicros) { return }
                    break
                }
            }
        }
    }

    // MARK: Replay

    private func runReplay() {
        status.withLock { $0.state = .running }
        var timeline = RecordingTimeline(start: Clocks.monotonicMicros())
        for file in settings.replay {
            if isStopping { return }
            heartbeat.beat()
            guard let recording = Recording.load(file, kind: .ook, status: status, log: log, radio: "ook") else { continue }
            let base = timeline.place(recording)
            var edges = 0
            for input in recording.inputs {
                switch input {
                case let .edge(high, at): sink(.edge(high: high, micros: base + at)); edges += 1
                case let .quiet(at): sink(.idle(micros: base + at))
                case .rtl433, .ble: break
                }
            }
            status.withLock { $0.lines += edges }
            log.info("radio.replayed", [("radio", "ook"), ("file", file), ("edges", String(edges))])
        }
        status.withLock { $0.state = .finished }
        log.info("radio.replay_finished", [("radio", "ook")])
    }
}
