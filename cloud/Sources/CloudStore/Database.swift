/// Picks the backend from a database URL (`--db`).
public enum Database {
    /// - `sqlite:PATH` (also `sqlite:///abs/path`) or a plain path: a SQLite file, created if missing.
    /// - `postgres://…` / `postgresql://…`: a PostgreSQL server (libpq URI syntax, PG* variables apply).
    public static func open(url: String) async throws(StoreError) -> any SQLDatabase {
        let lowered = url.lowercased()
        if lowered.hasPrefix("postgres://") || lowered.hasPrefix("postgresql://") {
            let scheme = lowered.hasPrefix("postgres://") ? "postgres://" : "postgresql://"
            return try await PostgresPool.open(conninfo: scheme + url.dropFirst(scheme.count))
        }
        if lowered.hasPrefix("sqlite:") {
            var path = Substring(url.dropFirst("sqlite:".count))
            // sqlite:///var/lib/x.db is the URL spelling of /var/lib/x.db (empty authority).
            if path.hasPrefix("//") { path = path.dropFirst(2) }
            guard !path.isEmpty else { throw invalid("sqlite: needs a path, e.g. sqlite:/var/lib/doorbell-cloud/cloud.sqlite") }
            return try SQLiteConnection(path: String(path))
        }
        if lowered.hasPrefix("postgres:") || lowered.hasPrefix("postgresql:") {
            throw invalid("a PostgreSQL URL starts with postgresql:// (postgresql://user:password@host:port/dbname)")
        }
        if let scheme = scheme(of: url) {
            // Only the scheme: the rest may hold a password.
            throw invalid("unsupported database URL scheme \"\(scheme):\"; use sqlite:PATH, a file path, "
                + "or postgresql://user:password@host:port/dbname")
        }
        if url.isEmpty { throw invalid("no database given; use sqlite:PATH, a file path, or a postgresql:// URL") }
        if let keyword = libpqKeywords.first(where: { lowered.hasPrefix($0 + "=") }) {
            // Would otherwise become a SQLite file named "host=…".
            throw invalid("\"\(keyword)=…\" looks like a libpq key=value connection string; "
                + "give PostgreSQL as a URL: postgresql://user:password@host:port/dbname")
        }
        return try SQLiteConnection(path: url)
    }

    private static let libpqKeywords = ["host", "hostaddr", "port", "dbname", "user", "password", "service"]

    /// The scheme of `scheme://…`; a plain path may contain a colon and is not a URL.
    private static func scheme(of url: String) -> String? {
        guard let colon = url.firstIndex(of: ":") else { return nil }
        let scheme = url[..<colon]
        guard let first = scheme.first, first.isASCII, first.isLetter,
              scheme.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "+-.".contains($0)) })
        else { return nil }
        return url[colon...].hasPrefix("://") ? String(scheme) : nil
    }

    private static func invalid(_ message: String) -> StoreError {
        StoreError(operation: "open database", code: 0, message: message, backend: "doorbell-cloud")
    }
}
