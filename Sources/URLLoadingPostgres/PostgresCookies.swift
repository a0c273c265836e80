import Foundation
import Logging
import Postgres
@_spi(Tools) public import URLLoading

/// Cookies in a PostgreSQL database a fleet shares, under the
/// same rules as the SQLite file: every worker's `CookieStore` keeps the
/// jar in memory, loads it once, and writes each change in one
/// transaction. Two workers setting the same cookie at once upsert one row
/// (the later wins); a worker's change reaches the others' jars through
/// `NOTIFY`, read back from the table after it committed.
///
/// Session cookies are kept when a worker opens the store: the fleet's
/// session outlives any one worker.
final class PostgresCookies: CookiePersistence {
    private let database: PostgresDatabase
    let listener: PostgresListener
    private let logger = Logger(label: "urlloading.cookies")
    private static let columns =
        "name, value, domain, host_only, path, expires, created, last_access, secure, http_only, same_site, version, comment, comment_url, ports"
    private static let keyMatch = "name = $1 AND domain = $2 AND host_only = $3 AND path = $4"

    init(database: PostgresDatabase) throws(StoreError) {
        self.database = database
        listener = try database.openStore("cookies", migrations: PostgresSchema.cookies, channel: PostgresListener.cookieChannel)
    }

    deinit { listener.stop() }

    func load(now: Date, keepSessionCookies: Bool) throws(StoreError) -> [Cookie] {
        try database.withConnection { (connection) throws(PostgresError) in
            try connection.run("DELETE FROM urlloading_cookies WHERE expires IS NOT NULL AND expires <= $1", [.double(now.timeIntervalSince1970)])
            return try connection.query("SELECT \(Self.columns) FROM urlloading_cookies", [], Self.cookie)
        }
    }

    private static func cookie(_ row: PostgresRow) -> Cookie {
        var cookie = Cookie(
            name: row.text(0) ?? "", value: row.text(1) ?? "", domain: row.text(2) ?? "", isHostOnly: row.bool(3) ?? true,
            path: row.text(4) ?? "/", expiresDate: row.double(5).map(Date.init(timeIntervalSince1970:)),
            creationDate: Date(timeIntervalSince1970: row.double(6) ?? 0), isSecure: row.bool(8) ?? true, isHTTPOnly: row.bool(9) ?? true,
            sameSite: Cookie.SameSite(rawValue: row.text(10) ?? "") ?? .unspecified)
        cookie.lastAccessDate = Date(timeIntervalSince1970: row.double(7) ?? 0)
        cookie.readRFC2965(version: row.int64(11), comment: row.text(12), commentURL: row.text(13), ports: row.text(14))
        return cookie
    }

    private static func keyValues(_ key: Cookie.Key) -> [PostgresValue] {
        [.text(key.name), .text(key.domain), .bool(key.isHostOnly), .text(key.path)]
    }

    func apply(_ changes: [Cookie.Key: Cookie?], touches: [Cookie.Key: Date]) throws(StoreError) {
        // Rows in one order in every worker: two transactions never wait for each other in a cycle.
        let ordered = changes.sorted { ($0.key.domain, $0.key.path, $0.key.name) < ($1.key.domain, $1.key.path, $1.key.name) }
        try database.withConnection { (connection) throws(PostgresError) in
            try connection.transaction { (connection) throws(PostgresError) in
                for (key, cookie) in ordered {
                    if let cookie {
                        try connection.run(
                            """
                            INSERT INTO urlloading_cookies(\(Self.columns)) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
                            ON CONFLICT (name, domain, host_only, path) DO UPDATE SET value = EXCLUDED.value, expires = EXCLUDED.expires,
                                created = EXCLUDED.created, last_access = EXCLUDED.last_access, secure = EXCLUDED.secure,
                                http_only = EXCLUDED.http_only, same_site = EXCLUDED.same_site, version = EXCLUDED.version,
                                comment = EXCLUDED.comment, comment_url = EXCLUDED.comment_url, ports = EXCLUDED.ports
                            """,
                            [
                                .text(cookie.name), .text(cookie.value), .text(cookie.canonicalDomain), .bool(cookie.isHostOnly), .text(cookie.path),
                                cookie.expiresDate.map { .double($0.timeIntervalSince1970) } ?? .null, .double(cookie.creationDate.timeIntervalSince1970),
                                .double(cookie.lastAccessDate.timeIntervalSince1970), .bool(cookie.isSecure), .bool(cookie.isHTTPOnly),
                                .text(cookie.sameSite.rawValue), .int(Int64(cookie.version)), cookie.comment.map { .text($0) } ?? .null,
                                cookie.commentURL.map { .text($0.absoluteString) } ?? .null, cookie.portListText.map { .text($0) } ?? .null,
                            ])
                    } else {
                        try connection.run("DELETE FROM urlloading_cookies WHERE \(Self.keyMatch)", Self.keyValues(key))
                    }
                    try listener.announce(Self.payload(key), on: connection)
                }
                for (key, date) in touches.sorted(by: { $0.value < $1.value }) where changes[key] == nil {
                    try connection.run(
                        "UPDATE urlloading_cookies SET last_access = greatest(last_access, $5) WHERE \(Self.keyMatch)",
                        Self.keyValues(key) + [.double(date.timeIntervalSince1970)])
                }
            }
        }
    }

    /// A changed cookie's identity, fields separated by tabs (which no
    /// name, domain or path holds: the jar refuses control characters).
    static func payload(_ key: Cookie.Key) -> String {
        "c\t\(key.name)\t\(key.domain)\t\(key.isHostOnly ? 1 : 0)\t\(key.path)"
    }

    static func key(_ payload: String) -> Cookie.Key? {
        let parts = payload.split(separator: "\t", omittingEmptySubsequences: false)
        guard parts.count == 5, parts[0] == "c" else { return nil }
        return Cookie.Key(name: String(parts[1]), domain: String(parts[2]), isHostOnly: parts[3] == "1", path: String(parts[4]))
    }

    func observeOthers(_ handler: @escaping @Sendable ([Cookie.Key: Cookie?]) -> Void) {
        listener.observe { [database, logger] payload in
            // nil: changes may have been missed; the whole table is read again.
            do {
                if let payload {
                    guard let key = Self.key(payload) else { return }
                    let rows = try database.withConnection { (connection) throws(PostgresError) in
                        try connection.query("SELECT \(Self.columns) FROM urlloading_cookies WHERE \(Self.keyMatch)", Self.keyValues(key), Self.cookie)
                    }
                    handler([key: rows.first])
                } else {
                    let rows = try database.withConnection { (connection) throws(PostgresError) in
                        try connection.query("SELECT \(Self.columns) FROM urlloading_cookies", [], Self.cookie)
                    }
                    handler(Dictionary(rows.map { ($0.key, Optional($0)) }, uniquingKeysWith: { first, _ in first }))
                }
            } catch {
                logger.warning("another worker's cookie change could not be read", metadata: ["error": "\(error)"])
            }
        }
    }
}

extension CookieStore {
    /// A cookie store in the fleet's PostgreSQL database: every worker with a
    /// store on the same database sees the cookies the others set (within
    /// milliseconds), and two workers setting one cookie at once leave one.
    ///
    /// - Parameter database: The fleet's database.
    /// - Throws: `StoreError` when its tables cannot be made or are of a newer schema.
    public convenience init(database: PostgresDatabase, publicSuffixes: PublicSuffixList = .system) throws(StoreError) {
        try self.init(persistence: PostgresCookies(database: database), location: database.description, keepSessionCookies: true, publicSuffixes: publicSuffixes)
    }
}
