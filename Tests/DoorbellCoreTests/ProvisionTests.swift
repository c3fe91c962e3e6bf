@testable import DoorbellCore
import Testing

/// #29 "first boot, no keyboard": the boot partition's doorbell.toml read, every bad-file case
/// told with what to fix, and the steps continued from any power cut.
struct ProvisionFileTests {
    static let token = "dbe_" + String(repeating: "k", count: 43)
    static let agent = """
        # the board's agent.toml, as edited
        gateway_id = "gw-unnamed"

        [log]
        level = "info"

        [uplink]
        url = "https://cloud.example.com:8443/events"
        sign_ed25519 = true

        """
    static let good = agent + """
        [provision]
        cloud_url = "https://cloud.example.com:8443/"
        enrolment_token = "\(token)"
        ssh_authorized_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG installer@laptop"
        wifi_ssid = "Home \\"net\\""
        wifi_psk = "correct horse"
        wifi_country = "DE"

        """

    func read(_ text: String, machine: String? = "gw-10000000abc") throws(ConfigError) -> ProvisionFile {
        try ProvisionFileReader.read(bytes: Array(text.utf8), file: "/boot/firmware/doorbell.toml",
                                     installedPath: "/etc/doorbell-agent/agent.toml", machineGatewayID: machine)
    }

    func issues(_ text: String, machine: String? = "gw-10000000abc") -> [ConfigIssue] {
        do {
            let file = try read(text, machine: machine)
            if case let .failure(error) = file.agent { return error.issues }
            return []
        } catch {
            return error.issues
        }
    }

    @Test func aGoodFileGivesTheConfigWithoutProvisionAndTheFileWithoutSecrets() throws {
        let file = try read(Self.good)
        #expect(file.settings == ProvisionSettings(
            cloudURL: "https://cloud.example.com:8443", enrolmentToken: Self.token, gatewayID: "gw-10000000abc",
            sshAuthorizedKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG installer@laptop",
            wifi: WiFiNetwork(ssid: "Home \"net\"", psk: "correct horse", country: "DE")))
        #expect(file.settings.enrolURL == "https://cloud.example.com:8443/enrol")
        let installed = String(decoding: file.agentTOML, as: UTF8.self)
        #expect(!installed.contains(Self.token) && !installed.contains("correct horse") && !installed.contains("wifi_ssid"))
        #expect(installed.contains("# the board's agent.toml, as edited"), "the installer's comments stay")
        let config = try ConfigLoader.parse(bytes: file.agentTOML, file: "agent.toml")
        #expect(config.gatewayID == "gw-10000000abc", "the placeholder is replaced by the machine's id")
        #expect(try file.agent.get() == config)
        #expect(file.holdsSecrets)
        let scrubbed = String(decoding: file.scrubbedBootFile, as: UTF8.self)
        #expect(!scrubbed.contains(Self.token) && !scrubbed.contains("correct horse"))
        #expect(scrubbed.contains("wifi_ssid") && scrubbed.contains("ssh-ed25519"), "only the secrets go")
        // Read again, the scrubbed file holds nothing more to remove.
        let again = try read(scrubbed)
        #expect(!again.holdsSecrets && again.settings.enrolmentToken == nil && again.settings.wifi?.psk == nil)
        #expect(again.agentTOML == file.agentTOML, "the same config either way")
    }

    @Test func theGatewayIdComesFromTheFileOrTheMachine() throws {
        let named = Self.good.replacingOccurrences(of: "gw-unnamed", with: "gw-front")
        #expect(try read(named).settings.gatewayID == "gw-front")
        #expect(try read(named, machine: nil).settings.gatewayID == "gw-front")
        let inProvision = Self.agent.replacingOccurrences(of: "gateway_id = \"gw-unnamed\"\n", with: "")
            + "[provision]\ngateway_id = \"gw-7\"\nenrolment_token = \"\(Self.token)\"\n"
        let file = try read(inProvision)
        #expect(file.settings.gatewayID == "gw-7")
        #expect(try ConfigLoader.parse(bytes: file.agentTOML, file: "agent.toml").gatewayID == "gw-7", "written into the config")
        #expect(ProvisionFileReader.derivedGatewayID(serialNumber: Array("00000000abcdef01\0".utf8), machineID: nil) == "gw-abcdef01")
        #expect(ProvisionFileReader.derivedGatewayID(serialNumber: nil, machineID: Array("0123456789abcdef0123456789abcdef\n".utf8)) == "gw-0123456789ab")
        #expect(ProvisionFileReader.derivedGatewayID(serialNumber: Array("not hex".utf8), machineID: Array("short\n".utf8)) == nil)
        #expect(ProvisionFileReader.derivedGatewayID(serialNumber: Array("0000".utf8), machineID: Array("fedcba9876543210".utf8)) == "gw-fedcba987654")
    }

    /// Every bad file: refused with the key, the boot file's line, and what to write instead.
    @Test(arguments: [
        ("[provision]\ncloud_url = \"http://cloud\"\n", "provision.cloud_url", "https://"),
        ("[provision]\nenrolment_token = \"dbe_ x\"\n", "provision.enrolment_token", "without spaces"),
        ("[provision]\ngateway_id = \"gw 1\"\n", "provision.gateway_id", "1-64 characters"),
        ("[provision]\nssh_authorized_key = \"hello\"\n", "provision.ssh_authorized_key", "id_ed25519.pub"),
        ("[provision]\nwifi_ssid = \"x\"\nwifi_psk = \"short\"\nwifi_country = \"DE\"\n", "provision.wifi_psk", "passphrase"),
        ("[provision]\nwifi_ssid = \"x\"\nwifi_psk = \"long enough\"\n", "provision.wifi_country", "radio stays off"),
        ("[provision]\nwifi_country = \"de\"\n", "provision.wifi_country", "needs wifi_ssid"),
        ("[provision]\nwifi_ssid = \"x\"\nwifi_country = \"Germany\"\n", "provision.wifi_country", "two capital letters"),
        ("[provision]\nenrolment_tokn = \"x\"\n", "provision.enrolment_tokn", "enrolment_token"),
        ("[provision]\ncloud_url = 5\n", "provision.cloud_url", "string"),
    ])
    func badProvisionTables(table: String, key: String, hint: String) {
        let found = issues(Self.agent + table)
        #expect(found.contains { $0.key == key && $0.message.contains(hint) && $0.line != nil && $0.file == "/boot/firmware/doorbell.toml" },
                "\(found)")
    }

    @Test func badFilesAsAWhole() {
        #expect(issues(Self.agent).first?.message.contains("no [provision] table") == true)
        #expect(issues("gateway_id = \n").first?.message.contains("not valid TOML") == true)
        // The placeholder gateway_id and a machine without serial or machine id: nothing to name it by.
        #expect(issues(Self.agent + "[provision]\nenrolment_token = \"\(Self.token)\"\n", machine: nil)
            .contains { $0.key == "provision.gateway_id" && $0.message.contains("no serial number") })
        let noURL = "gateway_id = \"gw-1\"\n[provision]\nenrolment_token = \"\(Self.token)\"\n"
        #expect(issues(noURL).contains { $0.key == "provision.cloud_url" && $0.message.contains("no [uplink] url") })
        let twoIDs = Self.good.replacingOccurrences(of: "gw-unnamed", with: "gw-a") + ""
        #expect(issues(twoIDs.replacingOccurrences(of: "[provision]\n", with: "[provision]\ngateway_id = \"gw-b\"\n"))
            .contains { $0.key == "provision.gateway_id" && $0.message.contains("keep one") })
        let inline = Self.agent + "provision2 = 1\n"
        #expect(!issues(inline).isEmpty)
        let multiline = Self.agent + "[provision]\nenrolment_token = \"\"\"\n\(Self.token)\"\"\"\n"
        #expect(issues(multiline).contains { $0.message.contains("one line of their own") })
        // A quoted key is the same key to TOML: it must not stay behind on the boot partition.
        let quoted = Self.agent + "[provision]\n\"enrolment_token\" = \"\(Self.token)\"\n"
        #expect(issues(quoted).contains { $0.message.contains("one line of their own") })
    }

    /// A mistake in the agent part is told at its line in the boot file, as `check-config` would.
    @Test func agentMistakesPointIntoTheBootFile() throws {
        let text = Self.good.replacingOccurrences(of: "level = \"info\"", with: "level = \"loud\"")
        let file = try read(text)
        guard case let .failure(error) = file.agent else { Issue.record("accepted"); return }
        let line = text.split(separator: "\n", omittingEmptySubsequences: false).firstIndex { $0.contains("loud") }.map { $0 + 1 }
        #expect(error.issues.map(\.line) == [line])
        #expect(error.issues.first?.file == "/boot/firmware/doorbell.toml" && error.issues.first?.key == "log.level")
        // Without a gateway_id line the id is put first: the lines still point at the right place.
        let prepended = text.replacingOccurrences(of: "gateway_id = \"gw-unnamed\"\n", with: "")
        guard case let .failure(error2) = try read(prepended).agent else { Issue.record("accepted"); return }
        let line2 = prepended.split(separator: "\n", omittingEmptySubsequences: false).firstIndex { $0.contains("loud") }.map { $0 + 1 }
        #expect(error2.issues.map(\.line) == [line2])
    }
}

/// The plan from any state: a fake world performs each step; a power cut after any step, then
/// running again, ends where an uninterrupted run ends, with one key and one binding per token.
struct ProvisionPlanTests {
    struct World {
        var disk = ProvisionWorld()
        var bootFile: [UInt8]
        var keysMade = 0
        /// The cloud's binding: (gateway, key generation) per token hash.
        var cloud: [String: (String, Int)] = [:]
        var cloudReachable = true
    }

    enum Stop: Equatable { case cut, problem(String), unreachable }

    /// Runs the command until done (nil), a problem, or `cutAfter` steps (the power fails).
    static func run(_ world: inout World, cutAfter: Int? = nil) -> Stop? {
        var steps = 0
        for _ in 0..<32 {
            guard let file = try? ProvisionFileReader.read(bytes: world.bootFile, file: "b", installedPath: "/etc/a.toml",
                                                           machineGatewayID: "gw-m") else { return .problem("unreadable") }
            guard let action = ProvisionPlan.next(file, world.disk, now: 100) else { return nil }
            if let cutAfter, steps == cutAfter { return .cut }
            steps += 1
            switch action {
            case let .write(target, bytes, _):
                switch target {
                case .wifi: world.disk.wifi = bytes
                case .network: world.disk.network = bytes
                case .authorizedKeys: world.disk.authorizedKeys = bytes
                case .config: world.disk.installedConfig = bytes
                case .bootFile: world.bootFile = bytes
                case .status: world.disk.status = ProvisionStatus(json: bytes)
                }
            case .createDeviceKey:
                world.keysMade += 1
                world.disk.hasDeviceKey = true
            case .enrol:
                guard world.cloudReachable else { return .unreachable }
                let token = ProvisionPlan.tokenHash(file.settings.enrolmentToken ?? "")
                if let bound = world.cloud[token], bound != (file.settings.gatewayID, world.keysMade) { return .problem("used") }
                world.cloud[token] = (file.settings.gatewayID, world.keysMade)
                // The answer's record is a step of its own: the power may fail before it.
                if let cutAfter, steps == cutAfter { return .cut }
                steps += 1
                world.disk.status = ProvisionStatus(state: .enrolled, gatewayID: file.settings.gatewayID, tokenSHA256: token, atUnixSeconds: 1)
            case let .problem(message):
                return .problem(message)
            }
        }
        Issue.record("no end within 32 steps")
        return .problem("no end")
    }

    static let files = [
        ProvisionFileTests.good,
        ProvisionFileTests.agent + "[provision]\nenrolment_token = \"\(ProvisionFileTests.token)\"\n",
        ProvisionFileTests.agent + "[provision]\nenrolment_token = \"\(ProvisionFileTests.token)\"\nwifi_ssid = \"open\"\nwifi_country = \"FR\"\n",
    ]

    @Test(arguments: files)
    func everyPowerCutResumesToTheSameEnd(text: String) throws {
        var straight = World(bootFile: Array(text.utf8))
        #expect(Self.run(&straight) == nil)
        #expect(straight.disk.status?.state == .provisioned)
        #expect(!String(decoding: straight.bootFile, as: UTF8.self).contains(ProvisionFileTests.token))
        #expect(straight.keysMade == 1 && straight.cloud.count == 1)
        if let wifi = try ProvisionFileReader.read(bytes: Array(text.utf8), file: "b", installedPath: "/etc/a.toml",
                                                   machineGatewayID: "gw-m").settings.wifi {
            #expect(straight.disk.wifi == ProvisionPlan.wpaSupplicantConf(wifi), "the network as the installer gave it, passphrase and all")
        }
        var cut = 0
        while cut < 20 {
            var world = World(bootFile: Array(text.utf8))
            let first = Self.run(&world, cutAfter: cut)
            if first == nil { break } // no step left to cut after
            #expect(first == .cut)
            #expect(Self.run(&world) == nil, "cut after step \(cut)")
            #expect(world.disk == straight.disk, "cut after step \(cut)")
            #expect(world.bootFile == straight.bootFile, "cut after step \(cut)")
            #expect(world.keysMade == 1, "one device key, whatever the cut (\(cut))")
            #expect(world.cloud.count == 1)
            cut += 1
        }
        #expect(cut >= 5, "the cuts covered the steps")
        // Run again afterwards: nothing to do.
        var again = straight
        #expect(Self.run(&again, cutAfter: 0) == nil)
        #expect(again.disk == straight.disk)
    }

    @Test func anUnreachableCloudLosesNothingAndTheNextRunFinishes() {
        var world = World(bootFile: Array(ProvisionFileTests.good.utf8))
        world.cloudReachable = false
        #expect(Self.run(&world) == .unreachable)
        #expect(world.disk.installedConfig != nil && world.disk.hasDeviceKey && world.disk.wifi != nil)
        #expect(String(decoding: world.bootFile, as: UTF8.self).contains(ProvisionFileTests.token), "the token stays until it is used")
        world.cloudReachable = true
        #expect(Self.run(&world) == nil)
        #expect(world.disk.status?.state == .provisioned)
    }

    @Test func aBadAgentPartStillMakesTheBoxReachable() {
        let bad = ProvisionFileTests.good.replacingOccurrences(of: "level = \"info\"", with: "level = \"loud\"")
        var world = World(bootFile: Array(bad.utf8))
        guard case let .problem(message) = Self.run(&world) else { Issue.record("accepted"); return }
        #expect(message.contains("log.level"))
        #expect(world.disk.wifi != nil && world.disk.authorizedKeys != nil, "Wi-Fi and SSH first")
        #expect(world.disk.installedConfig == nil && world.cloud.isEmpty)
    }

    @Test func aNewTokenLaterEnrolsAgain() {
        var world = World(bootFile: Array(ProvisionFileTests.good.utf8))
        #expect(Self.run(&world) == nil)
        let second = "dbe_" + String(repeating: "z", count: 43)
        world.bootFile = Array(ProvisionFileTests.good.replacingOccurrences(of: ProvisionFileTests.token, with: second).utf8)
        #expect(Self.run(&world) == nil)
        #expect(world.cloud.count == 2 && world.keysMade == 1)
        // No token and never enrolled: told to add one.
        var fresh = World(bootFile: Array((ProvisionFileTests.agent + "[provision]\ncloud_url = \"https://c\"\n").utf8))
        guard case let .problem(message) = Self.run(&fresh) else { Issue.record("no problem told"); return }
        #expect(message.contains("no enrolment_token"))
    }

    @Test func wifiFiles() {
        let conf = String(decoding: ProvisionPlan.wpaSupplicantConf(WiFiNetwork(ssid: "Home \"net\"", psk: "correct horse", country: "DE")), as: UTF8.self)
        #expect(conf.contains("country=DE\n") && conf.contains("\tssid=486f6d6520226e657422\n") && conf.contains("\tpsk=\"correct horse\"\n"))
        let hex = String(repeating: "AB", count: 32)
        let keyed = String(decoding: ProvisionPlan.wpaSupplicantConf(WiFiNetwork(ssid: "x", psk: hex, country: "DE")), as: UTF8.self)
        #expect(keyed.contains("\tpsk=\(hex.lowercased())\n"))
        let open = String(decoding: ProvisionPlan.wpaSupplicantConf(WiFiNetwork(ssid: "x", psk: nil, country: "DE")), as: UTF8.self)
        #expect(open.contains("key_mgmt=NONE") && !open.contains("psk"))
    }

    @Test func enrolAnswers() {
        #expect(ProvisionPlan.enrolOutcome(status: 201, body: [], url: "u") == .enrolled)
        #expect(ProvisionPlan.enrolOutcome(status: 200, body: [], url: "u") == .enrolled)
        #expect(ProvisionPlan.enrolOutcome(status: 503, body: [], url: "u") == .retry("u answered 503: HTTP 503"))
        #expect(ProvisionPlan.enrolOutcome(status: 429, body: [], url: "u") != .enrolled)
        let used = Array(#"{"error":"enrolment_token_used","reason":"make a new one"}"#.utf8)
        guard case let .refused(message) = ProvisionPlan.enrolOutcome(status: 409, body: used, url: "u") else { Issue.record("not refused"); return }
        #expect(message.contains("enrolment_token_used") && message.contains("make a new one"))
    }

    @Test func statusRoundTrips() {
        let status = ProvisionStatus(state: .problem, gatewayID: "gw-1", message: "b:3: log.level: unknown", tokenSHA256: "ab", atUnixSeconds: 9)
        #expect(ProvisionStatus(json: JSONWriter.encode(status.json)) == status)
        #expect(ProvisionStatus(json: Array("{}".utf8)) == nil)
        #expect(status.summary.contains("PROBLEM") && status.summary.contains("log.level"))
    }
}
