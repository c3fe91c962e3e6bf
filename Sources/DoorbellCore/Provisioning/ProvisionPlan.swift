// Which provisioning step comes next, from what is already done: the `provision` command asks,
// performs the one step (each a durable write or the enrolment call), reads the world again and
// asks again. A power cut between any two steps leaves a state this function continues from, so
// the first-boot unit may simply run the command again (tested as a property: every cut, same
// end, one enrolment per token).

/// `provisioning.json` in the state directory: what `agentctl status` shows, and the record that
/// the token in the boot file was already spent (its SHA-256, never the token).
public struct ProvisionStatus: Sendable, Equatable {
    public enum State: String, Sendable {
        /// Enrolled with the cloud; the boot file may still hold the token until it is rewritten.
        case enrolled
        /// Done: config installed, enrolled, secrets gone from the boot partition.
        case provisioned
        /// The cloud could not be reached yet; the unit retries.
        case waiting
        /// Something only the installer can fix (`message` says what).
        case problem
    }

    public var state: State
    public var gatewayID: String
    public var message: String
    public var tokenSHA256: String?
    public var atUnixSeconds: Int64

    public init(state: State, gatewayID: String, message: String = "", tokenSHA256: String? = nil, atUnixSeconds: Int64) {
        self.state = state
        self.gatewayID = gatewayID
        self.message = message
        self.tokenSHA256 = tokenSHA256
        self.atUnixSeconds = atUnixSeconds
    }

    public var json: JSONValue {
        .object([("state", .string(state.rawValue)), ("gateway_id", .string(gatewayID)), ("message", .string(message)),
                 ("token_sha256", tokenSHA256.map(JSONValue.string) ?? .null), ("at", .number(Double(atUnixSeconds)))])
    }

    public init?(json bytes: [UInt8]) {
        guard let value = try? JSONReader.parse(bytes: bytes), let state = value["state"]?.stringValue.flatMap(State.init(rawValue:)),
              let gatewayID = value["gateway_id"]?.stringValue else { return nil }
        self.init(state: state, gatewayID: gatewayID, message: value["message"]?.stringValue ?? "",
                  tokenSHA256: value["token_sha256"]?.stringValue, atUnixSeconds: value["at"]?.intValue ?? 0)
    }

    /// One line for `agentctl status`.
    public var summary: String {
        switch state {
        case .provisioned: return "provisioning: done, gateway \(gatewayID)"
        case .enrolled: return "provisioning: enrolled as \(gatewayID); the boot partition still holds the token (doorbell-agent provision finishes it)"
        case .waiting: return "provisioning: waiting for the cloud (\(message))"
        case .problem: return "provisioning: PROBLEM — \(message)"
        }
    }
}

/// Where each file goes: flags of the command (tests give temporary directories).
public struct ProvisionPaths: Sendable, Equatable {
    public var bootFile: String
    public var config: String
    public var stateDir: String
    public var authorizedKeys: String
    public var wifiDir: String
    public var networkDir: String

    public init(bootDir: String, configDir: String = "/etc/doorbell-agent", stateDir: String = "/var/lib/doorbell-agent",
                authorizedKeys: String = "/root/.ssh/authorized_keys", wifiDir: String = "/etc/wpa_supplicant",
                networkDir: String = "/etc/systemd/network") {
        bootFile = bootDir + "/doorbell.toml"
        config = configDir + "/agent.toml"
        self.stateDir = stateDir
        self.authorizedKeys = authorizedKeys
        self.wifiDir = wifiDir
        self.networkDir = networkDir
    }

    public var status: String { stateDir + "/provisioning.json" }
    /// wpa_supplicant@wlan0.service reads this (Debian's wpa_supplicant package).
    public var wifi: String { wifiDir + "/wpa_supplicant-wlan0.conf" }
    /// systemd-networkd: DHCP on wlan0 once wpa_supplicant has associated.
    public var network: String { networkDir + "/25-doorbell-wlan0.network" }
}

/// What is on disk now, as the command read it.
public struct ProvisionWorld: Sendable, Equatable {
    public var installedConfig: [UInt8]?
    public var hasDeviceKey: Bool
    public var status: ProvisionStatus?
    public var authorizedKeys: [UInt8]?
    public var wifi: [UInt8]?
    public var network: [UInt8]?

    public init(installedConfig: [UInt8]? = nil, hasDeviceKey: Bool = false, status: ProvisionStatus? = nil,
                authorizedKeys: [UInt8]? = nil, wifi: [UInt8]? = nil, network: [UInt8]? = nil) {
        self.installedConfig = installedConfig
        self.hasDeviceKey = hasDeviceKey
        self.status = status
        self.authorizedKeys = authorizedKeys
        self.wifi = wifi
        self.network = network
    }
}

public enum ProvisionTarget: String, Sendable, Equatable {
    case wifi, network, authorizedKeys, config, bootFile, status
}

public enum ProvisionAction: Sendable, Equatable {
    /// Replace the whole file durably (temp, fsync, rename) with this mode.
    case write(ProvisionTarget, [UInt8], mode: UInt32)
    case createDeviceKey
    /// POST the token and the device key to `settings.enrolURL`; on success record `.enrolled`.
    case enrol
    /// Stop: the installer must fix this (status `.problem`, exit non-zero).
    case problem(String)
}

public enum ProvisionPlan {
    /// The next step, or nil when everything is done.
    public static func next(_ file: ProvisionFile, _ world: ProvisionWorld, now: Int64) -> ProvisionAction? {
        let settings = file.settings
        // Done before and nothing new on the boot partition: the installed config may since have
        // been edited by hand, so it is left alone.
        if !file.holdsSecrets, let status = world.status, status.state == .provisioned { return nil }
        // Once the passphrase has been used and removed from the boot file, the file written
        // with it stands: the SSID alone must not turn it into an open network.
        if let wifi = settings.wifi, wifi.psk != nil || world.wifi == nil {
            let conf = wpaSupplicantConf(wifi)
            if world.wifi != conf { return .write(.wifi, conf, mode: 0o600) }
            if world.network != networkdFile { return .write(.network, networkdFile, mode: 0o644) }
        }
        if let key = settings.sshAuthorizedKey {
            let current = world.authorizedKeys ?? []
            if !ProvisionFileReader.splitLines(current).contains(where: { ProvisionFileReader.trimmed($0).elementsEqual(key.utf8) }) {
                var keys = current
                if let last = keys.last, last != 0x0A { keys.append(0x0A) }
                keys.append(contentsOf: Array(key.utf8) + [0x0A])
                return .write(.authorizedKeys, keys, mode: 0o600)
            }
        }
        if case let .failure(error) = file.agent { return .problem(error.description) }
        if world.installedConfig != file.agentTOML { return .write(.config, file.agentTOML, mode: 0o644) }
        if !world.hasDeviceKey { return .createDeviceKey }
        let spent = world.status.map { $0.state == .enrolled || $0.state == .provisioned } ?? false
        if let token = settings.enrolmentToken {
            if !(spent && world.status?.tokenSHA256 == tokenHash(token) && world.status?.gatewayID == settings.gatewayID) {
                return .enrol
            }
        } else if !spent || world.status?.gatewayID != settings.gatewayID {
            return .problem("\(file.settings.gatewayID) is not enrolled and [provision] has no enrolment_token: make one in the app (POST /enrolment-tokens) and add enrolment_token = \"dbe_…\" to doorbell.toml")
        }
        if file.holdsSecrets { return .write(.bootFile, file.scrubbedBootFile, mode: 0o600) }
        if world.status?.state != .provisioned {
            let done = ProvisionStatus(state: .provisioned, gatewayID: settings.gatewayID, tokenSHA256: world.status?.tokenSHA256,
                                       atUnixSeconds: now)
            return .write(.status, JSONWriter.encode(done.json), mode: 0o644)
        }
        return nil
    }

    public static func tokenHash(_ token: String) -> String {
        Hex.encode(SHA256.hash(Array(token.utf8)))
    }

    /// The enrolment request's body.
    public static func enrolBody(_ settings: ProvisionSettings, publicKey: String) -> [UInt8] {
        JSONWriter.encode(.object([("token", .string(settings.enrolmentToken ?? "")), ("gateway_id", .string(settings.gatewayID)),
                                   ("public_key", .string(publicKey))]))
    }

    /// The problem report's body (`POST /enrol/problems`), cut to what the cloud keeps.
    public static func problemBody(_ settings: ProvisionSettings, problem: String) -> [UInt8] {
        JSONWriter.encode(.object([("token", .string(settings.enrolmentToken ?? "")), ("gateway_id", .string(settings.gatewayID)),
                                   ("problem", .string(String(problem.prefix(2000))))]))
    }

    public enum EnrolOutcome: Sendable, Equatable {
        case enrolled
        /// Try again later (exit 75): the network, the cloud's overload or its storage.
        case retry(String)
        /// A new token or another gateway id is needed.
        case refused(String)
    }

    /// What the cloud's answer to `POST /enrol` means for the gateway.
    public static func enrolOutcome(status: Int, body: [UInt8], url: String) -> EnrolOutcome {
        if status == 200 || status == 201 { return .enrolled }
        let answer = try? JSONReader.parse(bytes: body)
        let reason = answer?["reason"]?.stringValue ?? "HTTP \(status)"
        if status == 429 || status >= 500 || status == 408 { return .retry("\(url) answered \(status): \(reason)") }
        return .refused("the cloud refused the enrolment (\(status) \(answer?["error"]?.stringValue ?? "")): \(reason)")
    }

    static func wpaSupplicantConf(_ wifi: WiFiNetwork) -> [UInt8] {
        var lines = [
            "# Written by doorbell-agent provision from the boot partition's doorbell.toml.",
            "ctrl_interface=DIR=/run/wpa_supplicant GROUP=netdev",
            "update_config=0",
            "country=\(wifi.country ?? "")",
            "",
            "network={",
            // Hex: any SSID bytes, no quoting rules to get wrong.
            "\tssid=\(Hex.encode(Array(wifi.ssid.utf8)))",
            "\tscan_ssid=1",
        ]
        if let psk = wifi.psk {
            lines.append("\tkey_mgmt=WPA-PSK")
            lines.append(psk.utf8.count == 64 ? "\tpsk=\(psk.lowercased())" : "\tpsk=\"\(psk)\"")
        } else {
            lines.append("\tkey_mgmt=NONE")
        }
        lines.append("}")
        return Array((lines.joined(separator: "\n") + "\n").utf8)
    }

    static let networkdFile = Array("""
        # Written by doorbell-agent provision: DHCP on the Wi-Fi interface wpa_supplicant@wlan0 brings up.
        [Match]
        Name=wlan0

        [Network]
        DHCP=yes

        """.utf8)
}
