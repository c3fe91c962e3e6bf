@testable import DoorbellCore
import Testing

/// A radio's descriptor is what the loader enforces and what the README shows: its rows are made
/// from it, its ranges are the ranges refused, its defaults are what a missing key gets.
@Suite struct RadioDescriptorTests {
    /// The smallest section that reads, per radio and per `source`/`transport`.
    static let minimal: [String: [String: String]] = [
        "rtl433": ["": ""],
        "ook": ["gpio": "source = \"gpio\"\nchip = \"c\"\nline = 1\n", "rtl433": "source = \"rtl433\"\n",
                "replay": "source = \"replay\"\nreplay = [\"a.ook\"]\n"],
        "ble": ["hci": "transport = \"hci\"\n", "serial": "transport = \"serial\"\npath = \"/dev/ttyACM0\"\n",
                "tcp": "transport = \"tcp\"\naddress = \"127.0.0.1:9\"\n", "replay": "transport = \"replay\"\nreplay = [\"a.btsnoop\"]\n"],
    ]

    /// A document with one radio section the option applies to, plus `extra` lines.
    static func document(_ d: RadioDescriptor, for o: RadioOption, extra: String = "") -> String {
        let bases = minimal[d.name] ?? [:]
        let base = o.appliesTo.first.flatMap { bases[$0] } ?? bases.sorted { $0.key < $1.key }.first?.value ?? ""
        // The option's own line gives way to `extra` (a key twice is not TOML).
        let kept = extra.isEmpty ? base : base.split(separator: "\n").filter { !$0.hasPrefix(o.key + " ") }.map { $0 + "\n" }.joined()
        return "gateway_id = \"gw\"\n[radio.\(d.name)]\n" + kept + extra
    }

    static func issues(_ toml: String) -> [ConfigIssue] {
        do { _ = try ConfigLoader.parse(text: toml, file: "agent.toml"); return [] } catch { return error.issues }
    }

    @Test func aDescriptorMakesItsRows() {
        let d = RadioDescriptor(name: "lora", summary: "a made-up radio", discriminator: "source", options: [
            RadioOption("source", .choice([RadioChoice("spi"), RadioChoice("uart")], default: nil), required: true, help: "where"),
            RadioOption("enabled", .bool(default: true), help: "run it"),
            RadioOption("spreading", .int(7...12, default: 9), for: ["spi"], help: "SF"),
            RadioOption("port", .string(default: nil), required: true, for: ["uart", "spi"], help: "the device"),
            RadioOption("firmware", .path, help: ""),
            RadioOption("keys", .strings(default: ["a", "b"]), help: "k"),
            RadioOption("captures", .paths(default: nil), help: "c"),
            RadioOption("channels", .ints(default: [1, 2]), help: "ch"),
        ])
        let rows = d.rows.map { [$0.key, $0.type, $0.defaultValue, $0.meaning] }
        #expect(rows == [
            ["`[radio.lora] source`", "`spi`, `uart`, required", "", "where"],
            ["`[radio.lora] enabled`", "bool", "`true`", "run it"],
            ["`[radio.lora] spreading`", "int 7–12 (spi)", "9", "SF"],
            ["`[radio.lora] port`", "string, required (uart, spi)", "", "the device"],
            ["`[radio.lora] firmware`", "path", "", ""],
            ["`[radio.lora] keys`", "string array", "`[\"a\",\"b\"]`", "k"],
            ["`[radio.lora] captures`", "path array", "", "c"],
            ["`[radio.lora] channels`", "int array", "`[1,2]`", "ch"],
        ])
        #expect(d.help(for: "spreading") == "SF")
        #expect(d.help(for: "bandwidth") == "")
    }

    @Test func theReferenceHoldsEveryRegisteredRadiosRowsInRegistryOrder() {
        let generated = RadioRegistry.descriptors.flatMap(\.rows)
        let rows = ConfigReference.rows
        let start = rows.firstIndex { $0.key.hasPrefix("`[radio.") } ?? rows.endIndex
        #expect(Array(rows[start...].prefix(generated.count)) == generated)
        #expect(rows.filter { $0.key.hasPrefix("`[radio.") }.count == generated.count, "a [radio.*] row written by hand")
        #expect(ConfigLoader.knownRadios == ["rtl433", "ook", "ble"])
        #expect(rows.contains { $0.key == "`[[device]] radio`" && $0.type == "`rtl433`, `ook` or `ble`" && $0.defaultValue == "the first configured of rtl433, ook, ble" })
    }

    /// Every registered radio declares what it counts (status, table and metrics come from it),
    /// each counter once, and every exported series has a help text.
    @Test func everyRadioDeclaresItsCounters() {
        for d in RadioRegistry.descriptors {
            #expect(!d.counters.isEmpty, "\(d.name) declares no counters")
            #expect(Set(d.counters.map(\.key)).count == d.counters.count, "\(d.name) declares a counter twice")
            #expect(d.counters.allSatisfy { !$0.help.isEmpty })
            #expect(RadioCounterCatalog.counters(for: d.name) == d.counters)
        }
        #expect(RadioCounterCatalog.counters(for: "zigbee") == [])
    }

    @Test func aDiscriminatorsChoicesAreTheValuesItsReaderKnows() {
        func choices(_ d: RadioDescriptor) -> [String] {
            guard let key = d.discriminator, case let .choice(c, _)? = d.option(key)?.type else { return [] }
            return c.map(\.value)
        }
        #expect(choices(OOKRadioSettings.descriptor) == OOKSource.allCases.map(\.rawValue))
        for value in choices(BLERadioSettings.descriptor) {
            #expect(!Self.issues("gateway_id = \"gw\"\n[radio.ble]\n" + (Self.minimal["ble"]?[value] ?? "x")).contains { $0.key == "radio.ble.transport" })
        }
    }

    /// Every int option, at and just beyond both ends of its declared range.
    @Test func anIntOutsideItsDeclaredRangeIsRefusedWithThatRange() {
        var checked = 0
        for d in RadioRegistry.descriptors {
            for o in d.options {
                guard case let .int(range, _) = o.type else { continue }
                let key = "radio.\(d.name).\(o.key)"
                let refusal = "use a value from \(range.lowerBound) to \(range.upperBound)"
                for v in [range.lowerBound - 1, range.upperBound + 1] {
                    let found = Self.issues(Self.document(d, for: o, extra: "\(o.key) = \(v)\n"))
                    #expect(found.contains { $0.key == key && $0.message == "\(v) is out of range; \(refusal)" }, "\(key) = \(v): \(found)")
                }
                for v in [range.lowerBound, range.upperBound] {
                    let found = Self.issues(Self.document(d, for: o, extra: "\(o.key) = \(v)\n"))
                    #expect(!found.contains { $0.message.contains("out of range") }, "\(key) = \(v): \(found)")
                }
                checked += 1
            }
        }
        #expect(checked >= 10)
    }

    /// What each defaulted option becomes in the settings, written as the descriptor's default.
    static let settingOf: [String: @Sendable (AgentConfig) -> String?] = [
        "rtl433.enabled": { $0.rtl433 == nil ? "false" : "true" },
        "rtl433.binary": { $0.rtl433?.binary },
        "rtl433.args": { $0.rtl433.map { $0.args.joined(separator: ",") } },
        "rtl433.replay": { $0.rtl433.map { $0.replay.joined(separator: ",") } },
        "rtl433.restart_initial_ms": { $0.rtl433.map { "\($0.restartInitialMs)" } },
        "rtl433.restart_max_ms": { $0.rtl433.map { "\($0.restartMaxMs)" } },
        "ook.enabled": { $0.ook == nil ? "false" : "true" },
        "ook.active_low": { $0.ook?.gpio.map { "\($0.activeLow)" } },
        "ook.glitch_us": { $0.ook.map { "\($0.glitchMicros)" } },
        "ook.protocols": { $0.ook.map { $0.decoder.protocols.map(String.init).joined(separator: ",") } },
        "ook.bits": { $0.ook.map { "\($0.decoder.bits)" } },
        "ook.max_time_unit_us": { $0.ook.map { "\($0.decoder.maxTimeUnitMicros)" } },
        "ook.rtl433_binary": { $0.ook?.rtl433.binary },
        "ook.rtl433_args": { $0.ook.map { $0.rtl433.args.joined(separator: ",") } },
        "ble.enabled": { $0.ble == nil ? "false" : "true" },
        "ble.device": { if case let .kernel(n, _)? = $0.ble?.transport { "hci\(n)" } else { nil } },
        "ble.channel": { if case let .kernel(_, exclusive)? = $0.ble?.transport { exclusive ? "user" : "raw" } else { nil } },
        "ble.baud": { if case let .serial(_, baud, _)? = $0.ble?.transport { "\(baud)" } else { nil } },
        "ble.flow_control": { if case let .serial(_, _, flow)? = $0.ble?.transport { "\(flow)" } else { nil } },
        "ble.scan": { $0.ble.map { $0.activeScan ? "active" : "passive" } },
        "ble.interval_ms": { $0.ble.map { "\($0.intervalMs)" } },
        "ble.window_ms": { $0.ble.map { "\($0.windowMs)" } },
        "ble.extended_scan": { $0.ble.map { "\($0.extendedScan)" } },
        "ble.ancs": { $0.ble.map { "\($0.ancsLink)" } },
        "ble.ancs_receipt_window_s": { $0.ble.map { "\($0.ancsReceiptWindowSeconds)" } },
        "ble.ancs_notify": { $0.ble.map { $0.ancsNotify.joined(separator: ",") } },
        "ble.ancs_share_text": { $0.ble.map { "\($0.ancsShareText)" } },
        "ble.stall_s": { $0.ble.map { "\($0.stallSeconds)" } },
        "ble.command_timeout_ms": { $0.ble.map { "\($0.commandTimeoutMs)" } },
    ]

    static func plainDefault(_ t: RadioOptionType) -> String? {
        switch t {
        case let .bool(d): "\(d)"
        case let .int(_, d): d.map(String.init)
        case let .string(d), let .choice(_, d): d
        case .path: nil
        case let .strings(d), let .paths(d): d?.joined(separator: ",")
        case let .ints(d): d?.map(String.init).joined(separator: ",")
        }
    }

    /// A key left out gets the descriptor's default, and the settings types' own defaults (what
    /// the runtime's tests build by hand) are the same.
    @Test func aMissingKeyGetsTheDeclaredDefault() throws {
        var byHand = AgentConfig(gatewayID: "gw", rtl433: RTL433Settings())
        byHand.ook = OOKRadioSettings(source: .rtl433)
        byHand.ble = BLERadioSettings(transport: .kernel(device: 0, exclusive: true))
        for d in RadioRegistry.descriptors {
            for o in d.options {
                guard let want = Self.plainDefault(o.type) else { continue }
                let path = "\(d.name).\(o.key)"
                guard let setting = Self.settingOf[path] else { Issue.record("\(path) has a default the test does not check"); continue }
                let loaded = try ConfigLoader.parse(text: Self.document(d, for: o), file: "agent.toml")
                #expect(setting(loaded) == want, "\(path) loaded")
                if o.key != "baud" && o.key != "flow_control" && o.key != "active_low" {
                    #expect(setting(byHand) == want, "\(path) in the settings type")
                }
            }
        }
    }

    @Test func aChoiceIsRefusedWithTheDeclaredChoices() {
        let found = Self.issues("gateway_id = \"gw\"\n[radio.ble]\ntransport = \"hci\"\nscan = \"aggressive\"\n")
        #expect(found.map(\.description) == ["agent.toml:4:1: radio.ble.scan: must be \"passive\" or \"active\", found \"aggressive\""])
    }

    @Test func aKeyOfAnotherSourceOrTransportIsSaidToBeSo() {
        #expect(Self.issues("gateway_id = \"gw\"\n[radio.ble]\ntransport = \"hci\"\nbaud = 115200\n").map(\.description)
            == ["agent.toml:4:1: radio.ble.baud: is for transport = \"serial\"; this section has transport = \"hci\""])
        #expect(Self.issues("gateway_id = \"gw\"\n[radio.ook]\nsource = \"replay\"\nreplay = [\"a.ook\"]\nrtl433_args = [\"-d\", \"1\"]\n").map(\.description)
            == ["agent.toml:5:1: radio.ook.rtl433_args: is for source = \"rtl433\"; this section has source = \"replay\""])
        #expect(Self.issues("gateway_id = \"gw\"\n[radio.ble]\ntransport = \"tcp\"\naddress = \"h:1\"\nchannel = \"raw\"\ndevice = \"hci1\"\n").map(\.message)
            == ["is for transport = \"hci\"; this section has transport = \"tcp\"", "is for transport = \"hci\"; this section has transport = \"tcp\""])
    }

    /// The suggestion comes from the declared keys, also those the reader never reached.
    @Test func didYouMeanOffersDeclaredKeysThatApply() {
        let found = Self.issues("gateway_id = \"gw\"\n[radio.ble]\ntransport = \"tcp\"\naddress = \"nope\"\nintervall_ms = 50\nbaud = 9600\n")
        #expect(found.map(\.description).sorted() == [
            "agent.toml:4:1: radio.ble.address: must be host:port, e.g. \"127.0.0.1:9100\" or \"[::1]:9100\"",
            "agent.toml:5:1: radio.ble.intervall_ms: unknown key; did you mean \"interval_ms\"?",
            "agent.toml:6:1: radio.ble.baud: is for transport = \"serial\"; this section has transport = \"tcp\"",
        ])
    }

    @Test func anUnknownRadioIsToldWithTheRadiosThereAre() {
        let found = Self.issues("gateway_id = \"gw\"\n[radio.oook]\nsource = \"gpio\"\n")
        #expect(found.map(\.description) == ["agent.toml:2:1: radio.oook: unknown radio; did you mean \"ook\"? This agent knows: "
            + RadioRegistry.descriptors.map { "\($0.name) (\($0.summary))" }.joined(separator: ", ")])
        #expect(found.first?.message.contains("ble (Bluetooth LE scanning") == true)
    }

    /// A reader asking for a key its descriptor lacks is an issue the tests see, not a crash.
    @Test func anUndeclaredKeyIsABugReportedNotACrash() {
        let sink = IssueSink(file: "agent.toml", locator: SourceLocator(text: ""))
        let section = RadioSection(TableReader([], path: [.key("radio"), .key("ble")], sink: sink), BLERadioSettings.descriptor)
        #expect(section.int("bogus_ms") == nil)
        #expect(section.int("scan") == nil)
        #expect(sink.issues.map(\.key) == ["radio.ble.bogus_ms", "radio.ble.scan"])
        #expect(sink.issues.allSatisfy { $0.message.contains("a bug in the agent") })
    }
}
