// [radio.rtl433]: rtl_433 decoding an SDR's signal (or recordings) into JSON messages.

extension RTL433Settings: Radio {
    static let descriptor = RadioDescriptor(
        name: "rtl433", summary: "rtl_433 on an RTL-SDR stick: its decoders' JSON messages",
        options: [
            RadioOption("enabled", .bool(default: true), help: "run rtl_433"),
            RadioOption("binary", .string(default: "rtl_433"), help: "program, looked up in PATH"),
            RadioOption("conf_file", .path,
                        help: "rtl_433 decoder file passed as `-c` (boards ship `board/common/rtl_433-doorbells.conf`)"),
            RadioOption("args", .strings(default: []),
                        help: "extra rtl_433 arguments (`-d`, `-f`, `-g`, `-R`, `-X`); `-F/-M/-r/-w/-W` are refused, the agent sets output itself (`-F json -M time:unix:usec -M level`)"),
            RadioOption("replay", .paths(default: []),
                        help: "recordings to play (`-r FILE` each) instead of an SDR: the sim board. The radio shows `finished` after them."),
            RadioOption("restart_initial_ms", .int(100...600_000, default: 1_000),
                        help: "backoff when rtl_433 exits or is missing: the first wait"),
            RadioOption("restart_max_ms", .int(1_000...3_600_000, default: 60_000),
                        help: "backoff when rtl_433 exits or is missing: the longest wait (at least restart_initial_ms)"),
        ],
        counters: [
            RadioCounterCatalog.lines, RadioCounterCatalog.frames,
            RadioCounterSpec("malformed", table: "malformed", metric: "doorbell_radio_malformed_total", help: "Lines that could not be decoded."),
            RadioCounterCatalog.unmatched,
        ])

    static var slot: WritableKeyPath<AgentConfig, RTL433Settings?> { \.rtl433 }

    static func read(_ s: RadioSection, baseDir: String, checks: ConfigFileChecks) -> RTL433Settings? {
        var r = RTL433Settings()
        if let b = s.string("binary") { r.binary = b.contains("/") ? ConfigLoader.resolve(b, baseDir: baseDir) : b }
        if let c = s.string("conf_file") {
            let p = ConfigLoader.resolve(c, baseDir: baseDir)
            r.confFile = p
            if !checks.isReadableFile(p) {
                s.report("conf_file", "cannot read \(p). Point it at the board's rtl_433 decoder file, e.g. conf_file = \"/usr/share/doorbell-agent/board/common/rtl_433-doorbells.conf\"")
            }
        }
        if let a = s.strings("args") {
            r.args = a
            for bad in ["-F", "-M", "-r", "-w", "-W"] where a.contains(bad) {
                s.report("args", "must not contain \(bad): the agent sets output and input options itself (use `replay` for recordings)")
            }
        }
        if let files = s.strings("replay") {
            r.replay = files.map { ConfigLoader.resolve($0, baseDir: baseDir) }
            for p in r.replay where !checks.isReadableFile(p) {
                s.report("replay", "cannot read recording \(p). Check the path (relative paths start at the config file's folder).")
            }
        }
        if let v = s.int("restart_initial_ms") { r.restartInitialMs = v }
        if let v = s.int("restart_max_ms") { r.restartMaxMs = v }
        if r.restartMaxMs < r.restartInitialMs {
            s.report("restart_max_ms", "must be at least restart_initial_ms (\(r.restartInitialMs))")
        }
        return r
    }
}
