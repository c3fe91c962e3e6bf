import ArgumentParser
import CloudCore
import CloudServer
import CloudStore
import Logging
import NIOSSL

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Receive, verify, deduplicate and store events over HTTPS.",
        discussion: """
            Standard output carries one line per outcome, flushed at once:
              LISTENING https://HOST:PORT
              EVENT JSON  (id, sequence, type, gateway_id, device, occurred_at, verified)
              DUPLICATE ID
              REJECTED CODE id=WEBHOOK-ID|- REASON
              UNAVAILABLE N/TOTAL   (only with --fail-first)
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

    @Option(help: ArgumentHelp("SQLite database file (WAL); created if missing.", valueName: "path"))
    var db: String

    @Option(help: ArgumentHelp("File holding the gateway's whsec_<base64> secret (v1 signatures).", valueName: "file"))
    var gatewaySecret: String?

    @Option(help: ArgumentHelp(
        "File holding the gateway's Ed25519 public key, base64 of 32 raw bytes, optionally prefixed ed25519: (v1a signatures).",
        valueName: "file"))
    var gatewayPublicKey: String?

    @Option(help: ArgumentHelp(
        "Reject webhook-timestamp values further than this from the receiver's clock.", valueName: "seconds"))
    var toleranceSeconds: Int64 = 300

    @Option(help: ArgumentHelp("Test aid: answer the first N POST /events with 503 before any check.", valueName: "n"))
    var failFirst = 0

    func validate() throws {
        guard gatewaySecret != nil || gatewayPublicKey != nil else {
            throw ValidationError("give --gateway-secret FILE, --gateway-public-key FILE, or both")
        }
        guard (0...65535).contains(port) else { throw ValidationError("--port must be 0...65535") }
        guard toleranceSeconds >= 0 else { throw ValidationError("--tolerance-seconds must be ≥ 0") }
        guard failFirst >= 0 else { throw ValidationError("--fail-first must be ≥ 0") }
    }

    func run() async throws {
        LoggingSystem.bootstrap(StreamLogHandler.standardError)
        let logger = Logger(label: "doorbell-cloud")

        let keys = try KeyFiles.gatewayKeys(secretFile: gatewaySecret, publicKeyFile: gatewayPublicKey)
        let tls = try TLSConfiguration.server(certificatePEM: tlsCert, privateKeyPEM: tlsKey)
        let store: EventStore
        do {
            store = try EventStore(path: db)
        } catch {
            throw CLIError("--db \(db): \(error)")
        }

        let output = OutputLines.standardOutput
        let events = EventsEndpoint(
            intake: WebhookIntake(keys: keys, tolerance: TimestampTolerance(seconds: toleranceSeconds)),
            store: store,
            output: output,
            failFirst: failFirst > 0 ? FailFirst(total: failFirst) : nil)
        let app = try makeApplication(
            settings: ServerSettings(host: host, port: port, tls: tls, readyFile: readyFile),
            events: events, output: output, logger: logger)
        try await app.runService()
    }
}
