import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
import Migrations
import Storage
import Testing
import TestSupport
@_spi(Tools) @testable import URLLoading

/// ResponseCache over real SQLite files and a real PostgreSQL database (one
/// suite, two backends: `CacheBackend`): Apple's URLCache API, the tiers and
/// their capacities (C1, C3), persistence (C2); on SQLite also several
/// processes and crashes.
@Suite struct ResponseCacheTests {
    static func stored(
        _ url: String, body: Data, headers: HeaderFields = [("Cache-Control", "max-age=60")],
        request: HeaderFields = [], at time: Double = Date().timeIntervalSince1970,
        policy: CacheStoragePolicy = .allowed
    ) -> StoredResponse {
        // Force-unwraps: test literals.
        StoredResponse(
            url: url, key: CachePolicy.primaryKey(URL(string: url)!)!, status: 200, responseHeaders: headers,
            requestHeaders: request, body: body, requestTime: time, responseTime: time, storedAt: time,
            storagePolicy: policy)
    }

    static func key(_ url: String) -> String { CachePolicy.primaryKey(URL(string: url)!)! }

    @Test("Store, look up, remove one, remove all — through URLRequest and HTTPURLResponse", arguments: CacheBackend.allCases)
    func foundationAPI(_ backend: CacheBackend) throws {
        let place = try backend.place()
        let cache = try place.open(memoryCapacity: 1 << 20, diskCapacity: 1 << 24)
        let url = try #require(URL(string: "https://example.com/a?x=1"))
        let request = URLRequest(url: url)
        let response = try #require(
            HTTPURLResponse(
                url: url, statusCode: 200, httpVersion: "HTTP/1.1",
                headerFields: ["Cache-Control": "max-age=60", "Content-Type": "text/plain"]))
        cache.storeCachedResponse(CachedResponse(response: response, data: Data("hello".utf8), userInfo: ["k": "v"]), for: request)
        let hit = try #require(cache.cachedResponse(for: request))
        #expect(hit.data == Data("hello".utf8))
        #expect((hit.response as? HTTPURLResponse)?.statusCode == 200)
        #expect((hit.response as? HTTPURLResponse)?.value(forHTTPHeaderField: "content-type") == "text/plain")
        #expect(hit.userInfo?["k"] as? String == "v")
        #expect(cache.cachedResponse(for: URLRequest(url: try #require(URL(string: "https://example.com/a?x=2")))) == nil)
        cache.removeCachedResponse(for: request)
        #expect(cache.cachedResponse(for: request) == nil)
        cache.storeCachedResponse(CachedResponse(response: response, data: Data("again".utf8)), for: request)
        cache.removeAllCachedResponses()
        #expect(cache.cachedResponse(for: request) == nil)
        #expect(cache.currentDiskUsage == 0)
        #expect(cache.currentMemoryUsage == 0)
    }

    /// A URL, its request, and a response fresh for 60 seconds.
    static func freshFor60Seconds(_ address: String) throws -> (URL, URLRequest, HTTPURLResponse) {
        let url = try #require(URL(string: address))
        let response = try #require(HTTPURLResponse(url: url, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: ["Cache-Control": "max-age=60"]))
        return (url, URLRequest(url: url), response)
    }

    @Test("userInfo on disk: an NSNumber comes back as the type it holds, integers not taken for Booleans")
    func userInfoNumbersOnDisk() throws {
        let folder = TemporaryDirectory()
        let (url, request, response) = try Self.freshFor60Seconds("https://example.com/numbers")
        let info: [AnyHashable: Any] = [
            "three": NSNumber(value: 3), "one": NSNumber(value: 1), "half": NSNumber(value: 2.5), "yes": NSNumber(value: true),
        ]
        do {
            let cache = try ResponseCache.open(memoryCapacity: 0, diskCapacity: 1 << 20, directory: folder.url)
            cache.storeCachedResponse(CachedResponse(response: response, data: Data("n".utf8), userInfo: info), for: request)
            // An unsigned number past Int64 is not kept wrapped: the entry is stored without it.
            cache.storeCachedResponse(
                CachedResponse(response: response, data: Data("h".utf8), userInfo: ["huge": NSNumber(value: UInt64.max)]),
                for: URLRequest(url: url.appendingPathComponent("huge")))
        }
        let read = try #require(try ResponseCache.open(memoryCapacity: 0, diskCapacity: 1 << 20, directory: folder.url).cachedResponse(for: request))
        let stored = try #require(read.userInfo)
        #expect(stored["three"] as? Int == 3)
        #expect(stored["one"] as? Int == 1)
        #expect(!(stored["one"] is Bool))
        #expect(stored["half"] as? Double == 2.5)
        #expect(stored["yes"] as? Bool == true)
        let huge = try ResponseCache.open(memoryCapacity: 0, diskCapacity: 1 << 20, directory: folder.url)
            .cachedResponse(for: URLRequest(url: url.appendingPathComponent("huge")))
        #expect(huge?.data == Data("h".utf8))
        #expect(huge?.userInfo == nil)
    }

    @Test("userInfo on disk: a property list comes back with its types; string pairs of an older entry still read; a crafted value is none")
    func userInfoOnDisk() throws {
        let folder = TemporaryDirectory()
        let (url, request, response) = try Self.freshFor60Seconds("https://example.com/info")
        do {
            let cache = try ResponseCache.open(memoryCapacity: 0, diskCapacity: 1 << 20, directory: folder.url)
            cache.storeCachedResponse(
                CachedResponse(response: response, data: Data("i".utf8), userInfo: ["n": 2, "list": ["x"], "flag": true]), for: request)
            // Not a property list: stored without it.
            cache.storeCachedResponse(
                CachedResponse(response: response, data: Data("o".utf8), userInfo: ["object": NSObject()]), for: URLRequest(url: url.appendingPathComponent("o")))
        }
        let read = try #require(try ResponseCache.open(memoryCapacity: 0, diskCapacity: 1 << 20, directory: folder.url).cachedResponse(for: request))
        #expect(read.userInfo?["n"] as? Int == 2)
        #expect(read.userInfo?["list"] as? [String] == ["x"])
        #expect(read.userInfo?["flag"] as? Bool == true)
        let other = try ResponseCache.open(memoryCapacity: 0, diskCapacity: 1 << 20, directory: folder.url)
        #expect(other.cachedResponse(for: URLRequest(url: url.appendingPathComponent("o")))?.userInfo == nil)

        let connection = try Connection(path: folder.url.appendingPathComponent(DiskTier.databaseName).path, busyTimeout: .seconds(5))
        try connection.run("UPDATE entries SET user_info = ? WHERE url = ?", [.blob(FieldCoding.encode(["k": "v"])), .text(url.absoluteString)])
        let older = try #require(try ResponseCache.open(memoryCapacity: 0, diskCapacity: 1 << 20, directory: folder.url).cachedResponse(for: request))
        #expect(older.userInfo?["k"] as? String == "v")
        let magic = Data("URLLoading userInfo 1\n".utf8)
        let crafted = [
            magic + Data([0x6D]) + Data(repeating: 0xFF, count: 8),  // a map whose count is more than the bytes left
            magic + Data([0x61, 1, 0, 0, 0, 0, 0, 0, 0, 0x73]),  // not a map at the top
            magic + Data(repeating: 0x61, count: 4096),  // nesting past any bound
            Data("bplist00".utf8) + Data(repeating: 0xFF, count: 64),  // another format
            Data([1, 0, 0]),  // string pairs cut short
        ]
        for crafted in crafted {
            try connection.run("UPDATE entries SET user_info = ? WHERE url = ?", [.blob(crafted), .text(url.absoluteString)])
            let hit = try ResponseCache.open(memoryCapacity: 0, diskCapacity: 1 << 20, directory: folder.url).cachedResponse(for: request)
            #expect(hit?.data == Data("i".utf8) && hit?.userInfo == nil)
        }
    }

    @Test("cachedResponse(for:) hands out one HTTPURLResponse per memory entry; a new store replaces it, a disk hit builds one")
    func handsOutOneResponse() throws {
        let folder = TemporaryDirectory()
        let cache = try ResponseCache.open(memoryCapacity: 1 << 20, diskCapacity: 1 << 20, directory: folder.url)
        let request = URLRequest(url: try #require(URL(string: "https://example.com/once")))
        cache.store(Self.stored("https://example.com/once", body: Data("one".utf8), headers: [("Cache-Control", "max-age=60"), ("ETag", "\"1\"")]))
        let first = try #require(cache.cachedResponse(for: request))
        let second = try #require(cache.cachedResponse(for: request))
        #expect(first.response === second.response)
        #expect((first.response as? HTTPURLResponse)?.value(forHTTPHeaderField: "ETag") == "\"1\"")
        cache.store(Self.stored("https://example.com/once", body: Data("two".utf8), headers: [("Cache-Control", "max-age=60"), ("ETag", "\"2\"")]))
        let replaced = try #require(cache.cachedResponse(for: request))
        #expect(replaced.response !== first.response)
        #expect((replaced.response as? HTTPURLResponse)?.value(forHTTPHeaderField: "ETag") == "\"2\"" && replaced.data == Data("two".utf8))
        // From the disk tier in a new cache: built there, then the promoted entry's.
        let reopened = try ResponseCache.open(memoryCapacity: 1 << 20, diskCapacity: 1 << 20, directory: folder.url)
        let fromDisk = try #require(reopened.cachedResponse(for: request))
        #expect((fromDisk.response as? HTTPURLResponse)?.value(forHTTPHeaderField: "ETag") == "\"2\"" && fromDisk.data == Data("two".utf8))
        #expect(reopened.cachedResponse(for: request)?.response === fromDisk.response)
    }

    @Test("A released cache's last counters are written after it is gone, and before its folder opens again")
    func countersWrittenAfterRelease() throws {
        let folder = TemporaryDirectory()
        let request = URLRequest(url: try #require(URL(string: "https://example.com/released")))
        for round in 1...3 {
            do {
                let cache = try ResponseCache.open(memoryCapacity: 0, diskCapacity: 1 << 20, directory: folder.url)
                if round == 1 { cache.store(Self.stored("https://example.com/released", body: Data("r".utf8))) }
                #expect(cache.cachedResponse(for: request) != nil)
            }
            _ = try ResponseCache.open(memoryCapacity: 0, diskCapacity: 1 << 20, directory: folder.url)
            #expect(try CacheMaintenance.stats(in: folder.url).counters["hits"] == round)
        }
    }

    @Test("A cache used now and then writes its hit counter within the write delay, with no flush() and no full batch")
    func countersWrittenWithoutFlush() async throws {
        let folder = TemporaryDirectory()
        let cache = try ResponseCache.open(memoryCapacity: 1 << 20, diskCapacity: 1 << 20, directory: folder.url)
        cache.store(Self.stored("https://example.com/counted", body: Data("c".utf8)))
        let request = URLRequest(url: try #require(URL(string: "https://example.com/counted")))
        #expect(cache.cachedResponse(for: request) != nil)
        #expect(try CacheMaintenance.stats(in: folder.url).counters["hits"] == nil, "a hit is not a write of its own")
        let written = await eventually(within: .seconds(Int64(CacheLedger.writeDelaySeconds) * 3)) {
            (try? CacheMaintenance.stats(in: folder.url).counters["hits"]) == 1
        }
        #expect(written, "the hit was not written within the delay")
        withExtendedLifetime(cache) {}
    }

    @Test("Entries survive a restart, large bodies included, with exact usage", arguments: CacheBackend.allCases)
    func survivesRestart(_ backend: CacheBackend) throws {
        let place = try backend.place()
        let small = Data(repeating: 1, count: 1000)
        let large = Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0 * 7) })
        var bytes = 0
        do {
            let cache = try place.open(memoryCapacity: 0, diskCapacity: 100 << 20)
            let a = Self.stored("https://example.com/small", body: small)
            let b = Self.stored("https://example.com/large", body: large)
            cache.store(a)
            cache.store(b)
            bytes = a.cost + b.cost
        }
        let reopened = try place.open(memoryCapacity: 0, diskCapacity: 100 << 20)
        #expect(try reopened.lookup(key: Self.key("https://example.com/small"), requestHeaders: [])?.wholeBody() == small)
        #expect(try reopened.lookup(key: Self.key("https://example.com/large"), requestHeaders: [])?.wholeBody() == large)
        #expect(reopened.currentDiskUsage == bytes)
        if let directory = place.directory {
            // On SQLite, a body over the inline limit is a file of its own.
            let files = try FileManager.default.contentsOfDirectory(atPath: directory.url.appendingPathComponent("Bodies").path)
            #expect(files.count == 1)
        }
    }

    @Test("A tier stores a response only up to 5% of its capacity; capacity 0 stores nothing", arguments: CacheBackend.allCases)
    func fivePercentRule(_ backend: CacheBackend) throws {
        let place = try backend.place()
        defer { withExtendedLifetime(place) {} }
        let cache = try place.open(memoryCapacity: 100_000, diskCapacity: 1_000_000)
        let fits = Self.stored("https://example.com/fits", body: Data(count: 4000))  // < 5,000 and < 50,000
        let diskOnly = Self.stored("https://example.com/disk", body: Data(count: 20_000))  // > 5,000, < 50,000
        let neither = Self.stored("https://example.com/none", body: Data(count: 60_000))  // > 50,000
        for response in [fits, diskOnly, neither] { cache.store(response) }
        #expect(cache.currentMemoryUsage == fits.cost)
        #expect(cache.currentDiskUsage == fits.cost + diskOnly.cost)
        let empty = try backend.place()
        defer { withExtendedLifetime(empty) {} }
        let none = try empty.open(memoryCapacity: 0, diskCapacity: 0)
        none.store(fits)
        #expect(none.lookup(key: fits.key, requestHeaders: []) == nil)
    }

    @Test("The least recently used entries go first, on disk and in memory; shrinking evicts", arguments: CacheBackend.allCases)
    func lruEviction(_ backend: CacheBackend) throws {
        let place = try backend.place()
        let responses = (0..<21).map { Self.stored("https://example.com/\($0 + 10)", body: Data(count: 900)) }
        let cost = responses[0].cost  // the same for every one: equal URL lengths and bodies
        // Room for exactly 20: the 5% rule admits each one.
        let cache = try place.open(memoryCapacity: 0, diskCapacity: 20 * cost)
        let t0 = Date().timeIntervalSince1970
        for (offset, response) in responses.prefix(20).enumerated() { cache.store(response, now: t0 + Double(offset)) }
        #expect(try cache.diskListing().count == 20)
        // Use entry 0 (past the LRU's one-minute resolution) so that entry 1 is the least recently used.
        #expect(cache.lookup(key: responses[0].key, requestHeaders: [], now: t0 + 120) != nil)
        cache.store(responses[20], now: t0 + 121)
        let keys = Set(try cache.diskListing().map(\.key))
        #expect(keys.count == 20)
        #expect(!keys.contains(responses[1].key))
        #expect(keys.contains(responses[0].key))
        #expect(keys.contains(responses[20].key))
        #expect(cache.currentDiskUsage <= cache.diskCapacity)
        cache.diskCapacity = 10 * cost
        #expect(cache.currentDiskUsage <= 10 * cost)
        #expect(try cache.diskListing().count == 10)

        let memory = MemoryTier(capacity: 20 * cost)
        for response in responses.prefix(20) { memory.store(response) }
        _ = memory.variants(for: responses[0].key)
        memory.store(responses[20])
        #expect(memory.variants(for: responses[1].key).isEmpty)
        #expect(!memory.variants(for: responses[0].key).isEmpty)
        #expect(memory.count == 20)
        memory.capacity = 5 * cost
        #expect(memory.count == 5)
        #expect(memory.usage == 5 * cost)
    }

    @Test("Storage policies: memory only, and not allowed", arguments: CacheBackend.allCases)
    func storagePolicies(_ backend: CacheBackend) throws {
        let place = try backend.place()
        defer { withExtendedLifetime(place) {} }
        let cache = try place.open(memoryCapacity: 1 << 20, diskCapacity: 1 << 20)
        cache.store(Self.stored("https://example.com/m", body: Data(count: 10), policy: .allowedInMemoryOnly))
        cache.store(Self.stored("https://example.com/n", body: Data(count: 10), policy: .notAllowed))
        #expect(cache.lookup(key: Self.key("https://example.com/m"), requestHeaders: []) != nil)
        #expect(cache.lookup(key: Self.key("https://example.com/n"), requestHeaders: []) == nil)
        #expect(try cache.diskListing().isEmpty)
    }

    @Test("Remove responses stored since a date", arguments: CacheBackend.allCases)
    func removeSince(_ backend: CacheBackend) throws {
        let place = try backend.place()
        defer { withExtendedLifetime(place) {} }
        let cache = try place.open(memoryCapacity: 1 << 20, diskCapacity: 1 << 20)
        let now = Date().timeIntervalSince1970
        cache.store(Self.stored("https://example.com/old", body: Data(count: 10), at: now - 1000))
        cache.store(Self.stored("https://example.com/new", body: Data(count: 10), at: now))
        cache.removeCachedResponses(since: Date(timeIntervalSince1970: now - 10))
        #expect(cache.lookup(key: Self.key("https://example.com/old"), requestHeaders: []) != nil)
        #expect(cache.lookup(key: Self.key("https://example.com/new"), requestHeaders: []) == nil)
        #expect(try cache.diskListing().map(\.url) == ["https://example.com/old"])
    }

    @Test("§4.1: variants of one URL are kept apart by Vary; secrets are stored as fingerprints only", arguments: CacheBackend.allCases)
    func varyVariants(_ backend: CacheBackend) throws {
        let place = try backend.place()
        let cache = try place.open(memoryCapacity: 0, diskCapacity: 1 << 20)
        let headers: HeaderFields = [("Cache-Control", "max-age=60"), ("Vary", "Accept-Language, Authorization")]
        cache.store(
            Self.stored(
                "https://example.com/v", body: Data("en".utf8), headers: headers,
                request: [("Accept-Language", "en"), ("Authorization", "Bearer secret-token-1")]))
        cache.store(
            Self.stored(
                "https://example.com/v", body: Data("fr".utf8), headers: headers,
                request: [("Accept-Language", "fr"), ("Authorization", "Bearer secret-token-1")]))
        let key = Self.key("https://example.com/v")
        #expect(cache.lookup(key: key, requestHeaders: [("Accept-Language", "fr"), ("Authorization", "Bearer secret-token-1")])?.body == Data("fr".utf8))
        #expect(cache.lookup(key: key, requestHeaders: [("Accept-Language", "en"), ("Authorization", "Bearer secret-token-1")])?.body == Data("en".utf8))
        #expect(cache.lookup(key: key, requestHeaders: [("Accept-Language", "en"), ("Authorization", "Bearer other")]) == nil)
        #expect(try place.rawContains(Data("Accept-Language".utf8)), "the check looks where the entries are")
        #expect(try !place.rawContains(Data("secret-token-1".utf8)))
    }

    @Test("A damaged cache database is recreated empty and works")
    func damagedDatabaseIsRecreated() throws {
        let directory = TemporaryDirectory()
        try Data("garbage, not a database".utf8).write(to: directory.url.appendingPathComponent("Cache.sqlite"))
        // Damaged, but private as the library made it (one others can read is refused).
        chmod(directory.path("Cache.sqlite"), 0o600)
        let cache = try ResponseCache.open(memoryCapacity: 0, diskCapacity: 1 << 20, directory: directory.url)
        cache.store(Self.stored("https://example.com/x", body: Data(count: 10)))
        #expect(cache.lookup(key: Self.key("https://example.com/x"), requestHeaders: []) != nil)
    }

    @Test("A body file lost behind the cache's back is a miss, never a partial body")
    func lostBodyFileIsAMiss() throws {
        let directory = TemporaryDirectory()
        let cache = try ResponseCache.open(memoryCapacity: 0, diskCapacity: 100 << 20, directory: directory.url)
        cache.store(Self.stored("https://example.com/big", body: Data(count: 500_000)))
        let bodies = directory.url.appendingPathComponent("Bodies")
        for name in try FileManager.default.contentsOfDirectory(atPath: bodies.path) {
            try Data(count: 10).write(to: bodies.appendingPathComponent(name))
        }
        #expect(cache.lookup(key: Self.key("https://example.com/big"), requestHeaders: []) == nil)
        #expect(try cache.diskListing().isEmpty)
        #expect(cache.currentDiskUsage == 0)
    }

    @Test("A stored header list that another program damaged is a miss and its entry is removed; the others still answer")
    func damagedHeaderListIsAMiss() throws {
        let directory = TemporaryDirectory()
        let cache = try ResponseCache.open(memoryCapacity: 0, diskCapacity: 1 << 20, directory: directory.url)
        let names = ["short", "huge", "text", "request", "kept"]
        for name in names { cache.store(Self.stored("https://example.com/\(name)", body: Data(name.utf8))) }
        let file = try Database(path: directory.path(DiskTier.databaseName), migrations: Schema.cache)
        try file.write { (connection: Connection) throws(SQLiteError) in
            let damage: [(column: String, value: SQLiteValue, name: String)] = [
                ("response_headers", .blob(Data([5, 0, 0, 0, 0x61, 0x62])), "short"),  // a length past the end
                ("response_headers", .blob(Data([0xFF, 0xFF, 0xFF, 0x7F, 0x61])), "huge"),
                ("response_headers", .text("not a list"), "text"),
                ("request_headers", .blob(Data([1, 0, 0])), "request"),  // a length cut short
            ]
            for (column, value, name) in damage {
                try connection.run("UPDATE entries SET \(column) = ? WHERE url = ?", [value, .text("https://example.com/\(name)")])
            }
        }
        for name in names.dropLast() {
            #expect(cache.lookup(key: Self.key("https://example.com/\(name)"), requestHeaders: []) == nil, "\(name)")
        }
        let kept = cache.lookup(key: Self.key("https://example.com/kept"), requestHeaders: [])
        #expect(kept?.body == Data("kept".utf8) && kept?.entry.responseHeaders["Cache-Control"] == "max-age=60")
        #expect(try cache.diskListing().map(\.url) == ["https://example.com/kept"])
    }

    // MARK: Several processes, crashes

    @Test("Two processes and this one store into one cache at once; nothing is lost")
    func threeWritersAtOnce() async throws {
        let directory = TemporaryDirectory()
        let count = 150
        let children = try ["a", "b"].map { tag in
            try ChildProcess.start(ChildProcess.helper, ["cache-writer", directory.url.path, tag, "\(count)"])
        }
        let cache = try ResponseCache.open(memoryCapacity: 0, diskCapacity: 1 << 30, directory: directory.url)
        for index in 0..<count {
            let url = "https://fixture.test/c/\(index)"
            cache.store(Self.stored(url, body: CacheFixtures.body(for: url, index: index)))
        }
        for child in children {
            let result = try await child.wait()
            #expect(result.status == 0, "\(result.standardError)")
            #expect(result.standardOutput == "ok \(count)\n")
        }
        let listing = try cache.diskListing()
        #expect(listing.count == 3 * count)
        var bytes = 0
        for (key, url) in listing {
            let stored = try #require(cache.lookup(key: key, requestHeaders: []))
            #expect(try stored.wholeBody() == CacheFixtures.body(for: url, index: CacheFixtures.index(of: url) ?? -1), "\(url)")
            bytes += stored.cost
        }
        #expect(try cache.diskUsage() == (3 * count, bytes))
    }

    @Test("SIGKILL while storing, 20 times: the cache opens, passes integrity_check, and serves only whole entries")
    func crashWhileStoring() async throws {
        let directory = TemporaryDirectory()
        var survivors = 0
        var reported = 0
        for round in 0..<20 {
            let child = try ChildProcess.startWithOutputLines(ChildProcess.helper, ["cache-store-loop", directory.url.path, "\(round * 100_000)"])
            // Kill after a varying number of stores, during the next one.
            let target = Int.random(in: 3...40)
            var seen = 0
            while seen < target, let line = await child.nextLine(), line.hasPrefix("stored ") { seen += 1 }
            reported += seen
            child.kill(SIGKILL)
            let result = try await child.wait()
            #expect(result.signalled, "round \(round): the child ended by itself: \(result.standardError)")

            let cache = try ResponseCache.open(memoryCapacity: 0, diskCapacity: 1 << 30, directory: directory.url)
            #expect(try CacheMaintenance.verify(in: directory.url).isEmpty, "round \(round): integrity_check failed")
            let listing = try cache.diskListing()
            #expect(listing.count >= reported, "round \(round): lost entries that were reported stored")
            for (key, url) in listing {
                guard let stored = cache.lookup(key: key, requestHeaders: []) else { continue }
                #expect(try stored.wholeBody() == CacheFixtures.body(for: url, index: CacheFixtures.index(of: url) ?? -1), "round \(round): \(url)")
                survivors += 1
            }
            let (entries, _) = try cache.diskUsage()
            #expect(entries == (try cache.diskListing().count))
        }
        #expect(survivors > 0)
    }

    @Test("A disk lookup answers while another thread's write holds the tier's writing connection (a store, a batch of uses, a checkpoint)")
    func lookupDoesNotWaitForAWrite() throws {
        let folder = TemporaryDirectory()
        let disk = try DiskTier(directory: folder.url, capacity: 64 << 20)
        let response = Self.stored("https://example.com/while-writing", body: Data("stored".utf8))
        _ = try disk.store(response, now: Date().timeIntervalSince1970)
        let (inside, release, ended) = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
        Thread.detachNewThread {
            _ = try? disk.writing { (connection: Connection) throws(SQLiteError) in
                try connection.run("DELETE FROM entries")
                inside.signal()
                _ = release.wait(timeout: .now() + 60)
                throw SQLiteError(extendedCode: 4, message: "rolled back on purpose")
            }
            ended.signal()
        }
        #expect(inside.wait(timeout: .now() + 30) == .success)
        // On a thread of its own: a lookup that waited for the write fails the test, never hangs it.
        let answered = DispatchSemaphore(value: 0)
        let bodies = Lock<[Data]>([])
        Thread.detachNewThread {
            let found = (try? disk.variants(for: response.key, now: Date().timeIntervalSince1970)) ?? []
            bodies.withLock { $0 = found.map(\.body) }
            answered.signal()
        }
        let answeredWhileWriting = answered.wait(timeout: .now() + 20)
        release.signal()
        #expect(answeredWhileWriting == .success, "the lookup waited for the write")
        #expect(bodies.withLock { $0 } == [Data("stored".utf8)])
        #expect(ended.wait(timeout: .now() + 30) == .success)
    }
}
