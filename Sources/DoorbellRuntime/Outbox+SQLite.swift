import CSQLite
import DoorbellCore
import Glibc

// SQLite plumbing for the outbox: errors with what to do, cached prepared statements, binding.

extension Outbox {
    enum Value { case int(Int64), text(String), blob([UInt8]), null }

    func fail(_ rc: Int32, _ what: String) -> OutboxError {
        let detail = db.flatMap { sqlite3_errmsg($0) }.map { String(cString: $0) } ?? String(cString: sqlite3_errstr(rc))
        switch rc & 0xFF {
        case SQLITE_FULL:
            return OutboxError(code: .full, message: "\(what): the disk is full (\(path)). Free space on the state directory's filesystem; events are kept as long as possible.")
        case SQLITE_READONLY:
            return OutboxError(code: .readOnly, message: "\(what): \(path) is read-only (\(detail)). The state directory must be writable by the doorbell-agent user.")
        case SQLITE_CANTOPEN, SQLITE_PERM, SQLITE_AUTH:
            return OutboxError(code: .cannotOpen, message: "\(what): \(detail). The state directory must exist and be writable by the doorbell-agent user (StateDirectory= in the unit).")
        case SQLITE_CORRUPT, SQLITE_NOTADB:
            return OutboxError(code: .corrupt, message: "\(what): \(path) is damaged (\(detail)). Stop the agent and move the file aside; a new outbox is created at the next start.")
        default:
            return OutboxError(code: .io, message: "\(what): \(detail)")
        }
    }

    func exec(_ sql: String) throws(OutboxError) {
        guard let db else { throw OutboxError(code: .closed, message: "the outbox is closed") }
        let rc = sqlite3_exec(db, sql, nil, nil, nil)
        guard rc == SQLITE_OK else { throw fail(rc, "outbox statement failed") }
    }

    /// A statement without parameters or rows (BEGIN, COMMIT), prepared once: not a PRAGMA,
    /// which SQLite applies while preparing, so a cached one would change nothing.
    func step(_ sql: String) throws(OutboxError) {
        let stmt = try prepare(sql)
        let rc = sqlite3_step(stmt)
        sqlite3_reset(stmt)
        guard rc == SQLITE_DONE else { throw fail(rc, "outbox statement failed") }
    }

    func prepare(_ sql: String) throws(OutboxError) -> OpaquePointer {
        guard let db else { throw OutboxError(code: .closed, message: "the outbox is closed") }
        if let s = statements[sql] { return s }
        var stmt: OpaquePointer?
        let rc = sqlite3_prepare_v2(db, sql, -1, &stmt, nil)
        guard rc == SQLITE_OK, let stmt else { throw fail(rc, "cannot prepare an outbox statement") }
        statements[sql] = stmt
        return stmt
    }

    func run(_ sql: String, _ values: [Value]) throws(OutboxError) {
        let stmt = try prepare(sql)
        defer { sqlite3_reset(stmt); sqlite3_clear_bindings(stmt) }
        bind(stmt, values)
        let rc = sqlite3_step(stmt)
        guard rc == SQLITE_DONE || rc == SQLITE_ROW else { throw fail(rc, "outbox write failed") }
    }

    func bind(_ stmt: OpaquePointer, _ values: [Value]) {
        for (i, v) in values.enumerated() {
            let index = Int32(i + 1)
            switch v {
            case let .int(n): sqlite3_bind_int64(stmt, index, n)
            case let .text(s): sqlite3_bind_text(stmt, index, s, -1, doorbell_sqlite_transient())
            case let .blob(b): b.withUnsafeBytes { _ = sqlite3_bind_blob(stmt, index, $0.baseAddress, Int32($0.count), doorbell_sqlite_transient()) }
            case .null: sqlite3_bind_null(stmt, index)
            }
        }
    }

    func queryInt(_ sql: String, _ values: Value...) throws(OutboxError) -> Int64? {
        try queryInts(sql, values)?.first ?? nil
    }

    /// One row of integer columns (NULL as nil); nil when there is no row.
    func queryInts(_ sql: String, _ values: [Value] = []) throws(OutboxError) -> [Int64?]? {
        let stmt = try prepare(sql)
        defer { sqlite3_reset(stmt); sqlite3_clear_bindings(stmt) }
        bind(stmt, values)
        let rc = sqlite3_step(stmt)
        guard rc == SQLITE_ROW else {
            if rc == SQLITE_DONE { return nil }
            throw fail(rc, "cannot read the outbox")
        }
        return (0..<sqlite3_column_count(stmt)).map { sqlite3_column_type(stmt, $0) == SQLITE_NULL ? nil : sqlite3_column_int64(stmt, $0) }
    }

    func blob(_ stmt: OpaquePointer, _ column: Int32) -> [UInt8] {
        let count = Int(sqlite3_column_bytes(stmt, column))
        var bytes = [UInt8](repeating: 0, count: count)
        if count > 0, let p = sqlite3_column_blob(stmt, column) {
            bytes.withUnsafeMutableBytes { $0.copyMemory(from: UnsafeRawBufferPointer(start: p, count: count)) }
        }
        return bytes
    }

    func text(_ stmt: OpaquePointer, _ column: Int32) -> String? {
        guard let p = sqlite3_column_text(stmt, column) else { return nil }
        return String(cString: p)
    }
}
