import Foundation
import Hummingbird
import HummingbirdCore
import HummingbirdTLS
import Logging
import NIOCore
import NIOSSL
import ServiceLifecycle

/// How `doorbell-cloud serve` listens.
public struct ServerSettings: Sendable {
    public var host: String
    /// 0 picks a free port; the chosen one is printed and written to `readyFile`.
    public var port: Int
    /// Required by the CLI; nil (plain HTTP) only for in-process tests.
    public var tls: TLSConfiguration?
    /// Where to write `{"port": N}` (atomically) once listening.
    public var readyFile: String?
    /// Header/idle and body timeouts, the declared-length cap, the connection cap.
    public var limits: ConnectionLimits

    public init(host: String = "127.0.0.1", port: Int = 8443, tls: TLSConfiguration?, readyFile: String? = nil,
                limits: ConnectionLimits = ConnectionLimits()) {
        self.host = host
        self.port = port
        self.tls = tls
        self.readyFile = readyFile
        self.limits = limits
    }
}

/// The routes: `GET /healthz`, `POST /events` and `POST /heartbeat` (gateways) and the app API (see `AppAPI`).
public func makeRouter(events: EventsEndpoint, api: AppAPI? = nil) -> Router<BasicRequestContext> {
    let router = Router()
    router.get("healthz") { _, _ in
        // The provider token's health: "failing" means APNs refuses freshly signed tokens (check
        // the key); a signed count far above one per 50 minutes means tokens are being rejected.
        let tokens = events.fanOut?.providerTokenStatus
        return Response.json(.ok, [
            "status": .string("ok"),
            "conflicting_duplicates": .int(Int64(events.conflicts.current)),
            "apns_provider_token": tokens.map { .string($0.health.name) } ?? .null,
            "apns_provider_tokens_signed": .int(Int64(tokens?.signed ?? 0)),
            // Output lines dropped because stdout's reader fell too far behind (`LineQueue`).
            "stdout_lines_dropped": .int(Int64(OutputLines.standardOutputQueue.dropped)),
        ])
    }
    router.post("events") { request, context in
        try await events.receive(request, context: context)
    }
    router.post("heartbeat") { request, context in
        try await events.heartbeat(request, context: context)
    }
    api?.register(on: router)
    return router
}

/// The whole HTTP(S) service; run it with `runService()` to get SIGTERM/SIGINT handling.
public func makeApplication(
    settings: ServerSettings, events: EventsEndpoint, api: AppAPI? = nil, output: OutputLines, logger: Logger,
    services: [any Service] = []
) throws -> some ApplicationProtocol {
    let limits = settings.limits
    let count = ConnectionCount()
    let http1 = HTTPServerBuilder.http1(additionalChannelHandlers: [ConnectionGuardHandler(limits: limits, count: count)])
    let server: HTTPServerBuilder = try settings.tls.map { try .tls(http1, tlsConfiguration: $0) } ?? http1
    let scheme = settings.tls == nil ? "http" : "https"
    return Application(
        router: makeRouter(events: events, api: api),
        server: server,
        configuration: .init(address: .hostname(settings.host, port: settings.port), serverName: "doorbell-cloud"),
        services: services,
        onServerRunning: { channel in
            let port = channel.localAddress?.port ?? settings.port
            let host = settings.host.contains(":") ? "[\(settings.host)]" : settings.host
            output.listening(url: "\(scheme)://\(host):\(port)")
            if let readyFile = settings.readyFile {
                do {
                    try ReadyFile.write(port: port, to: readyFile)
                } catch {
                    logger.error("could not write --ready-file", metadata: ["path": "\(readyFile)", "error": "\(error)"])
                }
            }
        },
        logger: logger)
}

enum ReadyFile {
    /// Writes `{"port": N}` through a temporary file and a rename, so readers never see half of it.
    static func write(port: Int, to path: String) throws {
        try Data("{\"port\": \(port)}\n".utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
    }
}
