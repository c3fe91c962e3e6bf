// [radio.ook]: OOK pulses the agent decodes itself (rc-switch protocols), from a receiver
// module's data pin, rtl_433 in pulse mode, or recorded timelines.

extension OOKRadioSettings: Radio {
    static let descriptor = RadioDescriptor(
        name: "ook", summary: "433 MHz OOK pulses decoded by the agent (EV1527, PT2262, rc-switch)",
        discriminator: "source",
        options: [
            RadioOption("source", .choice(OOKSource.allCases.map { RadioChoice($0.rawValue) }, default: nil), required: true,
                        help: "where OOK pulses come from: a receiver module's data pin (libgpiod edge events), rtl_433 in pulse mode (`-R 0 -w OOK:-`, for remotes its decoders mislabel or miss), or `.ook`/`.vcd` recordings. The agent decodes them itself."),
            RadioOption("enabled", .bool(default: true), help: "`false` keeps the section but does not run the radio"),
            RadioOption("chip", .string(default: nil), required: true, for: ["gpio"],
                        help: "the GPIO chip by **label**: `pinctrl-bcm2835` (Zero 2 W, 3), `pinctrl-bcm2711` (4), `pinctrl-rp1` (5); `gpiochipN` or a path also work. A missing chip, a line in use or missing permission is a `missing` radio with the reason in `agentctl status`, retried with backoff, never a crash."),
            RadioOption("line", .int(GPIOLineRef.offsets, default: nil), required: true, for: ["gpio"],
                        help: "line offset (the BCM GPIO number on a Pi)"),
            RadioOption("active_low", .bool(default: false), for: ["gpio"], help: "the module's output idles high"),
            RadioOption("glitch_us", .int(0...2_000, default: 80),
                        help: "levels shorter than this are receiver noise, folded into the level around them"),
            RadioOption("protocols", .ints(default: OOKDecoder.Settings().protocols),
                        help: "rc-switch protocols to try (1 = EV1527/PT2262: sync 1T+31T, bits 1T:3T)"),
            RadioOption("bits", .int(OOKDecoder.Settings.bitRange, default: OOKDecoder.Settings().bits), help: "bits per word"),
            RadioOption("max_time_unit_us", .int(OOKDecoder.Settings.maxTimeUnitRange, default: OOKDecoder.Settings.defaultMaxTimeUnitMicros),
                        help: "the slowest time unit T to decode (rtl_433's `short` pulse, EV1527's 1T; `time_unit_us` in the events). Bells use 190–530 µs; raise it for a slower remote or a line that stretches levels. The word gap (3⅓ T, at least 2 ms), the burst silence (80 T, at least 100 ms), the line's idle (40 T, at least 50 ms) and the repeat gap of one press (448 T, at least `[tracker.button] repeat_gap_ms`) grow with it"),
            RadioOption("replay", .paths(default: nil), for: ["replay", "rtl433"],
                        help: "`replay`: `.ook`/`.vcd` files, placed a minute apart on the tracker's clock; `rtl433`: `.cu8` recordings for rtl_433 to read instead of the SDR"),
            RadioOption("rtl433_binary", .string(default: "rtl_433"), for: ["rtl433"],
                        help: "the rtl_433 program run in pulse mode, looked up in PATH"),
            RadioOption("rtl433_args", .strings(default: []), for: ["rtl433"],
                        help: "its device options (`-d`, `-f`, `-g`); decoder and output options are refused. One stick cannot serve `[radio.rtl433]` and this at once: give each its `-d`."),
        ],
        counters: [
            RadioCounterSpec("pulses", table: "pulses", metric: "doorbell_ook_pulses_total", labelledByRadio: false, help: "Pulses the OOK decoder saw."),
            RadioCounterSpec("glitches", table: "glitches", metric: "doorbell_ook_glitches_total", labelledByRadio: false,
                             help: "Receiver spikes folded by the glitch filter."),
            RadioCounterSpec("words", table: "words", metric: "doorbell_ook_words_total", labelledByRadio: false, help: "Fixed-code words decoded."),
            RadioCounterSpec("frames", table: "codes", metric: "doorbell_radio_frames_total", help: RadioCounterCatalog.frames.help),
            RadioCounterCatalog.unmatched,
            RadioCounterSpec("lines", table: nil, metric: RadioCounterCatalog.lines.metric, help: RadioCounterCatalog.lines.help),
            RadioCounterSpec("rejected", table: nil, help: "Pulse trains the OOK decoder rejected."),
        ])

    static var slot: WritableKeyPath<AgentConfig, OOKRadioSettings?> { \.ook }

    static func read(_ s: RadioSection, baseDir: String, checks: ConfigFileChecks) -> OOKRadioSettings? {
        let sourceName = s.select(hint: "where the pulses come from: source = \"gpio\" (receiver module on a pin), \"rtl433\" (SDR in pulse mode) or \"replay\" (recordings)")
        guard let sourceName else { return nil }
        guard let source = OOKSource(rawValue: sourceName) else {
            s.report("source", "unknown source \"\(sourceName)\"; use \(OOKSource.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", "))")
            return nil
        }
        var o = OOKRadioSettings(source: source)
        if source == .gpio {
            o.gpio = ConfigLoader.readLine(s.table, what: "the receiver's data pin")
        }
        if let v = s.int("glitch_us") { o.glitchMicros = v }
        if let v = s.int("bits") { o.decoder.bits = v }
        if let v = s.int("max_time_unit_us") { o.decoder.maxTimeUnitMicros = v }
        if let list = s.ints("protocols") {
            let known = OOKProtocol.table.map(\.number)
            if list.isEmpty { s.report("protocols", "needs at least one rc-switch protocol number (1-6)") }
            for n in list where !known.contains(n) { s.report("protocols", "unknown protocol \(n); rc-switch protocols are 1-6 (1 = EV1527/PT2262)") }
            o.decoder.protocols = list.filter { known.contains($0) }
        }
        readReplay(s, source: source, into: &o, baseDir: baseDir, checks: checks)
        if source == .rtl433 {
            if let b = s.string("rtl433_binary") { o.rtl433.binary = b.contains("/") ? ConfigLoader.resolve(b, baseDir: baseDir) : b }
            if let a = s.strings("rtl433_args") {
                for bad in ["-F", "-M", "-r", "-w", "-W", "-R", "-X", "-c"] where a.contains(bad) {
                    s.report("rtl433_args", "must not contain \(bad): in pulse mode the agent decodes itself (device, frequency and gain options only)")
                }
                o.rtl433.args = a
            }
        }
        return o
    }

    private static func readReplay(_ s: RadioSection, source: OOKSource, into o: inout OOKRadioSettings, baseDir: String, checks: ConfigFileChecks) {
        if let files = s.strings("replay") {
            let paths = files.map { ConfigLoader.resolve($0, baseDir: baseDir) }
            for p in paths where !checks.isReadableFile(p) {
                s.report("replay", "cannot read recording \(p). Check the path (relative paths start at the config file's folder).")
            }
            switch source {
            case .replay:
                for p in paths where !(p.hasSuffix(".ook") || p.hasSuffix(".vcd")) {
                    s.report("replay", "\(p): source = \"replay\" plays .ook or .vcd timelines; .cu8 recordings need source = \"rtl433\"")
                }
                o.replay = paths
            case .rtl433:
                o.rtl433.replay = paths
            case .gpio:
                s.report("replay", "is for source = \"replay\" or \"rtl433\"; a GPIO pin cannot replay")
            }
        }
        if source == .replay && o.replay.isEmpty && s.has("replay") == false {
            s.report("replay", "is required with source = \"replay\": the .ook / .vcd recordings to play")
        }
    }
}
