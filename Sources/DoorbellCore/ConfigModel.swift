// The validated configuration. Everything here has passed ConfigLoader's checks, so the
// shells can use it without re-checking.

public struct AgentConfig: Sendable, Equatable {
    public var gatewayID: String
    public var paths: PathSettings
    public var log: LogSettings
    public var rtl433: RTL433Settings?
    /// The OOK receiver: GPIO pin, rtl_433's pulse output, or recorded timelines.
    public var ook: OOKRadioSettings?
    /// The Bluetooth LE scanner (HCI) and the base station's own iBeacon.
    public var ble: BLERadioSettings?
    public var regions: [BeaconRegion] = []
    public var button: ButtonTracker.Settings
    public var devices: [DeviceConfig]
    public var uplink: UplinkSettings?
    /// The house's own MQTT broker (Home Assistant, Node-RED): a second sink of the same outbox.
    public var mqtt: MQTTSettings?
    public var metrics: MetricsSettings?
    public var clock = ClockSettings()
    public var outbox = OutboxLimits()
    public var memory = MemorySettings()
    public var actions: [ActionConfig] = []
    /// Where the field image's update service pulls RAUC bundles from (`[update]`); the agent
    /// itself only checks the key: scripts/image's doorbell-update.service reads it.
    public var update: UpdateSettings?

    public init(gatewayID: String, paths: PathSettings = PathSettings(), log: LogSettings = LogSettings(),
                rtl433: RTL433Settings? = nil, button: ButtonTracker.Settings = ButtonTracker.Settings(),
                devices: [DeviceConfig] = [], uplink: UplinkSettings? = nil, metrics: MetricsSettings? = nil) {
        self.metrics = metrics
        self.gatewayID = gatewayID
        self.paths = paths
        self.log = log
        self.rtl433 = rtl433
        self.button = button
        self.devices = devices
        self.uplink = uplink
    }
}

public struct PathSettings: Sendable, Equatable {
    public static let defaultStateDir = "/var/lib/doorbell-agent"
    public static let defaultControlSocket = "/run/doorbell-agent/control.sock"
    public var stateDir: String = PathSettings.defaultStateDir
    public var controlSocket: String = PathSettings.defaultControlSocket
    public init(stateDir: String = PathSettings.defaultStateDir, controlSocket: String = PathSettings.defaultControlSocket) {
        self.stateDir = stateDir
        self.controlSocket = controlSocket
    }
    public var outboxPath: String { stateDir + "/outbox.sqlite" }
    public var deviceKeyPath: String { stateDir + "/device.key" }
}

public enum LogLevel: String, Sendable, CaseIterable, Comparable {
    case debug, info, notice, warning, error
    public var syslogPriority: Int {
        switch self { case .debug: 7; case .info: 6; case .notice: 5; case .warning: 4; case .error: 3 }
    }
    public static func < (a: LogLevel, b: LogLevel) -> Bool { a.syslogPriority > b.syslogPriority }
}

public struct LogSettings: Sendable, Equatable {
    public var level: LogLevel = .info
    public init(level: LogLevel = .info) { self.level = level }
}

public struct RTL433Settings: Sendable, Equatable {
    /// Program to run; looked up in PATH when it has no slash.
    public var binary: String = "rtl_433"
    /// rtl_433 config file with the board's decoders (`-c`), resolved against the agent config's folder.
    public var confFile: String?
    /// Extra arguments (device selection `-d`, frequency `-f`, gain `-g`, decoders `-R`/`-X`).
    public var args: [String] = []
    /// Recordings to play instead of a live SDR (`-r FILE` each): the simulated board.
    public var replay: [String] = []
    public var restartInitialMs: Int = 1_000
    public var restartMaxMs: Int = 60_000
    /// Print demodulated pulses (`-w OOK:-`) instead of decoded JSON, for the agent's own decoder.
    public var pulseOutput = false

    public init(binary: String = "rtl_433", confFile: String? = nil, args: [String] = [], replay: [String] = [],
                restartInitialMs: Int = 1_000, restartMaxMs: Int = 60_000, pulseOutput: Bool = false) {
        self.pulseOutput = pulseOutput
        self.binary = binary
        self.confFile = confFile
        self.args = args
        self.replay = replay
        self.restartInitialMs = restartInitialMs
        self.restartMaxMs = restartMaxMs
    }

    /// The full argv after the program name. Output options come first (the agent parses JSON
    /// only); `args` come before the conf file because rtl_433 applies options in order and a
    /// `-R 0` after the conf file would disable the board's flex decoders.
    public var arguments: [String] {
        if pulseOutput {
            // No decoders, no JSON: only the pulse data, on stdout.
            return ["-R", "0", "-w", "OOK:-"] + args + replay.flatMap { ["-r", $0] }
        }
        var argv = ["-F", "json", "-M", "time:unix:usec", "-M", "level"]
        argv += args
        if let confFile { argv += ["-c", confFile] }
        for file in replay { argv += ["-r", file] }
        return argv
    }
}

/// A GPIO line named the way it survives kernel updates: the chip's label (`pinctrl-bcm2711`,
/// `pinctrl-rp1` on a Pi 5) or its name/path (`gpiochip0`, `/dev/gpiochip4`), and the offset.
public struct GPIOLineRef: Sendable, Equatable, CustomStringConvertible {
    /// The line offsets the loader accepts.
    public static let offsets = 0...1023
    public var chip: String
    public var line: Int
    /// The module's output (or the relay input) is active at low level.
    public var activeLow = false
    public init(chip: String, line: Int, activeLow: Bool = false) {
        self.chip = chip
        self.line = line
        self.activeLow = activeLow
    }
    public var description: String { "\(chip) line \(line)" }
}

public enum OOKSource: String, Sendable, CaseIterable {
    /// A 433 MHz receiver module's data pin (libgpiod edge events).
    case gpio
    /// rtl_433 run in pulse mode (`-R 0 -w OOK:-`): an SDR demodulates, the agent decodes.
    case rtl433
    /// Recorded `.ook` / `.vcd` timelines (the simulated board, tests).
    case replay
}

public struct OOKRadioSettings: Sendable, Equatable {
    public var source: OOKSource
    public var gpio: GPIOLineRef?
    /// Levels shorter than this are receiver noise, folded into the level around them.
    public var glitchMicros = 80
    public var decoder = OOKDecoder.Settings()
    /// source = "replay": .ook / .vcd files.
    public var replay: [String] = []
    /// source = "rtl433": how to run it (binary, `-d`/`-f`/`-g` args, `.cu8` recordings to read).
    public var rtl433 = RTL433Settings(pulseOutput: true)
    public init(source: OOKSource) { self.source = source }
}

/// How a configured device is recognised in rtl_433's output. Every key given must match the
/// message field of the same name; `model` alone is never enough (rtl_433 mislabels EV1527 bells).
public struct RTL433Match: Sendable, Equatable {
    public var fields: [(String, MatchValue)]
    public init(fields: [(String, MatchValue)]) { self.fields = fields }
    public static func == (a: RTL433Match, b: RTL433Match) -> Bool {
        a.fields.count == b.fields.count && zip(a.fields, b.fields).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
    }
    public static let allowedKeys = ["code", "id", "unit", "channel", "button", "cmd", "data", "model", "protocol", "tristate", "address"]
}

public enum MatchValue: Sendable, Equatable {
    case integer(Int64)
    case text(String)
}

public enum DeviceKind: String, Sendable, CaseIterable {
    case doorbell
    /// A button inside the house that answers the door (AnswerButton): `door.answered`, not pushed.
    case answerButton = "answer_button"
}

public struct DeviceConfig: Sendable, Equatable {
    public var id: String
    public var name: String
    public var kind: DeviceKind
    public var radio: String
    public var match: RTL433Match
    /// BTHome devices that encrypt: the 16-byte AES key; plaintext adverts are then refused.
    public var bindkey: [UInt8]?
    public init(id: String, name: String, kind: DeviceKind = .doorbell, radio: String = "rtl433", match: RTL433Match) {
        self.id = id
        self.name = name
        self.kind = kind
        self.radio = radio
        self.match = match
    }
}

public struct UplinkSettings: Sendable, Equatable {
    public var url: String
    public var caFile: String?
    public var hmacSecretFile: String?
    public var signEd25519: Bool = true
    public var connectTimeoutMs: Int = 5_000
    public var requestTimeoutMs: Int = 15_000
    public var retryInitialMs: Int = 1_000
    public var retryMaxMs: Int = 300_000
    /// An event that failed this many times while the receiver took other events is parked as a
    /// dead letter (UplinkMachine.Settings.parkAfterFailures).
    public var parkAfterFailures: Int = 15
    /// libcurl's CURLOPT_PINNEDPUBLICKEY: "sha256//base64[;sha256//...]".
    public var pinnedPublicKey: String?
    /// mTLS: the gateway's certificate and key (PEM).
    public var clientCertFile: String?
    public var clientKeyFile: String?
    /// Optional proxy URL (http://host:port, socks5h://...).
    public var proxy: String?
    /// Requests in flight at once while draining a backlog (HTTP/2 streams on the one connection;
    /// over HTTP/1.1 they still go one at a time). 1 = strictly one event at a time, in order.
    public var maxInFlight: Int = 8
    /// A signed heartbeat to `<url's directory>/heartbeat` at start-up and this often
    /// (HeartbeatSchedule); 0 = none.
    public var heartbeatIntervalSeconds: Int = 0

    public init(url: String, caFile: String? = nil, hmacSecretFile: String? = nil, signEd25519: Bool = true,
                connectTimeoutMs: Int = 5_000, requestTimeoutMs: Int = 15_000,
                retryInitialMs: Int = 1_000, retryMaxMs: Int = 300_000) {
        self.url = url
        self.caFile = caFile
        self.hmacSecretFile = hmacSecretFile
        self.signEd25519 = signEd25519
        self.connectTimeoutMs = connectTimeoutMs
        self.requestTimeoutMs = requestTimeoutMs
        self.retryInitialMs = retryInitialMs
        self.retryMaxMs = retryMaxMs
    }
}

/// Prometheus text-format metrics written atomically to a file (node_exporter's textfile collector).
public struct UpdateSettings: Sendable, Equatable {
    public var url: String
    public init(url: String) { self.url = url }
}

public struct MetricsSettings: Sendable, Equatable {
    public var file: String
    public var intervalSeconds: Int = 15
    public init(file: String, intervalSeconds: Int = 15) {
        self.file = file
        self.intervalSeconds = intervalSeconds
    }
}

/// A Pi has no RTC: until NTP syncs, the wall clock may be 1970 or a stale fake-hwclock time.
public struct ClockSettings: Sendable, Equatable {
    /// Hold delivery until the clock is synchronized (receivers reject stale signature timestamps).
    public var requireSync = true
    /// Present once the clock is synchronized (systemd-timesyncd's flag file by default).
    public var syncFile = "/run/systemd/timesync/synchronized"
    /// Also believe the kernel's NTP state (adjtimex) when the file is absent (chrony, ntpd).
    public var kernelCheck = true
    public init(requireSync: Bool = true, syncFile: String = "/run/systemd/timesync/synchronized", kernelCheck: Bool = true) {
        self.requireSync = requireSync
        self.syncFile = syncFile
        self.kernelCheck = kernelCheck
    }
}

/// What the agent keeps mapped (PageReleaseSchedule, ProcessMappings).
public struct MemorySettings: Sendable, Equatable {
    /// Unmap the clean pages of the binary and its libraries after start-up and after bursts.
    public var releaseCleanPages = true
    public init(releaseCleanPages: Bool = true) { self.releaseCleanPages = releaseCleanPages }
}

/// How much the outbox may hold before it evicts (presence and telemetry first, presses last).
public struct OutboxLimits: Sendable, Equatable {
    public var maxEvents = 20_000
    public var maxBytes = 16 << 20
    public init(maxEvents: Int = 20_000, maxBytes: Int = 16 << 20) { self.maxEvents = maxEvents; self.maxBytes = maxBytes }
}

/// A local action: runs on the base station at once, whatever the network does.
public struct ActionConfig: Sendable, Equatable {
    public var name: String
    /// Event types that trigger it (default: doorbell.pressed).
    public var on: [EventType]
    /// Devices that trigger it; empty = every device.
    public var devices: [String]
    /// Program and arguments, run without a shell; event fields arrive in the environment.
    public var exec: [String]
    /// Drive a chime relay or buzzer: the line goes active for `durationMs`, then back.
    public var gpioPulse: GPIOPulseSettings?
    /// Answer the door: the ringing doorbell notification is dismissed on every connected phone
    /// (the phone link's `agentctl answer`). Alone in its action: nothing to run or pulse.
    public var answerPhones = false
    public var timeoutMs: Int = 10_000
    /// At most this many running at once; a press beyond it is skipped and counted.
    public var maxRunning: Int = 2

    public init(name: String, on: [EventType] = [.doorbellPressed], devices: [String] = [], exec: [String],
                timeoutMs: Int = 10_000, maxRunning: Int = 2) {
        self.name = name
        self.on = on
        self.devices = devices
        self.exec = exec
        self.timeoutMs = timeoutMs
        self.maxRunning = maxRunning
    }

    public func matches(_ event: AgentEvent) -> Bool {
        // A replayed or injected test press rings too: an installer checks the chime that way.
        on.contains(event.type) && (devices.isEmpty || devices.contains(event.device.id))
    }

    /// What it does, as status shows it: `answer_phones`, `exec`, `gpio_pulse` or both of those.
    public var does: String {
        if answerPhones { return "answer_phones" }
        return [gpioPulse == nil ? nil : "gpio_pulse", exec.isEmpty ? nil : "exec"].compactMap { $0 }.joined(separator: " + ")
    }
}

public struct GPIOPulseSettings: Sendable, Equatable {
    public var line: GPIOLineRef
    public var durationMs: Int = 300
    public init(line: GPIOLineRef, durationMs: Int = 300) {
        self.line = line
        self.durationMs = durationMs
    }
}

public enum HCITransportKind: Sendable, Equatable {
    /// The kernel's HCI socket on controller `hciN`. Exclusive (the default): the HCI user channel,
    /// the controller is the agent's alone and BlueZ cannot stop its scan. Shared: the raw channel
    /// beside bluetoothd, whose discovery and power changes silently end the agent's scan (the
    /// field rig lost 7 of 10 presses to one `bluetoothctl scan on`; issue #15).
    case kernel(device: Int, exclusive: Bool = true)
    /// H4 over a UART (an nRF52840 or similar running an HCI firmware).
    case serial(path: String, baud: Int, flowControl: Bool)
    /// H4 over TCP (a dongle behind ser2net; the tests' virtual controller).
    case tcp(host: String, port: Int)
    /// btsnoop captures played as the radio (the simulated board, support cases).
    case replay(files: [String])

    /// The kernel's device groups (/proc/devices) of the UARTs an H4 controller sits on: a board's
    /// (ttyS), a Pi's (ttyAMA), a USB CDC dongle's (ttyACM), an FTDI/CP210x adapter's (ttyUSB).
    /// The unit's DeviceAllow= must list each (SystemdUnitTests checks it with systemd's parser).
    public static let serialDeviceGroups = ["ttyS", "ttyAMA", "ttyACM", "ttyUSB"]
}

public struct BLERadioSettings: Sendable, Equatable {
    public var transport: HCITransportKind
    public var activeScan = false
    public var intervalMs = 60
    public var windowMs = 30
    /// Use LE extended scanning when the controller supports it (and no own beacon is advertised).
    public var extendedScan = true
    /// No advertising report for this long while scanning: reset the controller (0 = never).
    public var stallSeconds = 120
    /// How long a command may wait for its Command Complete/Status.
    public var commandTimeoutMs = 2_000
    /// The base station's own iBeacon, advertised while scanning.
    public var beacon: OwnBeacon?
    /// The phone link (ANCS): advertise connectably soliciting ANCS and serve the phone's connection.
    public var ancsLink = false
    /// The doorbell app's bundle id: its notifications on the phone are the pushes' receipts.
    public var ancsDoorbellApp = ""
    public var ancsReceiptWindowSeconds = 120
    /// ANCS category names and app bundle ids whose notifications become `phone.notification`.
    public var ancsNotify = ["incoming_call"]
    /// Titles and messages of those notifications go into the events (off: never leave the box).
    public var ancsShareText = false
    /// The name the connectable advertisement carries (scan response): what the owner sees when
    /// pairing. The loader defaults it to the gateway id.
    public var ancsName: String?
    public init(transport: HCITransportKind) { self.transport = transport }
}

public struct OwnBeacon: Sendable, Equatable {
    public var beacon: IBeacon
    public var intervalMs = 100
    public init(beacon: IBeacon, intervalMs: Int = 100) { self.beacon = beacon; self.intervalMs = intervalMs }
}

public enum MQTTProtocolVersion: String, Sendable, Equatable {
    case v311 = "3.1.1"
    case v5 = "5"
}

public struct MQTTSettings: Sendable, Equatable {
    public var host: String
    public var port: Int = 1883
    public var protocolVersion: MQTTProtocolVersion = .v311
    /// Also the persistent session's identity: keep it stable per gateway.
    public var clientID: String
    public var username: String?
    /// The password, read at start and on reload, never written in the config itself.
    public var passwordFile: String?
    /// TLS when set (port 8883 by convention).
    public var caFile: String?
    public var certFile: String?
    public var keyFile: String?
    public var topicPrefix: String = "doorbell"
    public var discovery: Bool = true
    public var discoveryPrefix: String = "homeassistant"
    /// With discovery: how long events wait for Home Assistant's birth message after a connect
    /// (MQTTSession); 0 publishes them at once.
    public var waitForHomeAssistantSeconds: Int = 30
    public var keepaliveSeconds: Int = 60
    public var maxInFlight: Int = 20
    public var retryInitialMs: Int = 1_000
    public var retryMaxMs: Int = 60_000
    public init(host: String, clientID: String) {
        self.host = host
        self.clientID = clientID
    }
}
