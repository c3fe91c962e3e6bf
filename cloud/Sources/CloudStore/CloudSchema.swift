/// The schema, one script for SQLite and PostgreSQL: only types and syntax both accept
/// (TEXT, BIGINT, `ON CONFLICT`, `IF NOT EXISTS`). Times are Unix milliseconds; ids are text
/// chosen by the caller (no sequences, which the two spell differently).
enum CloudSchema {
    /// 2: `deliveries.lease_owner` (which fan-out holds a claimed push; a restart takes its own back).
    /// 3: delivery receipts from base stations: `deliveries.displayed_at_ms`, `displayed_on`,
    ///    `not_displayed_at_ms`, and `phone_links` (a gateway's bonded phone ↔ its push token).
    /// 4: `phones.installation_sha256` (who may register a token: `PhoneClaim`), `phones.name`,
    ///    `phones.name_shared`; beacon messages and their rate limits keyed by a region text
    ///    (`BeaconRegion.key`: iBeacon or Eddystone-UID) instead of uuid/major/minor columns.
    /// 5: `enrolment_tokens` (one-time tokens a gateway enrols itself with, kept as SHA-256) and
    ///    `provisioning_reports` (problems a gateway reported with one); new tables only.
    /// 6: `gateway_heartbeats` (each gateway's last heartbeat: when, its agent version and boot
    ///    slot) and `heartbeat_ids` (the ids taken within the timestamp tolerance, the replay
    ///    guard); new tables only.
    static let version: Int64 = 6

    static let beaconMessagesTable = """
        CREATE TABLE IF NOT EXISTS beacon_messages (
            id          TEXT PRIMARY KEY NOT NULL,
            account_id  TEXT NOT NULL REFERENCES accounts (id),
            region      TEXT NOT NULL,
            doorbell_id TEXT REFERENCES doorbells (id) ON DELETE CASCADE,
            site        TEXT,
            event       TEXT NOT NULL,
            title       TEXT NOT NULL,
            body        TEXT NOT NULL,
            UNIQUE (account_id, region, event)
        )
        """

    static let beaconPushesTable = """
        CREATE TABLE IF NOT EXISTS beacon_pushes (
            token        TEXT NOT NULL,
            region       TEXT NOT NULL,
            last_push_ms BIGINT NOT NULL,
            PRIMARY KEY (token, region)
        )
        """

    static let script = """
        CREATE TABLE IF NOT EXISTS events (
            id             TEXT PRIMARY KEY NOT NULL,
            sequence       BIGINT NOT NULL,
            type           TEXT NOT NULL,
            gateway_id     TEXT NOT NULL,
            device_id      TEXT,
            occurred_at    TEXT NOT NULL,
            body           TEXT NOT NULL,
            received_at_ms BIGINT NOT NULL,
            verified       TEXT NOT NULL
        );
        CREATE INDEX IF NOT EXISTS events_by_gateway_sequence ON events (gateway_id, sequence);

        CREATE TABLE IF NOT EXISTS accounts (
            id            TEXT PRIMARY KEY NOT NULL,
            name          TEXT NOT NULL,
            token_sha256  TEXT NOT NULL UNIQUE,
            created_at_ms BIGINT NOT NULL
        );

        CREATE TABLE IF NOT EXISTS gateways (
            id             TEXT PRIMARY KEY NOT NULL,
            account_id     TEXT NOT NULL REFERENCES accounts (id),
            public_key     TEXT,
            secret         TEXT,
            enrolled_at_ms BIGINT NOT NULL
        );

        CREATE TABLE IF NOT EXISTS doorbells (
            id            TEXT PRIMARY KEY NOT NULL,
            gateway_id    TEXT NOT NULL REFERENCES gateways (id) ON DELETE CASCADE,
            device_id     TEXT NOT NULL,
            account_id    TEXT NOT NULL REFERENCES accounts (id),
            name          TEXT NOT NULL,
            site          TEXT,
            created_at_ms BIGINT NOT NULL,
            UNIQUE (gateway_id, device_id)
        );

        CREATE TABLE IF NOT EXISTS shares (
            doorbell_id   TEXT NOT NULL REFERENCES doorbells (id) ON DELETE CASCADE,
            account_id    TEXT NOT NULL REFERENCES accounts (id),
            granted_at_ms BIGINT NOT NULL,
            PRIMARY KEY (doorbell_id, account_id)
        );

        CREATE TABLE IF NOT EXISTS phones (
            token            TEXT PRIMARY KEY NOT NULL,
            account_id       TEXT NOT NULL REFERENCES accounts (id),
            environment      TEXT NOT NULL,
            bundle_id        TEXT NOT NULL,
            registered_at_ms BIGINT NOT NULL,
            bad_token_count  BIGINT NOT NULL DEFAULT 0,
            installation_sha256 TEXT,
            name             TEXT,
            name_shared      BIGINT NOT NULL DEFAULT 0
        );
        CREATE INDEX IF NOT EXISTS phones_by_account ON phones (account_id);

        CREATE TABLE IF NOT EXISTS deliveries (
            event_id           TEXT NOT NULL,
            token              TEXT NOT NULL,
            account_id         TEXT NOT NULL,
            environment        TEXT NOT NULL,
            bundle_id          TEXT NOT NULL,
            doorbell_id        TEXT,
            payload            TEXT NOT NULL,
            apns_id            TEXT NOT NULL,
            collapse_id        TEXT,
            expires_at_ms      BIGINT NOT NULL,
            state              TEXT NOT NULL,
            attempts           BIGINT NOT NULL DEFAULT 0,
            next_attempt_at_ms BIGINT NOT NULL,
            last_status        BIGINT,
            last_reason        TEXT,
            created_at_ms      BIGINT NOT NULL,
            updated_at_ms      BIGINT NOT NULL,
            lease_owner        TEXT,
            displayed_at_ms    BIGINT,
            displayed_on       TEXT,
            not_displayed_at_ms BIGINT,
            PRIMARY KEY (event_id, token)
        );
        CREATE INDEX IF NOT EXISTS deliveries_due ON deliveries (state, next_attempt_at_ms);

        \(beaconMessagesTable);

        \(beaconPushesTable);

        CREATE TABLE IF NOT EXISTS phone_links (
            gateway_id   TEXT NOT NULL,
            phone_id     TEXT NOT NULL,
            token        TEXT NOT NULL,
            phone_name   TEXT,
            linked_at_ms BIGINT NOT NULL,
            PRIMARY KEY (gateway_id, phone_id)
        );

        CREATE TABLE IF NOT EXISTS enrolment_tokens (
            token_sha256     TEXT PRIMARY KEY NOT NULL,
            account_id       TEXT NOT NULL REFERENCES accounts (id),
            gateway_id       TEXT,
            created_at_ms    BIGINT NOT NULL,
            expires_at_ms    BIGINT NOT NULL,
            used_at_ms       BIGINT,
            used_by_gateway  TEXT,
            used_public_key  TEXT
        );
        CREATE INDEX IF NOT EXISTS enrolment_tokens_by_account ON enrolment_tokens (account_id);

        CREATE TABLE IF NOT EXISTS provisioning_reports (
            id             TEXT PRIMARY KEY NOT NULL,
            token_sha256   TEXT NOT NULL,
            account_id     TEXT NOT NULL REFERENCES accounts (id),
            gateway_id     TEXT NOT NULL,
            problem        TEXT NOT NULL,
            reported_at_ms BIGINT NOT NULL
        );
        CREATE INDEX IF NOT EXISTS provisioning_reports_by_account ON provisioning_reports (account_id, reported_at_ms);

        CREATE TABLE IF NOT EXISTS gateway_heartbeats (
            gateway_id    TEXT PRIMARY KEY NOT NULL,
            last_seen_ms  BIGINT NOT NULL,
            agent_version TEXT NOT NULL,
            boot_slot     TEXT
        );

        CREATE TABLE IF NOT EXISTS heartbeat_ids (
            id             TEXT PRIMARY KEY NOT NULL,
            received_at_ms BIGINT NOT NULL
        );
        CREATE INDEX IF NOT EXISTS heartbeat_ids_by_time ON heartbeat_ids (received_at_ms);

        CREATE TABLE IF NOT EXISTS schema_version (
            id      BIGINT PRIMARY KEY NOT NULL DEFAULT 1 CHECK (id = 1),
            version BIGINT NOT NULL
        );
        """

    /// The PostgreSQL advisory lock a migration holds (to its transaction's end): servers
    /// starting at once on one database migrate one after the other, the later ones finding
    /// the work done. Any constant will do; this one is "doorbell" in ASCII.
    static let migrationLock: Int64 = 0x646F_6F72_6265_6C6C

    /// Creates what is missing. Idempotent, so every start runs it.
    static func migrate(_ database: any SQLDatabase) async throws(StoreError) {
        try await database.withConnection { (db) async throws(StoreError) in try await migrate(db) }
    }

    /// PostgreSQL: the whole migration is one transaction under `migrationLock`, so two servers
    /// migrating a fresh database at once neither race on `CREATE TABLE IF NOT EXISTS` (which
    /// is not safe concurrently there) nor both write a version row. SQLite serialises writers
    /// on its own, and the upgrade is a transaction.
    private static func migrate(_ db: any SQLConnection) async throws(StoreError) {
        guard db.backend == "PostgreSQL" else { return try await migrateHoldingLock(db, inTransaction: false) }
        try await db.transaction("migrate schema") { () async throws(StoreError) in
            try await db.query("SELECT pg_advisory_xact_lock($1)", [.integer(migrationLock)], operation: "lock schema migration")
            try await migrateHoldingLock(db, inTransaction: true)
        }
    }

    private static func migrateHoldingLock(_ db: any SQLConnection, inTransaction: Bool) async throws(StoreError) {
        try await db.execute(script: script, operation: "create schema")
        // MAX: a schema_version table from before its key may hold a row per racing server.
        let current = try await db.query("SELECT MAX(version) FROM schema_version", [], operation: "read schema version")
        let stored = current.rows.first?.integer(0)
        if stored == nil {
            try await db.query("INSERT INTO schema_version (version) VALUES ($1)", [.integer(version)],
                         operation: "write schema version")
        } else if let found = stored, found < version {
            func upgrade(_ body: () async throws(StoreError) -> Void) async throws(StoreError) {
                if inTransaction { return try await body() }
                try await db.transaction("upgrade schema from version \(found) to \(version)", body)
            }
            try await upgrade { () async throws(StoreError) in
                if found < 2 {
                    try await db.query("ALTER TABLE deliveries ADD COLUMN lease_owner TEXT", [], operation: "add deliveries.lease_owner")
                }
                if found < 3 {
                    for column in ["displayed_at_ms BIGINT", "displayed_on TEXT", "not_displayed_at_ms BIGINT"] {
                        try await db.query("ALTER TABLE deliveries ADD COLUMN \(column)", [], operation: "add deliveries.\(column)")
                    }
                }
                if found < 4 {
                    // Existing phones keep no secret: their own account binds one at its next
                    // registration (`PhoneClaim.rebind`); no other account can take them meanwhile.
                    for column in ["installation_sha256 TEXT", "name TEXT", "name_shared BIGINT NOT NULL DEFAULT 0"] {
                        try await db.query("ALTER TABLE phones ADD COLUMN \(column)", [], operation: "add phones.\(column)")
                    }
                    // Region texts replace the iBeacon columns: rebuilt, as SQLite cannot drop a
                    // UNIQUE constraint in place.
                    let rebuilds = [
                        ("beacon_messages", beaconMessagesTable,
                         "id, account_id, region, doorbell_id, site, event, title, body",
                         "id, account_id, 'ibeacon:' || uuid || '/' || major || '/' || minor, doorbell_id, site, event, title, body"),
                        ("beacon_pushes", beaconPushesTable, "token, region, last_push_ms",
                         "token, 'ibeacon:' || uuid || '/' || major || '/' || minor, last_push_ms"),
                    ]
                    for (table, create, columns, select) in rebuilds {
                        try await db.query("ALTER TABLE \(table) RENAME TO \(table)_v3", [], operation: "set aside \(table)")
                        try await db.query(create, [], operation: "create \(table)")
                        try await db.query("INSERT INTO \(table) (\(columns)) SELECT \(select) FROM \(table)_v3", [],
                                           operation: "copy \(table)")
                        try await db.query("DROP TABLE \(table)_v3", [], operation: "drop old \(table)")
                    }
                }
                try await db.query("UPDATE schema_version SET version = $1", [.integer(version)], operation: "write schema version")
            }
        } else if let found = stored, found > version {
            throw StoreError(operation: "open database", code: 0,
                             message: "the database has schema version \(found), newer than this doorbell-cloud (\(version)); upgrade doorbell-cloud",
                             backend: db.backend)
        }
    }
}
