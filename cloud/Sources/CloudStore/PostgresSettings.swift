/// Where and how to connect to PostgreSQL, read from a libpq-style connection string
/// (`host=… port=… dbname=… user=…`) or URI (`postgresql://user:password@host:port/dbname?…`),
/// with the PG* environment variables filling in what it leaves out, as for psql. Pure: no I/O.
public struct PostgresSettings: Sendable, Equatable {
    public enum SSLMode: String, Sendable {
        case disable, allow, prefer, require
        case verifyCA = "verify-ca"
        case verifyFull = "verify-full"
    }

    /// A host name or address, or a directory holding the server's Unix socket (starts with `/`).
    public var host = "/var/run/postgresql"
    public var port = 5432
    public var user: String
    public var password: String?
    public var database: String
    public var connectTimeoutSeconds = 10
    public var sslMode = SSLMode.prefer
    public var applicationName = "doorbell-cloud"
    /// Server settings for every session, from `options` (`-c name=value`).
    public var startupParameters: [String: String] = [:]

    /// The Unix socket's path when `host` is a directory.
    public var unixSocketPath: String? {
        host.hasPrefix("/") ? host + "/.s.PGSQL.\(port)" : nil
    }

    /// `database "doorbell" on 127.0.0.1:5432 as user "doorbell"`, for messages (no password).
    public var target: String {
        let server = host.hasPrefix("/") ? "the Unix socket in \(host) (port \(port))" : "\(host):\(port)"
        return "database \"\(database)\" on \(server) as user \"\(user)\""
    }

    static let keywords: Set<String> = [
        "host", "hostaddr", "port", "dbname", "user", "password", "connect_timeout", "sslmode", "options",
        "application_name", "fallback_application_name", "client_encoding",
    ]

    /// Parses `conninfo`; `environment` supplies PGHOST, PGPORT, PGDATABASE, PGUSER, PGPASSWORD,
    /// PGOPTIONS, PGCONNECT_TIMEOUT, PGSSLMODE and, for the default user, USER.
    public static func parse(_ conninfo: String, environment: [String: String]) throws(StoreError) -> PostgresSettings {
        var values: [String: String] = [:]
        let fromEnvironment = [("PGHOST", "host"), ("PGPORT", "port"), ("PGDATABASE", "dbname"), ("PGUSER", "user"),
                               ("PGPASSWORD", "password"), ("PGOPTIONS", "options"),
                               ("PGCONNECT_TIMEOUT", "connect_timeout"), ("PGSSLMODE", "sslmode")]
        for (variable, keyword) in fromEnvironment {
            if let value = environment[variable], !value.isEmpty { values[keyword] = value }
        }
        let given: [(String, String)]
        if conninfo.hasPrefix("postgresql://") || conninfo.hasPrefix("postgres://") {
            given = try parseURI(conninfo)
        } else if conninfo.contains("=") {
            given = try parsePairs(conninfo)
        } else {
            given = conninfo.isEmpty ? [] : [("dbname", conninfo)]
        }
        for (keyword, value) in given { values[keyword] = value }

        let user = values["user"] ?? environment["USER"] ?? "postgres"
        var settings = PostgresSettings(user: user, password: values["password"], database: values["dbname"] ?? user)
        if let host = values["hostaddr"] ?? values["host"], !host.isEmpty { settings.host = host }
        if let port = values["port"] {
            guard let number = Int(port), (1...65535).contains(number) else { throw invalid("invalid port number: \"\(port)\"") }
            settings.port = number
        }
        if let timeout = values["connect_timeout"] {
            guard let seconds = Int(timeout), seconds >= 0 else { throw invalid("invalid integer value \"\(timeout)\" for connection option \"connect_timeout\"") }
            // libpq: 0 waits for ever, and anything under 2 s means 2 s.
            settings.connectTimeoutSeconds = seconds == 0 ? 3600 : max(seconds, 2)
        }
        if let mode = values["sslmode"] {
            guard let parsed = SSLMode(rawValue: mode) else { throw invalid("invalid sslmode value: \"\(mode)\"") }
            settings.sslMode = parsed
        }
        if let name = values["application_name"] ?? values["fallback_application_name"] { settings.applicationName = name }
        if let encoding = values["client_encoding"], encoding.uppercased() != "UTF8", encoding.uppercased() != "UTF-8" {
            throw invalid("client_encoding must be UTF8 (doorbell-cloud's strings are UTF-8)")
        }
        if let options = values["options"] { settings.startupParameters = try parseOptions(options) }
        return settings
    }

    /// `key=value key='quoted value' …`, as libpq reads it.
    static func parsePairs(_ text: String) throws(StoreError) -> [(String, String)] {
        var pairs: [(String, String)] = []
        var rest = Substring(text)
        while true {
            rest = rest.drop { $0.isWhitespace }
            guard !rest.isEmpty else { return pairs }
            guard let equals = rest.firstIndex(of: "=") else {
                throw invalid("missing \"=\" after \"\(rest.prefix { !$0.isWhitespace })\" in connection info string")
            }
            let keyword = String(rest[..<equals]).trimmingSpaces
            guard keywords.contains(keyword) else { throw invalid("invalid connection option \"\(keyword)\"") }
            rest = rest[rest.index(after: equals)...].drop { $0.isWhitespace }
            var value = ""
            if rest.first == "'" {
                rest = rest.dropFirst()
                var closed = false
                while let character = rest.first {
                    rest = rest.dropFirst()
                    if character == "\\", let next = rest.first {
                        value.append(next)
                        rest = rest.dropFirst()
                    } else if character == "'" {
                        closed = true
                        break
                    } else {
                        value.append(character)
                    }
                }
                guard closed else { throw invalid("unterminated quoted string in connection info string") }
            } else {
                while let character = rest.first, !character.isWhitespace {
                    rest = rest.dropFirst()
                    if character == "\\", let next = rest.first {
                        value.append(next)
                        rest = rest.dropFirst()
                    } else {
                        value.append(character)
                    }
                }
            }
            pairs.append((keyword, value))
        }
    }

    /// `postgresql://[user[:password]@][host][:port][/dbname][?keyword=value&…]`, percent-encoded.
    static func parseURI(_ uri: String) throws(StoreError) -> [(String, String)] {
        var rest = Substring(uri.drop { $0 != ":" }.dropFirst(3))
        var pairs: [(String, String)] = []
        var query: Substring = ""
        if let mark = rest.firstIndex(of: "?") {
            query = rest[rest.index(after: mark)...]
            rest = rest[..<mark]
        }
        if let slash = rest.firstIndex(of: "/") {
            let name = rest[rest.index(after: slash)...]
            if !name.isEmpty { pairs.append(("dbname", try decode(name))) }
            rest = rest[..<slash]
        }
        if let at = rest.lastIndex(of: "@") {
            let credentials = rest[..<at]
            if let colon = credentials.firstIndex(of: ":") {
                pairs.append(("user", try decode(credentials[..<colon])))
                pairs.append(("password", try decode(credentials[credentials.index(after: colon)...])))
            } else if !credentials.isEmpty {
                pairs.append(("user", try decode(credentials)))
            }
            rest = rest[rest.index(after: at)...]
        }
        var hostPart = rest
        if hostPart.hasPrefix("["), let close = hostPart.firstIndex(of: "]") {  // [::1]:5432
            pairs.append(("host", String(hostPart[hostPart.index(after: hostPart.startIndex)..<close])))
            hostPart = hostPart[hostPart.index(after: close)...]
            if hostPart.hasPrefix(":") { pairs.append(("port", String(hostPart.dropFirst()))) }
        } else if let colon = hostPart.lastIndex(of: ":") {
            if colon > hostPart.startIndex { pairs.append(("host", try decode(hostPart[..<colon]))) }
            pairs.append(("port", String(hostPart[hostPart.index(after: colon)...])))
        } else if !hostPart.isEmpty {
            pairs.append(("host", try decode(hostPart)))
        }
        for parameter in query.split(separator: "&") where !parameter.isEmpty {
            let parts = parameter.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let keyword = try decode(parts[0])
            guard keywords.contains(keyword) else { throw invalid("invalid URI query parameter: \"\(keyword)\"") }
            pairs.append((keyword, parts.count > 1 ? try decode(parts[1]) : ""))
        }
        return pairs
    }

    /// `-c name=value`, `-cname=value` and `--name=value`, separated by spaces.
    static func parseOptions(_ text: String) throws(StoreError) -> [String: String] {
        var parameters: [String: String] = [:]
        var words = text.split(whereSeparator: \.isWhitespace).makeIterator()
        while let word = words.next() {
            let setting: Substring
            if word == "-c" {
                guard let next = words.next() else { throw invalid("options: \"-c\" needs name=value") }
                setting = next
            } else if word.hasPrefix("--") {
                setting = word.dropFirst(2)
            } else if word.hasPrefix("-c") {
                setting = word.dropFirst(2)
            } else {
                throw invalid("options: only server settings (-c name=value) are supported, not \"\(word)\"")
            }
            guard let equals = setting.firstIndex(of: "="), equals > setting.startIndex else {
                throw invalid("options: \"\(setting)\" is not name=value")
            }
            parameters[String(setting[..<equals])] = String(setting[setting.index(after: equals)...])
        }
        return parameters
    }

    static func decode(_ text: Substring) throws(StoreError) -> String {
        var bytes: [UInt8] = []
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else {
                throw invalid("invalid percent-encoded token in URI")
            }
            bytes.append(high << 4 | low)
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// Messages name option keywords only, never a value (which may be the password).
    private static func invalid(_ detail: String) -> StoreError {
        StoreError(operation: "connect to PostgreSQL", code: 0,
                   message: "the connection string is not valid: \(detail); use key=value pairs (host=… port=… "
                       + "dbname=… user=…) or a URI postgresql://user:password@host:port/dbname, "
                       + "percent-encoding special characters",
                   backend: "PostgreSQL", state: "08006")
    }
}
