import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
import Migrations
import Storage
import Testing
import TestSupport
@testable import URLLoading

/// The SQLite tier's usage: its row counts the rows up to `counted_through`
/// and the newest rows are added when it is read, so a store writes the
/// row's page once in `CacheUsage.foldThreshold` stores; usage stays exact
/// for every connection and process.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(2)))) struct CacheUsageTests {
    /// What the file holds, counted row by row, and its usage row.
    struct Truth: Equatable {
        var entries: Int
        var bytes: Int
        var row: Row
        struct Row: Equatable {
            var entries: Int
            var bytes: Int
            var countedThrough: Int64
        }
    }

    static func truth(_ folder: TemporaryDirectory) throws -> Truth {
        let database = try Database(path: folder.url.appendingPathComponent(DiskTier.databaseName).path, migrations: Schema.cache)
        return try database.read { (connection: Connection) throws(SQLiteError) -> Truth in
            let counted = try connection.query("SELECT count(*), coalesce(sum(cost), 0) FROM entries") { ($0.int(0), $0.int(1)) }
            let row = try connection.query("SELECT entries, bytes, counted_through FROM usage WHERE id = 1") {
                Truth.Row(entries: $0.int(0), bytes: $0.int(1), countedThrough: $0.int64(2))
            }
            return Truth(
                entries: counted.first?.0 ?? -1, bytes: counted.first?.1 ?? -1, row: row.first ?? Truth.Row(entries: -1, bytes: -1, countedThrough: -1))
        }
    }

    static func response(_ index: Int, size: Int) -> StoredResponse {
        ResponseCacheTests.stored("https://example.com/\(index)", body: Data(count: size))
    }

    static func url(_ index: Int) throws -> URLRequest {
        URLRequest(url: try #require(URL(string: "https://example.com/\(index)")))
    }

    @Test("A store leaves the usage row alone until 32 rows are past it; usage stays exact through replacements, uses, removals and folds")
    func foldsAndStaysExact() throws {
        let folder = TemporaryDirectory()
        let cache = try ResponseCache.open(memoryCapacity: 0, diskCapacity: 1 << 30, directory: folder.url)
        let t0 = Date().timeIntervalSince1970
        for index in 0..<10 { cache.store(Self.response(index, size: 100 + index), now: t0) }
        var truth = try Self.truth(folder)
        #expect(truth.row == Truth.Row(entries: 0, bytes: 0, countedThrough: 0), "ten stores wrote the usage row: \(truth.row)")
        #expect(try cache.diskUsage() == (truth.entries, truth.bytes) && truth.entries == 10)
        for index in 10..<100 { cache.store(Self.response(index, size: 100 + index), now: t0) }
        truth = try Self.truth(folder)
        #expect(truth.row.countedThrough >= Int64(CacheUsage.foldThreshold) && truth.row.entries >= CacheUsage.foldThreshold, "never folded: \(truth.row)")
        #expect(try cache.diskUsage() == (truth.entries, truth.bytes) && truth.entries == 100)
        // Replaced with other sizes: the old rows were counted, the new are not.
        for index in 0..<20 { cache.store(Self.response(index, size: 5_000), now: t0 + 1) }
        // Used past the one-minute resolution: counted rows move past the count.
        for index in 30..<60 { #expect(cache.lookup(key: ResponseCacheTests.key("https://example.com/\(index)"), requestHeaders: [], now: t0 + 130) != nil) }
        cache.flush()
        for index in [5, 40, 95] { cache.removeCachedResponse(for: try Self.url(index)) }
        truth = try Self.truth(folder)
        #expect(try cache.diskUsage() == (truth.entries, truth.bytes) && truth.entries == 97)
        #expect(cache.currentDiskUsage == truth.bytes)
        // The count survives a reopening.
        let reopened = try ResponseCache.open(memoryCapacity: 0, diskCapacity: 1 << 30, directory: folder.url)
        #expect(try reopened.diskUsage() == (truth.entries, truth.bytes))
    }

    @Test("Two connections storing in turns into one file: each knows the other's rows, and eviction keeps the capacity exactly")
    func twoWritersStayExact() throws {
        let folder = TemporaryDirectory()
        // Room for about 30 (a tier takes a response of at most 5% of its capacity).
        let capacity = 30 * Self.response(999, size: 1_000).cost
        let first = try ResponseCache.open(memoryCapacity: 0, diskCapacity: capacity, directory: folder.url)
        let second = try ResponseCache.open(memoryCapacity: 0, diskCapacity: capacity, directory: folder.url)
        for index in 0..<150 {
            (index % 3 == 0 ? second : first).store(Self.response(index, size: 1_000))
            if index % 25 == 24 {
                let truth = try Self.truth(folder)
                #expect(truth.bytes <= capacity, "over capacity after \(index + 1) stores: \(truth)")
                #expect(try first.diskUsage() == (truth.entries, truth.bytes))
                #expect(try second.diskUsage() == (truth.entries, truth.bytes))
            }
        }
        // The costs grow with the URL's length: 30 or a little more of the last fit.
        let last = try Self.truth(folder)
        #expect(last.bytes <= capacity && last.entries >= 30, "\(last)")
    }

    @Test("Uses written in a batch move counted rows past the usage row's count: the next store knows it, and evicts to the capacity")
    func usesThenStores() throws {
        let folder = TemporaryDirectory()
        let capacity = 70 * Self.response(999, size: 1_000).cost
        let cache = try ResponseCache.open(memoryCapacity: 0, diskCapacity: capacity, directory: folder.url)
        let t0 = Date().timeIntervalSince1970
        // Two folds: every row is counted.
        for index in 100..<164 { cache.store(Self.response(index, size: 1_000), now: t0) }
        let full = try Self.truth(folder)
        #expect(full.entries == 64 && full.row.entries == 64, "\(full)")
        // Used past the one-minute resolution, written as one batch.
        for index in 140..<164 { #expect(cache.lookup(key: ResponseCacheTests.key("https://example.com/\(index)"), requestHeaders: [], now: t0 + 130) != nil) }
        cache.flush()
        for index in 200..<210 { cache.store(Self.response(index, size: 1_000), now: t0 + 131) }
        let after = try Self.truth(folder)
        #expect(after.bytes <= capacity && after.entries == 70, "over capacity: \(after) (before the uses: \(full))")
        #expect(try cache.diskUsage() == (after.entries, after.bytes))
    }

    @Test("A version 2 file counts all its rows in the usage row when it is migrated")
    func migratesVersionTwo() throws {
        let folder = TemporaryDirectory()
        let path = folder.url.appendingPathComponent(DiskTier.databaseName).path
        do {
            var options = Database.Options()
            options.fileMode = 0o600  // as the cache makes it
            let old = try Database(path: path, migrations: Array(Schema.cache.prefix(2)), options: options)
            // Five rows as version 2 stored them, its triggers counting each.
            try old.write { (connection: Connection) throws(SQLiteError) in
                for index in 0..<5 {
                    try CacheLRUOrderTests.insertOldRow(
                        connection, url: "https://example.com/\(index)", body: Data(count: 300), cost: 400 + index, time: 1)
                }
            }
        }
        let cache = try ResponseCache.open(memoryCapacity: 0, diskCapacity: 1 << 30, directory: folder.url)
        let truth = try Self.truth(folder)
        #expect(truth.row == Truth.Row(entries: 5, bytes: 2_010, countedThrough: 5) && truth.bytes == 2_010)
        #expect(try cache.diskUsage() == (5, truth.bytes))
        cache.removeCachedResponse(for: try Self.url(2))
        cache.store(Self.response(9, size: 300))
        let after = try Self.truth(folder)
        #expect(try cache.diskUsage() == (after.entries, after.bytes) && after.entries == 5)
    }

    @Test("Usage read while another connection's uses move counted rows past the count: every read sees one moment, so the entries never change")
    func usageIsOneSnapshot() throws {
        let folder = TemporaryDirectory()
        let reader = try ResponseCache.open(memoryCapacity: 0, diskCapacity: 1 << 30, directory: folder.url)
        let t0 = Date().timeIntervalSince1970
        // Two folds: every row is counted in the usage row.
        for index in 0..<64 { reader.store(Self.response(index, size: 1_000), now: t0) }
        let total = try Self.truth(folder)
        #expect(total.row.entries == 64 && total.entries == 64, "\(total)")
        let writer = try ResponseCache.open(memoryCapacity: 0, diskCapacity: 1 << 30, directory: folder.url)
        let stop = Lock(false)
        let finished = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            defer { finished.signal() }
            // Each use, a minute past the last, moves one counted row past the count.
            var round = 0
            while !stop.withLock({ $0 }) {
                round += 1
                let key = ResponseCacheTests.key("https://example.com/\(round % 64)")
                _ = writer.lookup(key: key, requestHeaders: [], now: t0 + Double(round) * 61)
                writer.flush()
            }
        }
        var seen: [Int: Int] = [:]
        for _ in 0..<3_000 {
            let entries = try reader.diskUsage().entries
            seen[entries, default: 0] += 1
        }
        stop.withLock { $0 = true }
        #expect(finished.wait(timeout: .now() + .seconds(60)) == .success)
        let after = try Self.truth(folder)
        #expect(after.row.countedThrough == total.row.countedThrough && after.row.entries < 64, "no use moved a row: \(after)")
        #expect(seen == [64: 3_000], "usage read as other entries than the file holds: \(seen)")
    }

    @Test("A crafted counted_through (negative, huge) is no trap: stores, removals and usage go on", arguments: [Int64(-5), Int64(9_000_000_000_000_000_000)])
    func craftedWatermark(_ value: Int64) throws {
        let folder = TemporaryDirectory()
        do {
            let cache = try ResponseCache.open(memoryCapacity: 0, diskCapacity: 1 << 30, directory: folder.url)
            for index in 0..<40 { cache.store(Self.response(index, size: 200)) }
        }
        let database = try Database(path: folder.url.appendingPathComponent(DiskTier.databaseName).path, migrations: Schema.cache)
        try database.write { (connection: Connection) throws(SQLiteError) in
            try connection.run("UPDATE usage SET counted_through = ? WHERE id = 1", [.integer(value)])
        }
        let cache = try ResponseCache.open(memoryCapacity: 0, diskCapacity: 50 * Self.response(0, size: 200).cost, directory: folder.url)
        for index in 40..<120 { cache.store(Self.response(index, size: 200)) }
        cache.removeCachedResponse(for: try Self.url(100))
        let usage = try cache.diskUsage()
        #expect(usage.entries >= 0 && usage.bytes >= 0)
        #expect(cache.lookup(key: ResponseCacheTests.key("https://example.com/119"), requestHeaders: []) != nil)
    }
}
