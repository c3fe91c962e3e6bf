// Each radio's counters, declared once: the key in the status JSON, the words of `agentctl
// status` (in the table's order) and the Prometheus series. A radio's counters are rendered
// from here in all three places; a new radio adds one entry.

public struct RadioCounterSpec: Sendable, Equatable {
    public let key: String
    /// The words after the number in `agentctl status` ("12 lines"); nil: JSON and metrics only.
    public let tableLabel: String?
    /// The Prometheus series; nil: not exported.
    public let metric: String?
    /// Whether the series carries `radio="name"` (shared series) or belongs to this radio alone.
    public let labelledByRadio: Bool
    public let help: String

    public init(_ key: String, table: String?, metric: String? = nil, labelledByRadio: Bool = true, help: String) {
        self.key = key
        self.tableLabel = table
        self.metric = metric
        self.labelledByRadio = labelledByRadio
        self.help = help
    }
}

public enum RadioCounterCatalog {
    static let lines = RadioCounterSpec("lines", table: "lines", metric: "doorbell_radio_lines_total", help: "Lines read from the radio.")
    static let frames = RadioCounterSpec("frames", table: "frames", metric: "doorbell_radio_frames_total", help: "Frames decoded.")
    static let unmatched = RadioCounterSpec("unmatched_frames", table: "unmatched", help: "Frames from transmitters not in the config.")

    public static let byRadio: [String: [RadioCounterSpec]] = [
        "rtl433": [
            lines, frames,
            RadioCounterSpec("malformed", table: "malformed", metric: "doorbell_radio_malformed_total", help: "Lines that could not be decoded."),
            unmatched,
        ],
        "ook": [
            RadioCounterSpec("pulses", table: "pulses", metric: "doorbell_ook_pulses_total", labelledByRadio: false, help: "Pulses the OOK decoder saw."),
            RadioCounterSpec("glitches", table: "glitches", metric: "doorbell_ook_glitches_total", labelledByRadio: false,
                             help: "Receiver spikes folded by the glitch filter."),
            RadioCounterSpec("words", table: "words", metric: "doorbell_ook_words_total", labelledByRadio: false, help: "Fixed-code words decoded."),
            RadioCounterSpec("frames", table: "codes", metric: "doorbell_radio_frames_total", help: frames.help),
            unmatched,
            RadioCounterSpec("lines", table: nil, metric: lines.metric, help: lines.help),
            RadioCounterSpec("rejected", table: nil, help: "Pulse trains the OOK decoder rejected."),
        ],
        "ble": [
            RadioCounterSpec("reports", table: "reports", help: "Advertising reports from the controller."),
            RadioCounterSpec("bthome", table: "BTHome", help: "BTHome adverts from configured buttons."),
            RadioCounterSpec("ibeacons", table: "iBeacon", help: "iBeacon adverts."),
            RadioCounterSpec("replays_refused", table: "replays refused", help: "BTHome packets refused as replays."),
            RadioCounterSpec("decrypt_failures", table: "bad MICs", help: "Encrypted BTHome adverts whose MIC did not verify."),
            RadioCounterSpec("downgrades_refused", table: nil, help: "Unencrypted adverts refused from a button configured with a key."),
            RadioCounterSpec("lines", table: nil, metric: lines.metric, help: "Advertising reports the radio read."),
        ],
    ]

    /// The counters of `radio`; a radio this build does not know has none declared.
    public static func counters(for radio: String) -> [RadioCounterSpec] { byRadio[radio] ?? [] }
}
