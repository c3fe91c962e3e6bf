import Foundation
import Logging
import NIOCore
import NIOSSL
import PostgresNIO
import Synchronization

/// PostgreSQL through postgres-nio: a pool of non-blocking connections (`PostgresClient`), run
/// by a task the pool owns from `open` to `close`. Concurrent requests use different
/// connections, so one slow statement delays only its own caller, and no thread waits for the
/// server. Every parameter goes as untyped text and every column comes back as text, so
/// `SQLValue`/`SQLRow` mean the same as on SQLite (and as with libpq before): the server infers a
/// parameter's type from the statement; one it cannot (`SELECT $1`) is an error (SQLSTATE 42P18)
/// though SQLite takes it: write `CAST($1 AS TEXT)`, which both accept.
///
/// A connection that breaks is replaced by the pool. A statement that was running when its
/// connection broke is not retried: it may or may not have run, and only the caller knows
/// whether it is safe; the rest of a transaction on that connection fails too (the server rolled
/// it back), and never runs outside it.
public final class PostgresPool: SQLDatabase {
    /// The server's code for a lost or refused connection (connection_failure); the pool uses it
    /// for its own connection failures too, so callers can treat both alike.
    public static let connectionFailure = "08006"
    /// Connections per process; several `serve` processes on one server each open this many.
    public static let maximumConnections = 10

    public let settings: PostgresSettings
    private let client: PostgresClient
    private let runner: Task<Void, Never>
    private let logger = Logger(label: "doorbell-cloud.postgres")
    public var backend: String { "PostgreSQL" }

    /// Connects once to check the settings and the server (so a wrong password or a server that
    /// is down is reported now, with what was tried), then starts the pool.
    public static func open(
        conninfo: String, environment: [String: String] = ProcessInfo.processInfo.environment
    ) async throws(StoreError) -> PostgresPool {
        let settings = try PostgresSettings.parse(conninfo, environment: environment)
        if let problem = await probe(settings) {
            throw StoreError(
                operation: "connect to PostgreSQL \(settings.target)", code: 0,
                message: "\(problem) (check that the server is running and reachable there, and that the user, "
                    + "password and database exist and are allowed in the server's pg_hba.conf)",
                backend: "PostgreSQL", state: connectionFailure)
        }
        return try PostgresPool(settings: settings)
    }

    private init(settings: PostgresSettings) throws(StoreError) {
        self.settings = settings
        var configuration: PostgresClient.Configuration
        if let socket = settings.unixSocketPath {
            configuration = .init(unixSocketPath: socket, username: settings.user, password: settings.password,
                                  database: settings.database)
        } else {
            configuration = .init(host: settings.host, port: settings.port, username: settings.user,
                                  password: settings.password, database: settings.database,
                                  tls: try Self.clientTLS(settings))
        }
        configuration.options.connectTimeout = .seconds(Int64(settings.connectTimeoutSeconds))
        configuration.options.additionalStartupParameters = Self.startupParameters(settings)
        configuration.options.maximumConnections = Self.maximumConnections
        let client = PostgresClient(configuration: configuration)
        self.client = client
        runner = Task { await client.run() }
    }

    deinit {
        runner.cancel()
    }

    public func close() async {
        runner.cancel()
        await runner.value
    }

    // MARK: Statements

    @discardableResult
    public func query(_ sql: String, _ parameters: [SQLValue], operation: String) async throws(StoreError) -> SQLResult {
        try await withConnection { (db) async throws(StoreError) in try await db.query(sql, parameters, operation: operation) }
    }

    public func execute(script: String, operation: String) async throws(StoreError) {
        try await withConnection { (db) async throws(StoreError) in try await db.execute(script: script, operation: operation) }
    }

    /// Leases a connection for `body`. Waiting for one is bounded by `connect_timeout`: when the
    /// server is down (or every connection stays busy) the caller gets an error saying which,
    /// instead of waiting for the pool's one-minute circuit breaker.
    public func withConnection<T: Sendable>(
        _ body: (any SQLConnection) async throws(StoreError) -> T
    ) async throws(StoreError) -> T {
        var connection = try await lease()
        // One the server closed while it sat idle: the pool has not noticed yet; nothing was sent.
        for _ in 0..<Self.maximumConnections where connection.connection.isClosed {
            connection.release()
            connection = try await lease()
        }
        defer { connection.release() }
        return try await body(Session(connection: connection.connection, target: settings.target))
    }

    /// A leased connection: held by a child task of the pool until `release()`.
    private struct Lease: Sendable {
        let connection: PostgresConnection
        let done: AsyncStream<Void>.Continuation
        func release() { done.finish() }
    }

    private enum LeaseEvent: Sendable {
        case leased(Lease)
        case failed(String)
        case timedOut
    }

    private func lease() async throws(StoreError) -> Lease {
        let (events, event) = AsyncStream.makeStream(of: LeaseEvent.self)
        let client = client
        // The lease lives in a task of its own so that the wait for it can time out without
        // cancelling the caller; once handed over, it lasts until the caller releases it.
        let holder = Task {
            do {
                try await client.withConnection { connection in
                    let (done, finish) = AsyncStream.makeStream(of: Void.self)
                    event.yield(.leased(Lease(connection: connection, done: finish)))
                    for await _ in done {}
                }
            } catch {
                event.yield(.failed(Self.describe(error)))
            }
        }
        let seconds = settings.connectTimeoutSeconds
        let timer = Task {
            guard (try? await Task.sleep(for: .seconds(seconds))) != nil else { return }
            event.yield(.timedOut)
        }
        defer { timer.cancel() }
        for await next in events {
            switch next {
            case .leased(let lease):
                return lease
            case .failed(let problem):
                throw lostConnection("could not get a connection: \(problem)")
            case .timedOut:
                // Cancelled, the holder gives back a connection it got just now.
                holder.cancel()
                event.finish()
                let problem = await Self.probe(settings)
                throw lostConnection(problem.map { "could not reconnect within \(seconds) s: \($0)" }
                    ?? "none of the \(Self.maximumConnections) connections became free within \(seconds) s")
            }
        }
        throw lostConnection("the connection pool has stopped")
    }

    private func lostConnection(_ message: String) -> StoreError {
        StoreError(operation: "connect to PostgreSQL", code: 0,
                   message: message + " (PostgreSQL \(settings.target); check that the server is running and reachable)",
                   backend: "PostgreSQL", state: Self.connectionFailure)
    }

    /// One connection of the pool, while leased.
    private struct Session: SQLConnection {
        let connection: PostgresConnection
        let target: String
        var backend: String { "PostgreSQL" }

        func query(_ sql: String, _ parameters: [SQLValue], operation: String) async throws(StoreError) -> SQLResult {
            var bindings = PostgresBindings(capacity: parameters.count)
            guard parameters.count <= 65_535 else {  // the protocol's limit
                throw StoreError(operation: operation, code: 0, message: "\(parameters.count) parameters; PostgreSQL takes at most 65535",
                                 backend: "PostgreSQL", state: "54023")
            }
            for (index, parameter) in parameters.enumerated() {
                switch parameter {
                case .null:
                    bindings.appendNull()
                case .integer(let value):
                    bindings.append(UntypedText(text: String(value)))
                case .text(let value):
                    // Text ends at the first NUL; refuse rather than store a cut string.
                    guard !value.utf8.contains(0) else {
                        throw StoreError(operation: operation, code: 0,
                                         message: "parameter $\(index + 1) contains a NUL character, which PostgreSQL text cannot hold",
                                         backend: "PostgreSQL", state: "22021")
                    }
                    bindings.append(UntypedText(text: value))
                }
            }
            let result: PostgresQueryResult
            do {
                result = try await answerOrClose(PostgresQuery(unsafeSQL: sql, binds: bindings)).get()
            } catch {
                let failure = Self.failure(error, operation: operation, target: target)
                // The pool must not hand out a connection the server has closed.
                if failure.state == PostgresPool.connectionFailure { try? await connection.close() }
                throw failure
            }
            var rows: [SQLRow] = []
            rows.reserveCapacity(result.rows.count)
            for row in result.rows {
                var columns: [String?] = []
                for cell in row {
                    columns.append(try Self.text(cell, operation: operation))
                }
                rows.append(SQLRow(columns))
            }
            // nil for commands that report no count (SELECT reports its row count; BEGIN nothing).
            return SQLResult(rows: rows, changes: result.metadata.rows ?? 0)
        }

        /// The statement's answer, or a failure once the connection closes first: a statement
        /// written to a connection that has just closed is never answered.
        private func answerOrClose(_ query: PostgresQuery) -> EventLoopFuture<PostgresQueryResult> {
            let answer: EventLoopFuture<PostgresQueryResult> = connection.query(query, logger: connection.logger)
            let promise = connection.eventLoop.makePromise(of: PostgresQueryResult.self)
            let first = FirstOnly()
            answer.whenComplete { result in if first.take() { promise.completeWith(result) } }
            connection.closeFuture.whenComplete { _ in
                if first.take() { promise.fail(ClosedBeforeAnswer()) }
            }
            return promise.futureResult
        }

        func execute(script: String, operation: String) async throws(StoreError) {
            for statement in script.sqlStatements {
                try await query(statement, [], operation: operation)
            }
        }

        /// A column as text, as libpq's text format would have it.
        static func text(_ cell: PostgresCell, operation: String) throws(StoreError) -> String? {
            guard cell.bytes != nil else { return nil }
            do {
                switch cell.dataType {
                case .int2, .int4, .int8: return String(try cell.decode(Int64.self))
                case .bool: return try cell.decode(Bool.self) ? "t" : "f"
                default: return try cell.decode(String.self)
                }
            } catch {
                throw StoreError(operation: operation, code: 0,
                                 message: "column \(cell.columnName) has type \(cell.dataType), which doorbell-cloud does not read; CAST it AS TEXT",
                                 backend: "PostgreSQL", state: "42804")
            }
        }

        static func failure(_ error: any Error, operation: String, target: String) -> StoreError {
            if error is ClosedBeforeAnswer {
                return StoreError(operation: operation, code: 0,
                                  message: "the connection closed before the server answered (lost the connection to \(target); "
                                      + "the statement may or may not have taken effect; the next statement uses another connection)",
                                  backend: "PostgreSQL", state: connectionFailure)
            }
            guard let error = error as? PSQLError else {
                return StoreError(operation: operation, code: 0, message: "\(error)", backend: "PostgreSQL")
            }
            let state = error.serverInfo?[.sqlState]
            let message = error.serverInfo?[.message]
            let fatal = error.serverInfo?[.severity].map { $0 == "FATAL" || $0 == "PANIC" } ?? false
            if fatal || [.serverClosedConnection, .clientClosedConnection, .connectionError, .uncleanShutdown].contains(error.code) {
                return StoreError(operation: operation, code: 0,
                                  message: "\(message ?? "connection lost") (lost the connection to \(target); the statement "
                                      + "may or may not have taken effect; the next statement uses another connection)",
                                  backend: "PostgreSQL", state: connectionFailure)
            }
            return StoreError(operation: operation, code: 0, message: message ?? PostgresPool.describe(error),
                              backend: "PostgreSQL", state: state)
        }
    }

    private struct ClosedBeforeAnswer: Error {}

    /// True for the first caller only.
    private final class FirstOnly: Sendable {
        private let taken = Mutex(false)
        func take() -> Bool {
            taken.withLock { taken in
                defer { taken = true }
                return !taken
            }
        }
    }

    /// `$N` as libpq sends it: text, type left for the server to infer.
    private struct UntypedText: PostgresDynamicTypeEncodable {
        let text: String
        var psqlType: PostgresDataType { PostgresDataType(0) }
        var psqlFormat: PostgresFormat { .text }
        func encode<JSONEncoder: PostgresJSONEncoder>(into byteBuffer: inout ByteBuffer, context: PostgresEncodingContext<JSONEncoder>) {
            byteBuffer.writeString(text)
        }
    }

    // MARK: Connecting

    /// Connects once and closes; nil when that worked, else why not.
    private static func probe(_ settings: PostgresSettings) async -> String? {
        var configuration: PostgresConnection.Configuration
        if let socket = settings.unixSocketPath {
            configuration = .init(unixSocketPath: socket, username: settings.user, password: settings.password,
                                  database: settings.database)
        } else {
            do {
                configuration = .init(host: settings.host, port: settings.port, username: settings.user,
                                      password: settings.password, database: settings.database,
                                      tls: try connectionTLS(settings))
            } catch {
                return "\(error)"
            }
        }
        configuration.options.connectTimeout = .seconds(Int64(settings.connectTimeoutSeconds))
        configuration.options.additionalStartupParameters = startupParameters(settings)
        do {
            let connection = try await PostgresConnection.connect(configuration: configuration, id: 0, logger: Logger(label: "doorbell-cloud.postgres"))
            try? await connection.close()
            return nil
        } catch {
            let text = describe(error)
            if let password = settings.password, password.count >= 4 { return text.replacing(password, with: "***") }
            return text
        }
    }

    /// The server's message, or what failed on the way to it, in one line.
    static func describe(_ error: any Error) -> String {
        guard let error = error as? PSQLError else { return "\(error)" }
        if let message = error.serverInfo?[.message] {
            return message + (error.serverInfo?[.sqlState].map { " (SQLSTATE \($0))" } ?? "")
        }
        if let underlying = error.underlying { return "\(error.code): \(underlying)" }
        return "\(error.code)"
    }

    /// Every statement doorbell-cloud runs is a short one: a statement still running after this
    /// is stuck behind a lock or a sick server, and failing it (the request gets a 503, the
    /// fan-out retries) beats holding a pool session and the rows it locked for ever. The
    /// connection string's `options=-c statement_timeout=…` overrides it.
    public static let defaultStatementTimeout = "30s"

    private static func startupParameters(_ settings: PostgresSettings) -> [(String, String)] {
        var parameters = settings.startupParameters
        if parameters["statement_timeout"] == nil { parameters["statement_timeout"] = defaultStatementTimeout }
        return [("application_name", settings.applicationName)] + parameters.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }

    private static func tlsConfiguration(_ settings: PostgresSettings) -> TLSConfiguration {
        var tls = TLSConfiguration.makeClientConfiguration()
        switch settings.sslMode {
        case .verifyFull: tls.certificateVerification = .fullVerification
        case .verifyCA: tls.certificateVerification = .noHostnameVerification
        default: tls.certificateVerification = .none  // libpq's prefer/require encrypt without checking
        }
        return tls
    }

    private static func clientTLS(_ settings: PostgresSettings) throws(StoreError) -> PostgresClient.Configuration.TLS {
        switch settings.sslMode {
        case .disable: return .disable
        case .allow, .prefer: return .prefer(tlsConfiguration(settings))
        case .require, .verifyCA, .verifyFull: return .require(tlsConfiguration(settings))
        }
    }

    private static func connectionTLS(_ settings: PostgresSettings) throws -> PostgresConnection.Configuration.TLS {
        switch settings.sslMode {
        case .disable: return .disable
        case .allow, .prefer: return .prefer(try NIOSSLContext(configuration: tlsConfiguration(settings)))
        case .require, .verifyCA, .verifyFull: return .require(try NIOSSLContext(configuration: tlsConfiguration(settings)))
        }
    }
}
