import DoorbellCore
import Glibc

// The Bluetooth LE radio: brings the controller up itself (reset, version, supported commands,
// event masks, scan parameters, scanning with duplicate filtering OFF — controller de-duplication
// is how BlueZ users lose button presses), optionally advertises the base station's own iBeacon,
// and hands every advertising report to the agent. Commands honour Num_HCI_Command_Packets and
// time out; a controller that stops delivering reports is reset and shows `degraded` until
// reports flow again. Transport failures restart everything with backoff.

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
}

public struct BLEControllerInfo: Sendable, Equatable {
    public var hciVersion: Int
    public var manufacturer: Int
    public var extendedScan: Bool
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
    private var framer = H4Framer()
    /// Packets of the last read not handled yet, last first (a read can carry several events).
    private var unhandled: [H4Framer.Packet] = []
    private var credits = 1
    private var lastReport: Int64 = 0
    /// State, backoff and restarts; used on the radio thread only.
    private var supervisor = RadioSupervisor(policy: RadioSupervisor.Policy(backoff: FullJitterBackoff(initialMillis: 500, capMillis: 30_000),
                                                                            floorMillis: 200))
    /// Every H4 packet in (true) and out (false), for `agentctl capture`; nil when nobody captures.
    public let tap = Locked<(@Sendable ([UInt8], Bool) -> Void)?>(nil)
    /// The presence tick: once a second while the radio runs (cheap; no I/O).
    static let tickMicros: Int64 = 1_000_000

    public init(settings: BLERadioSettings, log: Logger, sink: @escaping @Sendable (BLERadioInput) -> Void) {
        self.settings = settings
        self.log = log
        self.sink = sink
    }

    public func start() {
        startThread(name: "radio-ble") { [self] in
            if case let .replay(files) = settings.transport { replay(files) } else { supervise() }
            done.signal()
        }
    }

    public func stop(graceMicros: Int64 = 3_000_000) {
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
                framer = H4Framer()
                unhandled.removeAll()
                credits = 1
                try bringUp(transport)
                supervisor.running(at: Clocks.monotonicMicros())
                status.withLock { $0.show(supervisor) }
                try scan(transport)
            } catch {
                if isStopping { break }
                let retry = supervisor.failed(error.description, absent: error.meansAbsent, at: Clocks.monotonicMicros(), random: &rng)
                status.withLock { $0.show(supervisor) }
                degraded.withLock { $0 = true }
                if retry.isNews { log.error("radio.ble_failed", [("radio", "ble"), ("error", error.description)]) }
                sink(.health(false))
                if stopSignal.pause(micros: retry.afterMicros) { break }
            }
        }
    }

    // MARK: Commands

    static let commandNames: [UInt16: String] = [
        0x0C03: "Reset", 0x1001: "Read Local Version", 0x1002: "Read Local Supported Commands", 0x0C01: "Set Event Mask",
        0x2001: "LE Set Event Mask", 0x200B: "LE Set Scan Parameters", 0x200C: "LE Set Scan Enable",
        0x2041: "LE Set Extended Scan Parameters", 0x2042: "LE Set Extended Scan Enable", 0x2006: "LE Set Advertising Parameters",
        0x2008: "LE Set Advertising Data", 0x200A: "LE Set Advertising Enable",
    ]

    /// Sends one command and waits for its completion; reports arriving meanwhile are delivered.
    @discardableResult
    func command(_ t: HCITransport, _ opcode: UInt16, _ params: [UInt8], name: String? = nil) throws(HCIError) -> [UInt8] {
        let label = name ?? Self.commandNames[opcode] ?? String(format4(opcode))
        let deadline = Clocks.monotonicMicros() + Int64(settings.commandTimeoutMs) * 1000
        // Num_HCI_Command_Packets = 0: the controller takes no command until it says so.
        while credits == 0 {
            guard try waitEvents(t, until: deadline, want: nil) == nil else { break }
            if Clocks.monotonicMicros() >= deadline { throw HCIError(.timeout, "\(t.name): controller gave no command credit for \(settings.commandTimeoutMs) ms") }
        }
        let packet = H4Framer.command(opcode, params)
        tap.snapshot?(packet, false)
        try t.write(packet)
        credits = max(0, credits - 1)
        while true {
            if let result = try waitEvents(t, until: deadline, want: opcode) {
                guard let status = result.first else { return result }
                guard status == 0 else {
                    throw HCIError(.commandRefused, "\(t.name): the controller refused \(label): status 0x\(String(status, radix: 16)) (\(Self.statusText(status)))")
                }
                return result
            }
            if Clocks.monotonicMicros() >= deadline { throw HCIError(.timeout, "\(t.name): \(label) timed out after \(settings.commandTimeoutMs) ms") }
        }
    }

    func format4(_ v: UInt16) -> String { "0x" + String(v, radix: 16) }

    static func statusText(_ s: UInt8) -> String {
        switch s {
        case 0x01: "Unknown HCI Command"
        case 0x0C: "Command Disallowed"
        case 0x11: "Unsupported Feature or Parameter Value"
        case 0x12: "Invalid HCI Command Parameters"
        default: "see Core spec Vol 1 Part F"
        }
    }

    /// Reads until the completion of `want` (its return parameters, status first for Command
    /// Status), the deadline, or (want == nil) any event.
    private func waitEvents(_ t: HCITransport, until deadline: Int64, want: UInt16?) throws(HCIError) -> [UInt8]? {
        while true {
            if unhandled.isEmpty {
                let left = deadline - Clocks.monotonicMicros()
                if left <= 0 { return nil }
                var fds = [pollfd(fd: t.fd, events: Int16(POLLIN), revents: 0), pollfd(fd: stopSignal.fd, events: Int16(POLLIN), revents: 0)]
                let n = poll(&fds, 2, Int32(clamping: left / 1000 + 1))
                if n < 0 && errno == EINTR { continue }
                if isStopping { throw HCIError(.stopping, "stopping") }
                if n == 0 { return nil }
                unhandled = framer.feed(try t.read())
                unhandled.reverse() // taken from the end
            }
            // The reports of one read go on together (group commit); an answer found among
            // them returns after them, and packets after it wait for the next call.
            var reports: [BLEAdvertisingReport] = []
            defer { if !reports.isEmpty { deliver(reports) } }
            while let packet = unhandled.popLast() {
                guard case let .event(bytes) = packet else { continue }
                tap.snapshot?([0x04] + bytes, true)
                guard let event = HCIEvent.parse(bytes) else { continue }
                switch event {
                case let .commandComplete(opcode, numCommands, ret):
                    credits = Int(numCommands)
                    if opcode == want { return ret }
                    if want == nil { return [] }
                case let .commandStatus(status, numCommands, opcode):
                    credits = Int(numCommands)
                    if opcode == want { return [status] }
                    if want == nil { return [] }
                case let .advertisingReports(r):
                    reports += r
                case let .hardwareError(code):
                    unhandled.removeAll()
                    throw HCIError(.hardwareError, "\(t.name): controller hardware error 0x\(String(code, radix: 16))")
                case .other:
                    break
                }
            }
        }
    }

    private func deliver(_ reports: [BLEAdvertisingReport]) {
        lastReport = Clocks.monotonicMicros()
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
        var base = Clocks.monotonicMicros()
        for file in files {
            if isStopping { return }
            guard let bytes = readFile(file, maxBytes: 256 << 20) else {
                let message = "\(file): cannot read: \(errnoText())"
                status.withLock { $0.lastError = message }
                log.error("radio.replay_failed", [("radio", "ble"), ("error", message)])
                continue
            }
            let records: [BTSnoopRecord]
            do { records = try BTSnoop.read(bytes) } catch {
                status.withLock { $0.lastError = "\(file): \(error.description)" }
                log.error("radio.replay_failed", [("radio", "ble"), ("file", file), ("error", error.description)])
                continue
            }
            let origin = records.first?.timeMicros ?? 0
            var last: Int64 = 0
            for r in records where r.received && r.packet.first == 0x04 {
                guard case let .advertisingReports(reports)? = HCIEvent.parse(Array(r.packet.dropFirst())) else { continue }
                last = max(last, r.timeMicros - origin)
                status.withLock { $0.lines += reports.count }
                for report in reports { sink(.replayed(report, monoMicros: base + last)) }
            }
            log.info("radio.replayed", [("radio", "ble"), ("file", file), ("records", String(records.count))])
            base += last + 60_000_000
        }
        status.withLock { $0.state = .finished }
        log.info("radio.replay_finished", [("radio", "ble")])
    }

    // MARK: Bring-up and scanning

    private func bringUp(_ t: HCITransport) throws(HCIError) {
        try command(t, 0x0C03, [])
        let version = try command(t, 0x1001, [])
        let supported = try command(t, 0x1002, [])
        // Supported_Commands octet 37, bits 5 and 6: LE Set Extended Scan Parameters / Enable.
        let ext = supported.count > 38 && supported[1 + 37] & 0x60 == 0x60
        let info = BLEControllerInfo(hciVersion: version.count > 1 ? Int(version[1]) : 0,
                                     manufacturer: version.count > 5 ? Int(version[4]) | Int(version[5]) << 8 : 0, extendedScan: ext)
        controller.withLock { $0 = info }
        // Default events plus LE Meta (bit 61); LE subevents: advertising reports, legacy and extended.
        try command(t, 0x0C01, [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x1F, 0x00, 0x20])
        try command(t, 0x2001, [0x02, 0x10, 0, 0, 0, 0, 0, 0])
        if let own = settings.beacon {
            // Legacy advertising: a controller doing legacy advertising cannot use the extended
            // scan commands at the same time, so an own beacon keeps the scanner on legacy too.
            let units = UInt16(min(max(Double(own.intervalMs) / 0.625, 32), 16_384))
            try command(t, 0x2006, [UInt8(units & 0xFF), UInt8(units >> 8), UInt8(units & 0xFF), UInt8(units >> 8), 0x03, 0x00, 0x00,
                                    0, 0, 0, 0, 0, 0, 0x07, 0x00])
            let ad = Self.ownBeaconAdvertisingData(own.beacon)
            try command(t, 0x2008, [UInt8(ad.count)] + ad + [UInt8](repeating: 0, count: 31 - ad.count))
            try command(t, 0x200A, [0x01])
        }
        let interval = UInt16(Double(settings.intervalMs) / 0.625)
        let window = UInt16(Double(settings.windowMs) / 0.625)
        let type: UInt8 = settings.activeScan ? 1 : 0
        if ext && settings.extendedScan && settings.beacon == nil {
            try command(t, 0x2041, [0x00, 0x00, 0x01, type, UInt8(interval & 0xFF), UInt8(interval >> 8), UInt8(window & 0xFF), UInt8(window >> 8)])
            try command(t, 0x2042, [0x01, 0x00, 0, 0, 0, 0])
        } else {
            try command(t, 0x200B, [type, UInt8(interval & 0xFF), UInt8(interval >> 8), UInt8(window & 0xFF), UInt8(window >> 8), 0x00, 0x00])
            try command(t, 0x200C, [0x01, 0x00])
        }
        lastReport = Clocks.monotonicMicros()
        log.info("radio.started", [("radio", "ble"), ("transport", t.name), ("hci_version", String(info.hciVersion)),
                                   ("scan", ext && settings.extendedScan && settings.beacon == nil ? "extended" : "legacy"),
                                   ("own_beacon", settings.beacon.map { "\($0.beacon.uuidString)/\($0.beacon.major)/\($0.beacon.minor)" } ?? "off")])
    }

    /// Flags (LE General Discoverable off, BR/EDR not supported) and the iBeacon manufacturer data.
    public static func ownBeaconAdvertisingData(_ b: IBeacon) -> [UInt8] {
        let m = b.manufacturerData
        return [0x02, 0x01, 0x04, UInt8(m.count + 1), 0xFF] + m
    }

    private func scan(_ t: HCITransport) throws(HCIError) {
        var nextTick = Clocks.monotonicMicros() + Self.tickMicros
        while !isStopping {
            let now = Clocks.monotonicMicros()
            if now >= nextTick {
                sink(.tick)
                nextTick = now + Self.tickMicros
            }
            if settings.stallSeconds > 0, now - lastReport > Int64(settings.stallSeconds) * 1_000_000 {
                degraded.withLock { $0 = true }
                let message = "no advertising reports for \(settings.stallSeconds) s: resetting the controller"
                supervisor.resetInPlace(message, at: now)
                status.withLock { $0.show(supervisor) } // the reason shows until reports flow again
                log.warning("radio.ble_stalled", [("radio", "ble"), ("stall_s", String(settings.stallSeconds))])
                sink(.health(false))
                try bringUp(t)
                continue
            }
            _ = try waitEvents(t, until: min(nextTick, lastReport + Int64(max(settings.stallSeconds, 1)) * 1_000_000 + 1_000), want: 0xFFFF)
        }
    }
}
