public import Foundation
import Logging
import Migrations
import Storage

/// The cookie table of a persistent store: loaded whole when the store
/// opens, then written change by change.
final class CookieDatabase: Sendable {
    let database: Database

    init(path: String, logger: Logger, busyTimeout: Duration? = nil) throws {
        var options = Database.Options()
        if let busyTimeout { options.busyTimeout = busyTimeout }
        // Cookie values are credentials: owner only.
        options.fileMode = 0o600
        options.directoryMode = 0o700
        // Refused, as the credential store's, when others can read it.
        options.requirePrivateFile = true
        // Cookies cannot be fetched again: keep a damaged file for inspection.
        options.onCorruption = .moveAside
        options.logger = logger
        database = try Database(path: path, migrations: Schema.cookies, options: options)
    }

    private static let columns = "name, value, domain, host_only, path, expires, created, last_access, secure, http_only, same_site"

    /// Every cookie that is still valid, after deleting expired ones and,
    /// unless kept, session cookies (a new process starts a new session).
    func load(now: Date, keepSessionCookies: Bool) throws -> [Cookie] {
        try database.write { connection in
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
                return cookie
            }
        }
    }

    /// Writes final states and last-access times in one transaction.
    func apply(_ changes: CookieJar.Changes, touches: [Cookie.Key: Date]) throws {
        try database.write { connection in
            let upsert = try connection.cachedStatement("""
                INSERT OR REPLACE INTO cookies(\(Self.columns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """)
            let delete = try connection.cachedStatement(
                "DELETE FROM cookies WHERE name = ? AND domain = ? AND host_only = ? AND path = ?")
            let touch = try connection.cachedStatement(
                "UPDATE cookies SET last_access = ? WHERE name = ? AND domain = ? AND host_only = ? AND path = ?")
            for (key, cookie) in changes.final {
                if let cookie {
                    upsert.reset()
                    try upsert.bind([
                        .text(cookie.name), .text(cookie.value), .text(cookie.domain), .integer(cookie.isHostOnly ? 1 : 0),
                        .text(cookie.path), cookie.expiresDate.map { .real($0.timeIntervalSince1970) } ?? .null,
                        .real(cookie.creationDate.timeIntervalSince1970), .real(cookie.lastAccessDate.timeIntervalSince1970),
                        .integer(cookie.isSecure ? 1 : 0), .integer(cookie.isHTTPOnly ? 1 : 0), .text(cookie.sameSite.rawValue),
                    ])
                    try upsert.run()
                } else {
                    delete.reset()
                    try delete.bind([.text(key.name), .text(key.domain), .integer(key.isHostOnly ? 1 : 0), .text(key.path)])
                    try delete.run()
                }
            }
            for (key, date) in touches where changes.final[key] == nil {
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

/// A cookie store kept in an SQLite file (SPEC K4): what default sessions
/// use, shared by every default session of an application.
///
/// The store loads its cookies when it opens and answers lookups from
/// memory, never waiting for the file; every change is written to the file
/// in its own transaction before the call returns (last-access times and
/// the expired cookies a lookup drops go with the next write), outside the
/// lock lookups take, so another process holding the file's lock delays
/// only the callers that change cookies. When a write
/// fails (disk full, file locked), the change stays in memory, is logged
/// without cookie values, and is written with the next change or `flush()`.
/// The file has mode 0600 in a directory of mode 0700; a damaged file is
/// moved aside (`<name>.corrupt-<time>`) and the store starts empty.
public final class PersistentCookieStore: CookieStore, CustomStringConvertible {
    let engine: CookieStoreEngine
    /// The database file.
    public let path: String

    /// The file name used inside a data directory.
    public static let fileName = "Cookies.sqlite"

    /// Opens (creating as needed) the store in `directory`.
    ///
    /// - Parameters:
    ///   - directory: The directory of the file `Cookies.sqlite`.
    ///   - keepSessionCookies: Keep cookies without expiry that an earlier
    ///     process stored; by default they are dropped, as a browser drops
    ///     them when it restarts.
    ///   - publicSuffixes: The public suffix list; the system's by default.
    /// - Throws: `StoreError` when the file cannot be opened or is of a newer version.
    public convenience init(directory: URL, keepSessionCookies: Bool = false, publicSuffixes: PublicSuffixList = .system) throws {
        try self.init(directory: directory, keepSessionCookies: keepSessionCookies, publicSuffixes: publicSuffixes, clock: { Date() })
    }

    /// Opens the store reading the time from `clock` (tests).
    package init(
        directory: URL, keepSessionCookies: Bool = false, publicSuffixes: PublicSuffixList = .system,
        limits: (perDomain: Int, total: Int)? = nil, busyTimeout: Duration? = nil, clock: @escaping @Sendable () -> Date
    ) throws {
        let logger = Logger(label: "urlloading.cookies")
        path = directory.appendingPathComponent(Self.fileName).path
        let database: CookieDatabase
        var jar = CookieJar(publicSuffixes: publicSuffixes)
        if let limits { (jar.perDomainLimit, jar.totalLimit) = limits }
        do {
            database = try CookieDatabase(path: path, logger: logger, busyTimeout: busyTimeout)
            var changes = CookieJar.Changes()
            let now = clock()
            for cookie in try database.load(now: now, keepSessionCookies: keepSessionCookies) {
                jar.restore(cookie, changes: &changes)
            }
            // Eviction on load (limits lowered since) is written back.
            if !changes.isEmpty { try database.apply(changes, touches: [:]) }
        } catch {
            throw StoreError.wrapping(error, path: path)
        }
        engine = CookieStoreEngine(jar: jar, database: database, clock: clock, logger: logger)
    }

    deinit {
        do {
            try engine.flush()
        } catch {
            Logger(label: "urlloading.cookies").error("cookie store could not write its last changes", metadata: ["error": "\(error)"])
        }
    }

    /// Writes changes that are still in memory (after a failed write) and
    /// the latest last-access times.
    ///
    /// - Throws: `StoreError` when the file cannot be written.
    public func flush() throws {
        do {
            try engine.flush()
        } catch {
            throw StoreError.wrapping(error, path: path)
        }
    }

    public var acceptPolicy: CookieAcceptPolicy {
        get { engine.acceptPolicy }
        set { engine.acceptPolicy = newValue }
    }

    public func cookies(for url: URL, mainDocumentURL: URL?) -> [Cookie] {
        engine.cookies(for: url, mainDocumentURL: mainDocumentURL)
    }

    @discardableResult
    public func setCookies(_ setCookieFields: [String], for url: URL, mainDocumentURL: URL?, policy: CookieAcceptPolicy) -> [Cookie] {
        engine.setCookies(setCookieFields, for: url, mainDocumentURL: mainDocumentURL, policy: policy)
    }

    public func setCookie(_ cookie: Cookie) { engine.setCookie(cookie) }
    public func deleteCookie(_ cookie: Cookie) { engine.delete(cookie) }
    public func removeCookies(since date: Date) { engine.remove { $0.creationDate >= date } }
    public func removeAll() { engine.remove { _ in true } }
    public var allCookies: [Cookie] { engine.allCookies }

    /// The file and the number of cookies, without their values.
    public var description: String { "PersistentCookieStore(\(path), \(engine.count) cookies)" }
}
