import CLibPQ

// postgres_ext.h defines these as character literals, which Swift does not import.
private let diagnosticSQLState = Int32(UInt8(ascii: "C"))  // PG_DIAG_SQLSTATE
private let diagnosticPrimaryMessage = Int32(UInt8(ascii: "M"))  // PG_DIAG_MESSAGE_PRIMARY

/// A thin owner of one libpq `PGconn`. Every parameter goes as text and every column comes back
/// as text, so `SQLValue`/`SQLRow` mean the same as on SQLite. Not thread-safe (hence
/// `@unchecked`): the stores serialize access with a mutex.
///
/// A parameter the statement gives no type (`SELECT $1`, `$1 IS NULL`) is an error here
/// (SQLSTATE 42P18) though SQLite takes it: write `CAST($1 AS TEXT)`, which both accept.
///
/// A connection found broken before a statement is reset once (a new server session: session
/// settings made with `SET` are gone). A statement that was running when the connection broke
/// is not retried: it may or may not have run, and only the caller knows whether it is safe.
public final class PostgresConnection: SQLConnection, @unchecked Sendable {
    private let handle: OpaquePointer
    /// Where we are connected, for messages: `database "x" on host:port as user "y"`.
    private let target: String
    /// Whether the session was inside BEGIN…COMMIT after the last statement; a reset loses the
    /// transaction, and the rest of it must not then run outside one.
    private var inTransaction = false
    public var backend: String { "PostgreSQL" }

    /// libpq reports connection failures without a SQLSTATE; this is the server's own code for
    /// them (connection_failure), so callers can treat both alike.
    public static let connectionFailure = "08006"

    /// `conninfo` is a libpq connection string (`host=… dbname=…`) or a `postgresql://` URI;
    /// the PG* environment variables fill in what it leaves out, as for psql.
    public init(conninfo: String) throws(StoreError) {
        let password = try Self.validate(conninfo)
        // Defaults first (the connection string overrides them), then client_encoding, which
        // must win: Swift strings are UTF-8 whatever the database's encoding.
        let settings: [(String, String)] = [
            ("connect_timeout", "10"),
            ("fallback_application_name", "doorbell-cloud"),
            ("dbname", conninfo),
            ("client_encoding", "UTF8"),
        ]
        guard let conn = Self.connect(settings) else {
            throw StoreError(operation: "connect to PostgreSQL", code: 0, message: "libpq is out of memory",
                             backend: "PostgreSQL", state: Self.connectionFailure)
        }
        target = Self.describe(conn)
        guard PQstatus(conn) == CONNECTION_OK else {
            let message = Self.redact(Self.connectionMessage(conn), password)
            PQfinish(conn)
            throw StoreError(
                operation: "connect to PostgreSQL \(target)", code: 0,
                message: "\(message) (check that the server is running and reachable there, and that the user, "
                    + "password and database exist and are allowed in the server's pg_hba.conf)",
                backend: "PostgreSQL", state: Self.connectionFailure)
        }
        handle = conn
        // `CREATE … IF NOT EXISTS` on every start would otherwise print NOTICEs to stderr.
        PQsetNoticeProcessor(conn, { _, _ in }, nil)
    }

    deinit {
        PQfinish(handle)
    }

    public func execute(script: String, operation: String) throws(StoreError) {
        try ensureConnected(operation, sql: script)
        try consume(PQexec(handle, script), operation)
    }

    @discardableResult
    public func query(_ sql: String, _ parameters: [SQLValue], operation: String) throws(StoreError) -> SQLResult {
        try ensureConnected(operation, sql: sql)
        guard parameters.count <= 65_535 else {  // the protocol's limit
            throw StoreError(operation: operation, code: 0, message: "\(parameters.count) parameters; PostgreSQL takes at most 65535",
                             backend: "PostgreSQL", state: "54023")
        }

        // Text format for everything: the server parses "42" into a BIGINT column itself, and
        // `$N` maps to values[N-1] whatever order or repetition the statement uses.
        var values: [UnsafeMutableBufferPointer<CChar>?] = []
        defer { values.forEach { $0?.deallocate() } }
        for (index, parameter) in parameters.enumerated() {
            let text: String
            switch parameter {
            case .null:
                values.append(nil)
                continue
            case .integer(let value): text = String(value)
            case .text(let value): text = value
            }
            // Text-format values end at the first NUL; refuse rather than store a cut string.
            guard !text.utf8.contains(0) else {
                throw StoreError(operation: operation, code: 0,
                                 message: "parameter $\(index + 1) contains a NUL character, which PostgreSQL text cannot hold",
                                 backend: "PostgreSQL", state: "22021")
            }
            let cString = text.utf8CString
            let buffer = UnsafeMutableBufferPointer<CChar>.allocate(capacity: cString.count)
            _ = buffer.initialize(from: cString)
            values.append(buffer)
        }
        let pointers: [UnsafePointer<CChar>?] = values.map { $0?.baseAddress.map { UnsafePointer($0) } }
        let result = PQexecParams(handle, sql, Int32(pointers.count), nil, pointers, nil, nil, 0)
        return try consume(result, operation)
    }

    // MARK: - Results

    /// Reads `result` (which may be nil when libpq could not even send) and clears it.
    @discardableResult
    private func consume(_ result: OpaquePointer?, _ operation: String) throws(StoreError) -> SQLResult {
        defer {
            PQclear(result)
            // UNKNOWN means the connection is gone; keep what we knew for ensureConnected.
            switch PQtransactionStatus(handle) {
            case PQTRANS_IDLE: inTransaction = false
            case PQTRANS_INTRANS, PQTRANS_INERROR: inTransaction = true
            default: break
            }
        }
        guard let result else { throw failure(operation, result: nil) }
        switch PQresultStatus(result) {
        case PGRES_TUPLES_OK, PGRES_COMMAND_OK, PGRES_EMPTY_QUERY:
            break
        default:
            throw failure(operation, result: result)
        }

        let rowCount = PQntuples(result)
        let columnCount = PQnfields(result)
        var rows: [SQLRow] = []
        rows.reserveCapacity(Int(rowCount))
        for row in 0..<rowCount {
            var columns: [String?] = []
            columns.reserveCapacity(Int(columnCount))
            for column in 0..<columnCount {
                if PQgetisnull(result, row, column) != 0 {
                    columns.append(nil)
                } else if let bytes = PQgetvalue(result, row, column) {
                    let count = Int(PQgetlength(result, row, column))
                    columns.append(bytes.withMemoryRebound(to: UInt8.self, capacity: count) {
                        String(decoding: UnsafeBufferPointer(start: $0, count: count), as: UTF8.self)
                    })
                } else {
                    columns.append(nil)
                }
            }
            rows.append(SQLRow(columns))
        }
        // "" for commands that report no count (SELECT reports its row count; BEGIN nothing).
        let changes = PQcmdTuples(result).flatMap { Int(String(cString: $0)) } ?? 0
        return SQLResult(rows: rows, changes: changes)
    }

    private func failure(_ operation: String, result: OpaquePointer?) -> StoreError {
        let state = field(result, diagnosticSQLState)
        guard PQstatus(handle) == CONNECTION_OK else {
            // The connection's message has all of it (e.g. the server's FATAL, then libpq's
            // "server closed the connection"); the result only the last part, and no SQLSTATE.
            let message = Self.connectionMessage(handle)
            return StoreError(operation: operation, code: 0,
                              message: "\(message.isEmpty ? "connection lost" : message) (lost the connection to "
                                  + "\(target); the statement may or may not have taken effect; the next statement reconnects)",
                              backend: "PostgreSQL", state: state ?? Self.connectionFailure)
        }
        var message = field(result, diagnosticPrimaryMessage)
            ?? result.flatMap { PQresultErrorMessage($0) }.map { Self.oneLine(String(cString: $0)) }
            ?? ""
        if message.isEmpty { message = Self.connectionMessage(handle) }
        if message.isEmpty, let result, let status = PQresStatus(PQresultStatus(result)) {
            message = String(cString: status)
        }
        return StoreError(operation: operation, code: 0, message: message, backend: "PostgreSQL", state: state)
    }

    private func field(_ result: OpaquePointer?, _ code: Int32) -> String? {
        guard let result, let value = PQresultErrorField(result, code) else { return nil }
        return String(cString: value)
    }

    // MARK: - Connection

    /// Resets a broken connection once before a statement. A transaction open on the lost
    /// session was rolled back by the server, so its remaining statements fail instead of
    /// running one by one outside it; only the caller's ROLLBACK goes through.
    private func ensureConnected(_ operation: String, sql: String) throws(StoreError) {
        guard PQstatus(handle) != CONNECTION_OK else { return }
        PQreset(handle)
        guard PQstatus(handle) == CONNECTION_OK else {
            throw StoreError(
                operation: operation, code: 0,
                message: "lost the connection to PostgreSQL \(target) and could not reconnect: "
                    + "\(Self.connectionMessage(handle)) (check that the server is running and reachable)",
                backend: "PostgreSQL", state: Self.connectionFailure)
        }
        let lostTransaction = inTransaction
        inTransaction = false
        let isRollback = sql.drop { $0.isWhitespace }.prefix(8).uppercased() == "ROLLBACK"
        if lostTransaction && !isRollback {
            throw StoreError(operation: operation, code: 0,
                             message: "the connection to PostgreSQL \(target) was lost inside a transaction, which did not complete "
                                 + "(the server rolls back unfinished ones); roll back and retry the whole transaction",
                             backend: "PostgreSQL", state: "08007")
        }
    }

    private static func connect(_ settings: [(String, String)]) -> OpaquePointer? {
        // libpq wants NULL-terminated arrays of C strings; keep copies alive for the call.
        let keywords = settings.map { cStringCopy($0.0) }
        let values = settings.map { cStringCopy($0.1) }
        defer { (keywords + values).forEach { $0.deallocate() } }
        let keywordPointers: [UnsafePointer<CChar>?] = keywords.map { $0.baseAddress.map { UnsafePointer($0) } } + [nil]
        let valuePointers: [UnsafePointer<CChar>?] = values.map { $0.baseAddress.map { UnsafePointer($0) } } + [nil]
        return PQconnectdbParams(keywordPointers, valuePointers, 1)
    }

    private static func cStringCopy(_ text: String) -> UnsafeMutableBufferPointer<CChar> {
        let cString = text.utf8CString
        let buffer = UnsafeMutableBufferPointer<CChar>.allocate(capacity: cString.count)
        _ = buffer.initialize(from: cString)
        return buffer
    }

    /// Checks the syntax up front so a typo gets a message of its own, and returns the password
    /// (if any) so it can be kept out of messages. libpq takes a string without `=` or a URI
    /// prefix as a bare database name, which cannot be malformed.
    private static func validate(_ conninfo: String) throws(StoreError) -> String? {
        let isURI = conninfo.hasPrefix("postgresql://") || conninfo.hasPrefix("postgres://")
        guard isURI || conninfo.contains("=") else { return nil }
        var errorMessage: UnsafeMutablePointer<CChar>?
        guard let options = PQconninfoParse(conninfo, &errorMessage) else {
            let detail = errorMessage.map { redactQuoted(oneLine(String(cString: $0)), in: conninfo) } ?? "out of memory"
            PQfreemem(errorMessage)
            throw StoreError(
                operation: "connect to PostgreSQL", code: 0,
                message: "the connection string is not valid: \(detail); use key=value pairs (host=… port=… "
                    + "dbname=… user=…) or a URI postgresql://user:password@host:port/dbname, "
                    + "percent-encoding special characters",
                backend: "PostgreSQL", state: connectionFailure)
        }
        defer { PQconninfoFree(options) }
        var option = options
        while let keyword = option.pointee.keyword {
            if String(cString: keyword) == "password", let value = option.pointee.val {
                return String(cString: value)
            }
            option += 1
        }
        return nil
    }

    /// `database "doorbell" on 127.0.0.1:5432 as user "doorbell"`, from what libpq actually
    /// used (connection string, PG* variables and defaults).
    private static func describe(_ conn: OpaquePointer) -> String {
        func value(_ pointer: UnsafeMutablePointer<CChar>?) -> String {
            pointer.map { String(cString: $0) } ?? ""
        }
        let host = value(PQhost(conn))
        let port = value(PQport(conn))
        let server = host.hasPrefix("/") ? "the Unix socket in \(host) (port \(port))"
            : "\(host.isEmpty ? "localhost" : host):\(port)"
        return "database \"\(value(PQdb(conn)))\" on \(server) as user \"\(value(PQuser(conn)))\""
    }

    private static func connectionMessage(_ conn: OpaquePointer) -> String {
        PQerrorMessage(conn).map { oneLine(String(cString: $0)) } ?? ""
    }

    /// libpq's messages end in a newline and continue on tab-indented lines.
    private static func oneLine(_ text: String) -> String {
        text.split(whereSeparator: \.isNewline)
            .map { $0.split(whereSeparator: \.isWhitespace).joined(separator: " ") }
            .filter { !$0.isEmpty }
            .joined(separator: "; ")
    }

    private static func redact(_ text: String, _ password: String?) -> String {
        // Short passwords would mangle ordinary words; libpq never echoes them anyway.
        guard let password, password.count >= 4 else { return text }
        return text.replacing(password, with: "***")
    }

    /// libpq quotes the offending fragment of a bad connection string, which may be the
    /// password. Keeps only fragments that are plainly option names (`name=` in the string).
    private static func redactQuoted(_ text: String, in conninfo: String) -> String {
        var output = ""
        var fragment = ""
        var quoted = false
        for character in text {
            if character == "\"" {
                if quoted {
                    let isOptionName = !fragment.isEmpty
                        && fragment.allSatisfy { $0.isASCII && ($0.isLowercase || $0 == "_") }
                        && conninfo.contains(fragment + "=")
                    output += (isOptionName ? fragment : "…") + "\""
                    fragment = ""
                } else {
                    output.append(character)
                }
                quoted.toggle()
            } else if quoted {
                fragment.append(character)
            } else {
                output.append(character)
            }
        }
        return output
    }
}
