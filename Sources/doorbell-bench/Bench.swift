import DoorbellCore
import DoorbellRuntime
import Glibc

// In-process figures for `make bench` (scripts/bench.sh adds the whole-process ones). Each
// prints `name<TAB>value<TAB>unit<TAB>method` so the script can build the table.

@main
struct Bench {
    static func main() {
        let args = Array(CommandLine.arguments.dropFirst())
        if args.first == "prefill", args.count == 4, let n = Int(args[3]) {
            prefill(path: args[1], gatewayID: args[2], count: n)
            return
        }
        let dir = args.first ?? "/tmp"
        decodeRate()
        ookDecodeRate()
        durableAppend(dir: dir)
    }

    /// Fills an outbox with `count` presses, as an agent would have while the uplink was down.
    static func prefill(path: String, gatewayID: String, count: Int) {
        guard let outbox = try? Outbox(path: path) else { print("cannot open \(path)"); exit(1) }
        var rng = SystemRandomNumberGenerator()
        for i in 0..<count {
            let event = AgentEvent(type: .doorbellPressed, device: DeviceRef(id: "front-door", name: "Front door", radio: "rtl433"),
                                   occurredAtMicros: Clocks.wallMicros(), clockSynced: true,
                                   data: .object([("code", .string("5a3c91")), ("model", .string("EV1527")), ("suppressed", .number(Double(i % 3)))]))
            let id = UUIDv7.make(unixMillis: Clocks.wallMicros() / 1000, random: &rng)
            _ = try? outbox.append(id: id, type: event.type.rawValue, createdAtMs: Clocks.wallMicros() / 1000) { seq in
                event.body(id: id, sequence: seq, gatewayID: gatewayID, agentVersion: AgentVersion.current)
            }
        }
        outbox.close()
    }

    static func emit(_ name: String, _ value: Double, _ unit: String, _ method: String) {
        print("\(name)\t\(value.rounded() == value ? String(Int(value)) : String(format2(value)))\t\(unit)\t\(method)")
    }

    static func format2(_ v: Double) -> String { String(Double(Int(v * 100)) / 100) }

    /// rtl_433 JSON lines → frames → matched device → tracker, one core.
    static func decodeRate() {
        let lines = [
            #"{"time" : "1795355235.181475", "model" : "EV1527", "count" : 1, "num_rows" : 1, "len" : 25, "data" : "5a3c910", "code" : 5913745, "mod" : "ASK", "freq" : 433.985, "rssi" : -0.081, "snr" : 8.191, "noise" : -8.272}"#,
            #"{"time" : "@0.257012s", "model" : "Generic-Remote", "id" : 5069, "cmd" : 192, "tristate" : "0Z01101Z1000"}"#,
        ]
        var pipeline = RFPipeline(directory: DeviceDirectory(devices: [
            DeviceConfig(id: "bell", name: "Bell", match: RTL433Match(fields: [("code", .integer(0x5A3C91))])),
        ]), settings: ButtonTracker.Settings())
        let n = 200_000
        var events = 0
        let start = Clocks.monotonicMicros()
        for i in 0..<n {
            let t = Int64(i) * 1_000
            events += pipeline.handle(line: lines[i & 1], at: ReceiveTime(monoMicros: t, wallMicros: t, clockSynced: true)).count
        }
        let seconds = Double(Clocks.monotonicMicros() - start) / 1e6
        emit("rtl433_lines_per_s", Double(n) / seconds, "lines/s", "\(n) rtl_433 JSON lines (2 kinds) through decode, device match and ButtonTracker on one core (\(events) events)")
    }

    /// Receiver-pin edges → glitch filter → pulses → OOKDecoder → device match → tracker, one core.
    /// The timeline: presses of our own encoder (EV1527 at T = 350 µs, ±30 µs jitter) separated by
    /// receiver noise, so the decoder sees both words and garbage, as a GPIO receiver delivers.
    static func ookDecodeRate() {
        var rng = SeededRandom(seed: 3)
        var pulses: [Pulse] = []
        for _ in 0..<40 {
            var press = EV1527Encoder(timeUnitMicros: 350, repeats: 20, jitterMicros: 30).press(code: 0x5A3C91, random: &rng)
            if let last = press.indices.last { press[last].lowMicros = 4_000_000 }
            pulses += press
            for _ in 0..<200 { pulses.append(Pulse(high: Int.random(in: 50...3_000, using: &rng), low: Int.random(in: 50...6_000, using: &rng))) }
        }
        let edges = PulseRecording.edges(pulses: pulses)
        let rounds = 20
        var events = 0
        let start = Clocks.monotonicMicros()
        var pulsesSeen = 0
        var other = 0
        for _ in 0..<rounds {
            var pipeline = OOKPipeline(directory: DeviceDirectory(devices: [
                DeviceConfig(id: "bell", name: "Bell", radio: "ook", match: RTL433Match(fields: [("code", .integer(0x5A3C91))])),
            ]), button: ButtonTracker.Settings())
            for e in edges {
                for ev in pipeline.edge(high: e.high, atMicros: e.micros, time: ReceiveTime(monoMicros: e.micros, wallMicros: e.micros, clockSynced: true)) {
                    events += 1
                    if ev.type != .doorbellPressed { other += 1 }
                }
            }
            pulsesSeen += pipeline.decoder.counters.pulses
        }
        let seconds = Double(Clocks.monotonicMicros() - start) / 1e6
        emit("ook_pulses_per_s", Double(pulsesSeen) / seconds, "pulses/s",
             "\(pulsesSeen) receiver pulses (40 EV1527 presses between noise bursts, \(rounds) rounds) through glitch filter, OOKDecoder (6 protocols), device match and ButtonTracker on one core (\(events) events, \(other) not presses)")
    }

    /// Frame → durable event: one outbox transaction (WAL, synchronous=FULL) per event.
    static func durableAppend(dir: String) {
        let path = dir + "/bench-outbox-\(getpid()).sqlite"
        defer { for s in ["", "-wal", "-shm"] { unlink(path + s) } }
        guard let outbox = try? Outbox(path: path) else { emit("durable_append", 0, "error", "cannot open \(path)"); return }
        let event = AgentEvent(type: .doorbellPressed, device: DeviceRef(id: "front-door", name: "Front door", radio: "rtl433"),
                               occurredAtMicros: Clocks.wallMicros(), clockSynced: true,
                               data: .object([("code", .string("5a3c91")), ("model", .string("EV1527")), ("suppressed", .number(0))]))
        var rng = SystemRandomNumberGenerator()
        let n = 1_000
        var latencies: [Int64] = []
        latencies.reserveCapacity(n)
        let ioBefore = writeBytes()
        for _ in 0..<n {
            let id = UUIDv7.make(unixMillis: Clocks.wallMicros() / 1000, random: &rng)
            let t0 = Clocks.monotonicMicros()
            _ = try? outbox.append(id: id, type: event.type.rawValue, createdAtMs: 0) { seq in
                event.body(id: id, sequence: seq, gatewayID: "gw-bench", agentVersion: AgentVersion.current)
            }
            latencies.append(Clocks.monotonicMicros() - t0)
        }
        let written = writeBytes() - ioBefore
        latencies.sort()
        emit("durable_append_p50", Double(latencies[n / 2]) / 1000, "ms", "frame → event committed (one SQLite transaction, WAL, synchronous=FULL), \(n) events, \(dir)")
        emit("durable_append_p99", Double(latencies[n * 99 / 100]) / 1000, "ms", "same run, 99th percentile")
        emit("storage_bytes_per_event", Double(written) / Double(n), "bytes", "/proc/self/io write_bytes over \(n) appends (body ≈ \(event.body(id: "x", sequence: 1, gatewayID: "gw-bench", agentVersion: "0.1.0").count) B)")
        outbox.close()
    }

    static func writeBytes() -> Int64 {
        guard let bytes = readFile("/proc/self/io", maxBytes: 4096) else { return 0 }
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") where line.hasPrefix("write_bytes:") {
            return Int64(line.split(separator: " ").last ?? "0") ?? 0
        }
        return 0
    }
}
