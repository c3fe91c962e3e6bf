#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The fields of an event body (docs/protocol.md, "Body") that the receiver stores and indexes.
/// Other fields are kept only in the stored body text; unknown fields are ignored.
public struct EventEnvelope: Sendable, Equatable {
    public let id: String
    public let sequence: Int64
    public let type: String
    public let gatewayID: String
    /// `device.id`, when the event has a device.
    public let deviceID: String?
    public let occurredAt: String
    /// `device.name`, when given: what a push calls the doorbell until its owner renames it.
    public let deviceName: String?
    /// `test: true` marks installer checks; phones must not ring for them.
    public let isTest: Bool

    public init(id: String, sequence: Int64, type: String, gatewayID: String, deviceID: String?, occurredAt: String,
                deviceName: String? = nil, isTest: Bool = false) {
        self.deviceName = deviceName
        self.isTest = isTest
        self.id = id
        self.sequence = sequence
        self.type = type
        self.gatewayID = gatewayID
        self.deviceID = deviceID
        self.occurredAt = occurredAt
    }

    /// Decodes and validates a body. Throws `Rejection.invalidBody` with the field at fault.
    public static func parse(_ body: [UInt8]) throws(Rejection) -> EventEnvelope {
        let wire = try decodeStrictly(Wire.self, body)
        for (name, value) in [("id", wire.id), ("type", wire.type), ("gateway_id", wire.gateway_id),
                              ("occurred_at", wire.occurred_at)] where value.isEmpty {
            throw .invalidBody("field '\(name)' is empty")
        }
        guard wire.sequence >= 1 else {
            throw .invalidBody("field 'sequence' must be an integer ≥ 1, got \(wire.sequence)")
        }
        if let device = wire.device, device.id.isEmpty {
            throw .invalidBody("field 'device.id' is empty")
        }
        return EventEnvelope(
            id: wire.id, sequence: wire.sequence, type: wire.type, gatewayID: wire.gateway_id,
            deviceID: wire.device?.id, occurredAt: wire.occurred_at,
            deviceName: wire.device?.name, isTest: wire.test ?? false)
    }

    private struct Wire: Decodable {
        struct Device: Decodable {
            let id: String
            let name: String?
        }

        let id: String
        let sequence: Int64
        let type: String
        let gateway_id: String
        let occurred_at: String
        let device: Device?
        let test: Bool?
    }

    /// A gateway's JSON body, checked strictly first (a key given twice would be read one way
    /// here and maybe the other way by whoever reads the stored body), then decoded; the
    /// `Rejection.invalidBody` names the field at fault.
    static func decodeStrictly<T: Decodable>(_ type: T.Type, _ body: [UInt8]) throws(Rejection) -> T {
        do {
            try StrictJSON.check(body)
        } catch {
            throw .invalidBody(error.description)
        }
        do {
            return try JSONDecoder().decode(T.self, from: Data(body))
        } catch let error as DecodingError {
            throw .invalidBody(describe(error))
        } catch {
            throw .invalidBody("not valid JSON")
        }
    }

    private static func describe(_ error: DecodingError) -> String {
        func path(_ context: DecodingError.Context, appending key: (any CodingKey)? = nil) -> String {
            (context.codingPath + (key.map { [$0] } ?? [])).map(\.stringValue).joined(separator: ".")
        }
        switch error {
        case .keyNotFound(let key, let context):
            return "missing field '\(path(context, appending: key))'"
        case .typeMismatch(_, let context) where context.codingPath.isEmpty:
            return "not a JSON object"
        case .typeMismatch(let type, let context):
            return "field '\(path(context))' must be \(expected(type))"
        case .valueNotFound(let type, let context):
            return "field '\(path(context))' is null, must be \(expected(type))"
        case .dataCorrupted(let context) where context.codingPath.isEmpty:
            return "not valid JSON"
        case .dataCorrupted(let context):
            return "field '\(path(context))' has an invalid value"
        @unknown default:
            return "not a valid event"
        }
    }

    private static func expected(_ type: Any.Type) -> String {
        if type == Int64.self { return "an integer" }
        if type == String.self { return "a string" }
        return "an object"
    }
}
