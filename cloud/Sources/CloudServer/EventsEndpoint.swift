import CloudCore
import CloudPush
import CloudStore
import Hummingbird
import Logging
import NIOPosix
import Synchronization

/// A count shared by copies of a struct.
final class Counter: Sendable {
    private let value = Atomic<Int>(0)

    func increment() {
        value.add(1, ordering: .relaxed)
    }

    var current: Int { value.load(ordering: .relaxed) }
}

/// `POST /events`: pick the gateway's keys, verify (CloudCore), deduplicate, store and queue the
/// pushes in one transaction (CloudStore), answer, wake the fan-out, print a line.
public struct EventsEndpoint: Sendable {
    /// Bodies larger than this are refused with 413 before they are read in full.
    public static let maxBodyBytes = BodyLimits.events

    /// Keys from `--gateway-secret` / `--gateway-public-key`: accepted for any gateway that is not
    /// enrolled (the single-gateway setup of the walking skeleton). Such events are stored but
    /// have no owner, so they ring no phone.
    let fallbackKeys: GatewayKeys?
    let tolerance: TimestampTolerance
    let store: CloudStore
    let output: OutputLines
    let clock: WallClock
    let failFirst: FailFirst?
    let fanOut: FanOut?
    let pushTTLMilliseconds: Int64
    /// Event ids that arrived again with another body (`/healthz`'s `conflicting_duplicates`).
    let conflicts = Counter()

    public init(fallbackKeys: GatewayKeys?, tolerance: TimestampTolerance = .standard, store: CloudStore,
                output: OutputLines, clock: WallClock = .system, failFirst: FailFirst? = nil,
                fanOut: FanOut? = nil, pushTTLSeconds: Int64 = 3600) {
        self.fallbackKeys = fallbackKeys
        self.tolerance = tolerance
        self.store = store
        self.output = output
        self.clock = clock
        self.failFirst = failFirst
        self.fanOut = fanOut
        pushTTLMilliseconds = pushTTLSeconds * 1000
    }

    func receive(_ request: Request, context: some RequestContext) async throws -> Response {
        if let failFirst, let attempt = failFirst.nextFailure() {
            output.unavailable(attempt: attempt, of: failFirst.total)
            return .error(.serviceUnavailable, code: "unavailable",
                          reason: "failing delivery \(attempt) of the first \(failFirst.total) on purpose (--fail-first)")
        }

        let webhook: WebhookRequest
        switch await Self.read(request, limit: Self.maxBodyBytes) {
        case .success(let read): webhook = read
        case .failure(let tooLarge): return BodyLimits.tooLarge(limit: tooLarge.limit)
        }
        let receivedAt = clock.millisecondsSinceEpoch()
        let event: VerifiedEvent
        do {
            let claimed = (try? EventEnvelope.parse(webhook.body))?.gatewayID
            let keys = try await keys(for: webhook, bodyGateway: claimed, logger: context.logger)
            event = try WebhookIntake(keys: keys, tolerance: tolerance).verify(webhook, now: receivedAt / 1000)
        } catch {
            return refusal(error, webhook: webhook, logger: context.logger)
        }

        let stored = StoredEvent(event, receivedAtMilliseconds: receivedAt)
        let result: CloudStore.IngestResult
        do {
            let envelope = event.envelope
            result = try await store.ingest(stored, envelope: envelope, now: receivedAt,
                                            pushTTLMilliseconds: pushTTLMilliseconds) { doorbell in
                PushPayload.forEvent(envelope, doorbell: doorbell)
            }
        } catch {
            context.logger.error("could not store event", metadata: ["id": "\(stored.id)", "error": "\(error)"])
            return .error(.internalServerError, code: "storage_failed",
                          reason: "the event could not be stored; retry later")
        }

        switch result {
        case .stored(let pushes):
            output.accepted(event)
            if pushes > 0 { fanOut?.notify() }
            return .json(.ok, ["status": .string("accepted"), "id": .string(stored.id), "pushes": .int(Int64(pushes))])
        case .receipt(let outcome):
            output.accepted(event)
            var matched: (String, String)?
            if case let .recorded(eventID, token) = outcome { matched = (eventID, token) }
            output.receipt(id: stored.id, kind: event.envelope.type, eventID: matched?.0, token: matched?.1)
            return .json(.ok, ["status": .string("accepted"), "id": .string(stored.id),
                               "receipt": .string(matched == nil ? "unmatched" : "recorded")])
        case .duplicate:
            output.duplicate(id: stored.id)
            return .json(.ok, ["status": .string("duplicate"), "id": .string(stored.id)])
        case .conflicting:
            // Answered like a duplicate (the agent would otherwise retry it for ever), but an
            // operator must see it: the gateway reused an event id for another event.
            conflicts.increment()
            context.logger.warning("an event id arrived again with another body; the first body is kept and the new one dropped",
                                   metadata: ["id": "\(stored.id)", "gateway": "\(event.envelope.gatewayID)"])
            output.duplicate(id: stored.id)
            return .json(.ok, ["status": .string("duplicate"), "id": .string(stored.id)])
        }
    }

    /// `POST /heartbeat`: verified exactly like an event (same keys, headers, tolerance and
    /// answers), then the gateway's last-seen time and version are recorded; 204, no push.
    func heartbeat(_ request: Request, context: some RequestContext) async throws -> Response {
        let webhook: WebhookRequest
        switch await Self.read(request, limit: BodyLimits.heartbeat) {
        case .success(let read): webhook = read
        case .failure(let tooLarge): return BodyLimits.tooLarge(limit: tooLarge.limit)
        }
        let receivedAt = clock.millisecondsSinceEpoch()
        let heartbeat: GatewayHeartbeat
        do {
            let claimed = (try? GatewayHeartbeat.parse(webhook.body))?.gatewayID
            let keys = try await keys(for: webhook, bodyGateway: claimed, logger: context.logger)
            heartbeat = try WebhookIntake(keys: keys, tolerance: tolerance).verifyHeartbeat(webhook, now: receivedAt / 1000)
            // Ids are kept twice the tolerance: a replay older than that fails the timestamp check.
            let forget = receivedAt - 2 * tolerance.seconds * 1000
            guard try await store.recordHeartbeat(heartbeat, now: receivedAt, forgetBefore: forget) else {
                throw Rejection.replayed(id: heartbeat.id)
            }
        } catch {
            return refusal(error, webhook: webhook, logger: context.logger)
        }
        output.heartbeat(heartbeat)
        return Response(status: .noContent)
    }

    /// The headers and the body (up to `limit` bytes) of a gateway's signed request.
    private static func read(_ request: Request, limit: Int) async -> Result<WebhookRequest, BodyTooLarge> {
        let body: ByteBuffer
        do {
            body = try await BodyLimits.collect(request, limit: limit)
        } catch {
            return .failure(BodyTooLarge(limit: limit))
        }
        let headers = request.headers
        return .success(WebhookRequest(
            webhookID: headers.values(named: "webhook-id").first,
            webhookTimestamp: headers.values(named: "webhook-timestamp").first,
            // Several signature fields are one list, like several entries in one field.
            webhookSignature: headers.values(named: "webhook-signature").joined(separator: " "),
            gatewayID: headers.values(named: "doorbell-gateway-id").first,
            body: Array(buffer: body)))
    }

    /// The answer to a request that failed a check (401/400, as `Rejection.category` says) or
    /// whose gateway could not be read (500).
    private func refusal(_ error: any Error, webhook: WebhookRequest, logger: Logger) -> Response {
        if let error = error as? Rejection {
            output.rejected(error, webhookID: webhook.webhookID)
            let status: HTTPResponse.Status = error.category == .authentication ? .unauthorized : .badRequest
            return .error(status, code: error.code, reason: error.message)
        }
        logger.error("could not read or write the gateway's state", metadata: ["error": "\(error)"])
        return .error(.internalServerError, code: "storage_failed", reason: "the gateway's keys or state could not be read; retry later")
    }

    /// The keys to verify with: the enrolled gateway's, else the fallback keys, else keys nobody
    /// holds, so an unknown gateway fails the signature check like a wrong key (its id cannot be
    /// probed). The gateway id comes from `doorbell-gateway-id`, or from the (not yet verified) body.
    private func keys(for webhook: WebhookRequest, bodyGateway: String?, logger: Logger) async throws -> GatewayKeys {
        let claimed = webhook.gatewayID.flatMap { $0.isEmpty ? nil : $0 } ?? bodyGateway
        if let claimed {
            if let gateway = try await store.gateway(id: claimed) {
                do {
                    return try GatewayKeys(
                        secret: gateway.secret.map { try WebhookSecret(parsing: $0) },
                        publicKey: gateway.publicKey.map { try GatewayPublicKey(parsing: $0) })
                } catch {
                    logger.error("the enrolled keys of a gateway do not parse; its owner must enroll it again",
                                 metadata: ["gateway": "\(claimed)", "error": "\(error)"])
                }
            }
        }
        return fallbackKeys ?? .nobodys()
    }
}
