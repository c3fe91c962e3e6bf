import CloudCore

/// The receiver's durable event table. Deduplicates by event id: the id is the primary key and
/// inserts are `ON CONFLICT DO NOTHING`, so two concurrent deliveries of one event store it
/// once and exactly one of them sees `.inserted`.
public final class EventStore: Sendable {
    public enum InsertResult: Sendable, Equatable {
        case inserted
        case duplicate
    }

    private let database: any SQLDatabase

    /// Opens (creating if missing) the SQLite database at `path` and brings its schema up to date.
    public convenience init(path: String) async throws(StoreError) {
        try await self.init(database: SQLiteConnection(path: path))
    }

    public init(database: any SQLDatabase) async throws(StoreError) {
        try await CloudSchema.migrate(database)
        self.database = database
    }

    /// Stores `event` unless an event with the same id is already stored. Durable on return.
    public func insert(_ event: StoredEvent) async throws(StoreError) -> InsertResult {
        let changes = try await database.query(EventRows.insert, EventRows.parameters(event),
                                               operation: "insert event \(event.id)").changes
        return changes == 0 ? .duplicate : .inserted
    }

    /// All stored events, ordered by gateway and sequence.
    public func allEvents() async throws(StoreError) -> [StoredEvent] {
        try await database.query(
            "SELECT \(EventRows.columns) FROM events ORDER BY gateway_id, sequence, received_at_ms",
            [], operation: "list events"
        ).rows.map(EventRows.event)
    }
}

/// The `events` table's SQL, shared by `EventStore` and `CloudStore`.
enum EventRows {
    static let columns = "id, sequence, type, gateway_id, device_id, occurred_at, body, received_at_ms, verified"

    static let insert = """
        INSERT INTO events (\(columns))
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
        ON CONFLICT (id) DO NOTHING
        """

    static func parameters(_ event: StoredEvent) -> [SQLValue] {
        [
            .text(event.id), .integer(event.sequence), .text(event.type), .text(event.gatewayID),
            .optional(event.deviceID), .text(event.occurredAt), .text(event.body),
            .integer(event.receivedAtMilliseconds), .text(event.verified.joined(separator: " ")),
        ]
    }

    static func event(_ row: SQLRow) -> StoredEvent {
        StoredEvent(
            id: row.text(0) ?? "", sequence: row.integer(1) ?? 0, type: row.text(2) ?? "",
            gatewayID: row.text(3) ?? "", deviceID: row.text(4), occurredAt: row.text(5) ?? "",
            body: row.text(6) ?? "null", receivedAtMilliseconds: row.integer(7) ?? 0,
            verified: (row.text(8) ?? "").split(separator: " ").map(String.init))
    }
}
