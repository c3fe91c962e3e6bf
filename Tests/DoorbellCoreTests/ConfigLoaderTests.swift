import DoorbellCore
import Testing

@Suite struct ConfigLoaderTests {
    static let good = """
    gateway_id = "gw-0001"

    [paths]
    state_dir = "state"

    [radio.rtl433]
    conf_file = "rtl_433.conf"
    args = ["-d", "0"]

    [tracker.button]
    cooldown_ms = 2000

    [[device]]
    id = "front-door"
    name = "Front door"
    match = { code = "0x91568F" }

    [[device]]
    id = "back-door"
    [device.match]
    id = 2900
    unit = 9

    [uplink]
    url = "https://cloud.example.com/events"
    ca_file = "/etc/ssl/ca.pem"
    hmac_secret_file = "gateway.whsec"
    """

    @Test func aGoodConfigLoadsWithResolvedPaths() throws {
        let c = try ConfigLoader.parse(text: Self.good, file: "/etc/doorbell-agent/agent.toml")
        #expect(c.gatewayID == "gw-0001")
        #expect(c.paths.stateDir == "/etc/doorbell-agent/state")
        #expect(c.paths.controlSocket == PathSettings.defaultControlSocket)
        #expect(c.rtl433?.confFile == "/etc/doorbell-agent/rtl_433.conf")
        #expect(c.rtl433?.arguments == ["-F", "json", "-M", "time:unix:usec", "-M", "level", "-d", "0", "-c", "/etc/doorbell-agent/rtl_433.conf"])
        #expect(c.button.cooldownMicros == 2_000_000)
        #expect(c.devices.map(\.id) == ["front-door", "back-door"])
        #expect(c.devices[0].match == RTL433Match(fields: [("code", .integer(0x91568F))]))
        #expect(c.devices[1].name == "back-door")
        #expect(c.uplink?.hmacSecretFile == "/etc/doorbell-agent/gateway.whsec")
        #expect(c.uplink?.signEd25519 == true)
        #expect(c.uplink?.heartbeatIntervalSeconds == 0, "no heartbeats unless asked for: a generic webhook receiver has no heartbeat path")
    }

    struct Case: Sendable, CustomStringConvertible {
        let name: String
        let toml: String
        let expected: String   // substring of the one reported issue, including its location
        var description: String { name }
    }

    static let base = """
    gateway_id = "gw"
    [radio.rtl433]
    args = []
    """

    static let badCases: [Case] = [
        Case(name: "mqtt password in clear", toml: base + "\n[mqtt]\nhost = \"hass.local\"\nusername = \"u\"\npassword = \"hunter2\"\n",
             expected: "mqtt.password: is not read from the config: put the password in a file of its own"),
        Case(name: "mqtt prefix with a wildcard", toml: base + "\n[mqtt]\nhost = \"hass.local\"\ntopic_prefix = \"door/#\"\n",
             expected: "mqtt.topic_prefix: must be topic levels without spaces, + or #"),
        Case(name: "mqtt client cert without key", toml: base + "\n[mqtt]\nhost = \"hass.local\"\nca_file = \"/etc/ssl/ca.pem\"\ncert_file = \"/etc/ssl/gw.pem\"\n",
             expected: "mqtt.key_file: cert_file and key_file go together"),
        Case(name: "mqtt protocol", toml: base + "\n[mqtt]\nhost = \"hass.local\"\nprotocol = \"4\"\n",
             expected: "mqtt.protocol: must be \"3.1.1\" or \"5\""),
        Case(name: "mqtt without host", toml: base + "\n[mqtt]\nport = 1883\n",
             expected: "mqtt.host: is required: the broker"),
        Case(name: "syntax error", toml: "gateway_id = gw-1\n", expected: "agent.toml:1:14: not valid TOML"),
        Case(name: "missing gateway id", toml: "[paths]\nstate_dir = \"/tmp\"\n", expected: "gateway_id: is required: the name this gateway has in the cloud"),
        Case(name: "typo in a key", toml: base + "\n[uplink]\nulr = \"https://x/events\"\nurl = \"https://x/events\"\n",
             expected: "agent.toml:5:1: uplink.ulr: unknown key; did you mean \"url\"?"),
        Case(name: "wrong type", toml: base + "\n[tracker.button]\nrepeat_gap_ms = \"300ms\"\n",
             expected: "agent.toml:5:1: tracker.button.repeat_gap_ms: must be an integer, found a string"),
        Case(name: "out of range", toml: base + "\n[tracker.button]\ncooldown_ms = -5\n",
             expected: "agent.toml:5:1: tracker.button.cooldown_ms: -5 is out of range; use a value from 0 to 600000"),
        Case(name: "plain http", toml: base + "\n[uplink]\nurl = \"http://cloud/events\"\n",
             expected: "uplink.url: must start with https://"),
        Case(name: "model alone", toml: base + "\n[[device]]\nid = \"bell\"\nmatch = { model = \"Smoke-GS558\" }\n",
             expected: "device[0].match: model alone is not enough"),
        Case(name: "bad code", toml: base + "\n[[device]]\nid = \"bell\"\nmatch = { code = \"zz12\" }\n",
             expected: "device[0].match.code: \"zz12\" is not a hex code"),
        Case(name: "duplicate device", toml: base + "\n[[device]]\nid = \"a\"\nmatch = { code = 1 }\n[[device]]\nid = \"a\"\nmatch = { code = 2 }\n",
             expected: "agent.toml:8:1: device[1].id: duplicate device id \"a\""),
        Case(name: "device without radio", toml: "gateway_id = \"gw\"\n[[device]]\nid = \"a\"\nmatch = { code = 1 }\n",
             expected: "device[0].radio: device uses radio \"rtl433\" but [radio.rtl433] is not configured"),
        Case(name: "rtl433 output flags", toml: "gateway_id = \"gw\"\n[radio.rtl433]\nargs = [\"-F\", \"csv\"]\n",
             expected: "radio.rtl433.args: must not contain -F"),
        Case(name: "bad log level", toml: "gateway_id = \"gw\"\n[log]\nlevel = \"verbose\"\n",
             expected: "log.level: unknown level \"verbose\"; use one of debug, info, notice, warning, error"),
        Case(name: "bad gateway id", toml: "gateway_id = \"gw 1\"\n", expected: "gateway_id: must be 1-64 characters"),
        Case(name: "bad pin", toml: base + "\n[uplink]\nurl = \"https://x/events\"\npinned_public_key = \"abc\"\n",
             expected: "uplink.pinned_public_key: must be sha256//<base64 of the SPKI hash>"),
        Case(name: "cert without key", toml: base + "\n[uplink]\nurl = \"https://x/events\"\nclient_cert_file = \"/etc/hosts\"\n",
             expected: "uplink.client_key_file: client_cert_file and client_key_file go together"),
        Case(name: "bad proxy", toml: base + "\n[uplink]\nurl = \"https://x/events\"\nproxy = \"proxy:3128\"\n",
             expected: "uplink.proxy: must start with http://"),
        Case(name: "heartbeat too often", toml: base + "\n[uplink]\nurl = \"https://x/events\"\nheartbeat_interval_s = 30\n",
             expected: "uplink.heartbeat_interval_s: must be 0 (no heartbeats) or 60 to 86400 seconds; found 30"),
        Case(name: "heartbeat negative", toml: base + "\n[uplink]\nurl = \"https://x/events\"\nheartbeat_interval_s = -1\n",
             expected: "uplink.heartbeat_interval_s: -1 is out of range; use a value from 0 to 86400"),
        Case(name: "ook without source", toml: "gateway_id = \"gw\"\n[radio.ook]\nchip = \"pinctrl-bcm2711\"\nline = 27\n",
             expected: "radio.ook.source: is required"),
        Case(name: "ook unknown source", toml: "gateway_id = \"gw\"\n[radio.ook]\nsource = \"sdr\"\n",
             expected: "radio.ook.source: unknown source \"sdr\"; use \"gpio\", \"rtl433\", \"replay\""),
        Case(name: "gpio without line", toml: "gateway_id = \"gw\"\n[radio.ook]\nsource = \"gpio\"\nchip = \"pinctrl-rp1\"\n",
             expected: "radio.ook.line: is required: the line offset of the receiver's data pin"),
        Case(name: "gpio without chip", toml: "gateway_id = \"gw\"\n[radio.ook]\nsource = \"gpio\"\nline = 27\n",
             expected: "radio.ook.chip: is required: the GPIO chip's label"),
        Case(name: "time unit in milliseconds", toml: "gateway_id = \"gw\"\n[radio.ook]\nsource = \"gpio\"\nchip = \"c\"\nline = 1\nmax_time_unit_us = 3\n",
             expected: "radio.ook.max_time_unit_us: 3 is out of range; use a value from 600 to 10000"),
        Case(name: "unknown rc-switch protocol", toml: "gateway_id = \"gw\"\n[radio.ook]\nsource = \"gpio\"\nchip = \"c\"\nline = 1\nprotocols = [1, 9]\n",
             expected: "radio.ook.protocols: unknown protocol 9"),
        Case(name: "replay of a cu8 as timeline", toml: "gateway_id = \"gw\"\n[radio.ook]\nsource = \"replay\"\nreplay = [\"a.cu8\"]\n",
             expected: "source = \"replay\" plays .ook or .vcd timelines"),
        Case(name: "pulse mode decoder flags", toml: "gateway_id = \"gw\"\n[radio.ook]\nsource = \"rtl433\"\nrtl433_args = [\"-R\", \"30\"]\n",
             expected: "radio.ook.rtl433_args: must not contain -R"),
        Case(name: "one SDR twice", toml: base + "\n[radio.ook]\nsource = \"rtl433\"\n",
             expected: "radio.ook: [radio.rtl433] and [radio.ook] source = \"rtl433\" would open the same SDR"),
        Case(name: "device on an unknown radio", toml: base + "\n[[device]]\nid = \"a\"\nradio = \"gpio\"\nmatch = { code = 1 }\n",
             expected: "device[0].radio: unknown radio \"gpio\"; this agent knows: rtl433, ook"),
        Case(name: "action without exec or pulse", toml: base + "\n[[action]]\nname = \"chime\"\n",
             expected: "action[0].exec: or gpio_pulse or answer_phones is required"),
        Case(name: "gpio pulse without chip", toml: base + "\n[[action]]\ngpio_pulse = { line = 17 }\n",
             expected: "action[0].gpio_pulse.chip: is required"),
        Case(name: "ble unknown transport", toml: "gateway_id = \"gw\"\n[radio.ble]\ntransport = \"usb\"\n",
             expected: "radio.ble.transport: unknown transport \"usb\"; use \"hci\", \"serial\", \"tcp\" or \"replay\""),
        Case(name: "ble bad hci name", toml: "gateway_id = \"gw\"\n[radio.ble]\ntransport = \"hci\"\ndevice = \"bt0\"\n",
             expected: "radio.ble.device: must name a controller like \"hci0\""),
        Case(name: "ble unknown hci channel", toml: "gateway_id = \"gw\"\n[radio.ble]\ntransport = \"hci\"\nchannel = \"monitor\"\n",
             expected: "radio.ble.channel: must be \"user\""),
        Case(name: "ble odd baud", toml: "gateway_id = \"gw\"\n[radio.ble]\ntransport = \"serial\"\npath = \"/dev/ttyACM0\"\nbaud = 123456\n",
             expected: "radio.ble.baud: 123456 is not a standard rate"),
        Case(name: "ble tcp without port", toml: "gateway_id = \"gw\"\n[radio.ble]\ntransport = \"tcp\"\naddress = \"127.0.0.1\"\n",
             expected: "radio.ble.address: must be host:port"),
        Case(name: "ble window over interval", toml: "gateway_id = \"gw\"\n[radio.ble]\ntransport = \"hci\"\ninterval_ms = 30\nwindow_ms = 60\n",
             expected: "radio.ble.window_ms: must not exceed interval_ms (30)"),
        Case(name: "region bad uuid", toml: "gateway_id = \"gw\"\n[radio.ble]\ntransport = \"hci\"\n[[region]]\nid = \"a\"\nuuid = \"xyz\"\n",
             expected: "region[0].uuid: \"xyz\" is not a UUID"),
        Case(name: "region minor without major", toml: "gateway_id = \"gw\"\n[radio.ble]\ntransport = \"hci\"\n[[region]]\nid = \"a\"\nuuid = \"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0\"\nminor = 3\n",
             expected: "region[0].minor: needs major too"),
        Case(name: "region without ble", toml: "gateway_id = \"gw\"\n[[region]]\nid = \"a\"\nuuid = \"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0\"\n",
             expected: "region[0]: iBeacon regions need [radio.ble]"),
        Case(name: "short bindkey", toml: "gateway_id = \"gw\"\n[radio.ble]\ntransport = \"hci\"\n[[device]]\nid = \"b\"\nmatch = { address = \"C0:11:22:33:44:02\" }\nbindkey = \"abcd\"\n",
             expected: "device[0].bindkey: must be the device's 16-byte key as 32 hex digits"),
        Case(name: "ble device by code", toml: "gateway_id = \"gw\"\n[radio.ble]\ntransport = \"hci\"\n[[device]]\nid = \"b\"\nmatch = { code = 1 }\n",
             expected: "device[0].match: a BLE button is matched by its address only"),
        Case(name: "own beacon without major", toml: "gateway_id = \"gw\"\n[radio.ble]\ntransport = \"hci\"\n[beacon]\nuuid = \"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0\"\nminor = 1\n",
             expected: "beacon.major: is required"),
        Case(name: "non-ASCII table name", toml: "gateway_id = \"gw\"\n# Réglages: comments may say anything\nname = \"Entrée\"\n[région]\n",
             expected: "agent.toml:4:3: not valid TOML: a non-ASCII character ('é') cannot be part of a bare key; bare keys are ASCII letters, digits, '-' and '_': quote the key (\"région\")"),
        Case(name: "invalid UTF-8 in a table name", toml: "gateway_id = \"gw\"\n[[\u{FFFD}]]\n",
             expected: "agent.toml:2:3: not valid TOML: a non-ASCII character ('\u{FFFD}') (U+FFFD usually means the file was not saved as UTF-8)"),
        Case(name: "table name starting with #", toml: "gateway_id = \"gw\"\n[[# devices]]\n",
             expected: "agent.toml:2:3: not valid TOML: a [table] name must start with a letter, digit"),
        Case(name: "table name starting with =", toml: "gateway_id = \"gw\"\n  [ =log]\n",
             expected: "agent.toml:2:5: not valid TOML: a [table] name must start with a letter, digit"),
        Case(name: "update url not http", toml: base + "\n[update]\nurl = \"ftp://updates.example.com/b.raucb\"\n",
             expected: "update.url: must be the bundle's http:// or https:// address"),
        Case(name: "update url with a shell character", toml: base + "\n[update]\nurl = \"https://u.example.com/b.raucb;reboot\"\n",
             expected: "update.url: is not a valid URL"),
        Case(name: "update without url", toml: base + "\n[update]\n",
             expected: "update.url: is required"),
        Case(name: "update unknown key", toml: base + "\n[update]\nurl = \"https://u.example.com/b.raucb\"\ninterval = 5\n",
             expected: "update.interval: unknown key"),
        Case(name: "no signing key", toml: base + "\n[uplink]\nurl = \"https://x/events\"\nsign_ed25519 = false\n",
             expected: "uplink: no signing key"),
    ]

    @Test func anUpdateURLIsKeptAsWritten() throws {
        let url = "http://192.168.1.10:8080/doorbell-raspberrypi-4.raucb"
        let c = try ConfigLoader.parse(text: Self.base + "\n[update]\nurl = \"\(url)\"\n", file: "agent.toml")
        #expect(c.update == UpdateSettings(url: url))
        #expect(try ConfigLoader.parse(text: Self.base, file: "agent.toml").update == nil)
    }

    @Test(arguments: badCases)
    func badConfigsAreReportedWithWhereAndWhat(c: Case) {
        do {
            _ = try ConfigLoader.parse(text: c.toml, file: "agent.toml")
            Issue.record("expected an error for \(c.name)")
        } catch {
            #expect(error.issues.count == 1, "\(error.description)")
            #expect(error.description.contains(c.expected), "\(error.description)")
        }
    }

    @Test func anOOKReceiverOnAPinWithAChimeRelay() throws {
        let toml = """
        gateway_id = "gw"
        [radio.ook]
        source = "gpio"
        chip = "pinctrl-rp1"
        line = 27
        glitch_us = 100
        protocols = [1, 2]
        max_time_unit_us = 2500
        [[device]]
        id = "front-door"
        match = { code = "0x91568F" }
        [[action]]
        name = "chime"
        gpio_pulse = { chip = "pinctrl-rp1", line = 17, active_low = true, duration_ms = 250 }
        """
        let c = try ConfigLoader.parse(text: toml, file: "/etc/doorbell-agent/agent.toml")
        #expect(c.ook?.source == .gpio)
        #expect(c.ook?.gpio == GPIOLineRef(chip: "pinctrl-rp1", line: 27))
        #expect(c.ook?.glitchMicros == 100)
        #expect(c.ook?.decoder.protocols == [1, 2])
        #expect(c.ook?.decoder.maxTimeUnitMicros == 2_500)
        #expect(c.ook?.decoder.separatorMicros == 8_333, "the word gap grows with the time unit")
        #expect(c.devices.first?.radio == "ook", "the one radio configured is the default")
        #expect(c.actions.first?.gpioPulse == GPIOPulseSettings(line: GPIOLineRef(chip: "pinctrl-rp1", line: 17, activeLow: true), durationMs: 250))
        #expect(c.actions.first?.exec == [])
    }

    @Test func aBLEGatewayWithButtonsRegionsAndItsOwnBeacon() throws {
        let toml = """
        gateway_id = "gw"
        [radio.ble]
        transport = "serial"
        path = "/dev/ttyACM0"
        baud = 1000000
        scan = "active"
        ancs = true
        [beacon]
        uuid = "e2c56db5-dffb-48d2-b060-d0f5a71096e0"
        major = 1
        minor = 2
        measured_power = -61
        [[device]]
        id = "side-door"
        match = { address = "c0:11:22:33:44:02" }
        bindkey = "231d39c1d7cc1ab1aee224cd096db932"
        [[region]]
        id = "alice"
        uuid = "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0"
        major = 100
        exit_timeout_s = 45
        """
        let c = try ConfigLoader.parse(text: toml, file: "/etc/doorbell-agent/agent.toml")
        #expect(c.ble?.transport == .serial(path: "/dev/ttyACM0", baud: 1_000_000, flowControl: true))
        #expect(c.ble?.activeScan == true)
        #expect(c.ble?.ancsLink == true)
        #expect(c.ble?.beacon?.beacon.major == 1 && c.ble?.beacon?.beacon.measuredPower == -61)
        #expect(c.devices.first?.radio == "ble", "the one radio configured is the default")
        #expect(c.devices.first?.match == RTL433Match(fields: [("address", .text("C0:11:22:33:44:02"))]))
        #expect(c.devices.first?.bindkey?.count == 16)
        #expect(c.regions.first?.major == 100 && c.regions.first?.minor == nil && c.regions.first?.exitTimeoutMicros == 45_000_000)
    }

    @Test func pulseModeRunsRTL433WithoutDecoders() throws {
        let toml = "gateway_id = \"gw\"\n[radio.ook]\nsource = \"rtl433\"\nrtl433_args = [\"-d\", \"1\"]\nreplay = [\"x.cu8\"]\n"
        let c = try ConfigLoader.parse(text: toml, file: "/b/agent.toml")
        #expect(c.ook?.rtl433.arguments == ["-R", "0", "-w", "OOK:-", "-d", "1", "-r", "/b/x.cu8"])
    }

    @Test func nonASCIIInsideStringsAndCommentsIsFine() throws {
        // Regression: `[région]` made TOMLKit's C++ parser abort the agent (Tests/FuzzCorpus/config/crash-non-ascii-table).
        let c = try ConfigLoader.parse(text: "gateway_id = \"gw\" # passerelle №1\n[log]\nlevel = 'info' # «info»\n", file: "a.toml")
        #expect(c.gatewayID == "gw")
        let m = try ConfigLoader.parse(text: "gateway_id = \"gw\"\n[radio.ble]\ntransport = \"hci\"\n[[region]]\nid = \"a\"\nname = \"\"\"Café \\\"Été\\\"\n«x»\"\"\"\nuuid = \"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0\"\n", file: "a.toml")
        #expect(m.regions.first?.name.hasPrefix("Café") == true)
    }

    @Test func theKernelHCIChannelIsExclusiveUnlessRawIsAsked() throws {
        // Issue #15: beside bluetoothd the raw channel lost presses; the user channel is the default.
        let plain = try ConfigLoader.parse(text: "gateway_id = \"gw\"\n[radio.ble]\ntransport = \"hci\"\n", file: "a.toml")
        #expect(plain.ble?.transport == .kernel(device: 0, exclusive: true))
        let raw = try ConfigLoader.parse(text: "gateway_id = \"gw\"\n[radio.ble]\ntransport = \"hci\"\ndevice = \"hci1\"\nchannel = \"raw\"\n", file: "a.toml")
        #expect(raw.ble?.transport == .kernel(device: 1, exclusive: false))
    }

    @Test func nestedArraysAndInlineTablesAreNotTableHeaders() throws {
        // Multi-line values may put [ or { at the start of a line; only real headers are checked.
        let text = "gateway_id = \"gw\"\n[radio.rtl433]\nargs = [\n  \"-d\",\n  \"0\",\n]\n[[device]]\nid = \"a\"\nmatch = { code = 1 }\n"
        let c = try ConfigLoader.parse(text: text, file: "a.toml")
        #expect(c.rtl433?.args == ["-d", "0"])
        #expect(c.devices.first?.id == "a")
        #expect(try TOMLReader.parse("x = [\n  [1, 2],\n  [{ a = 1 }],\n]\n[t]\n") == .table([
            ("x", .array([.array([.int(1), .int(2)]), .array([.table([("a", .int(1))])])])), ("t", .table([])),
        ]))
        #expect(try TOMLReader.parse("s = '''\n[#not a header\n'''\n[ok]\n") == .table([("s", .string("[#not a header\n")), ("ok", .table([]))]))
    }

    @Test func bytesThatAreNotUTF8AreReportedWhereTheyAre() {
        // Read as bytes, a Latin-1 "é" (0xE9) is an error at its place, not a silent U+FFFD.
        let bytes = Array("gateway_id = \"gw\"\n[log]\nlevel = \"".utf8) + [0xE9] + Array("\"\n".utf8)
        do {
            _ = try ConfigLoader.parse(bytes: bytes, file: "agent.toml")
            Issue.record("expected an error")
        } catch {
            #expect(error.description == "agent.toml:3:10: not valid TOML: invalid UTF-8 (byte 0xE9); TOML files must be UTF-8: re-save the file as UTF-8")
        }
    }

    @Test func syntaxErrorsSayWhatToWrite() {
        let cases: [(String, String)] = [
            ("gateway_id = \"gw\"\n[uplink]\nurl \"https://x/events\"\n", "agent.toml:3:5: not valid TOML: expected '=' after key `url`, found '\"'"),
            ("gateway_id = \"gw\"\n[log]\nlevel = \"info\"\nlevel = \"debug\"\n", "agent.toml:4:1: not valid TOML: duplicate key `level` (first defined on line 3)"),
            ("gateway_id = \"gw\nx = 1\n", "agent.toml:1:14: not valid TOML: unterminated string; close it with \" before the end of the line"),
            ("gateway_id = \"gw\"\n[log]\n[log]\n", "agent.toml:3:2: not valid TOML: table [log] is defined twice (first on line 2)"),
        ]
        for (toml, expected) in cases {
            do {
                _ = try ConfigLoader.parse(text: toml, file: "agent.toml")
                Issue.record("expected an error for \(toml)")
            } catch {
                #expect(error.issues.count == 1)
                #expect(error.description.hasPrefix(expected), "\(error.description)")
            }
        }
    }

    @Test func aDateWhereAStringBelongsIsAWrongType() {
        // Datetimes parse (the file is valid TOML) and then get the loader's type message.
        do {
            _ = try ConfigLoader.parse(text: "gateway_id = 1979-05-27T07:32:00Z\n", file: "agent.toml")
            Issue.record("expected an error")
        } catch {
            #expect(error.description == "agent.toml:1:1: gateway_id: must be a string, found a date-time; e.g. gateway_id = \"...\"")
        }
    }

    @Test func missingFilesAreReported() {
        let toml = Self.base + "\nconf_file = \"missing.conf\"\n[uplink]\nurl = \"https://x/events\"\nca_file = \"/nope/ca.pem\"\n"
        let checks = ConfigFileChecks(isReadableFile: { _ in false })
        do {
            _ = try ConfigLoader.parse(text: toml, file: "/etc/agent.toml", checks: checks)
            Issue.record("expected errors")
        } catch {
            #expect(error.description.contains("radio.rtl433.conf_file: cannot read /etc/missing.conf"))
            #expect(error.description.contains("uplink.ca_file: cannot read CA file /nope/ca.pem"))
        }
    }

    @Test func everyIssueIsReportedAtOnce() {
        let toml = "gateway_id = 5\ncolour = \"red\"\n[log]\nlevel = 3\n"
        do {
            _ = try ConfigLoader.parse(text: toml, file: "a.toml")
            Issue.record("expected errors")
        } catch {
            #expect(error.issues.count == 3, "\(error.description)")
        }
    }

    /// check-config's rule for mqtt.password_file: only its owner may open it (the README's 0600).
    @Test func aPasswordFileOthersMayOpenIsWarnedOfWithTheFix() {
        #expect(MQTTSettings.passwordFileWarning(path: "/etc/p", mode: 0o100600) == nil)
        #expect(MQTTSettings.passwordFileWarning(path: "/etc/p", mode: 0o100400) == nil)
        let world = MQTTSettings.passwordFileWarning(path: "/etc/p", mode: 0o100644) ?? ""
        #expect(world.contains("every user") && world.contains("mode 0644") && world.contains("chmod 600 /etc/p"), "\(world)")
        #expect(MQTTSettings.passwordFileWarning(path: "/etc/p", mode: 0o100640)?.contains("its group (mode 0640)") == true)
        #expect(MQTTSettings.passwordFileWarning(path: "/etc/p", mode: 0o100620) != nil, "group-writable is open too")
    }
}

@Suite struct PathResolutionTests {
    @Test(arguments: [
        ("/repo/board/sim/agent.toml", "../../.work/sim/state", "/repo/.work/sim/state"),
        ("board/sim/agent.toml", "./recordings/a.ook", "board/sim/recordings/a.ook"),
        ("agent.toml", "state", "state"),
        ("/etc/agent.toml", "/../x", "/x"),
    ])
    func relativePathsResolveAgainstTheConfigFolder(file: String, value: String, expected: String) throws {
        let c = try ConfigLoader.parse(text: "gateway_id = \"gw\"\n[paths]\nstate_dir = \"\(value)\"\n", file: file)
        #expect(c.paths.stateDir == expected)
    }
}

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Every board profile is a config the agent accepts as shipped.
@Suite struct BoardProfileTests {
    static let boardDir: String = {
        let here = #filePath
        return String(here[..<(here.range(of: "/Tests/")?.lowerBound ?? here.endIndex)]) + "/board"
    }()

    static func boards() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: boardDir)) ?? []).filter {
            FileManager.default.fileExists(atPath: boardDir + "/" + $0 + "/agent.toml")
        }.sorted()
    }

    @Test func theBoardsTheIssueNamesExist() {
        #expect(Set(Self.boards()).isSuperset(of: ["raspberrypi-zero-2w", "raspberrypi-3", "raspberrypi-4", "raspberrypi-5", "generic-arm64", "sim"]))
    }

    @Test(arguments: boards())
    func boardConfigLoads(board: String) throws {
        let path = Self.boardDir + "/" + board + "/agent.toml"
        let text = try String(contentsOfFile: path, encoding: .utf8)
        let c = try ConfigLoader.parse(text: text, file: path)
        #expect(c.ook != nil || c.rtl433 != nil, "\(board) has no radio")
        if board.hasPrefix("raspberrypi-") {
            #expect(c.ook?.source == .gpio)
            #expect(c.ook?.gpio?.chip.hasPrefix("pinctrl-") == true)
            #expect(c.actions.first?.gpioPulse != nil, "\(board): the chime relay")
        }
        #expect(FileManager.default.fileExists(atPath: Self.boardDir + "/" + board + "/README.md"))
    }
}
