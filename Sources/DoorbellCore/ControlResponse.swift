// The control socket's replies as types (the requests are ControlRequest): the agent encodes
// them, agentctl decodes them, so neither side reads the other's JSON by hand.

public enum ControlResponse {
    /// `{"ok":false,"error":...}`: what was wrong and what to do.
    public static func failure(_ message: String) -> JSONValue {
        .object([("ok", .bool(false)), ("error", .string(message))])
    }
}
