import AsyncHTTPClient
import CloudCore
import CloudStore
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import Synchronization

/// Where and how pushes go.
public struct APNsSettings: Sendable {
    public var key: APNsSigningKey
    /// Apple's hosts; tests point both at a local APNs-compatible server.
    public var productionURL = "https://api.push.apple.com"
    public var sandboxURL = "https://api.sandbox.push.apple.com"
    /// Extra trusted CA (PEM file) besides the system's; for test servers.
    public var caFile: String?
    /// Requests in flight at once on the connection (APNs allows many streams per connection).
    public var concurrency = 100
    /// Seconds until an unanswered request counts as failed (and is retried).
    public var requestTimeoutSeconds: Int64 = 15
    /// Provider token refresh age, seconds (clamped to APNs' 20…59 minutes).
    public var tokenRefreshSeconds: Int64 = 50 * 60
    /// How much lower (Linux nice) the fan-out's threads run than the request threads: enough
    /// that an ingest is scheduled first, not so much that a busy server starves the pushes
    /// (CFS weights about 3 : 1 at 5). 0: the same priority.
    public var niceness: Int32 = 5

    public init(key: APNsSigningKey) {
        self.key = key
    }
}

/// HTTP/2 to APNs (the provider API) through AsyncHTTPClient: one TLS connection per host,
/// requests multiplexed as streams. Holds the provider token schedule.
public final class APNsClient: Sendable {
    let settings: APNsSettings
    let http: HTTPClient
    /// The HTTP/2 connection's event loop: a thread of its own at a lower priority, so the
    /// fan-out's TLS and framing never queue ahead of an ingest on the server's event loops.
    private let loop: MultiThreadedEventLoopGroup
    private let tokens: Mutex<ProviderTokenSchedule>
    let logger: Logger

    public init(settings: APNsSettings, logger: Logger) throws {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12
        if let caFile = settings.caFile {
            do {
                tls.additionalTrustRoots = [.certificates(try NIOSSLCertificate.fromPEMFile(caFile))]
            } catch {
                throw APNsSetupError("--apns-ca \(caFile): not a readable PEM certificate file (\(error))")
            }
        }
        var configuration = HTTPClient.Configuration(
            tlsConfiguration: tls,
            timeout: .init(connect: .seconds(10), read: .seconds(settings.requestTimeoutSeconds)))
        configuration.httpVersion = .automatic  // ALPN picks h2, which APNs requires
        configuration.redirectConfiguration = .disallow
        loop = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let niceness = settings.niceness
        loop.next().execute { ThreadPriority.lowerCurrentThread(by: niceness) }
        http = HTTPClient(eventLoopGroupProvider: .shared(loop), configuration: configuration)
        self.settings = settings
        tokens = Mutex(ProviderTokenSchedule(refreshAfterSeconds: settings.tokenRefreshSeconds))
        self.logger = logger
    }

    public func shutdown() async {
        try? await http.shutdown()
        try? await loop.shutdownGracefully()
    }

    /// The current provider token, signing a fresh one when it has aged out; nil while a rejected
    /// replacement holds pushes (then: until when, Unix seconds).
    func providerToken(now: Int64) throws -> Result<APNsProviderToken, Held> {
        try tokens.withLock { schedule in
            if let until = schedule.heldUntil(now: now) { return .failure(Held(until: until)) }
            return .success(try schedule.token(now: now) { issuedAt in try settings.key.providerToken(issuedAt: issuedAt) })
        }
    }

    struct Held: Error {
        let until: Int64
    }

    func providerTokenRejected(_ token: APNsProviderToken, reason: String, now: Int64) -> ProviderTokenSchedule.RejectionAction {
        tokens.withLock { $0.rejected(token, reason: reason, now: now) }
    }

    func providerTokenAccepted(_ token: APNsProviderToken) {
        tokens.withLock { $0.accepted(token) }
    }

    /// Whether APNs accepts our tokens, and how many were signed since start (`/healthz`).
    public var providerTokenStatus: (health: ProviderTokenHealth, signed: Int) {
        tokens.withLock { ($0.health, $0.signed) }
    }

    /// One push. Never throws: transport failures come back as `.retry`.
    func send(_ delivery: Delivery, token providerToken: APNsProviderToken) async -> APNsVerdict {
        let base = delivery.environment == .production ? settings.productionURL : settings.sandboxURL
        var request = HTTPClientRequest(url: base + "/3/device/" + delivery.token)
        request.method = .POST
        request.headers.add(name: "authorization", value: "bearer " + providerToken.jwt)
        request.headers.add(name: "apns-topic", value: delivery.bundleID)
        request.headers.add(name: "apns-push-type", value: "alert")
        request.headers.add(name: "apns-priority", value: "10")
        request.headers.add(name: "apns-expiration", value: String(delivery.expiresAtMilliseconds / 1000))
        request.headers.add(name: "apns-id", value: delivery.apnsID)
        if let collapseID = delivery.collapseID {
            request.headers.add(name: "apns-collapse-id", value: collapseID)
        }
        request.headers.add(name: "content-type", value: "application/json")
        request.body = .bytes(ByteBuffer(string: PushPayload.personalized(delivery.payload, eventID: delivery.eventID, token: delivery.token)))
        do {
            let response = try await http.execute(request, timeout: .seconds(settings.requestTimeoutSeconds))
            let body = try await response.body.collect(upTo: 64 * 1024)
            return APNsVerdict.classify(
                status: Int(response.status.code), body: Array(buffer: body),
                retryAfter: response.headers.first(name: "retry-after"))
        } catch {
            // Reset streams, GOAWAY, lost connections, timeouts: the request may not have been
            // processed; APNs tolerates a resend (a phone shows one alert per collapse id).
            return .retry(reason: "transport: \(error)", afterSeconds: nil)
        }
    }
}

public struct APNsSetupError: Error, CustomStringConvertible {
    public let description: String

    public init(_ description: String) {
        self.description = description
    }
}
