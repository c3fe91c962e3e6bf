// agent.toml: devices, the MQTT sink and the uplink, and the small value checks they share.

extension ConfigLoader {
    static func readDevice(_ t: TableReader, index: Int, radios: [String]) -> DeviceConfig? {
        let id = t.string("id", hint: "a short stable id used in events, e.g. id = \"front-door\"")
        if let id, !isIdentifier(id) {
            t.report("id", "must be 1-64 characters of letters, digits, '-', '_' or '.', found \"\(id)\"")
        }
        let name = t.string("name", required: false) ?? id ?? ""
        var kind = DeviceKind.doorbell
        if let s = t.string("kind", required: false) {
            if let k = DeviceKind(rawValue: s) { kind = k } else {
                t.report("kind", "unknown kind \"\(s)\"; use one of \(DeviceKind.allCases.map(\.rawValue).joined(separator: ", "))")
            }
        }
        // Default: the one radio configured (rtl433 first when both are).
        let radio = t.string("radio", required: false) ?? radios.first ?? "rtl433"
        if !knownRadios.contains(radio) {
            t.report("radio", "unknown radio \"\(radio)\"; this agent knows: \(knownRadios.joined(separator: ", "))")
        } else if !radios.contains(radio) {
            t.report("radio", "device uses radio \"\(radio)\" but [radio.\(radio)] is not configured or is disabled")
        }
        var match: RTL433Match?
        if let m = t.table("match", required: true,
                           hint: "how to recognise it in rtl_433's output, e.g. match = { code = \"0x91568F\" }") {
            var fields: [(String, MatchValue)] = []
            var badValues = false
            for (key, node) in m.members {
                guard RTL433Match.allowedKeys.contains(key) else { continue }
                m.markUsed(key)
                switch node {
                case let .int(v): fields.append((key, .integer(v)))
                case let .string(s):
                    if key == "code" {
                        guard let v = parseCode(s) else {
                            badValues = true
                            m.report(key, "\"\(s)\" is not a hex code; write the raw button code like code = \"0x91568F\"")
                            continue
                        }
                        fields.append((key, .integer(v)))
                    } else {
                        fields.append((key, .text(s)))
                    }
                default:
                    badValues = true
                    m.report(key, "must be a string or an integer, found \(node.typeName)")
                }
            }
            m.finish()
            if badValues {
                // Already reported; a second message about the same line would only distract.
            } else if fields.isEmpty {
                t.report("match", "needs at least one of \(RTL433Match.allowedKeys.filter { $0 != "model" }.joined(separator: ", "))")
            } else if fields.allSatisfy({ $0.0 == "model" }) {
                t.report("match", "model alone is not enough: rtl_433 mislabels EV1527 doorbells. Add the raw code, e.g. code = \"0x91568F\"")
            } else {
                match = RTL433Match(fields: fields)
            }
        }
        var bindkey: [UInt8]?
        if let k = t.string("bindkey", required: false) {
            let out = Hex.decode(k) ?? []
            if out.count == 16 && radio == "ble" { bindkey = out } else if radio != "ble" {
                t.report("bindkey", "only BTHome devices (radio = \"ble\") have a bindkey")
            } else {
                t.report("bindkey", "must be the device's 16-byte key as 32 hex digits (from its app or firmware)")
            }
        }
        if radio == "ble", let match, match.fields.contains(where: { $0.0 != "address" }) || !match.fields.contains(where: { $0.0 == "address" }) {
            t.report("match", "a BLE button is matched by its address only: match = { address = \"C0:11:22:33:44:02\" }")
        }
        if let match, let a = match.fields.first(where: { $0.0 == "address" }) {
            if case let .text(s) = a.1, BLEAdvertisingReport.parse(address: s) != nil {} else {
                t.report("match", "address must look like \"C0:11:22:33:44:02\"")
            }
        }
        guard let id, var match else { return nil }
        // Addresses compare as printed: upper case.
        match.fields = match.fields.map { $0.0 == "address" ? ($0.0, { if case let .text(s) = $0.1 { return .text(s.uppercased()) }; return $0.1 }($0)) : $0 }
        var d = DeviceConfig(id: id, name: name, kind: kind, radio: radio, match: match)
        d.bindkey = bindkey
        return d
    }

    /// MQTT topic levels we build from config text: no wildcards, separators or control bytes.
    static func isTopicSafe(_ s: String) -> Bool {
        !s.isEmpty && s.utf8.allSatisfy { $0 > 0x20 && $0 != UInt8(ascii: "+") && $0 != UInt8(ascii: "#") && $0 != 0x7F }
    }

    static func readMQTT(_ t: TableReader, gatewayID: String, baseDir: String, checks: ConfigFileChecks) -> MQTTSettings? {
        let host = t.string("host", hint: "the broker, e.g. host = \"homeassistant.local\" (the Mosquitto add-on) or \"127.0.0.1\"")
        if let host, host.isEmpty || host.contains(" ") || host.contains("/") {
            t.report("host", "give a host name or address without scheme or port, e.g. \"192.168.1.10\"; found \"\(host)\"")
        }
        var m = MQTTSettings(host: host ?? "", clientID: "doorbell-agent-" + gatewayID)
        if let v = t.string("protocol", required: false) {
            if let p = MQTTProtocolVersion(rawValue: v) { m.protocolVersion = p } else {
                t.report("protocol", "must be \"3.1.1\" or \"5\"; found \"\(v)\"")
            }
        }
        if let v = t.string("client_id", required: false) {
            if v.isEmpty || v.utf8.count > 65_535 { t.report("client_id", "must not be empty") } else { m.clientID = v }
        }
        if let v = t.string("username", required: false) { m.username = v }
        for (key, keyPath, what) in [("password_file", \MQTTSettings.passwordFile, "the broker password (one line; keep it 0600)"),
                                     ("ca_file", \MQTTSettings.caFile, "the PEM file of the CA that signed the broker's certificate"),
                                     ("cert_file", \MQTTSettings.certFile, "the gateway's PEM client certificate"),
                                     ("key_file", \MQTTSettings.keyFile, "the gateway's PEM client key")] {
            if let s = t.string(key, required: false) {
                let p = resolve(s, baseDir: baseDir)
                m[keyPath: keyPath] = p
                if !checks.isReadableFile(p) { t.report(key, "cannot read \(p): give \(what)") }
            }
        }
        if t.has("password") {
            t.markUsed("password")
            t.report("password", "is not read from the config: put the password in a file of its own (0600) and set password_file")
        }
        if m.passwordFile != nil && m.username == nil { t.report("password_file", "needs username too") }
        if (m.certFile == nil) != (m.keyFile == nil) {
            t.report(m.certFile == nil ? "cert_file" : "key_file", "cert_file and key_file go together (TLS client authentication)")
        }
        if m.certFile != nil && m.caFile == nil { t.report("ca_file", "is required with a client certificate: TLS to the broker needs the CA that signed it") }
        m.port = m.caFile == nil ? 1883 : 8883
        if let v = t.int("port", in: 1...65_535) { m.port = v }
        for (key, keyPath) in [("topic_prefix", \MQTTSettings.topicPrefix), ("discovery_prefix", \MQTTSettings.discoveryPrefix)] {
            if let v = t.string(key, required: false) {
                let levels = v.split(separator: "/", omittingEmptySubsequences: false)
                if levels.isEmpty || !levels.allSatisfy({ isTopicSafe(String($0)) }) {
                    t.report(key, "must be topic levels without spaces, + or #, and no empty level, e.g. \"doorbell\" or \"house/doorbell\"; found \"\(v)\"")
                } else {
                    m[keyPath: keyPath] = v
                }
            }
        }
        if let b = t.bool("discovery") { m.discovery = b }
        if let v = t.int("wait_for_home_assistant_s", in: 0...3_600) { m.waitForHomeAssistantSeconds = v }
        if let v = t.int("keepalive_s", in: 5...3_600) { m.keepaliveSeconds = v }
        if let v = t.int("max_in_flight", in: 1...100) { m.maxInFlight = v }
        if let v = t.int("retry_initial_ms", in: 100...600_000) { m.retryInitialMs = v }
        if let v = t.int("retry_max_ms", in: 1_000...3_600_000) { m.retryMaxMs = v }
        if m.retryMaxMs < m.retryInitialMs { t.report("retry_max_ms", "must be at least retry_initial_ms (\(m.retryInitialMs))") }
        return host == nil ? nil : m
    }

    static func readUplink(_ t: TableReader, baseDir: String, checks: ConfigFileChecks) -> UplinkSettings? {
        let url = t.string("url", hint: "the cloud endpoint, e.g. url = \"https://cloud.example.com/events\"")
        if let url {
            if !url.hasPrefix("https://") {
                t.report("url", "must start with https:// (events are signed, but must also travel encrypted); found \"\(url)\"")
            } else if url.count <= "https://".count || url.contains(" ") {
                t.report("url", "is not a valid URL: \"\(url)\"")
            }
        }
        var u = UplinkSettings(url: url ?? "")
        if let s = t.string("ca_file", required: false) {
            let p = resolve(s, baseDir: baseDir)
            u.caFile = p
            if !checks.isReadableFile(p) {
                t.report("ca_file", "cannot read CA file \(p). Give the PEM file of the CA that signed the cloud's certificate, or remove ca_file to use the system CAs.")
            }
        }
        if let s = t.string("hmac_secret_file", required: false) {
            let p = resolve(s, baseDir: baseDir)
            u.hmacSecretFile = p
            if !checks.isReadableFile(p) {
                t.report("hmac_secret_file", "cannot read \(p). It must hold the gateway's whsec_... secret from enrollment.")
            }
        }
        if let b = t.bool("sign_ed25519") { u.signEd25519 = b }
        if u.hmacSecretFile == nil && !u.signEd25519 {
            t.report("", "no signing key: set hmac_secret_file or sign_ed25519 = true; the cloud rejects unsigned events")
        }
        if let v = t.int("connect_timeout_ms", in: 100...120_000) { u.connectTimeoutMs = v }
        if let v = t.int("request_timeout_ms", in: 500...600_000) { u.requestTimeoutMs = v }
        if let v = t.int("retry_initial_ms", in: 10...600_000) { u.retryInitialMs = v }
        if let v = t.int("retry_max_ms", in: 100...86_400_000) { u.retryMaxMs = v }
        if let v = t.int("max_in_flight", in: 1...64) { u.maxInFlight = v }
        if let v = t.int("park_after_failures", in: 3...1_000) { u.parkAfterFailures = v }
        if let v = t.int("heartbeat_interval_s", in: 0...86_400) {
            if (1..<60).contains(v) {
                t.report("heartbeat_interval_s", "must be 0 (no heartbeats) or 60 to 86400 seconds; found \(v) (900 is a heartbeat every 15 minutes, as the field images set it)")
            }
            u.heartbeatIntervalSeconds = v
        }
        if u.retryMaxMs < u.retryInitialMs { t.report("retry_max_ms", "must be at least retry_initial_ms (\(u.retryInitialMs))") }
        if let pin = t.string("pinned_public_key", required: false) {
            let pins = pin.split(separator: ";")
            if pins.isEmpty || !pins.allSatisfy({ $0.hasPrefix("sha256//") && $0.count > 8 }) {
                t.report("pinned_public_key", "must be sha256//<base64 of the SPKI hash>, several separated by ';' (openssl x509 -pubkey -noout -in cert.pem | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64)")
            }
            u.pinnedPublicKey = pin
        }
        for (key, keyPath) in [("client_cert_file", \UplinkSettings.clientCertFile), ("client_key_file", \UplinkSettings.clientKeyFile)] {
            if let s = t.string(key, required: false) {
                let p = resolve(s, baseDir: baseDir)
                u[keyPath: keyPath] = p
                if !checks.isReadableFile(p) { t.report(key, "cannot read \(p); mTLS needs the gateway's PEM certificate and key") }
            }
        }
        if (u.clientCertFile == nil) != (u.clientKeyFile == nil) {
            t.report(u.clientCertFile == nil ? "client_cert_file" : "client_key_file", "client_cert_file and client_key_file go together (mTLS)")
        }
        if let proxy = t.string("proxy", required: false) {
            if !["http://", "https://", "socks5://", "socks5h://"].contains(where: { proxy.hasPrefix($0) }) {
                t.report("proxy", "must start with http://, https://, socks5:// or socks5h://; found \"\(proxy)\"")
            }
            u.proxy = proxy
        }
        return url == nil ? nil : u
    }

    /// "0x91568F", "91568f" and "9524879"-as-hex all name a code; hex is how codes are printed.
    public static func parseCode(_ text: String) -> Int64? {
        var s = Substring(text.trimmingCharacters(in: " "))
        if s.hasPrefix("0x") || s.hasPrefix("0X") { s = s.dropFirst(2) }
        guard !s.isEmpty, s.count <= 15 else { return nil }
        return Int64(s, radix: 16)
    }

    static func isIdentifier(_ s: String) -> Bool {
        !s.isEmpty && s.utf8.count <= 64 && s.unicodeScalars.allSatisfy {
            ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || "-_.".unicodeScalars.contains($0)
        }
    }
}

extension MQTTSettings {
    /// What `check-config` says about a password file its group or other users may open (`mode`:
    /// its st_mode); nil when only its owner may. The agent still reads it: a warning, with the fix.
    public static func passwordFileWarning(path: String, mode: UInt32) -> String? {
        guard mode & 0o077 != 0 else { return nil }
        let octal = String(mode & 0o777, radix: 8)
        let who = mode & 0o007 != 0 ? "every user of this machine" : "its group"
        return "warning: mqtt.password_file \(path) is open to \(who) (mode 0\(octal)); the broker password should be the agent's alone: chmod 600 \(path) and chown it to the user the agent runs as"
    }
}
