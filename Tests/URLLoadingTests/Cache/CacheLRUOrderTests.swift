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

/// The SQLite tier keeps its LRU order in the row ids: a store
/// takes the next id, a touch moves its row to the next id, eviction reads
/// from the first row, and a version 1 file is renumbered by last use.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(2)))) struct CacheLRUOrderTests {
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
                    try Self.insertOldRow(connection, url: "https://example.com/\(name)", body: Data(name.utf8), cost: 105, time: lastUsed)
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
        #expect(found.index == 0 && found.triggers == 3 && found.version == Int64(Schema.cache.count))
        // The triggers came back: a removal keeps the usage exact.
        cache.removeCachedResponse(for: URLRequest(url: try #require(URL(string: "https://example.com/two"))))
        #expect(cache.currentDiskUsage == 210)
    }

    /// Inserts a row as an earlier version of the cache stored it (its
    /// triggers count it in the usage row).
    static func insertOldRow(_ connection: Connection, url: String, body: Data, cost: Int, time: Double) throws(SQLiteError) {
        try connection.run(
            """
            INSERT INTO entries(key, variant, url, host, status, response_headers, request_headers, body, body_size,
                cost, request_time, response_time, stored_at, last_used, storage_policy)
            VALUES (?, '', ?, 'example.com', 200, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0)
            """,
            [
                .text(ResponseCacheTests.key(url)), .text(url),
                .blob(FieldCoding.encode([("Cache-Control", "max-age=60")] as HeaderFields)),
                .blob(FieldCoding.encode(HeaderFields())), .blob(body), .integer(Int64(body.count)), .integer(Int64(cost)),
                .real(time), .real(time), .real(time), .real(time),
            ])
    }

    @Test("A full batch of uses is written off the lookups and never waits for another process's lock: every lookup answers while one holds it, and no use is lost")
    func fullBatchIsWrittenOffTheLookup() async throws {
        // The first round fills a batch; the rounds of the next second run while its write is tried.
        try await Self.lookUpWhileLocked(entries: CacheLedger.touchBatch + 1, usesWriteDelay: .seconds(CacheLedger.writeDelaySeconds))
    }

    @Test("The delayed write of a few uses does not wait for another process's lock either: lookups go on while one holds it, and no use is lost")
    func delayedWriteDoesNotWaitForTheLock() async throws {
        // The first round gathers ten uses; the rounds of the next second run while their delayed write (after 0.2 s) is tried.
        try await Self.lookUpWhileLocked(entries: 10, usesWriteDelay: .milliseconds(200))
    }

    /// Stores `entries` used two hours ago; while a child process holds
    /// the file's write lock, looks each up as used an hour later, round
    /// after round for a second after the first: every round answers in
    /// full (no lookup waits for a write waiting for the lock). Then, the
    /// lock gone, `flush()` writes every use.
    private static func lookUpWhileLocked(entries: Int, usesWriteDelay: Duration) async throws {
        let folder = TemporaryDirectory()
        // Writers wait up to 50 s for the lock: a lookup behind one would not answer within the bound below.
        let cache = try ResponseCache.open(
            memoryCapacity: 0, diskCapacity: 64 << 20, directory: folder.url, busyTimeout: .seconds(50), usesWriteDelay: usesWriteDelay)
        let t0 = Date().timeIntervalSince1970 - 7200
        let responses = (0..<entries).map { ResponseCacheTests.stored("https://example.com/\($0)", body: Data(count: 100), at: t0) }
        for response in responses { cache.store(response, now: t0) }
        let path = folder.path(DiskTier.databaseName)
        let holder = try ChildProcess.startWithOutputLines(ChildProcess.helper, ["hold-lock", path])
        defer { holder.kill(SIGKILL) }
        #expect(await holder.nextLine() == "locked")

        let used = t0 + 3600
        let progress = Lock((answered: 0, rounds: 0, done: false))
        Thread.detachNewThread {
            let clock = ContinuousClock()
            var started: ContinuousClock.Instant?
            repeat {
                let answered = responses.filter { cache.lookup(key: $0.key, requestHeaders: [], now: used) != nil }.count
                progress.withLock {
                    $0.answered += answered
                    $0.rounds += 1
                }
                started = started ?? clock.now
            } while started.map { clock.now - $0 < .seconds(1) } ?? true
            progress.withLock { $0.done = true }
        }
        #expect(await eventually(within: .seconds(30)) { progress.withLock { $0.done } }, "a lookup waited for the lock: \(progress.withLock { $0 })")
        let (answered, rounds, _) = progress.withLock { $0 }
        #expect(answered == rounds * responses.count)
        holder.kill(SIGKILL)
        // What a write could not write went back to the ledger: this one has every use.
        cache.flush()
        let check = try Connection(path: path, busyTimeout: .seconds(20), readOnly: true)
        #expect(try check.scalarInt("SELECT count(*) FROM entries WHERE last_used = ?", [.real(used)]) == Int64(responses.count))
    }
}
