import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Migrations
import Storage
import Testing
import TestSupport
@testable import URLLoading

/// The SQLite tier keeps its LRU order in the row ids: a store
/// takes the next id, a touch moves its row to the next id, eviction reads
/// from the first row, and a version 1 file is renumbered by last use.
@Suite struct CacheLRUOrderTests {
    @Test("Touches move rows in the order of their use; eviction then takes the least recently used")
    func touchesKeepTheOrder() throws {
        let folder = TemporaryDirectory()
        let responses = ["a", "b", "c", "d"].map { ResponseCacheTests.stored("https://example.com/\($0)", body: Data(count: 900)) }
        let cost = responses[0].cost
        let cache = try ResponseCache.open(memoryCapacity: 0, diskCapacity: 20 * cost, directory: folder.url)
        let t0 = Date().timeIntervalSince1970
        for (offset, response) in responses.enumerated() { cache.store(response, now: t0 + Double(offset)) }
        // Used past the one-minute resolution: c last, a before it; the batch is written in the order of use,
        // whatever order the ledger holds it in.
        #expect(cache.lookup(key: responses[2].key, requestHeaders: [], now: t0 + 130) != nil)
        #expect(cache.lookup(key: responses[0].key, requestHeaders: [], now: t0 + 125) != nil)
        cache.flush()
        #expect(try cache.diskListing().map(\.key) == [responses[1], responses[3], responses[0], responses[2]].map(\.key))
        cache.diskCapacity = 2 * cost
        #expect(try cache.diskListing().map(\.key) == [responses[0], responses[2]].map(\.key))
    }

    @Test("A version 1 file is renumbered by last use, loses the last_used index and keeps its usage")
    func migratesVersionOne() throws {
        let folder = TemporaryDirectory()
        let path = folder.url.appendingPathComponent(DiskTier.databaseName).path
        do {
            var options = Database.Options()
            options.fileMode = 0o600  // as the cache makes it
            let old = try Database(path: path, migrations: Array(Schema.cache.prefix(1)), options: options)
            try old.write { (connection: Connection) throws(SQLiteError) in
                // Stored in id order 1, 2, 3; used in the order 2, 3, 1.
                for (name, lastUsed) in [("one", 300.0), ("two", 100.0), ("three", 200.0)] {
                    let url = "https://example.com/\(name)"
                    try connection.run(
                        """
                        INSERT INTO entries(key, variant, url, host, status, response_headers, request_headers, body, body_size,
                            cost, request_time, response_time, stored_at, last_used, storage_policy)
                        VALUES (?, '', ?, 'example.com', 200, ?, ?, ?, ?, 105, ?, ?, ?, ?, 0)
                        """,
                        [
                            .text(ResponseCacheTests.key(url)), .text(url),
                            .blob(FieldCoding.encode([("Cache-Control", "max-age=60")] as HeaderFields)),
                            .blob(FieldCoding.encode(HeaderFields())), .blob(Data(name.utf8)), .integer(Int64(name.utf8.count)),
                            .real(lastUsed), .real(lastUsed), .real(lastUsed), .real(lastUsed),
                        ])
                }
            }
        }
        let cache = try ResponseCache.open(memoryCapacity: 0, diskCapacity: 1 << 20, directory: folder.url)
        #expect(try cache.diskListing().map(\.url) == ["two", "three", "one"].map { "https://example.com/\($0)" })
        #expect(cache.currentDiskUsage == 315)
        #expect(cache.lookup(key: ResponseCacheTests.key("https://example.com/one"), requestHeaders: [])?.body == Data("one".utf8))
        let check = try Database(path: path, migrations: Schema.cache)
        let found = try check.read { (connection: Connection) throws(SQLiteError) in
            (
                index: try connection.scalarInt("SELECT count(*) FROM sqlite_master WHERE name = 'entries_by_last_used'"),
                triggers: try connection.scalarInt("SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'entries'"),
                version: try connection.scalarInt("PRAGMA user_version")
            )
        }
        #expect(found.index == 0 && found.triggers == 3 && found.version == 2)
        // The triggers came back: a removal keeps the usage exact.
        cache.removeCachedResponse(for: URLRequest(url: try #require(URL(string: "https://example.com/two"))))
        #expect(cache.currentDiskUsage == 210)
    }
}
