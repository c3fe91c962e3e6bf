import ArgumentParser
import CloudCore
import CloudPush
import CloudServer
import CloudStore
import Foundation
import Logging
import NIOSSL
import ServiceLifecycle

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Receive, verify, deduplicate and store events over HTTPS; push them to phones via APNs.",
        discussion: """
            Standard output carries one line per outcome, flushed at once:
              LISTENING https://HOST:PORT
              EVENT JSON  (id, sequence, type, gateway_id, device, occurred_at, verified)
              DUPLICATE ID
              REJECTED CODE id=WEBHOOK-ID|- REASON
              UNAVAILABLE N/TOTAL   (only with --fail-first)
              PUSH EVENT-ID TOKEN8… STATE STATUS|- REASON|- [pruned]   (one per APNs attempt)
            Logs go to standard error.
            """)

    @Option(help: "Address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "Port to listen on; 0 picks a free one (see --ready-file).")
    var port = 8443

    @Option(help: ArgumentHelp("Once listening, write {\"port\": N} to this file (atomically).", valueName: "path"))
    var readyFile: String?

    @Option(help: ArgumentHelp("Server certificate chain, PEM (leaf first).", valueName: "pem"))
    var tlsCert: String

    @Option(help: ArgumentHelp("Server private key, PEM.", valueName: "pem"))
    var tlsKey: String

    @Option(help: ArgumentHelp(
        "SQLite database file (WAL; created if missing), or postgres://user@host/db for PostgreSQL.",
        valueName: "path|url"))
    var db: String

    @Option(help: ArgumentHelp(
        "File holding a whsec_<base64> secret (v1) accepted for gateways that are not enrolled.", valueName: "file"))
    var gatewaySecret: String?

    @Option(help: ArgumentHelp(
        "File holding the gateway's Ed25519 public key, base64 of 32 raw bytes, optionally prefixed ed25519: (v1a signatures).",
        valueName: "file"))
    var gatewayPublicKey: String?

    @Option(help: ArgumentHelp("File holding the admin token that POST /accounts requires.", valueName: "file"))
    var adminTokenFile: String?

    @Option(help: ArgumentHelp("APNs signing key, Apple's AuthKey_<KEYID>.p8. Without it pushes are queued, not sent.",
                               valueName: "p8"))
    var apnsKey: String?

    @Option(help: "The key's 10-character Key ID.")
    var apnsKeyID: String?

    @Option(help: "Your 10-character Apple Team ID.")
    var apnsTeamID: String?

    @Option(help: ArgumentHelp("App bundle id phones may register (the apns-topic); repeat for several.", valueName: "bundle-id"))
    var apnsTopic: [String] = []

    @Option(help: ArgumentHelp("APNs production base URL.", valueName: "url"))
    var apnsProductionURL = "https://api.push.apple.com"

    @Option(help: ArgumentHelp("APNs sandbox (development) base URL.", valueName: "url"))
    var apnsSandboxURL = "https://api.sandbox.push.apple.com"

    @Option(help: ArgumentHelp("Extra CA certificate (PEM) to trust for APNs; for test servers.", valueName: "pem"))
    var apnsCA: String?

    @Option(help: "Pushes in flight at once on the APNs connection.")
    var apnsConcurrency = 100

    @Option(help: ArgumentHelp(
        "A push unanswered after this long is sent again later. It also sets the lease (2 × this + 30 s): how late another server sharing the database takes over the pushes of one that died.",
        valueName: "seconds"))
    var apnsRequestTimeoutSeconds: Int64 = 15

    @Option(help: ArgumentHelp("How much lower (Linux nice, 0-19) the fan-out's threads run than the request threads; 0: the same.",
                               valueName: "n"))
    var fanOutNiceness: Int32 = 5

    @Option(help: ArgumentHelp("A ring not delivered within this many seconds is dropped (apns-expiration).", valueName: "seconds"))
    var pushTTLSeconds: Int64 = 3600

    @Option(help: ArgumentHelp("At most one beacon message per phone and region per this many seconds.", valueName: "seconds"))
    var beaconIntervalSeconds: Int64 = 600

    @Option(help: ArgumentHelp(
        "Reject webhook-timestamp values further than this from the receiver's clock.", valueName: "seconds"))
    var toleranceSeconds: Int64 = 300

    @Option(help: ArgumentHelp(
        "This process's name on the delivery queue (default: host name and port). A restart under the same name sends what it had claimed at once; give each process sharing a database its own.",
        valueName: "name"))
    var instanceID: String?

    @Option(help: ArgumentHelp(
        "A connection must send a request's headers within this time of opening or of its last answer (so also: how long an idle connection is kept).",
        valueName: "seconds"))
    var headerTimeoutSeconds = 10.0

    @Option(help: ArgumentHelp("A request's body must arrive in full within this time of its headers.", valueName: "seconds"))
    var bodyTimeoutSeconds = 20.0

    @Option(help: "Connections open at once; more are closed as soon as they are accepted.")
    var maxConnections = 1000

    @Option(help: ArgumentHelp(
        "On SIGTERM/SIGINT: longest wait for requests and pushes in flight before they are cut off.", valueName: "seconds"))
    var shutdownTimeoutSeconds = 30.0

    @Option(help: ArgumentHelp("Test aid: answer the first N POST /events with 503 before any check.", valueName: "n"))
    var failFirst = 0

    func validate() throws {
        if apnsKey != nil, apnsKeyID == nil || apnsTeamID == nil || apnsTopic.isEmpty {
            throw ValidationError("--apns-key needs --apns-key-id, --apns-team-id and at least one --apns-topic")
        }
        guard (1...1000).contains(apnsConcurrency) else { throw ValidationError("--apns-concurrency must be 1...1000") }
        guard (1...300).contains(apnsRequestTimeoutSeconds) else { throw ValidationError("--apns-request-timeout-seconds must be 1...300") }
        guard (0...19).contains(fanOutNiceness) else { throw ValidationError("--fan-out-niceness must be 0...19") }
        guard pushTTLSeconds > 0 else { throw ValidationError("--push-ttl-seconds must be > 0") }
        guard beaconIntervalSeconds >= 0 else { throw ValidationError("--beacon-interval-seconds must be ≥ 0") }
        guard (0...65535).contains(port) else { throw ValidationError("--port must be 0...65535") }
        guard toleranceSeconds >= 0 else { throw ValidationError("--tolerance-seconds must be ≥ 0") }
        guard failFirst >= 0 else { throw ValidationError("--fail-first must be ≥ 0") }
        for (name, value) in [("--header-timeout-seconds", headerTimeoutSeconds), ("--body-timeout-seconds", bodyTimeoutSeconds),
                              ("--shutdown-timeout-seconds", shutdownTimeoutSeconds)] where !(0.1...3600).contains(value) {
            throw ValidationError("\(name) must be 0.1...3600")
        }
        guard (1...100_000).contains(maxConnections) else { throw ValidationError("--max-connections must be 1...100000") }
        if let instanceID, instanceID.isEmpty || instanceID.count > 200 {
            throw ValidationError("--instance-id must be 1 to 200 characters")
        }
    }

    func run() async throws {
        LoggingSystem.bootstrap(StreamLogHandler.standardError)
        let logger = Logger(label: "doorbell-cloud")

        let keys = gatewaySecret == nil && gatewayPublicKey == nil ? nil
            : try KeyFiles.gatewayKeys(secretFile: gatewaySecret, publicKeyFile: gatewayPublicKey)
        let tls = try TLSConfiguration.server(certificatePEM: tlsCert, privateKeyPEM: tlsKey)
        let adminToken = try adminTokenFile.map { try KeyFiles.text($0, option: "--admin-token-file") }
        let store: CloudStore
        do {
            store = try await CloudStore(url: db)
        } catch {
            throw CLIError("--db \(db): \(error)")
        }

        var fanOut: FanOut?
        var client: APNsClient?
        // PostgreSQL: the fan-out gets a pool of its own, so its claims and outcome writes never
        // wait for a connection behind ingests (nor ingests behind them). SQLite: one writer anyway.
        var fanOutStore = store
        if let apnsKey, let apnsKeyID, let apnsTeamID {
            let pem = try KeyFiles.text(apnsKey, option: "--apns-key")
            let key: APNsSigningKey
            do {
                key = try APNsSigningKey(pem: pem, teamID: apnsTeamID, keyID: apnsKeyID)
            } catch {
                throw CLIError("--apns-key \(apnsKey): \(error)")
            }
            var settings = APNsSettings(key: key)
            settings.productionURL = apnsProductionURL
            settings.sandboxURL = apnsSandboxURL
            settings.caFile = apnsCA
            settings.concurrency = apnsConcurrency
            settings.niceness = fanOutNiceness
            settings.requestTimeoutSeconds = apnsRequestTimeoutSeconds
            let apns = try APNsClient(settings: settings, logger: logger)
            client = apns
            let lines = OutputLines.standardOutput
            let owner = instanceID ?? (ProcessInfo.processInfo.hostName + ":" + String(port))
            if store.backend == "PostgreSQL" {
                do {
                    fanOutStore = try await CloudStore(url: db)
                } catch {
                    throw CLIError("--db \(db): \(error)")
                }
            }
            fanOut = FanOut(store: fanOutStore, client: apns, logger: logger, clock: WallClock.system.millisecondsSinceEpoch,
                            owner: owner) {
                delivery, outcome, effect in
                let (state, status, reason): (String, Int64?, String?)
                switch outcome {
                case .delivered: (state, status, reason) = ("delivered", 200, nil)
                case .unregistered(let why, _): (state, status, reason) = ("unregistered", 410, why)
                case .badDeviceToken: (state, status, reason) = ("failed", 400, "BadDeviceToken")
                case .retry(let code, let why, _): (state, status, reason) = ("retry", code, why)
                case .failed(let code, let why): (state, status, reason) = ("failed", code, why)
                }
                lines.pushed(eventID: delivery.eventID, token: delivery.token, state: state, status: status,
                             reason: reason, pruned: effect == .pruned)
            }
        } else {
            logger.warning("no --apns-key: events are stored and pushes queued, but nothing is sent to phones")
        }

        let output = OutputLines.standardOutput
        let events = EventsEndpoint(
            fallbackKeys: keys, tolerance: TimestampTolerance(seconds: toleranceSeconds), store: store,
            output: output, failFirst: failFirst > 0 ? FailFirst(total: failFirst) : nil,
            fanOut: fanOut, pushTTLSeconds: pushTTLSeconds)
        let api = AppAPI(store: store, adminToken: adminToken, fanOut: fanOut, topics: Set(apnsTopic),
                         beaconIntervalSeconds: beaconIntervalSeconds, pushTTLSeconds: pushTTLSeconds)
        var limits = ConnectionLimits()
        limits.headerTimeoutMilliseconds = Int64(headerTimeoutSeconds * 1000)
        limits.bodyTimeoutMilliseconds = Int64(bodyTimeoutSeconds * 1000)
        limits.maxConnections = maxConnections
        let app = try makeApplication(
            settings: ServerSettings(host: host, port: port, tls: tls, readyFile: readyFile, limits: limits),
            events: events, api: api, output: output, logger: logger)
        // SIGTERM/SIGINT: graceful, in reverse order of `services`: first the fan-out (pushes on
        // the wire drain and are recorded), then the server (requests in flight finish), so a
        // client stalling the server's drain never cuts the fan-out's short. Bounded: after
        // --shutdown-timeout-seconds whatever is left is cancelled.
        let services: [any Service] = [app] + (fanOut.map { [FanOutService(fanOut: $0)] } ?? [])
        var configuration = ServiceGroupConfiguration(
            services: services, gracefulShutdownSignals: [.sigterm, .sigint], cancellationSignals: [], logger: logger)
        configuration.maximumGracefulShutdownDuration = .milliseconds(Int64(shutdownTimeoutSeconds * 1000))
        configuration.maximumCancellationDuration = .seconds(5)
        do {
            try await ServiceGroup(configuration: configuration).run()
        } catch {
            await client?.shutdown()
            await closeStores(store, fanOutStore)
            OutputLines.standardOutputQueue.drain(withinMilliseconds: 2_000)
            throw error
        }
        await client?.shutdown()
        await closeStores(store, fanOutStore)
        // The last PUSH lines of the drain; bounded, in case nobody reads stdout.
        OutputLines.standardOutputQueue.drain(withinMilliseconds: 2_000)
    }

    private func closeStores(_ store: CloudStore, _ fanOutStore: CloudStore) async {
        await store.close()
        if fanOutStore !== store { await fanOutStore.close() }
    }
}
