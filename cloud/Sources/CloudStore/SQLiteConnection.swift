import CSQLite

/// SQLITE_TRANSIENT: SQLite copies bound text before `bind` returns.
private let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

/// A thin owner of one `sqlite3*` handle. Not thread-safe: `EventStore` serializes access.
final class SQLiteConnection {
    private let handle: OpaquePointer

    init(path: String) throws(StoreError) {
        var db: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let rc = sqlite3_open_v2(path, &db, flags, nil)
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close_v2(db)
            throw StoreError(operation: "open \(path)", code: rc, message: message)
        }
        handle = db
        sqlite3_extended_result_codes(db, 1)
    }

    deinit {
        sqlite3_close_v2(handle)
    }

    /// Runs one or more statements that take no parameters and return no rows of interest.
    func execute(_ sql: String, operation: String) throws(StoreError) {
        let rc = sqlite3_exec(handle, sql, nil, nil, nil)
        guard rc == SQLITE_OK else { throw error(operation, rc) }
    }

    /// Prepares `sql`, binds `parameters` (1-based, in order), steps it to the end and calls
    /// `row` for each result row. Returns `sqlite3_changes()` for the statement.
    @discardableResult
    func run(
        _ sql: String, _ parameters: [SQLiteValue] = [], operation: String,
        row: (Row) throws(StoreError) -> Void = { _ in }
    ) throws(StoreError) -> Int {
        var statement: OpaquePointer?
        let prepared = sqlite3_prepare_v2(handle, sql, -1, &statement, nil)
        guard prepared == SQLITE_OK, let statement else { throw error(operation, prepared) }
        defer { sqlite3_finalize(statement) }

        for (offset, value) in parameters.enumerated() {
            let index = Int32(offset + 1)
            let rc: Int32
            switch value {
            case .null: rc = sqlite3_bind_null(statement, index)
            case .integer(let number): rc = sqlite3_bind_int64(statement, index, number)
            case .text(let text): rc = sqlite3_bind_text(statement, index, text, -1, transient)
            }
            guard rc == SQLITE_OK else { throw error(operation, rc) }
        }

        while true {
            let rc = sqlite3_step(statement)
            switch rc {
            case SQLITE_ROW: try row(Row(statement: statement))
            case SQLITE_DONE: return Int(sqlite3_changes(handle))
            default: throw error(operation, rc)
            }
        }
    }

    private func error(_ operation: String, _ code: Int32) -> StoreError {
        StoreError(operation: operation, code: code, message: String(cString: sqlite3_errmsg(handle)))
    }

    /// The current result row of a statement; valid only inside the `row` callback.
    struct Row {
        fileprivate let statement: OpaquePointer

        func integer(_ column: Int32) -> Int64 {
            sqlite3_column_int64(statement, column)
        }

        func text(_ column: Int32) -> String? {
            guard let bytes = sqlite3_column_text(statement, column) else { return nil }
            let count = Int(sqlite3_column_bytes(statement, column))
            return String(decoding: UnsafeBufferPointer(start: bytes, count: count), as: UTF8.self)
        }
    }
}

enum SQLiteValue {
    case null
    case integer(Int64)
    case text(String)
}
