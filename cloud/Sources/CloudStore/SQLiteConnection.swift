import CSQLite
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// SQLITE_TRANSIENT: SQLite copies bound text before `bind` returns.
private let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

/// A SQLite file: one `sqlite3*` handle, in WAL mode with `synchronous=FULL` (a row is on disk
/// when the statement returns). Sessions (`withConnection`, a transaction, a lone statement) take
/// the handle in turn, and each runs whole on a thread of the connection's own (a task executor):
/// a write's fsync never holds a thread that serves requests or NIO's event loops, and a
/// transaction's statements run back to back there instead of hopping threads between them.
/// `@unchecked Sendable`: the handle is used by one session at a time (`turns`).
public final class SQLiteConnection: SQLDatabase, @unchecked Sendable {
    private let handle: OpaquePointer
    private let thread: DedicatedThreadExecutor
    private let turns = TurnGate()
    public var backend: String { "SQLite" }

    /// Opens (creating it if missing) the file; blocks the caller for the open, so call it at
    /// start, not while serving.
    public init(path: String) throws(StoreError) {
        try Self.restrictToOwner(path)
        var db: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let rc = sqlite3_open_v2(path, &db, flags, nil)
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close_v2(db)
            throw StoreError(operation: "open \(path)", code: rc, message: message)
        }
        handle = db
        thread = DedicatedThreadExecutor(name: "sqlite")
        sqlite3_extended_result_codes(db, 1)
        try runQuery("PRAGMA journal_mode=WAL", [], operation: "enable WAL")
        try runScript("PRAGMA synchronous=FULL; PRAGMA busy_timeout=5000; PRAGMA foreign_keys=ON;", operation: "configure")
    }

    /// The file holds gateway secrets and phone tokens: 0600, whatever the umask, created so
    /// before SQLite opens it (and an older file tightened). SQLite gives the -wal and -shm files
    /// the database file's mode when it creates them; ones left from before are tightened too.
    static func restrictToOwner(_ path: String) throws(StoreError) {
        guard path != ":memory:", !path.isEmpty, !path.hasPrefix("file:") else { return }
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw StoreError(operation: "open \(path)", code: errno,
                             message: "\(String(cString: strerror(errno))); the directory must exist and be writable by this user")
        }
        let changed = fchmod(fd, 0o600)
        let failure = errno
        #if canImport(Glibc)
        Glibc.close(fd)
        #else
        Darwin.close(fd)
        #endif
        guard changed == 0 else {
            throw StoreError(operation: "make \(path) 0600", code: failure,
                             message: "\(String(cString: strerror(failure))); run doorbell-cloud as the file's owner")
        }
        for companion in [path + "-wal", path + "-shm"] where access(companion, F_OK) == 0 {
            guard chmod(companion, 0o600) == 0 else {
                throw StoreError(operation: "make \(companion) 0600", code: errno,
                                 message: "\(String(cString: strerror(errno))); run doorbell-cloud as the file's owner")
            }
        }
    }

    deinit {
        thread.stop()
        sqlite3_close_v2(handle)
    }

    public func execute(script: String, operation: String) async throws(StoreError) {
        try await withConnection { (db) async throws(StoreError) in try await db.execute(script: script, operation: operation) }
    }

    @discardableResult
    public func query(_ sql: String, _ parameters: [SQLValue], operation: String) async throws(StoreError) -> SQLResult {
        try await withConnection { (db) async throws(StoreError) in try await db.query(sql, parameters, operation: operation) }
    }

    public func withConnection<T: Sendable>(
        _ body: (any SQLConnection) async throws(StoreError) -> T
    ) async throws(StoreError) -> T {
        try await withTaskExecutorPreference(thread) { () async throws(StoreError) -> T in
            try await turns.take { () async throws(StoreError) -> T in try await body(Session(owner: self)) }
        }
    }

    public func close() async {}

    /// The handle while the caller has its turn. Its calls do not suspend: they run on the thread
    /// the session runs on, the connection's own.
    private struct Session: SQLConnection {
        let owner: SQLiteConnection
        var backend: String { "SQLite" }

        func query(_ sql: String, _ parameters: [SQLValue], operation: String) async throws(StoreError) -> SQLResult {
            try owner.runQuery(sql, parameters, operation: operation)
        }

        func execute(script: String, operation: String) async throws(StoreError) {
            try owner.runScript(script, operation: operation)
        }
    }

    private func runScript(_ script: String, operation: String) throws(StoreError) {
        let rc = sqlite3_exec(handle, script, nil, nil, nil)
        guard rc == SQLITE_OK else { throw error(operation, rc) }
    }

    @discardableResult
    private func runQuery(_ sql: String, _ parameters: [SQLValue], operation: String) throws(StoreError) -> SQLResult {
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

/// Hands out turns in arrival order, without holding a thread while waiting (an async mutex).
final class TurnGate: Sendable {
    private struct State {
        var busy = false
        var waiting: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Mutex(State())

    func take<T>(_ body: () async throws(StoreError) -> T) async throws(StoreError) -> T {
        await withCheckedContinuation { (turn: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state -> Bool in
                if state.busy {
                    state.waiting.append(turn)
                    return false
                }
                state.busy = true
                return true
            }
            if now { turn.resume() }
        }
        defer {
            let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
                if state.waiting.isEmpty {
                    state.busy = false
                    return nil
                }
                return state.waiting.removeFirst()
            }
            next?.resume()
        }
        return try await body()
    }
}

