/// A value bound to a statement parameter. Both backends receive the same SQL: parameters are
/// written `$1`, `$2`, … (PostgreSQL's form; SQLite accepts it as named parameters).
public enum SQLValue: Sendable, Equatable {
    case null
    case integer(Int64)
    case text(String)

    public static func optional(_ text: String?) -> SQLValue { text.map(SQLValue.text) ?? .null }
}

/// What one statement returned: its rows (every column read as text, nil for NULL) and how many
/// rows it inserted, updated or deleted.
public struct SQLResult: Sendable {
    public var rows: [SQLRow]
    public var changes: Int

    public init(rows: [SQLRow], changes: Int) {
        self.rows = rows
        self.changes = changes
    }
}

public struct SQLRow: Sendable {
    public var columns: [String?]

    public init(_ columns: [String?]) {
        self.columns = columns
    }

    public func text(_ index: Int) -> String? {
        index < columns.count ? columns[index] : nil
    }

    /// The column as an integer; nil for NULL or a value that is not one.
    public func integer(_ index: Int) -> Int64? {
        text(index).flatMap { Int64($0) }
    }
}

/// One connection to the database (SQLite file or PostgreSQL server). Not thread-safe: the
/// stores serialize access with a mutex, which also makes `BEGIN`…`COMMIT` blocks atomic; that
/// mutex is why implementations may be `@unchecked Sendable`.
public protocol SQLConnection: AnyObject, Sendable {
    /// Which backend, for messages: "SQLite" or "PostgreSQL".
    var backend: String { get }

    /// Runs one statement with `$N` parameters.
    @discardableResult
    func query(_ sql: String, _ parameters: [SQLValue], operation: String) throws(StoreError) -> SQLResult

    /// Runs a script of statements without parameters (schema creation).
    func execute(script: String, operation: String) throws(StoreError)
}

extension SQLConnection {
    /// Runs `body` between BEGIN and COMMIT; rolls back when it throws.
    public func transaction<T>(
        _ operation: String, _ body: () throws(StoreError) -> T
    ) throws(StoreError) -> T {
        try query("BEGIN", [], operation: "\(operation): begin")
        do {
            let value = try body()
            try query("COMMIT", [], operation: "\(operation): commit")
            return value
        } catch {
            _ = try? query("ROLLBACK", [], operation: "\(operation): rollback")
            throw error
        }
    }
}
