import Foundation
import Logging
import Migrations
import Storage

/// The cookie table of a persistent store: loaded whole when the store
/// opens, then written change by change.
final class CookieDatabase: Sendable {
    let database: Database

    init(path: String, logger: Logger, busyTimeout: Duration? = nil) throws(StorageError) {
        // Cookie values are credentials: owner only; they cannot be fetched
        // again, so a damaged file is kept for inspection.
        var options = Database.Options.privateStore(logger: logger)
        if let busyTimeout { options.busyTimeout = busyTimeout }
        database = try Database(path: path, migrations: Schema.cookies, options: options)
    }

    private static let columns =
        "name, value, domain, host_only, path, expires, created, last_access, secure, http_only, same_site, version, comment, comment_url, ports"

    /// Every cookie that is still valid, after deleting expired ones and,
    /// unless kept, session cookies (a new process starts a new session).
    func loadRows(now: Date, keepSessionCookies: Bool) throws(StorageError) -> [Cookie] {
        try database.write { (connection: Connection) throws(SQLiteError) in
            try connection.run("DELETE FROM cookies WHERE expires IS NOT NULL AND expires <= ?", [.real(now.timeIntervalSince1970)])
            if !keepSessionCookies { try connection.run("DELETE FROM cookies WHERE expires IS NULL") }
            return try connection.query("SELECT \(Self.columns) FROM cookies") { row in
                var cookie = Cookie(
                    name: row.text(0) ?? "", value: row.text(1) ?? "", domain: row.text(2) ?? "",
                    isHostOnly: row.int64(3) != 0, path: row.text(4) ?? "/",
                    expiresDate: row.isNull(5) ? nil : Date(timeIntervalSince1970: row.double(5)),
                    creationDate: Date(timeIntervalSince1970: row.double(6)),
                    isSecure: row.int64(8) != 0, isHTTPOnly: row.int64(9) != 0,
                    sameSite: Cookie.SameSite(rawValue: row.text(10) ?? "") ?? .unspecified)
                cookie.lastAccessDate = Date(timeIntervalSince1970: row.double(7))
                cookie.readRFC2965(version: row.int64(11), comment: row.text(12), commentURL: row.text(13), ports: row.text(14))
                return cookie
            }
        }
    }

    /// Writes final states and last-access times in one transaction.
    func write(_ changes: [Cookie.Key: Cookie?], touches: [Cookie.Key: Date]) throws(StorageError) {
        try database.write { (connection: Connection) throws(SQLiteError) in
            let upsert = try connection.cachedStatement(
                """
                INSERT OR REPLACE INTO cookies(\(Self.columns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """)
            let delete = try connection.cachedStatement(
                "DELETE FROM cookies WHERE name = ? AND domain = ? AND host_only = ? AND path = ?")
            let touch = try connection.cachedStatement(
                "UPDATE cookies SET last_access = ? WHERE name = ? AND domain = ? AND host_only = ? AND path = ?")
            for (key, cookie) in changes {
                if let cookie {
                    upsert.reset()
                    try upsert.bind([
                        .text(cookie.name), .text(cookie.value), .text(cookie.canonicalDomain), .integer(cookie.isHostOnly ? 1 : 0),
                        .text(cookie.path), cookie.expiresDate.map { .real($0.timeIntervalSince1970) } ?? .null,
                        .real(cookie.creationDate.timeIntervalSince1970), .real(cookie.lastAccessDate.timeIntervalSince1970),
                        .integer(cookie.isSecure ? 1 : 0), .integer(cookie.isHTTPOnly ? 1 : 0), .text(cookie.sameSite.rawValue),
                        .integer(Int64(cookie.version)), cookie.comment.map { .text($0) } ?? .null,
                        cookie.commentURL.map { .text($0.absoluteString) } ?? .null, cookie.portListText.map { .text($0) } ?? .null,
                    ])
                    try upsert.run()
                } else {
                    delete.reset()
                    try delete.bind([.text(key.name), .text(key.domain), .integer(key.isHostOnly ? 1 : 0), .text(key.path)])
                    try delete.run()
                }
            }
            for (key, date) in touches where changes[key] == nil {
                touch.reset()
                try touch.bind([
                    .real(date.timeIntervalSince1970), .text(key.name), .text(key.domain),
                    .integer(key.isHostOnly ? 1 : 0), .text(key.path),
                ])
                try touch.run()
            }
        }
    }
}
