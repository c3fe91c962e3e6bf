/// The compact JSON that `EVENT` lines carry:
/// `{"id":..,"sequence":..,"type":..,"gateway_id":..,"device":..,"occurred_at":..,"verified":[..]}`.
public enum EventLine {
    public static func json(_ envelope: EventEnvelope, verified: [SignatureVersion]) -> String {
        JSONText.object([
            "id": .string(envelope.id),
            "sequence": .int(envelope.sequence),
            "type": .string(envelope.type),
            "gateway_id": .string(envelope.gatewayID),
            "device": .string(envelope.deviceID),
            "occurred_at": .string(envelope.occurredAt),
            "verified": .array(verified.map { .string($0.rawValue) }),
        ])
    }
}
