import CloudCore
import CloudStore
import Hummingbird
import Logging
import NIOPosix

/// `POST /events`: verify (CloudCore), deduplicate and store (CloudStore), answer, print a line.
public struct EventsEndpoint: Sendable {
    /// Bodies larger than this are refused with 413 before they are read in full.
    public static let maxBodyBytes = 256 * 1024

    let intake: WebhookIntake
    let store: EventStore
    let output: OutputLines
    let clock: WallClock
    let failFirst: FailFirst?

    public init(intake: WebhookIntake, store: EventStore, output: OutputLines,
                clock: WallClock = .system, failFirst: FailFirst? = nil) {
        self.intake = intake
        self.store = store
        self.output = output
        self.clock = clock
        self.failFirst = failFirst
    }

    func receive(_ request: Request, context: some RequestContext) async throws -> Response {
        if let failFirst, let attempt = failFirst.nextFailure() {
            output.unavailable(attempt: attempt, of: failFirst.total)
            return .error(.serviceUnavailable, code: "unavailable",
                          reason: "failing delivery \(attempt) of the first \(failFirst.total) on purpose (--fail-first)")
        }

        let body = try await request.body.collect(upTo: Self.maxBodyBytes)
        let headers = request.headers
        let webhook = WebhookRequest(
            webhookID: headers.values(named: "webhook-id").first,
            webhookTimestamp: headers.values(named: "webhook-timestamp").first,
            // Several signature fields are one list, like several entries in one field.
            webhookSignature: headers.values(named: "webhook-signature").joined(separator: " "),
            gatewayID: headers.values(named: "doorbell-gateway-id").first,
            body: Array(buffer: body))

        let receivedAt = clock.millisecondsSinceEpoch()
        let event: VerifiedEvent
        do {
            event = try intake.verify(webhook, now: receivedAt / 1000)
        } catch {
            output.rejected(error, webhookID: webhook.webhookID)
            let status: HTTPResponse.Status = error.category == .authentication ? .unauthorized : .badRequest
            return .error(status, code: error.code, reason: error.message)
        }

        let stored = StoredEvent(event, receivedAtMilliseconds: receivedAt)
        let result: EventStore.InsertResult
        do {
            let store = self.store
            result = try await NIOThreadPool.singleton.runIfActive { try store.insert(stored) }
        } catch {
            context.logger.error("could not store event", metadata: ["id": "\(stored.id)", "error": "\(error)"])
            return .error(.internalServerError, code: "storage_failed",
                          reason: "the event could not be stored; retry later")
        }

        switch result {
        case .inserted:
            output.accepted(event)
            return .json(.ok, ["status": .string("accepted"), "id": .string(stored.id)])
        case .duplicate:
            output.duplicate(id: stored.id)
            return .json(.ok, ["status": .string("duplicate"), "id": .string(stored.id)])
        }
    }
}
