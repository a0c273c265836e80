import CSQLiteBench
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The same data for every contender: 1 KiB bodies and five header fields.
enum Fixture {
    static let body = Data((0..<1024).map { UInt8(truncatingIfNeeded: $0 &* 31) })

    static func url(_ index: Int) -> URL {
        // Force-unwrap: the string is built from a number.
        URL(string: "https://example.com/item/\(index)")!
    }

    static func headers(_ index: Int) -> [(name: String, value: String)] {
        [
            ("Cache-Control", "max-age=3600"), ("Content-Type", "application/octet-stream"), ("ETag", "\"v\(index)\""),
            ("Date", "Sun, 22 Nov 2026 03:00:00 GMT"), ("Server", "bench"),
        ]
    }

    static func headerBlob(_ index: Int) -> Data {
        Data(headers(index).map { "\($0.name): \($0.value)\r\n" }.joined().utf8)
    }

    /// A pseudo-random order of `count` indexes below `limit`.
    static func lookups(_ count: Int, below limit: Int) -> [Int] {
        var state: UInt64 = 0x9E3779B97F4A7C15
        return (0..<count).map { _ in
            state = state &* 6364136223846793005 &+ 1442695040888963407
            return Int(state >> 33) % limit
        }
    }
}

/// The raw-SQLite reference: one table, WAL, prepared statements, nothing else.
final class RawSQLite {
    private var db: OpaquePointer?
    private var insert: OpaquePointer?
    private var select: OpaquePointer?
    private var deleteOldest: OpaquePointer?

    init(path: String) {
        guard sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nil) == SQLITE_OK else {
            fail("raw sqlite: cannot open \(path)")
        }
        // As any SQLite user with two connections sets: a write that meets
        // the other connection's brief lock (the WAL index being rebuilt)
        // waits for it instead of failing the bench.
        sqlite3_busy_timeout(db, 5000)
        exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL")
        exec("CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE, headers BLOB NOT NULL, body BLOB NOT NULL, stored REAL NOT NULL)")
        insert = prepare("INSERT OR REPLACE INTO t(key, headers, body, stored) VALUES (?, ?, ?, ?)")
        select = prepare("SELECT headers, body FROM t WHERE key = ?")
        deleteOldest = prepare("DELETE FROM t WHERE id = (SELECT min(id) FROM t)")
    }

    deinit {
        sqlite3_finalize(insert)
        sqlite3_finalize(select)
        sqlite3_finalize(deleteOldest)
        sqlite3_close_v2(db)
    }

    func exec(_ sql: String) {
        guard sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else { fail("raw sqlite: \(sql) failed") }
    }

    private func prepare(_ sql: String) -> OpaquePointer? {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK else { fail("raw sqlite: cannot prepare \(sql)") }
        return statement
    }

    func store(_ index: Int) {
        let key = Fixture.url(index).absoluteString
        let headers = Fixture.headerBlob(index)
        sqlite3_bind_text(insert, 1, key, -1, bench_sqlite_transient())
        headers.withUnsafeBytes { _ = sqlite3_bind_blob(insert, 2, $0.baseAddress, Int32($0.count), bench_sqlite_transient()) }
        Fixture.body.withUnsafeBytes { _ = sqlite3_bind_blob(insert, 3, $0.baseAddress, Int32($0.count), bench_sqlite_transient()) }
        sqlite3_bind_double(insert, 4, Date().timeIntervalSince1970)
        guard sqlite3_step(insert) == SQLITE_DONE else { fail("raw sqlite: insert failed") }
        sqlite3_reset(insert)
    }

    /// Stores one more row and deletes the oldest, in one transaction.
    func storeEvicting(_ index: Int) {
        exec("BEGIN IMMEDIATE")
        store(index)
        guard sqlite3_step(deleteOldest) == SQLITE_DONE else { fail("raw sqlite: delete failed") }
        sqlite3_reset(deleteOldest)
        exec("COMMIT")
    }

    /// Reads one row's headers and body; returns the body size.
    func lookup(_ index: Int) -> Int {
        lookup(key: Fixture.url(index).absoluteString)
    }

    /// Reads the row of `key`'s headers and body; returns the body size.
    func lookup(key: String) -> Int {
        sqlite3_bind_text(select, 1, key, -1, bench_sqlite_transient())
        defer { sqlite3_reset(select) }
        guard sqlite3_step(select) == SQLITE_ROW else { return 0 }
        let headers = Data(bytes: sqlite3_column_blob(select, 0), count: Int(sqlite3_column_bytes(select, 0)))
        let body = Data(bytes: sqlite3_column_blob(select, 1), count: Int(sqlite3_column_bytes(select, 1)))
        return body.count + headers.count
    }

    func populate(_ count: Int) {
        exec("BEGIN")
        for index in 0..<count { store(index) }
        exec("COMMIT")
    }
}

/// FoundationNetworking's URLCache, the bar to clear.
enum FoundationCache {
    static func make(path: String, memory: Int, disk: Int) -> URLCache {
        URLCache(memoryCapacity: memory, diskCapacity: disk, diskPath: path)
    }

    static func store(_ cache: URLCache, _ index: Int) {
        let url = Fixture.url(index)
        var fields: [String: String] = [:]
        for field in Fixture.headers(index) { fields[field.name] = field.value }
        guard let response = HTTPURLResponse(url: url, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: fields) else { return }
        cache.storeCachedResponse(CachedURLResponse(response: response, data: Fixture.body), for: URLRequest(url: url))
    }

    static func lookup(_ cache: URLCache, _ index: Int) -> Int {
        cache.cachedResponse(for: URLRequest(url: Fixture.url(index)))?.data.count ?? 0
    }
}
