/// Why a delivery was refused.
///
/// `code` is a stable, single-token name for logs, `REJECTED` lines and the JSON error body;
/// `message` says what was wrong and what to fix.
public enum Rejection: Error, Equatable, Sendable {
    /// A required Standard Webhooks header is absent or empty.
    case missingHeader(String)
    /// `webhook-timestamp` is not integer Unix seconds.
    case invalidTimestamp(String)
    /// `webhook-timestamp` is further from the receiver's clock than the tolerance allows.
    case timestampOutOfTolerance(timestamp: Int64, now: Int64, toleranceSeconds: Int64)
    /// No entry of `webhook-signature` verified with a configured key.
    /// `versions` lists the versions the header carried (possibly none).
    case noValidSignature(versions: [String])
    /// The body is not a JSON object of the documented shape.
    case invalidBody(String)
    /// The body's `id` differs from `webhook-id`.
    case idMismatch(bodyID: String, headerID: String)
    /// The `doorbell-gateway-id` header differs from the body's `gateway_id`.
    case gatewayMismatch(bodyGatewayID: String, headerGatewayID: String)
    /// A heartbeat id the receiver took before: a recorded request sent again.
    case replayed(id: String)

    /// Whether the sender failed to prove who it is (HTTP 401) or sent a malformed event (HTTP 400).
    public enum Category: Sendable {
        case authentication
        case validation
    }

    public var category: Category {
        switch self {
        case .missingHeader, .invalidTimestamp, .timestampOutOfTolerance, .noValidSignature, .replayed:
            return .authentication
        case .invalidBody, .idMismatch, .gatewayMismatch:
            return .validation
        }
    }

    public var code: String {
        switch self {
        case .missingHeader: return "missing_header"
        case .invalidTimestamp: return "invalid_timestamp"
        case .timestampOutOfTolerance: return "stale_timestamp"
        case .noValidSignature: return "bad_signature"
        case .invalidBody: return "invalid_body"
        case .idMismatch: return "id_mismatch"
        case .gatewayMismatch: return "gateway_mismatch"
        case .replayed: return "replayed"
        }
    }

    public var message: String {
        switch self {
        case .missingHeader(let name):
            return "missing header \(name)"
        case .invalidTimestamp(let value):
            return "webhook-timestamp must be integer Unix seconds, got '\(value.prefix(40))'"
        case .timestampOutOfTolerance(let timestamp, let now, let tolerance):
            let (distance, overflow) = timestamp.subtractingReportingOverflow(now)
            let offset = overflow ? "far from" : distance < 0 ? "\(distance.magnitude) s behind" : "\(distance) s ahead of"
            return "webhook-timestamp \(timestamp) is \(offset) the receiver's clock (\(now), tolerance \(tolerance) s);"
                + " re-sign at every attempt and check the sender's clock"
        case .noValidSignature(let versions):
            let seen = versions.isEmpty ? "none" : versions.joined(separator: ", ")
            return "no signature in webhook-signature verified with the key(s) enrolled for this gateway"
                + " (versions present: \(seen)); sign '<webhook-id>.<webhook-timestamp>.<body>' over the exact body bytes"
                + " with the device key or whsec_ secret the owner enrolled with POST /gateways (enroll it first if it is new)"
        case .invalidBody(let detail):
            return "invalid body: \(detail)"
        case .idMismatch(let bodyID, let headerID):
            return "body id '\(bodyID.prefix(80))' does not equal webhook-id '\(headerID.prefix(80))'"
        case .gatewayMismatch(let bodyGatewayID, let headerGatewayID):
            return "body gateway_id '\(bodyGatewayID.prefix(80))' does not equal doorbell-gateway-id '\(headerGatewayID.prefix(80))'"
        case .replayed(let id):
            return "heartbeat id '\(id.prefix(80))' was received before; send every heartbeat with a new webhook-id"
        }
    }
}

extension Rejection: CustomStringConvertible {
    public var description: String { "\(code): \(message)" }
}
