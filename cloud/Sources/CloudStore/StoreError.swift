/// A storage failure, with the SQLite message and what the receiver was doing.
public struct StoreError: Error, Sendable, CustomStringConvertible {
    public let operation: String
    public let code: Int32
    public let message: String

    public init(operation: String, code: Int32, message: String) {
        self.operation = operation
        self.code = code
        self.message = message
    }

    public var description: String {
        "event store: \(operation) failed: \(message) (SQLite code \(code))"
    }
}
