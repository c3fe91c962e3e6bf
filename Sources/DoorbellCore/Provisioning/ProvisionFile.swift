// The boot partition's doorbell.toml (issue #29, "first boot, no keyboard"): the board's
// agent.toml as the installer edited it, plus a [provision] table with what the first boot needs
// once — the cloud, a one-time enrolment token, optionally the gateway id, an SSH key and a Wi-Fi
// network. Pure: bytes in, what to install out; the `provision` command does the writing.
//
// The text is edited by lines, never re-serialized, so the installed agent.toml keeps the
// installer's comments and layout. Each edit is checked by parsing its result: the tree must be
// the original's minus what was removed, or the installer is told how to lay the file out.

/// A Wi-Fi network for the first boot.
public struct WiFiNetwork: Sendable, Equatable {
    public var ssid: String
    /// 8–63 printable ASCII (a passphrase) or 64 hex digits (the PSK itself); nil: an open network.
    public var psk: String?
    /// The regulatory domain (ISO 3166 alpha-2): without it a Pi keeps its Wi-Fi radio blocked.
    public var country: String?
}

/// What `[provision]` says, checked.
public struct ProvisionSettings: Sendable, Equatable {
    /// `https://host[:port]`: `POST <cloud_url>/enrol`.
    public var cloudURL: String
    public var enrolmentToken: String?
    public var gatewayID: String
    public var sshAuthorizedKey: String?
    public var wifi: WiFiNetwork?
    /// `[uplink] ca_file` as written, resolved: to report a problem when the agent part is wrong.
    public var uplinkCAFile: String?

    public var enrolURL: String { cloudURL + "/enrol" }
    public var problemURL: String { cloudURL + "/enrol/problems" }
}

/// The boot file, read: the provisioning settings, and the agent config to install — or why it
/// cannot be (the agent part may be wrong while [provision] is right: then the box can still be
/// made reachable and the problem reported).
public struct ProvisionFile: Sendable {
    public var settings: ProvisionSettings
    /// The agent.toml to install: the file without its [provision] lines and with the gateway id.
    public var agentTOML: [UInt8]
    public var agent: Result<AgentConfig, ConfigError>
    /// The boot file without the token and the Wi-Fi passphrase, to write back once they are used.
    public var scrubbedBootFile: [UInt8]
    /// Whether the boot file still holds a secret (`scrubbedBootFile` differs from it).
    public var holdsSecrets: Bool
}

public enum ProvisionFileReader {
    /// What the board profiles ship as gateway_id: read as "not set", so the machine names it.
    public static let placeholderGatewayID = "gw-unnamed"
    static let secretKeys = ["enrolment_token", "wifi_psk"]

    /// Reads the boot file. `file` names it in messages; `installedPath` is where the agent part
    /// goes (relative paths in it resolve from there, as the agent will resolve them).
    /// `machineGatewayID` is the default gateway id (`derivedGatewayID`).
    public static func read(bytes: [UInt8], file: String, installedPath: String, machineGatewayID: String?,
                            checks: ConfigFileChecks = .none) throws(ConfigError) -> ProvisionFile {
        guard case let .table(members) = try ConfigLoader.tree(bytes: bytes, file: file) else { throw ConfigError(issues: []) }
        let sink = IssueSink(file: file, locator: SourceLocator(text: String(decoding: bytes, as: UTF8.self)))
        func fail(_ message: String, key: String = "provision") -> ConfigError {
            ConfigError(issues: [ConfigIssue(file: file, key: key, message: message)])
        }
        guard case let .table(provision)? = members.first(where: { $0.0 == "provision" })?.1 else {
            throw fail("there is no [provision] table: add one with cloud_url and enrolment_token (README: Provisioning)")
        }
        let table = TableReader(provision, path: [.key("provision")], sink: sink)
        let agentGatewayID: String? = members.first(where: { $0.0 == "gateway_id" }).flatMap {
            if case let .string(s) = $0.1, s != placeholderGatewayID { return s } else { return nil }
        }
        let settings = readSettings(table, uplinkURL: uplinkURL(members), agentGatewayID: agentGatewayID,
                                    machineGatewayID: machineGatewayID)
        table.finish()
        guard var settings, sink.issues.isEmpty else { throw ConfigError(issues: sink.issues) }
        if case let .table(uplink)? = members.first(where: { $0.0 == "uplink" })?.1,
           case let .string(ca)? = uplink.first(where: { $0.0 == "ca_file" })?.1 {
            settings.uplinkCAFile = ConfigLoader.resolve(ca, baseDir: ConfigLoader.directory(of: installedPath))
        }

        // The agent part: [provision] out, gateway_id set; line numbers kept for messages.
        var lines = splitLines(bytes)
        guard let range = tableLines(named: "provision", in: lines) else {
            throw fail("write [provision] as one table with a [provision] header line (not dotted keys or an inline table)")
        }
        var agentLines = lines
        agentLines[range.lowerBound] = Array("# [provision] was taken from the boot partition by doorbell-agent provision".utf8)
        for i in range.dropFirst() { agentLines[i] = [] }
        var prepended = false
        if agentGatewayID != settings.gatewayID {
            let line = Array("gateway_id = \"\(settings.gatewayID)\"".utf8)
            if let at = topLevelKeyLine("gateway_id", in: agentLines) {
                agentLines[at] = line
            } else {
                agentLines.insert(line, at: 0)
                prepended = true
            }
        }
        let agentTOML = joinLines(agentLines)
        var expected = members.filter { $0.0 != "provision" && $0.0 != "gateway_id" }
        expected.insert(("gateway_id", .string(settings.gatewayID)), at: 0)
        guard case let .table(installed)? = try? TOMLReader.parse(bytes: agentTOML),
              sameMembers(installed, expected) else {
            throw fail("could not take [provision] out of the file: put [provision] last, its keys one per line, and gateway_id on a line of its own before any table")
        }
        let agent: Result<AgentConfig, ConfigError>
        do {
            agent = .success(try ConfigLoader.parse(bytes: agentTOML, file: installedPath, checks: checks))
        } catch {
            // Told against the boot file, the one the installer edits.
            agent = .failure(ConfigError(issues: error.issues.map { issue in
                var issue = issue
                issue.file = file
                if prepended, let line = issue.line { issue.line = line > 1 ? line - 1 : nil }
                return issue
            }))
        }

        // The boot file without its secrets, each line found by its key and the result checked.
        let holdsSecrets = provision.contains { secretKeys.contains($0.0) }
        for i in range.dropFirst() {
            guard let key = secretKeys.first(where: { startsWithKey($0, lines[i]) }) else { continue }
            lines[i] = Array("# \(key) was used by doorbell-agent provision and removed".utf8)
        }
        let scrubbedFile = joinLines(lines)
        if holdsSecrets {
            let wanted = members.map { $0.0 == "provision" ? ("provision", TOMLNode.table(provision.filter { !secretKeys.contains($0.0) })) : $0 }
            guard case let .table(left)? = try? TOMLReader.parse(bytes: scrubbedFile), sameMembers(left, wanted) else {
                throw fail("could not remove the secrets from the file: write enrolment_token and wifi_psk each on one line of their own in [provision], as key = \"value\"")
            }
        }
        return ProvisionFile(settings: settings, agentTOML: agentTOML, agent: agent, scrubbedBootFile: scrubbedFile,
                             holdsSecrets: holdsSecrets)
    }

    static func readSettings(_ t: TableReader, uplinkURL: String?, agentGatewayID: String?,
                             machineGatewayID: String?) -> ProvisionSettings? {
        var cloudURL = t.string("cloud_url", required: false)
        if let url = cloudURL {
            if !url.hasPrefix("https://") || url.dropFirst("https://".count).isEmpty || url.contains(where: { $0 == " " || $0 == "?" || $0 == "#" }) {
                t.report("cloud_url", "must be the cloud's https:// address, e.g. cloud_url = \"https://cloud.example.com\"")
                cloudURL = nil
            } else {
                while cloudURL?.hasSuffix("/") == true { cloudURL?.removeLast() }
            }
        } else if let uplink = uplinkURL, let origin = origin(of: uplink) {
            cloudURL = origin
        } else {
            t.report("cloud_url", "is required (there is no [uplink] url to take it from), e.g. cloud_url = \"https://cloud.example.com\"")
        }
        let token = t.string("enrolment_token", required: false)
        if let token, token.utf8.count > 256 || token.contains(where: { $0.isWhitespace || !$0.isASCII }) {
            t.report("enrolment_token", "must be the token exactly as the cloud gave it (dbe_…), without spaces")
        }
        var gatewayID = t.string("gateway_id", required: false)
        if let id = gatewayID {
            if !ConfigLoader.isIdentifier(id) {
                t.report("gateway_id", "must be 1-64 characters of letters, digits, '-', '_' or '.', found \"\(id)\"")
            } else if let agentGatewayID, agentGatewayID != id {
                t.report("gateway_id", "says \"\(id)\" but the top-level gateway_id says \"\(agentGatewayID)\": keep one of them")
            }
        }
        gatewayID = gatewayID ?? agentGatewayID ?? machineGatewayID
        if gatewayID == nil {
            t.report("gateway_id", "is required: this machine has no serial number or machine id to name it by")
        }
        let ssh = t.string("ssh_authorized_key", required: false)
        if let ssh, !isAuthorizedKey(ssh) {
            t.report("ssh_authorized_key", "must be one public key line as in ~/.ssh/id_ed25519.pub, e.g. \"ssh-ed25519 AAAA… you@laptop\"")
        }
        var wifi: WiFiNetwork?
        if let ssid = t.string("wifi_ssid", required: false) {
            let psk = t.string("wifi_psk", required: false)
            let country = t.string("wifi_country", required: false)
            if ssid.utf8.count > 32 || ssid.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
                t.report("wifi_ssid", "must be 1-32 bytes without control characters")
            }
            if let psk, !isPSK(psk) {
                t.report("wifi_psk", "must be the Wi-Fi passphrase (8-63 printable ASCII characters) or the 64-hex-digit key")
            }
            if let country, !(country.utf8.count == 2 && country.utf8.allSatisfy({ (65...90).contains($0) })) {
                t.report("wifi_country", "must be the two capital letters of the country (ISO 3166), e.g. wifi_country = \"DE\"")
            }
            if country == nil { t.report("wifi_country", "is required with wifi_ssid: the Wi-Fi radio stays off without it, e.g. wifi_country = \"DE\"") }
            wifi = WiFiNetwork(ssid: ssid, psk: psk, country: country)
        } else {
            for key in ["wifi_psk", "wifi_country"] where t.has(key) { t.report(key, "needs wifi_ssid, the network's name") }
            t.excuse("wifi_psk")
            t.excuse("wifi_country")
        }
        guard let cloudURL, let gatewayID else { return nil }
        return ProvisionSettings(cloudURL: cloudURL, enrolmentToken: token, gatewayID: gatewayID, sshAuthorizedKey: ssh, wifi: wifi)
    }

    /// The gateway id a machine gets when the file names none: `gw-` and the Raspberry Pi's
    /// serial number (the device tree's serial-number, leading zeros dropped: printed by
    /// `cat /proc/device-tree/serial-number`, the same after a re-flash), else the first 12
    /// digits of /etc/machine-id (made at first boot, so a re-flashed card gets a new one).
    public static func derivedGatewayID(serialNumber: [UInt8]?, machineID: [UInt8]?) -> String? {
        func hexDigits(_ bytes: [UInt8]?) -> String? {
            guard let bytes else { return nil }
            let text = String(decoding: bytes.filter { $0 != 0 && $0 != 0x0A && $0 != 0x20 }, as: UTF8.self).lowercased()
            guard !text.isEmpty, text.utf8.count <= 32, text.utf8.allSatisfy({ Hex.digit($0) != nil }) else { return nil }
            return text
        }
        if let serial = hexDigits(serialNumber) {
            let trimmed = String(serial.drop(while: { $0 == "0" }))
            if !trimmed.isEmpty { return "gw-" + trimmed }
        }
        if let id = hexDigits(machineID), id.utf8.count >= 12 { return "gw-" + String(id.prefix(12)) }
        return nil
    }

    static func uplinkURL(_ members: [(String, TOMLNode)]) -> String? {
        guard case let .table(uplink)? = members.first(where: { $0.0 == "uplink" })?.1,
              case let .string(url)? = uplink.first(where: { $0.0 == "url" })?.1 else { return nil }
        return url
    }

    /// `https://host[:port]` of a URL.
    static func origin(of url: String) -> String? {
        guard url.hasPrefix("https://") else { return nil }
        let rest = url.dropFirst("https://".count)
        let host = rest.prefix(while: { $0 != "/" })
        return host.isEmpty ? nil : "https://" + host
    }

    static func isAuthorizedKey(_ line: String) -> Bool {
        let fields = line.split(separator: " ", omittingEmptySubsequences: true)
        guard fields.count >= 2, line.utf8.count <= 8192, line.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value != 0x7F }) else { return false }
        let type = fields[0]
        let known = type.hasPrefix("ssh-") || type.hasPrefix("ecdsa-sha2-") || type.hasPrefix("sk-")
        return known && fields[1].hasPrefix("AAAA")
    }

    static func isPSK(_ psk: String) -> Bool {
        let bytes = Array(psk.utf8)
        if bytes.count == 64 { return bytes.allSatisfy { Hex.digit($0) != nil } }
        return (8...63).contains(bytes.count) && bytes.allSatisfy { (0x20...0x7E).contains($0) }
    }

    // MARK: Lines

    static func splitLines(_ bytes: [UInt8]) -> [[UInt8]] {
        bytes.split(separator: 0x0A, omittingEmptySubsequences: false).map(Array.init)
    }

    static func joinLines(_ lines: [[UInt8]]) -> [UInt8] {
        var out: [UInt8] = []
        for (i, line) in lines.enumerated() {
            if i > 0 { out.append(0x0A) }
            out.append(contentsOf: line)
        }
        return out
    }

    static func trimmed(_ line: [UInt8]) -> ArraySlice<UInt8> {
        var s = line[...]
        while let f = s.first, f == 0x20 || f == 0x09 || f == 0x0D { s.removeFirst() }
        while let l = s.last, l == 0x20 || l == 0x09 || l == 0x0D { s.removeLast() }
        return s
    }

    /// A table header line: `[name]` or `[[name]]`, maybe with a comment after it.
    static func headerName(_ line: [UInt8]) -> String? {
        let s = trimmed(line)
        guard s.first == UInt8(ascii: "[") else { return nil }
        guard let close = s.firstIndex(of: UInt8(ascii: "]")) else { return nil }
        let inner = s[s.index(after: s.startIndex)..<close].filter { $0 != UInt8(ascii: "[") }
        return String(decoding: trimmed(Array(inner)), as: UTF8.self)
    }

    /// The lines of table `name`: its header to the line before the next header. The parse
    /// check after the edit catches a header look-alike inside a multi-line value.
    static func tableLines(named name: String, in lines: [[UInt8]]) -> Range<Int>? {
        guard let start = lines.firstIndex(where: { headerName($0) == name }) else { return nil }
        var end = start + 1
        while end < lines.count, headerName(lines[end]) == nil { end += 1 }
        return start..<end
    }

    static func topLevelKeyLine(_ key: String, in lines: [[UInt8]]) -> Int? {
        for (i, line) in lines.enumerated() {
            if headerName(line) != nil { return nil }
            if startsWithKey(key, line) { return i }
        }
        return nil
    }

    static func startsWithKey(_ key: String, _ line: [UInt8]) -> Bool {
        let s = trimmed(line)
        guard s.starts(with: key.utf8) else { return false }
        let rest = trimmed(Array(s.dropFirst(key.utf8.count)))
        return rest.first == UInt8(ascii: "=")
    }

    static func sameMembers(_ a: [(String, TOMLNode)], _ b: [(String, TOMLNode)]) -> Bool {
        let sortedA = a.sorted { $0.0 < $1.0 }
        let sortedB = b.sorted { $0.0 < $1.0 }
        return sortedA.count == sortedB.count && zip(sortedA, sortedB).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
    }
}
