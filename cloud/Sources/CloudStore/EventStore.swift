import CloudCore
import Synchronization

/// The receiver's durable event table (SQLite, WAL). Deduplicates by event id: the id is the
/// primary key and inserts are `INSERT OR IGNORE`, so two concurrent deliveries of one event
/// store it once and exactly one of them sees `.inserted`.
public final class EventStore: Sendable {
    public enum InsertResult: Sendable, Equatable {
        case inserted
        case duplicate
    }

    private let connection: Mutex<SQLiteConnection>

    /// Opens (creating if missing) the database at `path` and brings its schema up to date.
    public init(path: String) throws(StoreError) {
        let connection = try SQLiteConnection(path: path)
        try Self.configure(connection)
        self.connection = Mutex(connection)
    }

    /// Stores `event` unless an event with the same id is already stored. Durable on return
    /// (`synchronous=FULL`), so acknowledging afterwards is safe.
    public func insert(_ event: StoredEvent) throws(StoreError) -> InsertResult {
        let changes = try connection.withLock { (db) throws(StoreError) -> Int in
            try db.run(
                """
                INSERT OR IGNORE INTO events
                    (id, sequence, type, gateway_id, device_id, occurred_at, body, received_at_ms, verified)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
                [
                    .text(event.id), .integer(event.sequence), .text(event.type), .text(event.gatewayID),
                    event.deviceID.map(SQLiteValue.text) ?? .null, .text(event.occurredAt), .text(event.body),
                    .integer(event.receivedAtMilliseconds), .text(event.verified.joined(separator: " ")),
                ],
                operation: "insert event \(event.id)")
        }
        return changes == 0 ? .duplicate : .inserted
    }

    /// All stored events, ordered by gateway and sequence.
    public func allEvents() throws(StoreError) -> [StoredEvent] {
        try connection.withLock { (db) throws(StoreError) -> [StoredEvent] in
            var events: [StoredEvent] = []
            try db.run(
                """
                SELECT id, sequence, type, gateway_id, device_id, occurred_at, body, received_at_ms, verified
                FROM events ORDER BY gateway_id, sequence, received_at_ms
                """,
                operation: "list events"
            ) { row in
                events.append(StoredEvent(
                    id: row.text(0) ?? "", sequence: row.integer(1), type: row.text(2) ?? "",
                    gatewayID: row.text(3) ?? "", deviceID: row.text(4), occurredAt: row.text(5) ?? "",
                    body: row.text(6) ?? "null", receivedAtMilliseconds: row.integer(7),
                    verified: (row.text(8) ?? "").split(separator: " ").map(String.init)))
            }
            return events
        }
    }

    private static func configure(_ db: SQLiteConnection) throws(StoreError) {
        try db.run("PRAGMA journal_mode=WAL", operation: "enable WAL")
        try db.execute(
            """
            PRAGMA synchronous=FULL;
            PRAGMA busy_timeout=5000;
            CREATE TABLE IF NOT EXISTS events (
                id             TEXT PRIMARY KEY NOT NULL,
                sequence       INTEGER NOT NULL,
                type           TEXT NOT NULL,
                gateway_id     TEXT NOT NULL,
                device_id      TEXT,
                occurred_at    TEXT NOT NULL,
                body           TEXT NOT NULL,
                received_at_ms INTEGER NOT NULL,
                verified       TEXT NOT NULL
            );
            CREATE INDEX IF NOT EXISTS events_by_gateway_sequence ON events (gateway_id, sequence);
            """,
            operation: "create schema")
    }
}
