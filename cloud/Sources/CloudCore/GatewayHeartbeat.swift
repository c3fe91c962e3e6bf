/// A gateway's heartbeat (`POST /heartbeat`, docs/protocol.md "Heartbeat"): proof that the
/// gateway runs and holds its keys, without an event. Never stored as an event, never pushed.
public struct GatewayHeartbeat: Sendable, Equatable {
    public let id: String
    public let gatewayID: String
    /// The agent's version as it reports it (`doorbell-agent --version`).
    public let agentVersion: String
    /// The RAUC slot it booted from ("A", "B"), when the gateway knows.
    public let bootSlot: String?
    /// Unix seconds; equals the signed `webhook-timestamp`.
    public let sentAt: Int64

    public static let type = "gateway.heartbeat"

    public init(id: String, gatewayID: String, agentVersion: String, bootSlot: String?, sentAt: Int64) {
        self.id = id
        self.gatewayID = gatewayID
        self.agentVersion = agentVersion
        self.bootSlot = bootSlot
        self.sentAt = sentAt
    }

    /// Decodes and validates a body. Throws `Rejection.invalidBody` with the field at fault.
    public static func parse(_ body: [UInt8]) throws(Rejection) -> GatewayHeartbeat {
        let wire = try EventEnvelope.decodeStrictly(Wire.self, body)
        guard wire.type == type else { throw .invalidBody("field 'type' must be \"\(type)\", got \"\(wire.type.prefix(40))\"") }
        // Short printable texts: they are stored and shown to the owner.
        for (name, value, limit) in [("id", wire.id, 128), ("gateway_id", wire.gateway_id, 64),
                                     ("agent_version", wire.agent_version, 64), ("boot_slot", wire.boot_slot ?? "-", 16)] {
            if let problem = TextChecks.freeTextProblem(value, field: "field '\(name)'", characters: limit, bytes: limit) {
                throw .invalidBody(problem)
            }
        }
        return GatewayHeartbeat(id: wire.id, gatewayID: wire.gateway_id, agentVersion: wire.agent_version,
                                bootSlot: wire.boot_slot, sentAt: wire.sent_at)
    }

    private struct Wire: Decodable {
        let id: String
        let type: String
        let gateway_id: String
        let agent_version: String
        let boot_slot: String?
        let sent_at: Int64
    }
}
