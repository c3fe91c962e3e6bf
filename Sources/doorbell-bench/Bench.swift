import DoorbellCore
import DoorbellRuntime
import Glibc

// In-process figures for `make bench` (scripts/bench.sh adds the whole-process ones). Each
// prints `name<TAB>value<TAB>unit<TAB>method` so the script can build the table.

@main
struct Bench {
    static func main() {
        let args = Array(CommandLine.arguments.dropFirst())
        if args.first == "prefill", args.count == 4 || args.count == 5, let n = Int(args[3]) {
            prefill(path: args[1], gatewayID: args[2], count: n, sinks: args.count == 5 && args[4] == "mqtt" ? .mqtt : .cloud)
            return
        }
        if args.first == "wait-drained", args.count == 2 || args.count == 3 {
            exit(waitDrained(socket: args[1], radioLines: args.count == 3 ? Int(args[2]) ?? 0 : 0) ? 0 : 1)
        }
        if args.first == "ble-capture", args.count == 3, let n = Int(args[1]), n >= 0 {
            exit(writeReplayCapture(adverts: n, path: args[2]) ? 0 : 1)
        }
        let dir = args.first ?? "/tmp"
        decodeRate()
        ookDecodeRate()
        bleDecodeRate(dir: dir)
        durableAppend(dir: dir)
    }

    /// Waits (at most 10 min) until the agent behind `socket` has an empty outbox, and its first
    /// radio has read at least `radioLines` lines. One process asking over one socket every
    /// 100 ms: what is being timed is not disturbed by a shell loop spawning a process per look.
    static func waitDrained(socket: String, radioLines: Int) -> Bool {
        let deadline = Clocks.monotonicMicros() + 600_000_000
        while Clocks.monotonicMicros() < deadline {
            if let reply = try? ControlClient.request(path: socket, ControlRequest.status.json), let status = reply["status"],
               status["outbox"]?["depth"]?.intValue == 0,
               (status["radios"]?.arrayValues?.first?["lines"]?.intValue ?? 0) >= Int64(radioLines) { return true }
            usleep(100_000)
        }
        return false
    }

    /// Fills an outbox with `count` presses, as an agent would have while the uplink was down.
    static func prefill(path: String, gatewayID: String, count: Int, sinks: OutboxSinks) {
        guard let outbox = try? Outbox(path: path, sinks: sinks) else { print("cannot open \(path)"); exit(1) }
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

    /// HCI advertising reports through the whole BLE path, and through the decoders alone (the
    /// part the Python parsers do, for the side-by-side in bench.sh, which reads the corpus this
    /// writes to DIR/ble-corpus.jsonl).
    static func bleDecodeRate(dir: String) {
        var rng = SeededRandom(seed: 5)
        func bytes(_ n: Int) -> [UInt8] { (0..<n).map { _ in UInt8.random(in: 0...255, using: &rng) } }
        let key: [UInt8] = Array(0x40..<0x50)
        let button: [UInt8] = [0xC0, 0x11, 0x22, 0x33, 0x44, 0x02]
        let gate: [UInt8] = [0xC0, 0x11, 0x22, 0x33, 0x44, 0x03]
        let uuid: [UInt8] = [0xE2, 0xC5, 0x6D, 0xB5, 0xDF, 0xFB, 0x48, 0xD2, 0xB0, 0x60, 0xD0, 0xF5, 0xA7, 0x10, 0x96, 0xE0]
        var adverts: [(address: [UInt8], data: [UInt8], key: [UInt8]?)] = []
        for i in 0..<2_000 {
            switch i % 10 {
            case 0..<4:
                let sd = BTHomeDecoder.encode(objects: [0x00, UInt8(i / 10 & 0xFF), 0x01, 90, 0x3A, 0x01], triggerBased: true, address: button, bindkey: nil)
                adverts.append((button, [0x02, 0x01, 0x06, UInt8(sd.count + 3), 0x16, 0xD2, 0xFC] + sd, nil))
            case 4:
                let sd = BTHomeDecoder.encode(objects: [0x00, UInt8(i / 10 & 0xFF), 0x01, 90, 0x3A, 0x01], triggerBased: true, address: gate, bindkey: key, counter: UInt32(i))
                adverts.append((gate, [0x02, 0x01, 0x06, UInt8(sd.count + 3), 0x16, 0xD2, 0xFC] + sd, key))
            case 5..<8:
                let b = IBeacon(uuid: uuid, major: 100, minor: UInt16(i % 3), measuredPower: -59)
                adverts.append((bytes(6), [0x02, 0x01, 0x06, 26, 0xFF] + b.manufacturerData, nil))
            default:
                adverts.append((bytes(6), [0x02, 0x01, 0x06, 0x15, 0xFF] + bytes(20), nil))
            }
        }
        // As the controller delivers them: H4 LE Meta events, one report each.
        var stream: [UInt8] = []
        for a in adverts {
            let params: [UInt8] = [0x02, 0x01, 0x03, 0x01] + a.address.reversed() + [UInt8(a.data.count)] + a.data + [0xC4]
            stream += [0x04, 0x3E, UInt8(params.count)] + params
        }
        var devices = [DeviceConfig(id: "button", name: "Button", radio: "ble", match: RTL433Match(fields: [("address", .text("C0:11:22:33:44:02"))]))]
        var g = DeviceConfig(id: "gate", name: "Gate", radio: "ble", match: RTL433Match(fields: [("address", .text("C0:11:22:33:44:03"))]))
        g.bindkey = key
        devices.append(g)
        let region = BeaconRegion(id: "door", name: "Door", uuid: uuid, major: 100)
        let rounds = 50
        var events = 0
        var start = Clocks.monotonicMicros()
        for _ in 0..<rounds {
            var framer = H4Framer()
            var pipeline = BLEPipeline(devices: devices, regions: [region])
            var t: Int64 = 0
            for packet in framer.feed(stream) {
                guard case let .event(e) = packet, case let .advertisingReports(reports)? = HCIEvent.parse(e) else { continue }
                for r in reports {
                    t += 1_000
                    events += pipeline.handle(report: r, at: ReceiveTime(monoMicros: t, wallMicros: t, clockSynced: true)).count
                }
            }
        }
        var seconds = Double(Clocks.monotonicMicros() - start) / 1e6
        emit("ble_reports_per_s", Double(rounds * adverts.count) / seconds, "reports/s",
             "\(rounds * adverts.count) HCI LE advertising reports (40 % BTHome buttons, 10 % AES-CCM encrypted, 30 % iBeacon, 20 % noise) through H4 framing, event parse, AD walk, decoders, BTHomeButtonTracker and PresenceTracker on one core (\(events) events)")
        // Decoders alone: what ibeacon-ble and bthome-ble do per advert.
        var decoded = 0
        start = Clocks.monotonicMicros()
        for _ in 0..<rounds {
            for a in adverts {
                let (ad, _) = ADWalker.walk(a.data)
                if IBeaconDecoder.decode(ad) != nil { decoded += 1 }
                if let sd = ADWalker.serviceData(ad, uuid16: BTHomeDecoder.uuid16), (try? BTHomeDecoder.decode(sd, address: a.address, bindkey: a.key)) != nil { decoded += 1 }
            }
        }
        seconds = Double(Clocks.monotonicMicros() - start) / 1e6
        emit("ble_decode_adverts_per_s", Double(rounds * adverts.count) / seconds, "adverts/s",
             "same corpus, AD walk + iBeacon + BTHome (incl. AES-CCM) decoders only, one core (\(decoded / rounds) decoded per round)")
        var corpus = ""
        for a in adverts {
            func hex(_ b: [UInt8]) -> String { Hex.encode(b) }
            let addr = Hex.encode(a.address, uppercase: true, separator: UInt8(ascii: ":"))
            corpus += "{\"address\":\"\(addr)\",\"data_hex\":\"\(hex(a.data))\"" + (a.key.map { ",\"bindkey_hex\":\"\(hex($0))\"" } ?? "") + "}\n"
        }
        _ = try? writeSmallFile(dir + "/ble-corpus.jsonl", corpus)
    }

    /// The capture `doorbell-agent replay` is measured on (bench.sh, and the replay's peak-RSS
    /// test): `adverts` LE advertising reports, one per HCI event, 1 ms apart, the mix of
    /// bleDecodeRate on a busy street: 40 % BTHome buttons (4096 of them, rotating addresses,
    /// each press sent 4 times with one packet id, so 1 advert in 10 is a new press), 10 %
    /// AES-CCM encrypted BTHome (no key without a config), 30 % iBeacon and 20 % other
    /// manufacturer data from random addresses. Written as it is made: memory stays flat.
    static func writeReplayCapture(adverts: Int, path: String) -> Bool {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { print("ble-capture: cannot create \(path): \(errnoText())"); return false }
        defer { close(fd) }
        var rng = SeededRandom(seed: 7)
        func bytes(_ n: Int) -> [UInt8] { (0..<n).map { _ in UInt8.random(in: 0...255, using: &rng) } }
        let key: [UInt8] = Array(0x40..<0x50)
        let gate: [UInt8] = [0xC0, 0x11, 0x22, 0x33, 0x44, 0x03]
        let uuid: [UInt8] = [0xE2, 0xC5, 0x6D, 0xB5, 0xDF, 0xFB, 0x48, 0xD2, 0xB0, 0x60, 0xD0, 0xF5, 0xA7, 0x10, 0x96, 0xE0]
        let start: Int64 = 1_795_000_000_000_000
        var out = BTSnoop.header
        for i in 0..<adverts {
            let press = i / 10
            let address: [UInt8], data: [UInt8]
            switch i % 10 {
            case 0..<4:
                address = [0xC0, 0x11, 0x22, 0x00, UInt8(press >> 8 & 0x0F), UInt8(press & 0xFF)]
                let sd = BTHomeDecoder.encode(objects: [0x00, UInt8(press >> 12 & 0xFF), 0x01, 90, 0x3A, 0x01], triggerBased: true,
                                              address: address, bindkey: nil)
                data = [0x02, 0x01, 0x06, UInt8(sd.count + 3), 0x16, 0xD2, 0xFC] + sd
            case 4:
                address = gate
                let sd = BTHomeDecoder.encode(objects: [0x00, UInt8(press & 0xFF), 0x01, 90, 0x3A, 0x01], triggerBased: true,
                                              address: gate, bindkey: key, counter: UInt32(i))
                data = [0x02, 0x01, 0x06, UInt8(sd.count + 3), 0x16, 0xD2, 0xFC] + sd
            case 5..<8:
                address = bytes(6)
                data = [0x02, 0x01, 0x06, 26, 0xFF] + IBeacon(uuid: uuid, major: 100, minor: UInt16(i % 3), measuredPower: -59).manufacturerData
            default:
                address = bytes(6)
                data = [0x02, 0x01, 0x06, 0x15, 0xFF] + bytes(20)
            }
            // H4 event: LE Meta, legacy advertising report, one report, ADV_NONCONN_IND, random address.
            var params: [UInt8] = [0x02, 0x01, 0x03, 0x01]
            params += address.reversed()
            params.append(UInt8(data.count))
            params += data
            params.append(0xC4)
            var packet: [UInt8] = [0x04, 0x3E, UInt8(params.count)]
            packet += params
            out += BTSnoop.record(BTSnoopRecord(timeMicros: start + Int64(i) * 1_000, received: true, packet: packet))
            if out.count >= 1 << 16 || i == adverts - 1 {
                guard writeAll(fd, out) else { print("ble-capture: cannot write \(path): \(errnoText())"); return false }
                out.removeAll(keepingCapacity: true)
            }
        }
        return adverts > 0 || writeAll(fd, out)
    }

    static func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes { buf in retryingEINTR { write(fd, buf.baseAddress! + done, buf.count - done) } }
            if n <= 0 { return false }
            done += n
        }
        return true
    }

    /// Frame → durable event: one outbox transaction (WAL, synchronous=FULL) per event. Each
    /// phase opens the outbox with its syncer running, as in the agent (its checkpoints, by
    /// CheckpointPlan, not SQLite's), and closes it: the close writes back what the log still
    /// holds, so every frame a phase wrote is counted with its write-back once, whatever the
    /// checkpoint cycle (/proc/self/io counts the whole process, the syncer's thread too).
    static func durableAppend(dir: String) {
        let path = dir + "/bench-outbox-\(getpid()).sqlite"
        defer { for s in ["", "-wal", "-shm"] { unlink(path + s) } }
        let event = AgentEvent(type: .doorbellPressed, device: DeviceRef(id: "front-door", name: "Front door", radio: "rtl433"),
                               occurredAtMicros: Clocks.wallMicros(), clockSynced: true,
                               data: .object([("code", .string("5a3c91")), ("model", .string("EV1527")), ("suppressed", .number(0))]))
        var rng = SystemRandomNumberGenerator()
        func newEvent() -> OutboxNewEvent {
            let id = UUIDv7.make(unixMillis: Clocks.wallMicros() / 1000, random: &rng)
            return OutboxNewEvent(id: id, type: event.type.rawValue, createdAtMs: 0) { seq in
                event.body(id: id, sequence: seq, gatewayID: "gw-bench", agentVersion: AgentVersion.current)
            }
        }
        /// Bytes written from the open (excluded) to the close (included); nil if it failed.
        func phase(_ body: (Outbox) -> Void) -> Int64? {
            let outbox: Outbox
            do {
                outbox = try Outbox(path: path)
                try outbox.startSyncer(.unmonitored("outbox-sync", periodMicros: 1_000_000))
            } catch {
                emit("durable_append", 0, "error", "cannot open \(path) with its syncer: \(error)")
                return nil
            }
            let before = writeBytes()
            body(outbox)
            outbox.stopSyncer()
            outbox.close()
            return writeBytes() - before
        }
        let n = 1_000
        var latencies: [Int64] = []
        latencies.reserveCapacity(n)
        guard let written = phase({ outbox in
            for _ in 0..<n {
                let e = newEvent()
                let t0 = Clocks.monotonicMicros()
                _ = try? outbox.append(id: e.id, type: e.type, createdAtMs: 0, makeBody: e.makeBody)
                latencies.append(Clocks.monotonicMicros() - t0)
            }
        }) else { return }
        latencies.sort()
        emit("durable_append_p50", Double(latencies[n / 2]) / 1000, "ms", "frame → event committed (one SQLite transaction, WAL, synchronous=FULL), \(n) events, \(dir)")
        emit("durable_append_p99", Double(latencies[n * 99 / 100]) / 1000, "ms", "same run, 99th percentile")
        emit("storage_bytes_per_event", Double(written) / Double(n), "bytes", "/proc/self/io write_bytes over \(n) appends (body ≈ \(event.body(id: "x", sequence: 1, gatewayID: "gw-bench", agentVersion: "0.1.0").count) B), one transaction each, the syncer running, the log's write-back included")
        // A press's whole life in the outbox: stored (fsync), then removed at its 2xx (an
        // acknowledgement: no fsync of its own; the next press's makes it durable).
        guard let life = phase({ outbox in
            for _ in 0..<n {
                let e = newEvent()
                if let entry = try? outbox.append(id: e.id, type: e.type, createdAtMs: 0, makeBody: e.makeBody) {
                    try? outbox.settle(delivered: [entry.sequence])
                }
            }
        }) else { return }
        emit("storage_bytes_per_press_delivered", Double(life) / Double(n), "bytes",
             "/proc/self/io write_bytes over \(n) presses one at a time, each stored (one transaction, fsync) then removed as delivered (one transaction), the log's write-back included")
        // Group commit: a burst (the reports of one radio read) is one transaction.
        for burst in [10, 50] {
            var commits: [Int64] = []
            guard let written = phase({ outbox in
                for _ in 0..<(n / burst) {
                    let batch = (0..<burst).map { _ in newEvent() }
                    let t0 = Clocks.monotonicMicros()
                    _ = try? outbox.append(batch, bounds: nil, report: nil)
                    commits.append(Clocks.monotonicMicros() - t0)
                }
            }) else { return }
            commits.sort()
            emit("storage_bytes_per_event_burst\(burst)", Double(written) / Double(n), "bytes",
                 "same, group commit: \(n) events in bursts of \(burst), one transaction per burst (p50 commit \(Double(commits[commits.count / 2]) / 1000) ms)")
        }
    }

    static func writeBytes() -> Int64 {
        guard let bytes = readFile("/proc/self/io", maxBytes: 4096) else { return 0 }
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") where line.hasPrefix("write_bytes:") {
            return Int64(line.split(separator: " ").last ?? "0") ?? 0
        }
        return 0
    }
}
