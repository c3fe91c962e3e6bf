import CLinux
import DoorbellCore

// Fuzz targets for every parser that reads outside input. Built two ways:
// - with `-sanitize=fuzzer,address -DFUZZING` (scripts/fuzz.sh): libFuzzer drives
//   LLVMFuzzerTestOneInput; FUZZ_TARGET picks the parser;
// - normally: `doorbell-fuzz TARGET FILE...` runs saved inputs once (the corpus and every
//   crash found so far), which `make test` does as a regression test.

enum FuzzTarget: String, CaseIterable {
    static let bleButton = DeviceConfig(id: "btn", name: "Button", radio: "ble", match: RTL433Match(fields: [("address", .text("C0:11:22:33:44:02"))]))
    static let region = BeaconRegion(id: "r", name: "r", uuid: [0xE2, 0xC5, 0x6D, 0xB5, 0xDF, 0xFB, 0x48, 0xD2, 0xB0, 0x60, 0xD0, 0xF5, 0xA7, 0x10, 0x96, 0xE0])

    /// A host with the phone link on, brought up on a controller with 3 LE ACL buffers of 27 bytes,
    /// and a phone connected as handle 0x0040.
    static func connectedHost() -> HCIHost {
        var settings = BLERadioSettings(transport: .tcp(host: "127.0.0.1", port: 1))
        settings.ancsLink = true
        var host = HCIHost(settings: settings, transportName: "fuzz")
        var out = host.start(at: 0)
        for _ in 0..<20 {
            guard let cmd = out.lazy.compactMap({ if case let .send(p) = $0, p.first == 0x01 { p } else { nil } }).first else { break }
            let ret: [UInt8] = cmd[1] == 0x02 && cmd[2] == 0x10 ? [UInt8](repeating: 0xFF, count: 64) : cmd[2] == 0x20 && [0x02, 0x60].contains(cmd[1]) ? [27, 0, 3, 0, 0, 0] : []
            out = host.received([0x04, 0x0E, UInt8(4 + ret.count), 1, cmd[1], cmd[2], 0] + ret, at: 0)
        }
        let connection: [UInt8] = [0x04, 0x3E, 0x13, 0x01, 0x00, 0x40, 0x00, 0x01, 0x01, 0x5A, 0x44, 0x33, 0x22, 0x11, 0x7B, 0x18, 0x00, 0, 0, 0xF4, 0x01, 0x00]
        _ = host.received(connection, at: 0)
        precondition(host.connection != nil, "the fuzz host did not connect")
        return host
    }

    case json, rtl433, config, control, pulses, ooktext, vcd, hci, ad, bthome, secret, eddystone, ancs, smp, acl, phone, cli, btsnoop, provision, smaps

    func run(_ bytes: [UInt8]) {
        switch self {
        case .secret:
            // The whsec_ file and base64 in general: whatever decodes is canonical.
            let text = String(decoding: bytes, as: UTF8.self)
            if let decoded = Base64.decode(text) {
                precondition(Base64.encode(decoded) == text, "base64 accepted a non-canonical text")
            }
            if let secret = try? WebhookSecret(parsing: text) {
                precondition(secret.keyBytes.count >= 16, "a short secret was accepted")
            }
        case .cli:
            // doorbell-agent's words, one per line: a command, a text to print, or a usage error
            // that says something; never a crash.
            let words = String(decoding: bytes, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            do {
                switch try AgentCommandLine.parse(words) {
                case let .help(text), let .completionScript(text), let .version(text):
                    precondition(!text.isEmpty, "an empty text to print")
                case .command: break
                }
            } catch {
                precondition(!error.message.isEmpty, "a usage error without a message")
            }
        case .json:
            if let v = try? JSONReader.parse(bytes: bytes) {
                // What we write we must read back the same.
                let again = try? JSONReader.parse(bytes: JSONWriter.encode(v))
                precondition(again == v, "JSON round trip changed the value")
                // phones.json: what the bond store reads it writes back the same.
                if let bonds = try? PhoneBonds(json: v) {
                    precondition((try? PhoneBonds(json: bonds.json)) == bonds, "phones.json round trip changed the bonds")
                }
            }
        case .rtl433:
            var pipeline = RFPipeline(directory: DeviceDirectory(devices: [
                DeviceConfig(id: "bell", name: "Bell", match: RTL433Match(fields: [("code", .integer(0x5A3C91))])),
            ]), settings: ButtonTracker.Settings())
            var t: Int64 = 0
            for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false) {
                t += 10_000
                for event in pipeline.handle(line: line, at: ReceiveTime(monoMicros: t, wallMicros: t, clockSynced: true)) {
                    _ = event.body(id: "x", sequence: 1, gatewayID: "gw", agentVersion: "0")
                }
            }
        case .pulses:
            // Bytes as (high, low) pairs of little-endian UInt16 µs: the decoder must be total,
            // and a code only ever follows a word it decoded.
            var decoder = OOKDecoder()
            var pipeline = OOKPipeline(directory: nil, button: ButtonTracker.Settings())
            var t: Int64 = 0
            var i = 0
            while i + 3 < bytes.count {
                let high = Int(bytes[i]) | Int(bytes[i + 1]) << 8
                let low = Int(bytes[i + 2]) | Int(bytes[i + 3]) << 8
                i += 4
                let before = decoder.counters.words
                if let code = decoder.feed(Pulse(high: high, low: low)) {
                    precondition(decoder.counters.words > before, "a code without a word")
                    precondition(code.bits == 24 && code.code < 1 << 24, "code wider than its bits")
                }
                let time = ReceiveTime(monoMicros: t, wallMicros: t, clockSynced: true)
                _ = pipeline.edge(high: true, atMicros: t, time: time)
                t += Int64(high)
                _ = pipeline.edge(high: false, atMicros: t, time: time)
                t += Int64(low)
            }
        case .ooktext:
            let (pulses, _) = OOKPulseTextReader.pulses(text: String(decoding: bytes, as: UTF8.self))
            var decoder = OOKDecoder()
            for p in pulses { _ = decoder.feed(p) }
        case .vcd:
            if let edges = try? VCDTimeline.edges(text: String(decoding: bytes, as: UTF8.self)) {
                var pipeline = OOKPipeline(directory: nil, button: ButtonTracker.Settings())
                var last: Int64 = .min
                for e in edges {
                    precondition(e.micros >= last, "VCD edges out of order")
                    last = e.micros
                    _ = pipeline.edge(high: e.high, atMicros: e.micros, time: ReceiveTime(monoMicros: e.micros, wallMicros: e.micros, clockSynced: true))
                }
            }
        case .smaps:
            // /proc/self/smaps as the page release reads it: whatever the text, a released mapping
            // is a readable, private, unwritable file mapping with every counter read and zero.
            for m in ProcessMappings.releasable(ProcessMappings.parse(smaps: bytes)) {
                precondition(m.permissions.hasPrefix("r") && m.permissions.hasSuffix("p") && !m.permissions.contains("w"), "released \(m.permissions)")
                precondition(m.path.hasPrefix("/") && m.start < m.end, "released \(m.path)")
                precondition(m.anonymousKiB == 0 && m.swapKiB == 0 && m.lockedKiB == 0 && m.privateDirtyKiB == 0 && m.sharedDirtyKiB == 0,
                             "released a mapping with written pages")
            }
        case .btsnoop:
            // A capture as replay streams it (BLECaptureReader, fed in uneven chunks) must give the
            // inputs of the whole-file reader, and both go through the BLE pipeline learning every
            // advertiser, as `doorbell-agent replay` without a config does.
            let whole = try? Recording.read(fileName: "f.btsnoop", bytes: bytes)
            var reader = BLECaptureReader(fileName: "f.btsnoop")
            var pipeline = BLEPipeline(devices: [], regions: [Self.region])
            pipeline.learnAll = true
            var streamed = 0, at = 0, failed = false
            while at < bytes.count, !failed {
                let end = min(bytes.count, at + 1 + Int(bytes[at] % 97))
                reader.feed(bytes[at..<end])
                at = end
                do {
                    while let e = try reader.next() {
                        streamed += 1
                        for r in e.reports { _ = pipeline.handle(report: r, at: ReceiveTime(monoMicros: e.atMicros, wallMicros: e.unixMicros, clockSynced: true)) }
                    }
                } catch { failed = true }
            }
            if !failed { failed = (try? reader.finish()) == nil }
            precondition(failed == (whole == nil), "the streaming and the whole-file readers disagree on whether the capture is valid")
            if let whole { precondition(whole.inputs.count == streamed && whole.durationMicros == reader.durationMicros, "streamed inputs differ") }
        case .hci:
            // An H4 byte stream from a controller: framing, events, reports, the whole BLE pipeline.
            var framer = H4Framer()
            var pipeline = BLEPipeline(devices: [Self.bleButton], regions: [Self.region])
            var t: Int64 = 0
            for packet in framer.feed(bytes) {
                guard case let .event(e) = packet, case let .advertisingReports(reports)? = HCIEvent.parse(e) else { continue }
                for r in reports {
                    precondition(r.address.count == 6, "address is 6 bytes")
                    t += 100_000
                    _ = pipeline.handle(report: r, at: ReceiveTime(monoMicros: t, wallMicros: t, clockSynced: true))
                }
            }
        case .acl:
            // A phone's ACL/L2CAP/ATT bytes: as the controller's H4 stream into a host brought up
            // with the phone link and a phone connected, then as length-prefixed ATT PDUs straight
            // into a discovering GATT client and the ATT server.
            var host = Self.connectedHost()
            var t: Int64 = 0
            for chunk in stride(from: 0, to: bytes.count, by: 64) {
                t += 10_000
                _ = host.received(Array(bytes[chunk..<min(bytes.count, chunk + 64)]), at: t)
                precondition(host.aclInFlight <= 3, "more ACL packets in flight than the controller has buffers")
            }
            _ = host.tick(at: t + 31_000_000)
            var client = GATTClient()
            _ = client.start(at: 0)
            var i = 0
            while i < bytes.count {
                let pdu = Array(bytes[(i + 1)..<min(bytes.count, i + 1 + Int(bytes[i]))])
                i += 1 + Int(bytes[i])
                if let opcode = pdu.first, !ATT.isForClient(opcode) {
                    if let answer = ATT.serverAnswer(pdu).answer { precondition(answer.count <= ATT.defaultMTU, "an answer longer than any MTU") }
                    continue
                }
                for case let .send(out) in client.received(pdu, at: Int64(i)) {
                    precondition(out.count <= client.mtu, "a request longer than the MTU")
                }
            }
        case .ad:
            let (structures, _) = ADWalker.walk(bytes)
            if let b = IBeaconDecoder.decode(structures) {
                precondition(b.uuid.count == 16, "iBeacon UUID is 16 bytes")
                precondition(IBeaconDecoder.decode(ADWalker.walk([26, 0xFF] + b.manufacturerData).structures) == b, "iBeacon round trip")
            }
            if let sd = ADWalker.serviceData(structures, uuid16: BTHomeDecoder.uuid16) {
                _ = try? BTHomeDecoder.decode(sd, address: [1, 2, 3, 4, 5, 6], bindkey: nil)
            }
        case .bthome:
            // Service data after the UUID, decrypted with a fixed key: a forged MIC must never pass.
            let key: [UInt8] = Array(0..<16)
            if let p = try? BTHomeDecoder.decode(bytes, address: [0xC0, 0x11, 0x22, 0x33, 0x44, 0x03], bindkey: key), p.encrypted {
                precondition(p.counter != nil, "decrypted packet without counter")
            }
            _ = try? BTHomeDecoder.decode(bytes, address: [0xC0, 0x11, 0x22, 0x33, 0x44, 0x03], bindkey: nil)
        case .eddystone:
            // Eddystone service data (after the UUID) in a well-formed advert, then the raw bytes
            // as a whole advert: every decoder answers, and a decoded frame encodes back to itself.
            let advert: [UInt8] = [0x03, 0x03, 0xAA, 0xFE, UInt8(min(bytes.count, 250) + 3), 0x16, 0xAA, 0xFE] + bytes.prefix(250)
            for data in [advert, bytes] {
                let (structures, _) = ADWalker.walk(data)
                for decoder in BLEDecoderRegistry.all { _ = decoder.verdict(structures) }
                if case let .observation(.eddystone(frame)) = EddystoneDecoder.verdict(structures), frame != .encryptedTelemetry {
                    let again = EddystoneDecoder.verdict(ADWalker.walk(frame.advertisingData).structures)
                    precondition(again == .observation(.eddystone(frame)), "Eddystone round trip changed \(frame)")
                }
            }
            // Made per run, not a static: the enum keeps its case in the pointer's spare bits, which
            // LeakSanitizer takes for a leaked array when a global holds it.
            let region = BeaconRegion(id: "e", name: "e", namespace: [0xED, 0xD1, 0xEB, 0xEA, 0xC0, 0x4E, 0x5D, 0xEF, 0xA0, 0x17])
            var pipeline = BLEPipeline(devices: [], regions: [region])
            let report = BLEAdvertisingReport(address: [0xC0, 0x11, 0x22, 0x33, 0x44, 0x05], rssi: -50, data: advert)
            for t in 0..<4 { _ = pipeline.handle(report: report, at: ReceiveTime(monoMicros: Int64(t) * 100_000, wallMicros: 0, clockSynced: true)) }
        case .ancs:
            // Notification Source: the whole input and its first 8 bytes. Data Source: the rest as
            // GATT notifications, each a length byte (mod 64) and that many bytes, against one
            // outstanding command: never a trap, never more held than the bound, never an
            // answer for another UID.
            var source = ANCSNotificationSource()
            _ = source.receive(bytes)
            if case let .success(n) = source.receive(bytes.prefix(8)) { precondition(n.bytes == Array(bytes.prefix(8)), "ANCS round trip") }
            var settings = ANCSDataSourceAssembler.Settings()
            settings.maxResponseBytes = 600
            var assembler = ANCSDataSourceAssembler(settings: settings)
            let command = ANCSCommand.getNotificationAttributes(uid: 7, attributes: [.appIdentifier, .title(maxLength: 64), .message(maxLength: 200), .date, .negativeActionLabel])
            try? assembler.sent(command, at: 0)
            var i = 0
            var t: Int64 = 0
            while i < bytes.count {
                let n = Int(bytes[i]) % 64
                let fragment = bytes[(i + 1)..<min(bytes.count, i + 1 + n)]
                i += 1 + n
                t += 700_000
                let outcome = assembler.receive(fragment, at: t)
                precondition(assembler.heldBytes <= settings.maxResponseBytes, "ANCS assembler held more than its bound")
                if case let .notificationAttributes(a)? = outcome { precondition(a.uid == 7, "ANCS answer for another UID") }
                if assembler.outstanding == nil { try? assembler.sent(command, at: t) }
            }
            _ = assembler.linkDropped()
        case .smp:
            // SMP PDUs from a phone, each a length byte (mod 72) and that many bytes: whatever
            // parses encodes back to its bytes, and the responder never traps, never pairs
            // without a DHKey check it verified, and goes quiet once it has finished.
            let local = BLEIdentityAddress(type: 0, address: [0xB8, 0x27, 0xEB, 0x12, 0x34, 0x56])
            let phone = BLEIdentityAddress(type: 1, address: [0x70, 0x81, 0x94, 0x0D, 0xFB, 0xAA])
            guard let keys = try? P256KeyPair() else { return }
            var responder = SMPResponder(local: local, peer: phone, keyPair: keys, nonce: [UInt8](repeating: 7, count: 16))
            var i = 0
            var t: Int64 = 0
            while i < bytes.count {
                let n = Int(bytes[i]) % 72
                let pdu = Array(bytes[(i + 1)..<min(bytes.count, i + 1 + n)])
                i += 1 + n
                t += 1_000_000
                if let parsed = try? SMPPDU(parsing: pdu) { precondition(parsed.bytes == pdu, "SMP PDU round trip") }
                let finishedBefore = responder.isFinished
                let step = responder.received(pdu, at: t)
                if finishedBefore { precondition(step == SMPResponder.Step(), "SMP spoke after finishing") }
                // A random phone cannot know the DHKey: pairing must not complete.
                if case .paired? = step.outcome { preconditionFailure("SMP paired with fuzzed input") }
                if case .encryptionKey? = step.outcome { preconditionFailure("SMP accepted a fuzzed DHKey check") }
                if t % 8_000_000 == 0 { _ = responder.encrypted(at: t) }
            }
            _ = responder.tick(at: t + SMPResponder.timeoutMicros)
        case .phone:
            // A bonded phone's session, reading notifications, fed chunks of a kind/length byte
            // (kind: bits 0–1, length: bits 2–7) and that many bytes: 0 a Notification Source
            // notification, 1 a Data Source one, 2 the Control Point's Write Response and time
            // passing, 3 a refusal (odd first byte) or the door answered. Never a trap, the queue
            // within its bound, at most one Control Point write per input.
            let bond = PhoneBond(address: [0x3C, 0x22, 0xFB, 0, 0x11, 0x22], addressIsRandom: false, irk: Array(1...16), ltk: Array(1...16), name: "", bondedAtMicros: 0)
            var settings = PhoneSession.Settings(tracker: .init(doorbellAppID: "com.example.doorbell"))
            settings.maxQueuedCommands = 8
            var session = PhoneSession(settings: settings, bonds: PhoneBonds([bond]), localAddress: nil)
            let (ns, cp, ds): (UInt16, UInt16, UInt16) = (0x32, 0x35, 0x38)
            let zero = PhoneTime(monotonic: 0, wall: 0)
            _ = session.handle(.connected(LEConnection(handle: 0x40, role: .peripheral, peerAddress: bond.address, peerAddressType: 0, intervalUnits: 24)), at: zero)
            // Encrypted with the bond's key: the session reads the phone only then.
            _ = session.handle(.longTermKeyRequested(handle: 0x40, random: Array(repeating: 0, count: 8), ediv: 0), at: zero)
            _ = session.handle(.encryptionChanged(handle: 0x40, enabled: true, status: 0), at: zero)
            _ = session.handle(.gatt(.discoveredANCS(notificationSource: ns, controlPoint: cp, dataSource: ds)), at: zero)
            _ = session.handle(.gatt(.written(handle: ns)), at: zero)
            var i = 0
            var t = zero
            while i < bytes.count {
                let kind = bytes[i] & 0b11, n = Int(bytes[i] >> 2)
                let chunk = Array(bytes[(i + 1)..<min(bytes.count, i + 1 + n)])
                i += 1 + n
                let out: [PhoneSession.Output] = switch kind {
                case 0: session.handle(.gatt(.notification(handle: ns, chunk)), at: t)
                case 1: session.handle(.gatt(.notification(handle: ds, chunk)), at: t)
                case 2: session.handle(.gatt(.written(handle: cp)), at: t) + { t.monotonic += Int64(n) * 100_000; t.wall += Int64(n) * 100_000; return session.tick(at: t) }()
                default: chunk.first.map { $0 & 1 == 1 } == true ? session.handle(.gatt(.writeFailed(handle: cp, error: 0xA2)), at: t) : session.answered(at: t)
                }
                precondition(session.queuedCommands <= settings.maxQueuedCommands, "phone session queue past its bound")
                precondition(out.filter { if case .write = $0 { true } else { false } }.count <= 1, "two Control Point writes at once")
            }
            _ = session.handle(.disconnected(handle: 0x40, reason: 0x13), at: t)
            precondition(session.queuedCommands == 0, "a dropped link left commands queued")
        case .config:
            _ = try? ConfigLoader.parse(bytes: bytes, file: "fuzz.toml")
        case .provision:
            // The boot partition's doorbell.toml: what it installs holds no [provision], and the file
            // rewritten without secrets reads again to the same config, with nothing left to remove.
            _ = ProvisionStatus(json: bytes)
            guard let file = try? ProvisionFileReader.read(bytes: bytes, file: "doorbell.toml", installedPath: "/etc/agent.toml",
                                                           machineGatewayID: "gw-fuzz") else { return }
            if case let .table(members)? = try? TOMLReader.parse(bytes: file.agentTOML) {
                precondition(!members.contains { $0.0 == "provision" }, "the installed config kept [provision]")
            } else {
                preconditionFailure("the installed config does not parse")
            }
            guard let again = try? ProvisionFileReader.read(bytes: file.scrubbedBootFile, file: "doorbell.toml",
                                                            installedPath: "/etc/agent.toml", machineGatewayID: "gw-fuzz") else {
                preconditionFailure("the file without secrets does not read")
            }
            precondition(!again.holdsSecrets && again.settings.enrolmentToken == nil, "a secret survived the rewrite")
            precondition(again.agentTOML == file.agentTOML, "the rewrite changed the config")
        case .control:
            // The control socket's requests, without a socket: whatever parses says the same again.
            guard let json = try? JSONReader.parse(bytes: bytes) else { return }
            if let request = try? ControlRequest(json: json) {
                precondition((try? ControlRequest(json: request.json)) == request, "a request does not survive its own encoding")
            }
            // The replies and stream lines agentctl reads: whatever decodes says the same again.
            func same<Reply: ControlReplyBody>(_: Reply.Type) {
                guard case let .ok(reply)? = try? ControlResponse.decode(json, as: Reply.self) else { return }
                precondition((try? ControlResponse.decode(reply.json, as: Reply.self)) == .ok(reply), "a \(Reply.self) does not survive its own encoding")
            }
            same(StatusReply.self); same(PubkeyReply.self); same(VersionReply.self); same(EventsReply.self); same(InjectReply.self)
            same(QueueListReply.self); same(QueueRetryReply.self); same(QueuePurgeReply.self); same(ScanReply.self); same(PairReply.self)
            same(PhonesReply.self); same(ForgetReply.self); same(AnswerReply.self)
            for capturing in [false, true] {
                let line = ControlStreamLine(json: json, capturing: capturing)
                precondition(ControlStreamLine(json: line.json, capturing: capturing) == line, "a stream line does not survive its own encoding")
            }
        }
    }
}

#if FUZZING
nonisolated(unsafe) let selectedTarget: FuzzTarget = {
    guard let name = getenv("FUZZ_TARGET").map({ String(cString: $0) }), let t = FuzzTarget(rawValue: name) else {
        fatalError("set FUZZ_TARGET to one of: \(FuzzTarget.allCases.map(\.rawValue).joined(separator: ", "))")
    }
    return t
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data else { return 0 }
    selectedTarget.run(Array(UnsafeBufferPointer(start: data, count: size)))
    return 0
}

// SwiftPM links an executable's entry point under this name; here it hands over to libFuzzer.
@_cdecl("doorbell_fuzz_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    var argc = argc
    var argv = argv
    _ = selectedTarget
    return LLVMFuzzerRunDriver(&argc, &argv) { data, size in
        guard let data else { return 0 }
        selectedTarget.run(Array(UnsafeBufferPointer(start: data, count: Int(size))))
        return 0
    }
}
#else
@main
struct FuzzReplay {
    static func main() {
        let args = CommandLine.arguments.dropFirst()
        guard let name = args.first, let target = FuzzTarget(rawValue: name) else {
            print("usage: doorbell-fuzz \(FuzzTarget.allCases.map(\.rawValue).joined(separator: "|")) FILE...")
            exit(64)
        }
        var count = 0
        for path in args.dropFirst() {
            guard let f = fopen(path, "rb") else { print("cannot read \(path)"); exit(66) }
            var bytes: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let n = fread(&buffer, 1, buffer.count, f)
                if n <= 0 { break }
                bytes += buffer[0..<n]
            }
            fclose(f)
            target.run(bytes)
            count += 1
        }
        print("doorbell-fuzz \(name): \(count) inputs, no crash")
    }
}
#endif

#if canImport(Glibc)
import Glibc
#endif
