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

/// One session with the database: statements run in order on it, and `BEGIN`…`COMMIT` on it
/// is one transaction. Every call is `async` and none blocks a thread Swift concurrency or NIO
/// runs requests on: PostgreSQL goes over NIO (postgres-nio), SQLite runs on a thread of its own.
public protocol SQLConnection: Sendable {
    /// Which backend, for messages: "SQLite" or "PostgreSQL".
    var backend: String { get }

    /// Runs one statement with `$N` parameters.
    @discardableResult
    func query(_ sql: String, _ parameters: [SQLValue], operation: String) async throws(StoreError) -> SQLResult

    /// Runs a script of statements without parameters (schema creation). Statements end with `;`
    /// at the end of a line.
    func execute(script: String, operation: String) async throws(StoreError)
}

extension SQLConnection {
    /// Runs `body` between BEGIN and COMMIT; rolls back when it throws.
    public func transaction<T>(
        _ operation: String, _ body: () async throws(StoreError) -> T
    ) async throws(StoreError) -> T {
        try await query("BEGIN", [], operation: "\(operation): begin")
        do {
            let value = try await body()
            try await query("COMMIT", [], operation: "\(operation): commit")
            return value
        } catch {
            _ = try? await query("ROLLBACK", [], operation: "\(operation): rollback")
            throw error
        }
    }
}

/// A database the stores share among concurrent requests. A single statement runs on any
/// session (`query`); `withConnection` holds one session for a sequence that must not
/// interleave with others (a transaction). PostgreSQL: a pool of sessions, so an ingest never
/// waits for the fan-out's statements; SQLite: its one session, taken in turn (FIFO).
public protocol SQLDatabase: SQLConnection {
    func withConnection<T: Sendable>(
        _ body: (any SQLConnection) async throws(StoreError) -> T
    ) async throws(StoreError) -> T

    /// Closes the sessions; statements after this fail.
    func close() async
}

extension SQLDatabase {
    /// Runs `body` in one transaction on one session, which it gets as its argument.
    public func withTransaction<T: Sendable>(
        _ operation: String, _ body: (any SQLConnection) async throws(StoreError) -> T
    ) async throws(StoreError) -> T {
        try await withConnection { (db) async throws(StoreError) -> T in
            try await db.transaction(operation) { () async throws(StoreError) -> T in try await body(db) }
        }
    }
}

extension String {
    /// A script's statements: each ends with `;` at the end of a line (schema scripts put no
    /// `;` inside a line's literals).
    var sqlStatements: [String] {
        var statements = [""]
        for line in split(separator: "\n").map(String.init) {
            statements[statements.count - 1] += line + "\n"
            if line.trimmingSpaces.hasSuffix(";") { statements.append("") }
        }
        return statements.map(\.trimmingSpaces).filter { !$0.isEmpty }
    }
}
