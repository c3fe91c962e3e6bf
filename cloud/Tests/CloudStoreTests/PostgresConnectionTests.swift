import CloudCore
import CloudStore
import Foundation
import Testing

/// The test server's conninfo. cloud/scripts/with-test-postgres.sh starts a throwaway server
/// and sets it; without one the PostgreSQL suite shows as skipped instead of passing vacuously.
private let testPostgres = ProcessInfo.processInfo.environment["DOORBELL_CLOUD_TEST_POSTGRES"].flatMap {
    $0.isEmpty ? nil : $0
}

/// Statements both backends must run alike, with the same SQL.
private enum SharedChecks {
    static func parameterBinding(_ db: any SQLConnection) throws {
        try db.execute(script: "CREATE TABLE pairs (a TEXT NOT NULL, b TEXT NOT NULL, c TEXT NOT NULL)",
                       operation: "create pairs")
        // $2 before $1, and $2 twice: each goes by its number, not its position.
        try db.query("INSERT INTO pairs (a, b, c) VALUES ($2, $1, $2)", [.text("one"), .text("two")],
                     operation: "insert pair")
        let rows = try db.query("SELECT a, b, c FROM pairs WHERE a = $1 OR c = $1", [.text("two")],
                                operation: "select pair").rows
        #expect(rows.map(\.columns) == [["two", "one", "two"]])
        let none = try db.query("SELECT a FROM pairs WHERE b = $1 AND a = $1", [.text("one")], operation: "none")
        #expect(none.rows.isEmpty)
    }

    static func nullAndIntegerRoundTrip(_ db: any SQLConnection) throws {
        try db.execute(script: "CREATE TABLE mixed (id TEXT PRIMARY KEY NOT NULL, n BIGINT, note TEXT)",
                       operation: "create mixed")
        let rows: [[SQLValue]] = [
            [.text("min"), .integer(.min), .null],
            [.text("max"), .integer(.max), .text("h\u{E9}llo \u{2713} 'quoted' \"double\" $1")],
            [.text("none"), .null, .text("")],
        ]
        for row in rows {
            #expect(try db.query("INSERT INTO mixed (id, n, note) VALUES ($1, $2, $3)", row, operation: "insert").changes == 1)
        }
        let read = try db.query("SELECT id, n, note FROM mixed ORDER BY id", [], operation: "read").rows
        #expect(read.map(\.columns) == [
            ["max", "\(Int64.max)", "h\u{E9}llo \u{2713} 'quoted' \"double\" $1"],
            ["min", "\(Int64.min)", nil],
            ["none", nil, ""],
        ])
        #expect(read[1].integer(1) == .min)
        #expect(read[2].integer(1) == nil)
        let nulls = try db.query("SELECT id FROM mixed WHERE note IS NULL AND n < $1", [.integer(0)], operation: "nulls")
        #expect(nulls.rows.map(\.columns) == [["min"]])
    }
}

// MARK: - PostgreSQL

@Suite(.enabled(if: testPostgres != nil,
                "needs DOORBELL_CLOUD_TEST_POSTGRES: run under cloud/scripts/with-test-postgres.sh"))
final class PostgresConnectionTests {
    /// Each test works in a schema of its own, so the tests can run in parallel on one server.
    let schema = "t_" + String(UInt64.random(in: 0...UInt64.max), radix: 16)
    let base: String
    /// Creates and drops the schema; the tests' own connections find it on their search_path.
    let admin: PostgresConnection

    init() throws {
        base = try #require(testPostgres)
        admin = try PostgresConnection(conninfo: base)
        try admin.execute(script: "CREATE SCHEMA \(schema)", operation: "create test schema")
    }

    deinit {
        try? admin.execute(script: "DROP SCHEMA \(schema) CASCADE", operation: "drop test schema")
    }

    /// A new connection whose search_path is the test's schema. Set through the connection
    /// options rather than `SET`, so it survives a reset.
    func connect(user: String? = nil) throws -> PostgresConnection {
        if base.hasPrefix("postgres://") || base.hasPrefix("postgresql://") {
            return try PostgresConnection(conninfo: base + (base.contains("?") ? "&" : "?")
                + "options=-csearch_path%3D\(schema)" + (user.map { "&user=\($0)" } ?? ""))
        }
        return try PostgresConnection(conninfo: base + " options='-csearch_path=\(schema)'" + (user.map { " user=\($0)" } ?? ""))
    }

    func event(_ id: String, sequence: Int64) -> StoredEvent {
        StoredEvent(id: id, sequence: sequence, type: "doorbell.pressed", gatewayID: "gw-1", deviceID: nil,
                    occurredAt: "2026-11-22T14:03:07.123456Z", body: #"{"id":"\#(id)"}"#,
                    receivedAtMilliseconds: 1_700_000_000_000 + sequence, verified: ["v1"])
    }

    @Test func eventStoreRunsTheSchemaAndDeduplicates() throws {
        let store = try EventStore(connection: connect())
        #expect(try store.insert(event("e2", sequence: 2)) == .inserted)
        #expect(try store.insert(event("e1", sequence: 1)) == .inserted)
        #expect(try store.insert(event("e1", sequence: 1)) == .duplicate)
        #expect(try store.allEvents() == [event("e1", sequence: 1), event("e2", sequence: 2)])

        // The schema script is idempotent, and the version is written once.
        let again = try EventStore(connection: connect())
        #expect(try again.allEvents().count == 2)
        let versions = try admin.query("SELECT version FROM \(schema).schema_version", [], operation: "versions")
        #expect(versions.rows.map(\.columns) == [["2"]])
    }

    @Test func concurrentConnectionsStoreOneEventOnce() async throws {
        _ = try EventStore(connection: connect())
        let stores = try (0..<4).map { _ in try EventStore(connection: connect()) }
        let stored = event("e1", sequence: 1)
        let results = try await withThrowingTaskGroup(of: EventStore.InsertResult.self) { group in
            for store in stores {
                group.addTask { try store.insert(stored) }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results.filter { $0 == .inserted }.count == 1)
        #expect(results.filter { $0 == .duplicate }.count == 3)
    }

    @Test func nullAndIntegerParametersRoundTrip() throws {
        try SharedChecks.nullAndIntegerRoundTrip(connect())
    }

    @Test func parametersBindByNumber() throws {
        let db = try connect()
        try SharedChecks.parameterBinding(db)
        let row = try db.query("SELECT CAST($2 AS TEXT) || '-' || CAST($1 AS TEXT) || '-' || CAST($2 AS TEXT)",
                               [.text("a"), .integer(7)], operation: "concatenate")
        #expect(row.rows.first?.text(0) == "7-a-7")
    }

    @Test func changesCountRowsTouched() throws {
        let db = try connect()
        try db.execute(script: "CREATE TABLE counted (id TEXT PRIMARY KEY, n BIGINT NOT NULL)", operation: "create")
        #expect(try db.query("INSERT INTO counted VALUES ('a', 1), ('b', 2), ('c', 3)", [], operation: "insert").changes == 3)
        #expect(try db.query("UPDATE counted SET n = n + 10 WHERE n >= $1", [.integer(2)], operation: "update").changes == 2)
        #expect(try db.query("UPDATE counted SET n = 0 WHERE id = $1", [.text("zzz")], operation: "update none").changes == 0)
        #expect(try db.query("INSERT INTO counted VALUES ('a', 9) ON CONFLICT (id) DO NOTHING", [], operation: "dup").changes == 0)
        #expect(try db.query("DELETE FROM counted WHERE id <> $1", [.text("a")], operation: "delete").changes == 2)
        // Commands without a row count report 0.
        #expect(try db.query("CREATE INDEX counted_n ON counted (n)", [], operation: "index").changes == 0)
    }

    @Test func uniqueViolationCarriesItsSQLState() throws {
        let db = try connect()
        try db.execute(script: "CREATE TABLE once (id TEXT PRIMARY KEY)", operation: "create")
        try db.query("INSERT INTO once (id) VALUES ($1)", [.text("x")], operation: "first insert")
        let error = try #require(throws: StoreError.self) {
            try db.query("INSERT INTO once (id) VALUES ($1)", [.text("x")], operation: "second insert")
        }
        #expect(error.state == "23505")
        #expect(error.backend == "PostgreSQL")
        #expect(error.operation == "second insert")
        #expect(error.message.contains("duplicate key"))
        #expect("\(error)".contains("SQLSTATE 23505"))
        // The connection is still good.
        #expect(try db.query("SELECT count(*) FROM once", [], operation: "count").rows.first?.integer(0) == 1)
    }

    @Test func transactionRollsBackWhenTheBodyThrows() throws {
        let db = try connect()
        try db.execute(script: "CREATE TABLE ledger (id TEXT PRIMARY KEY)", operation: "create")
        #expect(throws: StoreError.self) {
            try db.transaction("two rows") { () throws(StoreError) in
                try db.query("INSERT INTO ledger (id) VALUES ($1)", [.text("a")], operation: "insert a")
                throw StoreError(operation: "test", code: 0, message: "the body failed", backend: "test")
            }
        }
        // A failing statement aborts the transaction on PostgreSQL; the rollback must clear it.
        #expect(throws: StoreError.self) {
            try db.transaction("duplicate") { () throws(StoreError) in
                try db.query("INSERT INTO ledger (id) VALUES ($1)", [.text("b")], operation: "insert b")
                try db.query("INSERT INTO ledger (id) VALUES ($1)", [.text("b")], operation: "insert b again")
            }
        }
        #expect(try db.query("SELECT id FROM ledger", [], operation: "list").rows.isEmpty)
        try db.transaction("commit") { () throws(StoreError) in
            _ = try db.query("INSERT INTO ledger (id) VALUES ($1)", [.text("c")], operation: "insert c")
        }
        #expect(try db.query("SELECT id FROM ledger", [], operation: "list").rows.map(\.columns) == [["c"]])
    }

    @Test func survivesItsBackendBeingTerminated() throws {
        let db = try connect()
        try db.execute(script: "CREATE TABLE kept (id TEXT)", operation: "create")
        let pid = try #require(try db.query("SELECT pg_backend_pid()", [], operation: "pid").rows.first?.integer(0))

        // Killed while running a statement: that statement fails...
        let error = try #require(throws: StoreError.self) {
            try db.query("SELECT pg_terminate_backend(pg_backend_pid())", [], operation: "terminate self")
        }
        // libpq keeps the server's FATAL text but not its SQLSTATE once the socket closes.
        #expect(error.state == PostgresConnection.connectionFailure)
        #expect(error.message.contains("terminating connection due to administrator command"))
        // ...and the next one reconnects, keeping the connection options (the search_path).
        let second = try #require(try db.query("SELECT pg_backend_pid()", [], operation: "pid").rows.first?.integer(0))
        #expect(second != pid)
        #expect(try db.query("SELECT count(*) FROM kept", [], operation: "count").rows.first?.integer(0) == 0)

        // Killed while idle, from another session: the first statement after finds it gone.
        #expect(try admin.query("SELECT pg_terminate_backend($1, 10000)", [.integer(second)],
                                operation: "terminate").rows.first?.text(0) == "t")
        let lost = try #require(throws: StoreError.self) {
            try db.query("SELECT 1", [], operation: "after termination")
        }
        #expect(lost.state == PostgresConnection.connectionFailure)
        #expect(lost.message.contains("lost the connection to database"))
        let third = try #require(try db.query("SELECT pg_backend_pid()", [], operation: "pid").rows.first?.integer(0))
        #expect(third != second)
    }

    @Test func reportsAServerThatStaysDownAndRecoversWhenItIsBack() throws {
        // A role of our own that can be barred from logging in: the server "stays down" for it.
        let role = "r" + schema
        try admin.execute(script: "CREATE ROLE \(role) LOGIN", operation: "create role")
        defer { try? admin.execute(script: "DROP ROLE IF EXISTS \(role)", operation: "drop role") }
        do {
            let db = try connect(user: role)
            let pid = try #require(try db.query("SELECT pg_backend_pid()", [], operation: "pid").rows.first?.integer(0))
            try admin.execute(script: "ALTER ROLE \(role) NOLOGIN", operation: "bar role")
            _ = try admin.query("SELECT pg_terminate_backend($1, 10000)", [.integer(pid)], operation: "terminate")
            #expect(throws: StoreError.self) { try db.query("SELECT 1", [], operation: "lost") }
            let down = try #require(throws: StoreError.self) { try db.query("SELECT 1", [], operation: "still down") }
            #expect(down.state == PostgresConnection.connectionFailure)
            #expect(down.message.contains("could not reconnect"))
            #expect(down.message.contains(#"as user "\#(role)""#))
            #expect(down.message.contains("not permitted to log in"))

            try admin.execute(script: "ALTER ROLE \(role) LOGIN", operation: "allow role")
            #expect(try db.query("SELECT 1", [], operation: "back").rows.first?.text(0) == "1")
        }
    }

    @Test func aTransactionLostWithItsConnectionDoesNotContinueOutsideIt() throws {
        let db = try connect()
        try db.execute(script: "CREATE TABLE pair (id TEXT)", operation: "create")
        let pid = try #require(try db.query("SELECT pg_backend_pid()", [], operation: "pid").rows.first?.integer(0))
        try db.query("BEGIN", [], operation: "begin")
        try db.query("INSERT INTO pair VALUES ('first')", [], operation: "first")
        _ = try admin.query("SELECT pg_terminate_backend($1, 10000)", [.integer(pid)], operation: "terminate")
        #expect(throws: StoreError.self) { try db.query("INSERT INTO pair VALUES ('second')", [], operation: "second") }
        // A caller that carries on instead of rolling back must not get autocommitted halves.
        let error = try #require(throws: StoreError.self) {
            try db.query("INSERT INTO pair VALUES ('third')", [], operation: "third")
        }
        #expect(error.state == "08007")
        try db.query("ROLLBACK", [], operation: "rollback")
        #expect(try db.query("SELECT count(*) FROM pair", [], operation: "count").rows.first?.integer(0) == 0)
    }

    @Test func openByURL() throws {
        // Only the key=value form is known here; a URL goes through the same PostgresConnection.
        let error = try #require(throws: StoreError.self) {
            try Database.open(url: "postgresql://doorbell:pw-in-url-9@127.0.0.1:1/doorbell?connect_timeout=5")
        }
        #expect("\(error)".contains("127.0.0.1:1"))
        #expect(!"\(error)".contains("pw-in-url-9"))
        let db = try connect()
        #expect(db.backend == "PostgreSQL")
    }
}

// MARK: - Without a server

/// Connection failures need libpq only: nothing listens on port 1.
@Suite struct PostgresConnectionErrorTests {
    @Test func unreachableServerNamesItAndHidesThePassword() throws {
        let error = try #require(throws: StoreError.self) {
            try PostgresConnection(conninfo: "host=127.0.0.1 port=1 dbname=doorbell user=cloud password=hunter2-secret connect_timeout=5")
        }
        let text = "\(error)"
        #expect(text.contains(#"database "doorbell" on 127.0.0.1:1 as user "cloud""#))
        #expect(text.contains("check that the server is running"))
        #expect(!text.contains("hunter2-secret"))
        #expect(error.backend == "PostgreSQL")
        #expect(error.state == PostgresConnection.connectionFailure)
    }

    @Test func malformedConninfoIsReportedWithoutEchoingIt() throws {
        let error = try #require(throws: StoreError.self) {
            try PostgresConnection(conninfo: "host=127.0.0.1 password=hunter2-secret bogus_option=hunter2-secret")
        }
        #expect("\(error)".contains(#"not valid: invalid connection option "bogus_option""#))
        #expect(!"\(error)".contains("hunter2-secret"))

        let uri = try #require(throws: StoreError.self) {
            try PostgresConnection(conninfo: "postgresql://cloud:hunter2-secret@127.0.0.1:1/db?nonsense=1")
        }
        #expect("\(uri)".contains(#"not valid: invalid URI query parameter: "nonsense""#))
        #expect(!"\(uri)".contains("hunter2-secret"))
    }

    @Test func unknownURLSchemesAreRefused() throws {
        let error = try #require(throws: StoreError.self) { try Database.open(url: "mysql://root:pw@localhost/db") }
        #expect("\(error)".contains(#"unsupported database URL scheme "mysql:""#))
        #expect(!"\(error)".contains("pw@"))
        #expect(throws: StoreError.self) { try Database.open(url: "host=127.0.0.1 dbname=doorbell") }
        #expect(throws: StoreError.self) { try Database.open(url: "postgresql:doorbell") }
        #expect(throws: StoreError.self) { try Database.open(url: "") }
        #expect(throws: StoreError.self) { try Database.open(url: "sqlite:") }
    }
}

// MARK: - SQLite, same checks

@Suite final class SQLiteParameterTests {
    let directory: URL

    init() throws {
        directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("doorbell-cloud-sqlite-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    deinit {
        try? FileManager.default.removeItem(at: directory)
    }

    var path: String { directory.appendingPathComponent("test.sqlite").path }

    @Test func parametersBindByNumber() throws {
        let db = try SQLiteConnection(path: path)
        try SharedChecks.parameterBinding(db)
        let row = try db.query("SELECT CAST($2 AS TEXT) || '-' || CAST($1 AS TEXT) || '-' || CAST($2 AS TEXT)",
                               [.text("a"), .integer(7)], operation: "concatenate")
        #expect(row.rows.first?.text(0) == "7-a-7")
    }

    @Test func nullAndIntegerParametersRoundTrip() throws {
        try SharedChecks.nullAndIntegerRoundTrip(SQLiteConnection(path: path))
    }

    @Test func openByURLPicksSQLite() throws {
        #expect(try Database.open(url: "sqlite:" + path).backend == "SQLite")
        #expect(try Database.open(url: "sqlite://" + path).backend == "SQLite")
        #expect(try Database.open(url: path).backend == "SQLite")
        #expect(FileManager.default.fileExists(atPath: path))
    }
}
