import Foundation
import Testing
import TestSupport
@_spi(Tools) @testable import URLLoading
@testable import URLLoadingPostgres

/// Memory tiers kept honest across a fleet: two caches on one
/// PostgreSQL database, as two workers; what one stores or removes leaves
/// the other's memory tier.
@Suite struct FleetMemoryTierTests {
    static func stored(_ body: String) -> StoredResponse {
        let url = "https://example.com/shared"
        let now = Date().timeIntervalSince1970
        return StoredResponse(
            url: url, key: CachePolicy.primaryKey(URL(string: url)!)!, status: 200, responseHeaders: [("Cache-Control", "max-age=600")],
            requestHeaders: [], body: Data(body.utf8), requestTime: now, responseTime: now, storedAt: now)
    }

    @Test("A store, a removal and a removal of all in one worker drop the key from the other worker's memory tier")
    func invalidation() async throws {
        let database = try TestPostgres.database()
        defer { database.drop() }
        let first = try ResponseCache(memoryCapacity: 1 << 20, diskCapacity: 1 << 24, database: PostgresDatabase(url: database.url))
        let secondStorage = try PostgresCacheStorage(database: PostgresDatabase(url: database.url), capacity: 1 << 24)
        let second = ResponseCache(memoryCapacity: 1 << 20, storage: secondStorage)
        let version1 = Self.stored("version 1")
        let key = version1.key
        first.store(version1)
        // The second worker hears of the store (its memory had nothing to drop yet), then reads it
        // from the database and keeps it in its memory tier.
        #expect(await eventually { secondStorage.listener.changesHeard == 1 })
        #expect(second.lookup(key: key, requestHeaders: [])?.body == Data("version 1".utf8))
        #expect(second.currentMemoryUsage == version1.cost)
        first.store(Self.stored("version 2"))
        #expect(await eventually { second.currentMemoryUsage == 0 }, "the store did not reach the other memory tier")
        #expect(secondStorage.listener.changesHeard == 2)
        #expect(second.lookup(key: key, requestHeaders: [])?.body == Data("version 2".utf8))
        // The storing worker keeps its own copy: its notification is not for itself.
        #expect(first.currentMemoryUsage > 0)
        #expect(first.lookup(key: key, requestHeaders: [])?.body == Data("version 2".utf8))

        first.remove(key: key)
        #expect(await eventually { second.currentMemoryUsage == 0 }, "the removal did not reach the other memory tier")
        #expect(second.lookup(key: key, requestHeaders: []) == nil)

        first.store(Self.stored("version 3"))
        #expect(first.currentMemoryUsage > 0)
        second.removeAllCachedResponses()
        #expect(await eventually { first.currentMemoryUsage == 0 }, "removing all did not reach the other memory tier")
    }

    @Test("Payloads: another worker's key or anything else is a change; this worker's own notice is not")
    func payloads() {
        #expect(PostgresListener.payload("abc k https://example.com/a b", ignoring: "me") == "k https://example.com/a b")
        #expect(PostgresListener.payload("me k https://example.com/a", ignoring: "me") == nil)
        #expect(PostgresListener.payload("hello", ignoring: "me") == nil)
        #expect(PostgresCacheStorage.change("k https://example.com/a b") == .key("https://example.com/a b"))
        #expect(PostgresCacheStorage.change("*") == .all)
        #expect(PostgresCacheStorage.change("garbage") == .all)
    }
}
