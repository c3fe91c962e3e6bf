// The HCI host as a value: it turns the controller's bytes and the passing of time into the
// packets to write and the things that happened (reports, bring-up done, a stall, a failure).
// The shell (DoorbellRuntime's BLERadio) only polls the transport and writes what it is told.
// Hand-written because BlueZ's host lives in bluetoothd, which the agent does not depend on (the
// user channel takes the controller from it), and libbluetooth has no host state machine.
//
// What it does: the bring-up script (Reset, Read Local Version, Read Local Supported Commands,
// event masks, the own beacon's advertising, then legacy or extended scanning, chosen from the
// supported commands), one command at a time within the controller's credits
// (Num_HCI_Command_Packets), a deadline per command, and a reset when no advertising report
// arrived for `stallSeconds`. With the phone link on (`ancsLink`), also the LE ACL buffers, the
// connectable ANCS solicitation (LEAdvertising) and one peripheral connection: ACL credits,
// L2CAP, the ATT server's answers and the GATT client (HCIHost+Link); SMP is handed out.

public struct BLEControllerInfo: Sendable, Equatable {
    public var hciVersion: Int
    public var manufacturer: Int
    public var extendedScan: Bool
    /// The controller's public address (Read BD_ADDR, most significant octet first), read when
    /// the phone link is on: the base station's identity in pairing (SMP's f5 and f6).
    public var publicAddress: [UInt8]?
    public init(hciVersion: Int, manufacturer: Int, extendedScan: Bool, publicAddress: [UInt8]? = nil) {
        self.hciVersion = hciVersion
        self.manufacturer = manufacturer
        self.extendedScan = extendedScan
        self.publicAddress = publicAddress
    }
}

public struct HCIHost: Sendable {
    public enum Action: Sendable, Equatable {
        /// Write this H4 packet to the controller.
        case send([UInt8])
        /// A received H4 event packet (type byte included), when `tapping` was asked for.
        case received([UInt8])
        /// The advertising reports of one read, together (they are stored in one transaction).
        case reports([BLEAdvertisingReport])
        /// The bring-up finished: the controller scans.
        case scanning(BLEControllerInfo, extended: Bool)
        /// No report for `stallSeconds`: the bring-up starts again on the same transport.
        case stalled
        /// No report for `stallSeconds` while a phone is connected: the scan is switched off and
        /// on again instead, since a reset would drop the phone (and in a quiet house, every
        /// `stallSeconds`). The controller is alive: it carries the phone's link.
        case scanRearmed
        /// Give up on this transport (the shell closes it and its supervisor backs off).
        case failed(HCIFailure)
        /// A phone connected (the base station is the peripheral).
        case connected(LEConnection)
        /// The connection ended (HCI reason code); advertising resumes by itself.
        case disconnected(handle: UInt16, reason: UInt8)
        /// An SMP PDU from the phone, for the pairing machine; answer with `send(smp:at:)`.
        case smp(handle: UInt16, [UInt8])
        /// The phone starts encryption: answer with `replyLongTermKey(_:at:)` (nil: no bond).
        case longTermKeyRequested(handle: UInt16, random: [UInt8], ediv: UInt16)
        /// Encryption Change or Key Refresh Complete (status 0 when it worked).
        case encryptionChanged(handle: UInt16, enabled: Bool, status: UInt8)
        /// What the GATT client found out (never its `.send`: the host carries those).
        case gatt(GATTClient.Action)
    }

    public struct HCIFailure: Sendable, Equatable, CustomStringConvertible {
        public enum Code: Sendable, Equatable { case noCredit, timeout, refused, hardwareError }
        public let code: Code
        public let description: String
        public init(code: Code, description: String) { self.code = code; self.description = description }
    }

    public static let names: [UInt16: String] = [
        0x0C03: "Reset", 0x1001: "Read Local Version", 0x1002: "Read Local Supported Commands", 0x0C01: "Set Event Mask",
        0x2001: "LE Set Event Mask", 0x200B: "LE Set Scan Parameters", 0x200C: "LE Set Scan Enable",
        0x2041: "LE Set Extended Scan Parameters", 0x2042: "LE Set Extended Scan Enable", 0x2006: "LE Set Advertising Parameters",
        0x2008: "LE Set Advertising Data", 0x200A: "LE Set Advertising Enable", 0x2009: "LE Set Scan Response Data",
        0x2002: "LE Read Buffer Size", 0x2060: "LE Read Buffer Size [v2]", 0x1005: "Read Buffer Size",
        0x2036: "LE Set Extended Advertising Parameters", 0x2037: "LE Set Extended Advertising Data",
        0x2039: "LE Set Extended Advertising Enable", 0x0406: "Disconnect",
        0x201A: "LE Long Term Key Request Reply", 0x201B: "LE Long Term Key Request Negative Reply", 0x1009: "Read BD_ADDR",
    ]

    /// Commands about one connection, or advertising again after it: a refusal after bring-up means
    /// the connection went meanwhile (or advertising runs already), not a broken controller; a scan
    /// switched off that was off already (older controllers say Command Disallowed).
    static let refusalTolerated: Set<UInt16> = [0x0406, 0x201A, 0x201B, 0x200A, 0x2039, 0x200C, 0x2042]

    public let settings: BLERadioSettings
    /// The transport's name, for messages ("hci0", "/dev/ttyACM0", "127.0.0.1:9000").
    public let transportName: String
    public private(set) var info: BLEControllerInfo?
    public private(set) var isScanning = false
    /// Bytes that started no packet (line noise on a UART).
    public var skippedBytes: Int { framer.skippedBytes }

    private var framer = H4Framer()
    private var credits = 1
    /// Commands still to send (the bring-up, then the link's), first first.
    var script: [(opcode: UInt16, params: [UInt8])] = []
    /// The phone link's state: connection, ACL buffers, reassembly, GATT.
    var link = LELink()
    /// The command sent and not yet answered, or waiting for a credit, with its deadline.
    private var pending: (opcode: UInt16, deadline: Int64, sent: Bool)?
    private var version: [UInt8] = []
    private var lastReport: Int64 = 0
    private var failed = false
    /// Set when the bring-up's last answer arrived, emitted by the next `advance`.
    private var scanningAction: Action?

    public init(settings: BLERadioSettings, transportName: String) {
        self.settings = settings
        self.transportName = transportName
    }

    /// The earliest time `tick` has something to do (a command deadline, the stall limit).
    public var nextDeadline: Int64? {
        if failed { return nil }
        let stall = isScanning && settings.stallSeconds > 0 ? lastReport + Int64(settings.stallSeconds) * 1_000_000 + 1_000 : nil
        return [pending?.deadline, stall, link.gatt.nextDeadline].compactMap { $0 }.min()
    }

    /// Starts (or, after a stall, restarts) the bring-up.
    public mutating func start(at now: Int64) -> [Action] {
        isScanning = false
        failed = false
        pending = nil
        script = [(0x0C03, []), (0x1001, []), (0x1002, [])]
        return dropLink(reason: 0x16) + advance(at: now)
    }

    /// Bytes the controller sent.
    public mutating func received(_ bytes: [UInt8], at now: Int64, tapping: Bool = false) -> [Action] {
        guard !failed else { return [] }
        var actions: [Action] = []
        var reports: [BLEAdvertisingReport] = []
        for packet in framer.feed(bytes) {
            if case let .acl(data) = packet {
                if tapping { actions.append(.received([0x02] + data)) }
                actions += acl(data, at: now)
                continue
            }
            guard case let .event(event) = packet else { continue }
            if tapping { actions.append(.received([0x04] + event)) }
            guard let parsed = HCIEvent.parse(event) else { continue }
            switch parsed {
            case let .commandComplete(opcode, numCommands, ret):
                credits = Int(numCommands)
                if let failure = answer(opcode, status: ret.first, returnParameters: ret, at: now) { return finish(actions, reports, failure) }
            case let .commandStatus(status, numCommands, opcode):
                credits = Int(numCommands)
                if let failure = answer(opcode, status: status, returnParameters: [status], at: now) { return finish(actions, reports, failure) }
            case let .advertisingReports(r):
                reports += r
            case let .hardwareError(code):
                return finish(actions, reports, HCIFailure(code: .hardwareError, description: "\(transportName): controller hardware error 0x\(String(code, radix: 16))"))
            case .other:
                break
            default:
                actions += linkEvent(parsed, at: now)
            }
        }
        if !reports.isEmpty {
            lastReport = now
            actions.append(.reports(reports))
        }
        return actions + advance(at: now)
    }

    /// Time passed: a command past its deadline fails; a scan without reports is reset.
    public mutating func tick(at now: Int64) -> [Action] {
        guard !failed else { return [] }
        if let p = pending, now >= p.deadline {
            let label = Self.names[p.opcode] ?? "0x" + String(p.opcode, radix: 16)
            let message = p.sent ? "\(transportName): \(label) timed out after \(settings.commandTimeoutMs) ms"
                                 : "\(transportName): controller gave no command credit for \(settings.commandTimeoutMs) ms"
            return fail(HCIFailure(code: p.sent ? .timeout : .noCredit, description: message))
        }
        let gatt = linkTick(at: now)
        if isScanning, settings.stallSeconds > 0, now - lastReport > Int64(settings.stallSeconds) * 1_000_000 {
            guard link.connection != nil, let info else { return gatt + [.stalled] + start(at: now) }
            lastReport = now
            script += usesExtendedScan(info) ? [(0x2042, [0x00, 0x00, 0, 0, 0, 0]), (0x2042, [0x01, 0x00, 0, 0, 0, 0])]
                                             : [(0x200C, [0x00, 0x00]), (0x200C, [0x01, 0x00])]
            return gatt + [.scanRearmed] + advance(at: now)
        }
        return gatt + advance(at: now)
    }

    // MARK: - Bring-up

    private mutating func answer(_ opcode: UInt16, status: UInt8?, returnParameters ret: [UInt8], at now: Int64) -> HCIFailure? {
        guard let p = pending, p.sent, p.opcode == opcode else { return nil }
        pending = nil
        if let status, status != 0, !(isScanning && Self.refusalTolerated.contains(opcode)) {
            let label = Self.names[opcode] ?? "0x" + String(opcode, radix: 16)
            return HCIFailure(code: .refused, description: "\(transportName): the controller refused \(label): status 0x\(String(status, radix: 16)) (\(Self.statusText(status)))")
        }
        switch opcode {
        case 0x1001: version = ret
        case 0x1002: script += rest(supported: ret)
        case 0x2002, 0x2060, 0x1005: bufferSize(opcode, ret)
        case 0x1009: if ret.count >= 7 { info?.publicAddress = ret[1...6].reversed() }
        default: break
        }
        if script.isEmpty && !isScanning, let info { isScanning = true; lastReport = now; scanningAction = .scanning(info, extended: usesExtendedScan(info)) }
        return nil
    }

    private mutating func rest(supported: [UInt8]) -> [(opcode: UInt16, params: [UInt8])] {
        // Supported_Commands octet 37, bits 5 and 6: LE Set Extended Scan Parameters / Enable.
        let ext = supported.count > 38 && supported[1 + 37] & 0x60 == 0x60
        // Read Local Version: Status, HCI_Version, HCI_Subversion (2), LMP_Version, Company_Identifier (2), ...
        let made = BLEControllerInfo(hciVersion: version.count > 1 ? Int(version[1]) : 0,
                                     manufacturer: version.count > 6 ? Int(version[5]) | Int(version[6]) << 8 : 0, extendedScan: ext)
        info = made
        link.extendedAdvertising = settings.ancsLink && ext && settings.extendedScan && LEAdvertising.supportsExtended(supported)
        var out: [(opcode: UInt16, params: [UInt8])]
        if settings.ancsLink {
            // Octet 41 bit 5: LE Read Buffer Size [v2]. Events add Encryption Key Refresh (bit 47);
            // LE: connection complete (legacy and enhanced), advertising reports, LTK request,
            // advertising set terminated.
            let v2 = supported.count > 42 && supported[1 + 41] & 0x20 != 0
            out = [(0x1009, []), (v2 ? 0x2060 : 0x2002, []), (0x0C01, [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x9F, 0x00, 0x20]),
                   (0x2001, [0x13, 0x12, 0x02, 0, 0, 0, 0, 0])]
        } else {
            // Default events plus LE Meta (bit 61); LE subevents: advertising reports, legacy and extended.
            out = [(0x0C01, [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x1F, 0x00, 0x20]), (0x2001, [0x02, 0x10, 0, 0, 0, 0, 0, 0])]
        }
        // A controller doing legacy advertising cannot use the extended scan commands at the same
        // time, so legacy advertising keeps the scanner on legacy too.
        out += LEAdvertising.setup(beacon: settings.beacon, solicit: settings.ancsLink, name: settings.ancsName ?? "",
                                   extended: link.extendedAdvertising)
        let interval = UInt16(Double(settings.intervalMs) / 0.625)
        let window = UInt16(Double(settings.windowMs) / 0.625)
        let type: UInt8 = settings.activeScan ? 1 : 0
        if usesExtendedScan(made) {
            out.append((0x2041, [0x00, 0x00, 0x01, type, UInt8(interval & 0xFF), UInt8(interval >> 8), UInt8(window & 0xFF), UInt8(window >> 8)]))
            out.append((0x2042, [0x01, 0x00, 0, 0, 0, 0]))
        } else {
            out.append((0x200B, [type, UInt8(interval & 0xFF), UInt8(interval >> 8), UInt8(window & 0xFF), UInt8(window >> 8), 0x00, 0x00]))
            out.append((0x200C, [0x01, 0x00]))
        }
        return out
    }

    private func usesExtendedScan(_ info: BLEControllerInfo) -> Bool {
        info.extendedScan && settings.extendedScan && (link.extendedAdvertising || settings.beacon == nil && !settings.ancsLink)
    }

    /// Sends the next command when nothing is outstanding and the controller has a credit.
    mutating func advance(at now: Int64) -> [Action] {
        var out: [Action] = []
        if let s = scanningAction { out.append(s); scanningAction = nil }
        let deadline = now + Int64(settings.commandTimeoutMs) * 1000
        if pending == nil, let next = script.first {
            // Num_HCI_Command_Packets = 0: the controller takes no command until it says so.
            pending = (next.opcode, deadline, false)
        }
        if let p = pending, !p.sent, credits > 0, let next = script.first, next.opcode == p.opcode {
            script.removeFirst()
            credits -= 1
            pending = (p.opcode, deadline, true)
            out.append(.send(H4Framer.command(next.opcode, next.params)))
        }
        return out
    }

    private mutating func fail(_ failure: HCIFailure) -> [Action] {
        failed = true
        pending = nil
        script.removeAll()
        return [.failed(failure)]
    }

    private mutating func finish(_ actions: [Action], _ reports: [BLEAdvertisingReport], _ failure: HCIFailure) -> [Action] {
        (reports.isEmpty ? actions : actions + [.reports(reports)]) + fail(failure)
    }

    public static func statusText(_ s: UInt8) -> String {
        switch s {
        case 0x01: "Unknown HCI Command"
        case 0x0C: "Command Disallowed"
        case 0x11: "Unsupported Feature or Parameter Value"
        case 0x12: "Invalid HCI Command Parameters"
        default: "see Core spec Vol 1 Part F"
        }
    }

    /// Flags (LE General Discoverable off, BR/EDR not supported) and the iBeacon manufacturer data.
    public static func ownBeaconAdvertisingData(_ b: IBeacon) -> [UInt8] { LEAdvertising.beaconData(b, connectable: false) }
}
