import CSQLite

/// SQLITE_TRANSIENT: SQLite copies bound text before `bind` returns.
private let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

/// A thin owner of one `sqlite3*` handle, in WAL mode with `synchronous=FULL` (a row is on disk
/// when the statement returns). Not thread-safe: the stores serialize access.
public final class SQLiteConnection: SQLConnection, @unchecked Sendable {
    private let handle: OpaquePointer
    public var backend: String { "SQLite" }

    public init(path: String) throws(StoreError) {
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
        try query("PRAGMA journal_mode=WAL", [], operation: "enable WAL")
        try execute(script: "PRAGMA synchronous=FULL; PRAGMA busy_timeout=5000; PRAGMA foreign_keys=ON;",
                    operation: "configure")
    }

    deinit {
        sqlite3_close_v2(handle)
    }

    public func execute(script: String, operation: String) throws(StoreError) {
        let rc = sqlite3_exec(handle, script, nil, nil, nil)
        guard rc == SQLITE_OK else { throw error(operation, rc) }
    }

    @discardableResult
    public func query(_ sql: String, _ parameters: [SQLValue], operation: String) throws(StoreError) -> SQLResult {
        var statement: OpaquePointer?
        let prepared = sqlite3_prepare_v2(handle, sql, -1, &statement, nil)
        guard prepared == SQLITE_OK, let statement else { throw error(operation, prepared) }
        defer { sqlite3_finalize(statement) }

        // `$N` is a named parameter to SQLite; bind each by its number so the same SQL runs on
        // PostgreSQL, whatever order or repetition the statement uses.
        let count = sqlite3_bind_parameter_count(statement)
        if count > 0 {
            for index in 1...count {
                guard let cName = sqlite3_bind_parameter_name(statement, index),
                      case let name = String(cString: cName), name.first == "$",
                      let number = Int(name.dropFirst()), number >= 1, number <= parameters.count
                else {
                    throw StoreError(operation: operation, code: SQLITE_RANGE,
                                     message: "parameter \(index) is not one of $1…$\(parameters.count)")
                }
                let rc: Int32
                switch parameters[number - 1] {
                case .null: rc = sqlite3_bind_null(statement, index)
                case .integer(let value): rc = sqlite3_bind_int64(statement, index, value)
                case .text(let text): rc = sqlite3_bind_text(statement, index, text, -1, transient)
                }
                guard rc == SQLITE_OK else { throw error(operation, rc) }
            }
        }

        var rows: [SQLRow] = []
        let columns = sqlite3_column_count(statement)
        while true {
            let rc = sqlite3_step(statement)
            switch rc {
            case SQLITE_ROW:
                var values: [String?] = []
                values.reserveCapacity(Int(columns))
                for column in 0..<columns {
                    values.append(text(statement, column))
                }
                rows.append(SQLRow(values))
            case SQLITE_DONE:
                return SQLResult(rows: rows, changes: Int(sqlite3_changes(handle)))
            default:
                throw error(operation, rc)
            }
        }
    }

    private func text(_ statement: OpaquePointer, _ column: Int32) -> String? {
        guard let bytes = sqlite3_column_text(statement, column) else { return nil }
        let count = Int(sqlite3_column_bytes(statement, column))
        return String(decoding: UnsafeBufferPointer(start: bytes, count: count), as: UTF8.self)
    }

    private func error(_ operation: String, _ code: Int32) -> StoreError {
        StoreError(operation: operation, code: code, message: String(cString: sqlite3_errmsg(handle)))
    }
}
