// [radio.ble]: a Bluetooth LE controller scanning for buttons and beacons, reached over the
// kernel's HCI socket, an H4 UART, H4 over TCP, or played from btsnoop captures.

extension BLERadioSettings: Radio {
    static let descriptor = RadioDescriptor(
        name: "ble", summary: "Bluetooth LE scanning through an HCI controller: BTHome buttons, iBeacon and Eddystone regions",
        discriminator: "transport",
        options: [
            RadioOption("transport", .choice(["hci", "serial", "tcp", "replay"].map { RadioChoice($0) }, default: nil), required: true,
                        help: "how the controller is reached: the kernel HCI socket (`device = \"hci0\"`; needs CAP_NET_RAW/CAP_NET_ADMIN, which the unit grants; through BlueZ's libbluetooth; `channel` below), an H4 UART (`path`, `baud` default 1000000, `flow_control` default true: an nRF52840 or similar with HCI firmware), H4 over TCP (`address = \"host:port\"`, numeric: ser2net, the tests' virtual controller), or btsnoop captures (`replay = [...]`)"),
            RadioOption("enabled", .bool(default: true), help: "`false` keeps the section but does not run the radio"),
            RadioOption("device", .string(default: "hci0"), for: ["hci"],
                        help: "the kernel controller (`btmgmt info` / `hciconfig` list them)"),
            RadioOption("path", .string(default: nil), required: true, for: ["serial"], help: "the H4 UART"),
            RadioOption("baud", .int(1_200...4_000_000, default: 1_000_000), for: ["serial"],
                        help: "its baud rate, a standard one (\(serialBauds.map(String.init).joined(separator: ", ")))"),
            RadioOption("flow_control", .bool(default: true), for: ["serial"], help: "RTS/CTS"),
            RadioOption("address", .string(default: nil), required: true, for: ["tcp"],
                        help: "`host:port` of an H4 stream; the host numeric (IPv4, `[IPv6]`) or `localhost`"),
            RadioOption("replay", .paths(default: nil), required: true, for: ["replay"],
                        help: "btsnoop captures to play (`agentctl capture` makes them)"),
            RadioOption("channel", .choice([RadioChoice("user", meaning: "the controller is the agent's alone, the default"),
                                            RadioChoice("raw", meaning: "shared with bluetoothd, which can stop the scan")], default: "user"),
                        for: ["hci"],
                        help: "`user` takes the controller for the agent alone (HCI user channel: the agent powers it down and binds it; bluetoothd loses it while the agent runs); `raw` shares it with bluetoothd, whose scans and power changes silently stop the agent's scan (the field rig lost 7 of 10 presses)"),
            RadioOption("scan", .choice([RadioChoice("passive"), RadioChoice("active")], default: "passive"),
                        help: "`active` also asks each advertiser for its scan response"),
            RadioOption("interval_ms", .int(3...10_240, default: 60),
                        help: "scan timing: how often the controller starts listening. Duplicate filtering is always off: controller de-duplication loses button presses."),
            RadioOption("window_ms", .int(3...10_240, default: 30), help: "how long it listens each time; at most interval_ms"),
            RadioOption("extended_scan", .bool(default: true),
                        help: "LE extended scanning when the controller supports it (and no own beacon is advertised); otherwise legacy"),
            RadioOption("ancs", .bool(default: false),
                        help: "the phone link (ANCS): advertise connectably with the ANCS Service Solicitation (beside the `[beacon]`: two extended advertising sets, or one legacy connectable set with the solicitation as scan response) and accept the owner's iPhone: `agentctl pair` opens a pairing window (LE Secure Connections, Just Works: the box has no display), the bonds (the phones' IRK and LTK) are kept in `state_dir/phones.json` (0600), a bonded phone reconnects by itself whatever private address it uses; the agent reads its notifications (ANCS) for the `ancs_*` keys below; `agentctl phones`, `forget`, `answer`"),
            RadioOption("ancs_app", .string(default: nil), for: [],
                        help: "with `ancs`: the doorbell app's bundle id; its notification of a press on a connected phone is reported as `push.displayed` (the cloud records it per push), and a connected phone that shows none within `ancs_receipt_window_s` as `push.not_displayed`; empty: no receipts"),
            RadioOption("ancs_receipt_window_s", .int(10...3_600, default: 120), help: "with `ancs`: how long after a press a connected phone has to show it"),
            RadioOption("ancs_notify", .strings(default: ["incoming_call"]),
                        help: "with `ancs`: ANCS categories (`incoming_call`, `missed_call`, `voicemail`, `social`, `schedule`, `email`, `news`, `health_and_fitness`, `business_and_finance`, `location`, `entertainment`, `other`) and app bundle ids whose new notifications become `phone.notification` events, their later changes and removal `phone.notification_modified` / `phone.notification_removed` (same `uid`), which `[[action]]`s with `on = [\"phone.notification\"]` (or the others) can ring, flash or stop"),
            RadioOption("ancs_share_text", .bool(default: false),
                        help: "with `ancs`: put the notification's title, subtitle and message into `phone.notification` (and `_modified`) events; off, they never leave the base station"),
            RadioOption("ancs_name", .string(default: nil),
                        help: "with `ancs`: the name in the connectable advertisement's scan response, what the owner sees when pairing (default: the `gateway_id`); at most 29 bytes of UTF-8, and on a controller without extended advertising with a `[beacon]` only the first 11 are sent (as the Shortened Local Name)"),
            RadioOption("stall_s", .int(0...86_400, default: 120),
                        help: "no advertising report for this long: the controller is reset and the radio shows `degraded` until reports flow again (0 = off); while a phone is connected (`ancs`) the scan is switched off and on instead, since a reset would drop the phone"),
            RadioOption("command_timeout_ms", .int(100...60_000, default: 2_000),
                        help: "how long one HCI command may wait for its Command Complete/Status; then the controller is restarted with backoff"),
        ],
        counters: [
            RadioCounterSpec("reports", table: "reports", help: "Advertising reports from the controller."),
            RadioCounterSpec("bthome", table: "BTHome", help: "BTHome adverts from configured buttons."),
            RadioCounterSpec("ibeacons", table: "iBeacon", help: "iBeacon adverts."),
            RadioCounterSpec("replays_refused", table: "replays refused", help: "BTHome packets refused as replays."),
            RadioCounterSpec("decrypt_failures", table: "bad MICs", help: "Encrypted BTHome adverts whose MIC did not verify."),
            RadioCounterSpec("downgrades_refused", table: nil, help: "Unencrypted adverts refused from a button configured with a key."),
            RadioCounterSpec("lines", table: nil, metric: RadioCounterCatalog.lines.metric, help: "Advertising reports the radio read."),
        ])

    static var slot: WritableKeyPath<AgentConfig, BLERadioSettings?> { \.ble }

    static let serialBauds = [9_600, 19_200, 38_400, 57_600, 115_200, 230_400, 460_800, 500_000, 921_600, 1_000_000, 2_000_000, 3_000_000]

    static func read(_ s: RadioSection, baseDir: String, checks: ConfigFileChecks) -> BLERadioSettings? {
        let kind = s.select(hint: "how the controller is reached: transport = \"hci\" (kernel, device = \"hci0\"), \"serial\" (H4 UART, path = \"/dev/ttyACM0\") or \"tcp\" (H4, address = \"127.0.0.1:9100\")")
        let transport: HCITransportKind?
        switch kind {
        case "hci"?: transport = readKernel(s)
        case "serial"?:
            let path = s.string("path", hint: "the UART of the HCI dongle, e.g. path = \"/dev/ttyACM0\"")
            let baud = s.int("baud") ?? 1_000_000
            if !serialBauds.contains(baud) { s.report("baud", "\(baud) is not a standard rate; use one of \(serialBauds.map(String.init).joined(separator: ", "))") }
            let flow = s.bool("flow_control") ?? true
            transport = path.map { .serial(path: $0, baud: baud, flowControl: flow) }
        case "tcp"?: transport = readTCP(s)
        case "replay"?:
            if let files = s.strings("replay"), !files.isEmpty {
                let paths = files.map { ConfigLoader.resolve($0, baseDir: baseDir) }
                for p in paths where !checks.isReadableFile(p) {
                    s.report("replay", "cannot read capture \(p). Check the path (relative paths start at the config file's folder).")
                }
                transport = .replay(files: paths)
            } else {
                transport = nil
                s.report("replay", "is required with transport = \"replay\": the btsnoop captures to play (agentctl capture makes them)")
            }
        case let other?:
            transport = nil
            s.report("transport", "unknown transport \"\(other)\"; use \"hci\", \"serial\", \"tcp\" or \"replay\"")
        case nil: transport = nil
        }
        guard let transport else { return nil }
        var b = BLERadioSettings(transport: transport)
        if let scan = s.choice("scan") { b.activeScan = scan == "active" }
        if let v = s.int("interval_ms") { b.intervalMs = v }
        if let v = s.int("window_ms") { b.windowMs = v }
        if b.windowMs > b.intervalMs { s.report("window_ms", "must not exceed interval_ms (\(b.intervalMs))") }
        if let v = s.bool("extended_scan") { b.extendedScan = v }
        if let v = s.bool("ancs") { b.ancsLink = v }
        if let v = s.string("ancs_app") { b.ancsDoorbellApp = v }
        if let v = s.int("ancs_receipt_window_s") { b.ancsReceiptWindowSeconds = v }
        if let v = s.strings("ancs_notify") {
            for item in v where !item.contains(".") && !PhoneNotification.categoryNames.contains(item) {
                s.report("ancs_notify", "\"\(item)\" is neither an ANCS category (\(PhoneNotification.categoryNames.joined(separator: ", "))) nor an app bundle id (like \"com.apple.mobilephone\")")
            }
            b.ancsNotify = v
        }
        if let v = s.bool("ancs_share_text") { b.ancsShareText = v }
        if let v = s.string("ancs_name") {
            if v.isEmpty || v.utf8.count > 29 {
                s.report("ancs_name", "must be 1 to 29 bytes of UTF-8 (what a scan response holds), found \(v.utf8.count)")
            } else {
                b.ancsName = v
            }
        }
        if let v = s.int("stall_s") { b.stallSeconds = v }
        if let v = s.int("command_timeout_ms") { b.commandTimeoutMs = v }
        return b
    }

    private static func readKernel(_ s: RadioSection) -> HCITransportKind? {
        let name = s.string("device") ?? "hci0"
        let exclusive = s.choice("channel") != "raw"
        if name.hasPrefix("hci"), let n = Int(name.dropFirst(3)), n >= 0, n < 64 { return .kernel(device: n, exclusive: exclusive) }
        s.report("device", "must name a controller like \"hci0\" (hciconfig / btmgmt info list them), found \"\(name)\"")
        return nil
    }

    private static func readTCP(_ s: RadioSection) -> HCITransportKind? {
        if let a = s.string("address", hint: "host:port of the H4 stream, e.g. address = \"127.0.0.1:9100\""),
           let colon = a.lastIndex(of: ":"), let port = Int(a[a.index(after: colon)...]), (1...65535).contains(port) {
            var host = String(a[..<colon])
            if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
            return .tcp(host: host, port: port)
        }
        if s.has("address") { s.report("address", "must be host:port, e.g. \"127.0.0.1:9100\" or \"[::1]:9100\"") }
        return nil
    }
}
