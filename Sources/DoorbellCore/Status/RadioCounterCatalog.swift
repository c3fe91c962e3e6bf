// A radio's counter, declared once in its `RadioDescriptor`: the key in the status JSON, the
// words of `agentctl status` (in the table's order) and the Prometheus series.

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

    /// The counters `radio`'s descriptor declares; a radio this build does not know has none.
    public static func counters(for radio: String) -> [RadioCounterSpec] {
        RadioRegistry.descriptors.first { $0.name == radio }?.counters ?? []
    }
}
