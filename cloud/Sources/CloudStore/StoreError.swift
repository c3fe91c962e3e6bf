/// A storage failure, with the backend's message and what the receiver was doing.
public struct StoreError: Error, Sendable, CustomStringConvertible {
    public let operation: String
    /// The backend's code: SQLite's extended result code, or 0 for PostgreSQL (see `state`).
    public let code: Int32
    public let message: String
    /// "SQLite" or "PostgreSQL".
    public let backend: String
    /// PostgreSQL's SQLSTATE (e.g. "23505"), when there is one.
    public let state: String?

    public init(operation: String, code: Int32, message: String, backend: String = "SQLite", state: String? = nil) {
        self.operation = operation
        self.code = code
        self.message = message
        self.backend = backend
        self.state = state
    }

    public var description: String {
        let detail = state.map { "SQLSTATE \($0)" } ?? "\(backend) code \(code)"
        return "store: \(operation) failed: \(message) (\(detail))"
    }
}
