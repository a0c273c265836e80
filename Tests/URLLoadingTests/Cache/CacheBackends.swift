import Foundation
import Postgres
import TestSupport
@_spi(Tools) @testable import URLLoading
@testable import URLLoadingPostgres

/// The persistent tiers the cache's store tests run against: one
/// suite, two backends — the SQLite files in a folder, and a PostgreSQL
/// database of the test server.
enum CacheBackend: String, CaseIterable, Sendable, CustomStringConvertible {
    case sqlite
    case postgres

    var description: String { rawValue }

    /// A new, empty place for this backend's caches.
    func place() throws -> CachePlace {
        switch self {
        case .sqlite: return CachePlace(backend: self, directory: TemporaryDirectory(), postgres: nil)
        case .postgres: return CachePlace(backend: self, directory: nil, postgres: try TestPostgres.database())
        }
    }
}

/// A folder or a database that caches open, reopen and look into; the
/// database is dropped when the place goes, so a test keeps it for as long
/// as its caches work.
final class CachePlace {
    let backend: CacheBackend
    let directory: TemporaryDirectory?
    let postgres: TestPostgres?

    init(backend: CacheBackend, directory: TemporaryDirectory?, postgres: TestPostgres?) {
        self.backend = backend
        self.directory = directory
        self.postgres = postgres
    }

    deinit { postgres?.drop() }

    /// A cache over this place (a new connection pool each time: a restart).
    func open(memoryCapacity: Int, diskCapacity: Int) throws -> ResponseCache {
        if let directory {
            return try ResponseCache.open(memoryCapacity: memoryCapacity, diskCapacity: diskCapacity, directory: directory.url)
        }
        guard let postgres else { throw TestPostgresError(message: "no place") }
        return try ResponseCache(memoryCapacity: memoryCapacity, diskCapacity: diskCapacity, database: PostgresDatabase(url: postgres.url))
    }

    /// Whether `bytes` appear anywhere the backend keeps entries (the
    /// database file and its WAL; the cache table's encoded columns).
    func rawContains(_ bytes: Data) throws -> Bool {
        if let directory {
            let file =
                try Data(contentsOf: directory.url.appendingPathComponent("Cache.sqlite"))
                + ((try? Data(contentsOf: directory.url.appendingPathComponent("Cache.sqlite-wal"))) ?? Data())
            return file.range(of: bytes) != nil
        }
        guard let postgres else { return false }
        let connection = try PostgresConnection(postgres.url)
        let found = try connection.scalarInt(
            """
            SELECT count(*) FROM urlloading_cache_entries WHERE position($1 IN request_headers) > 0
                OR position($1 IN response_headers) > 0 OR position($1 IN convert_to(url || key || variant, 'UTF8')) > 0
            """, [.bytes(bytes)])
        return (found ?? 0) > 0
    }
}

/// The places the cookie store tests run against: one suite,
/// two backends.
final class CookiePlace {
    let backend: CacheBackend
    let directory: TemporaryDirectory?
    let postgres: TestPostgres?

    init(_ backend: CacheBackend) throws {
        self.backend = backend
        directory = backend == .sqlite ? TemporaryDirectory() : nil
        postgres = backend == .postgres ? try TestPostgres.database() : nil
    }

    deinit { postgres?.drop() }

    /// A store over this place, keeping session cookies (what a fleet's does).
    func open(clock: @escaping @Sendable () -> Date) throws -> CookieStore {
        if let directory { return try CookieStore(directory: directory.url, keepSessionCookies: true, clock: clock) }
        guard let postgres else { throw TestPostgresError(message: "no place") }
        return try CookieStore(
            persistence: PostgresCookies(database: PostgresDatabase(url: postgres.url)), location: postgres.name, keepSessionCookies: true, clock: clock)
    }
}
