import DoorbellCore
import DoorbellRuntime
import Glibc

// `doorbell-agent provision --boot-dir DIR`: the first-boot shell around `ProvisionPlan`. It reads
// the world, performs the one step the plan names (a durable file write, the device key, or the
// enrolment call) and asks again, at most `maxSteps` times. Exit codes (sysexits.h): 0 done, 75
// not reachable yet (the unit retries), 78 the file must be fixed, 65 the cloud refused the
// token, 73 a file could not be written, 66 no boot file.
extension DoorbellAgentCommand {
    struct Provision {
        let paths: ProvisionPaths
        /// Every step writes or enrols once; more than this means the plan does not converge.
        static let maxSteps = 16
        /// The service user that must own the state it will read (the unit runs this as root).
        static let serviceUser = "doorbell-agent"

        func run() throws(AgentExit) {
            let previous = readFile(paths.status).flatMap(ProvisionStatus.init(json:))
            guard let bytes = readFile(paths.bootFile) else {
                if previous?.state == .provisioned { return } // the boot file was removed after provisioning: nothing to do
                throw fail("cannot read \(paths.bootFile): \(errnoText()). Put doorbell.toml (the board's agent.toml with a [provision] table) on the boot partition",
                           gatewayID: previous?.gatewayID ?? "", code: 66)
            }
            let machine = ProvisionFileReader.derivedGatewayID(serialNumber: readFile("/proc/device-tree/serial-number", maxBytes: 64),
                                                               machineID: readFile("/etc/machine-id", maxBytes: 64))
            var bootFile = bytes
            var gatewayID = previous?.gatewayID ?? machine ?? ""
            for _ in 0..<Self.maxSteps {
                // Read again at every step: the last ones rewrite the boot file itself.
                let file: ProvisionFile
                do {
                    file = try ProvisionFileReader.read(bytes: bootFile, file: paths.bootFile, installedPath: paths.config,
                                                        machineGatewayID: machine,
                                                        checks: ConfigFileChecks(isReadableFile: { isReadableFile($0) }))
                } catch {
                    throw fail(error.description, gatewayID: gatewayID, code: 78)
                }
                gatewayID = file.settings.gatewayID
                guard let action = ProvisionPlan.next(file, read(file), now: Clocks.wallMicros() / 1_000_000) else {
                    print("\(paths.bootFile): provisioned — gateway \(gatewayID), cloud \(file.settings.cloudURL)")
                    return
                }
                switch action {
                case let .write(target, content, mode):
                    try write(content, to: target, mode: mode, gatewayID: gatewayID)
                    if target == .bootFile { bootFile = readFile(paths.bootFile) ?? content }
                case .createDeviceKey:
                    try createKey(file, gatewayID: gatewayID)
                case .enrol:
                    try enrol(file)
                case let .problem(message):
                    report(message, file)
                    throw fail(message, gatewayID: gatewayID, code: 78)
                }
            }
            throw fail("provisioning did not finish within \(Self.maxSteps) steps (a file write that does not stick?); see the messages above",
                       gatewayID: gatewayID, code: 73)
        }

        func read(_ file: ProvisionFile) -> ProvisionWorld {
            var keyPath = PathSettings.defaultStateDir + "/device.key"
            if case let .success(config) = file.agent { keyPath = config.paths.deviceKeyPath }
            return ProvisionWorld(installedConfig: readFile(paths.config), hasDeviceKey: isReadableFile(keyPath),
                                  status: readFile(paths.status).flatMap(ProvisionStatus.init(json:)),
                                  authorizedKeys: readFile(paths.authorizedKeys), wifi: readFile(paths.wifi), network: readFile(paths.network))
        }

        func path(_ target: ProvisionTarget) -> String {
            switch target {
            case .wifi: return paths.wifi
            case .network: return paths.network
            case .authorizedKeys: return paths.authorizedKeys
            case .config: return paths.config
            case .bootFile: return paths.bootFile
            case .status: return paths.status
            }
        }

        func write(_ content: [UInt8], to target: ProvisionTarget, mode: UInt32, gatewayID: String) throws(AgentExit) {
            let file = path(target)
            let dir = ConfigLoader.directory(of: file)
            // ~/.ssh must be the owner's alone or sshd ignores the keys in it.
            guard makeDirectories(dir, mode: target == .authorizedKeys ? 0o700 : 0o755) else {
                throw fail("cannot create \(dir): \(errnoText()). provision runs as root from the first-boot unit", gatewayID: gatewayID, code: 73)
            }
            if let failure = DurableFile.replace(file, with: content, mode: mode_t(mode)) {
                throw fail("cannot write \(failure.path): \(failure.reason)" + (target == .bootFile ? ". Is the boot partition mounted read-write?" : ""),
                           gatewayID: gatewayID, code: 73)
            }
            if target == .status { handOver(file) }
        }

        func createKey(_ file: ProvisionFile, gatewayID: String) throws(AgentExit) {
            guard case let .success(config) = file.agent else { return }
            do {
                try Agent.prepareStateDir(config.paths.stateDir)
                _ = try DeviceKeyStore.loadOrCreate(path: config.paths.deviceKeyPath, log: Logger(level: .warning))
            } catch let error as AgentStartError {
                throw fail(error.description, gatewayID: gatewayID, code: error.exitCode)
            } catch {
                throw fail("\(error)", gatewayID: gatewayID, code: 73)
            }
            handOver(config.paths.stateDir)
            handOver(config.paths.deviceKeyPath)
        }

        func enrol(_ file: ProvisionFile) throws(AgentExit) {
            let settings = file.settings
            guard case let .success(config) = file.agent, let token = settings.enrolmentToken else { return }
            let loaded: Ed25519SigningKey?
            do {
                loaded = try DeviceKeyStore.load(path: config.paths.deviceKeyPath)
            } catch {
                throw fail(error.description, gatewayID: settings.gatewayID, code: 73)
            }
            guard let key = loaded else {
                throw fail("the device key \(config.paths.deviceKeyPath) vanished; run provision again", gatewayID: settings.gatewayID, code: 73)
            }
            let body = ProvisionPlan.enrolBody(settings, publicKey: "ed25519:" + DeviceKeyStore.publicKeyBase64(key.publicKey))
            switch post(body, to: settings.enrolURL, config) {
            case let .failure(error):
                throw waiting("cannot reach the cloud to enrol: \(error.message)", gatewayID: settings.gatewayID)
            case let .success(response):
                switch ProvisionPlan.enrolOutcome(status: response.status, body: response.body, url: settings.enrolURL) {
                case .enrolled:
                    let status = ProvisionStatus(state: .enrolled, gatewayID: settings.gatewayID, tokenSHA256: ProvisionPlan.tokenHash(token),
                                                 atUnixSeconds: Clocks.wallMicros() / 1_000_000)
                    try write(JSONWriter.encode(status.json), to: .status, mode: 0o644, gatewayID: settings.gatewayID)
                case let .retry(reason):
                    throw waiting(reason, gatewayID: settings.gatewayID)
                case let .refused(reason):
                    throw fail(reason + ". Put a new enrolment_token in doorbell.toml's [provision]", gatewayID: settings.gatewayID, code: 65)
                }
            }
        }

        /// The agent's own HTTPS client, with the uplink's CA, pin, client certificate and proxy.
        func post(_ body: [UInt8], to url: String, _ config: AgentConfig?) -> Result<HTTPResponse, TransportError> {
            let uplink = config?.uplink
            let client: HTTPSClient
            do {
                client = try HTTPSClient(options: HTTPSClientOptions(
                    url: url, caFile: uplink?.caFile, connectTimeoutMs: uplink?.connectTimeoutMs ?? 5_000,
                    requestTimeoutMs: uplink?.requestTimeoutMs ?? 15_000, userAgent: "doorbell-agent/\(AgentVersion.current) provision",
                    pinnedPublicKey: uplink?.pinnedPublicKey, clientCertFile: uplink?.clientCertFile,
                    clientKeyFile: uplink?.clientKeyFile, proxy: uplink?.proxy))
            } catch {
                return .failure(error)
            }
            return client.post(body: body, headers: [("Content-Type", "application/json")])
        }

        /// Best effort: a bad file told to the cloud when the network works (and the token is there
        /// to vouch for the gateway). The console and `agentctl status` have it anyway.
        func report(_ problem: String, _ file: ProvisionFile) {
            guard file.settings.enrolmentToken != nil else { return }
            // The agent part is what is wrong, so its TLS settings come from [uplink] ca_file as written.
            var config = AgentConfig(gatewayID: file.settings.gatewayID)
            config.uplink = UplinkSettings(url: file.settings.problemURL, caFile: file.settings.uplinkCAFile)
            if case let .failure(error) = post(ProvisionPlan.problemBody(file.settings, problem: problem), to: file.settings.problemURL, config) {
                printError("doorbell-agent provision: the problem could not be reported to the cloud: \(error.message)")
            }
        }

        /// Records and prints a problem; returns the exit to throw.
        func fail(_ message: String, gatewayID: String, code: Int32) -> AgentExit {
            record(ProvisionStatus(state: .problem, gatewayID: gatewayID, message: message, atUnixSeconds: Clocks.wallMicros() / 1_000_000))
            printError("doorbell-agent provision: \(message)")
            return AgentExit(code)
        }

        /// The cloud cannot be reached yet: exit 75 so the unit retries; what was done stays done.
        func waiting(_ message: String, gatewayID: String) -> AgentExit {
            record(ProvisionStatus(state: .waiting, gatewayID: gatewayID, message: message, atUnixSeconds: Clocks.wallMicros() / 1_000_000))
            printError("doorbell-agent provision: \(message) — will retry")
            return AgentExit(75)
        }

        /// The status file, keeping what an earlier run recorded about the token: a problem after
        /// enrolling must not make the next run enrol again.
        func record(_ status: ProvisionStatus) {
            var status = status
            if let previous = readFile(paths.status).flatMap(ProvisionStatus.init(json:)),
               previous.state == .enrolled || previous.state == .provisioned {
                if status.state == .waiting { return }
                status.tokenSHA256 = previous.tokenSHA256
            }
            guard makeDirectories(paths.stateDir, mode: 0o700),
                  DurableFile.replace(paths.status, with: JSONWriter.encode(status.json), mode: 0o644) == nil else {
                printError("doorbell-agent provision: cannot write \(paths.status): \(errnoText())")
                return
            }
            handOver(paths.stateDir)
            handOver(paths.status)
        }

        /// Running as root (the first-boot unit): state the agent reads belongs to its user.
        func handOver(_ path: String) {
            guard geteuid() == 0, let user = getpwnam(Self.serviceUser) else { return }
            _ = chown(path, user.pointee.pw_uid, user.pointee.pw_gid)
        }

        func makeDirectories(_ dir: String, mode: mode_t) -> Bool {
            var st = stat()
            if stat(dir, &st) == 0 { return (st.st_mode & S_IFMT) == S_IFDIR }
            let parent = ConfigLoader.directory(of: dir)
            if parent != dir, !makeDirectories(parent, mode: 0o755) { return false }
            return mkdir(dir, mode) == 0 || errno == EEXIST
        }
    }
}
