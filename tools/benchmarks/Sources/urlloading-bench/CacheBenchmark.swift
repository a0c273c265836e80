import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization
@_spi(Tools) import URLLoading

/// `urlloading-bench cache`: store throughput, memory-tier hit, disk-tier hit
/// from a new process, opening a cache of 100,000 entries, storing into a
/// full cache; each as a ratio of our time to raw SQLite's and to
/// FoundationNetworking's URLCache.
enum CacheBenchmark {
    /// Sizes: ours and raw SQLite on the full sizes; Foundation on smaller
    /// ones, since each of its stores takes milliseconds (it lists its whole
    /// directory): its figures per operation only get worse with more entries,
    /// so the ratios against it are conservative.
    static let storeCount = 20_000
    static let hitCount = 100_000
    static let bigCache = 100_000
    static let smallCache = 1_000
    static let diskLookups = 20_000
    static let evictCapacityEntries = 2_000
    static let evictCount = 5_000
    static let foundationStoreCount = 300
    static let foundationEntries = 500
    static let foundationLookups = 200

    static func ours(_ path: String, memory: Int = 0, disk: Int = 1 << 34) -> ResponseCache {
        do {
            return try ResponseCache.open(memoryCapacity: memory, diskCapacity: disk, directory: URL(fileURLWithPath: path))
        } catch {
            fail("cannot open our cache at \(path): \(error)")
        }
    }

    static func storeOurs(_ cache: ResponseCache, _ index: Int) {
        cache.store(url: Fixture.url(index), status: 200, responseHeaders: Fixture.headers(index), body: Fixture.body)
    }

    static func lookupOurs(_ cache: ResponseCache, _ index: Int) -> Int {
        cache.snapshot(for: Fixture.url(index))?.body.count ?? 0
    }

    /// The requests of the memory-hit figure, built before it is timed for
    /// every contender: it times the caches' lookups, not URL parsing.
    static func memoryHitRequests() -> [URLRequest] {
        (0..<smallCache).map { URLRequest(url: Fixture.url($0)) }
    }

    static func run() {
        var rows: [(figure: String, ours: Double, raw: Double, foundation: Double)] = []
        print("urlloading-bench cache: microseconds per operation, then ratios (ours / reference; below 1 is faster)\n")

        // store
        let oursStore: Double = {
            let cache = ours(scratchDirectory("store-ours"))
            return microsecondsPerOperation(storeCount) { for i in 0..<storeCount { storeOurs(cache, i) } }
        }()
        let rawStore: Double = {
            let raw = RawSQLite(path: scratchDirectory("store-raw") + "/raw.sqlite")
            return microsecondsPerOperation(storeCount) { for i in 0..<storeCount { raw.store(i) } }
        }()
        let foundationStore: Double = {
            let cache = FoundationCache.make(path: scratchDirectory("store-foundation"), memory: 0, disk: 1 << 30)
            return microsecondsPerOperation(foundationStoreCount) { for i in 0..<foundationStoreCount { FoundationCache.store(cache, i) } }
        }()
        rows.append(("store", oursStore, rawStore, foundationStore))

        // memory-hit
        let oursMemory = memoryHitOurs(hitCount)
        let rawWarm: Double = {
            let raw = RawSQLite(path: scratchDirectory("warm-raw") + "/raw.sqlite")
            raw.populate(smallCache)
            let order = Fixture.lookups(hitCount, below: smallCache)
            let keys = (0..<smallCache).map { Fixture.url($0).absoluteString }
            var total = 0
            return microsecondsPerOperation(hitCount) { for i in order { total += raw.lookup(key: keys[i]) } }
        }()
        let foundationMemory: Double = {
            let cache = FoundationCache.make(path: scratchDirectory("memory-foundation"), memory: 256 << 20, disk: 0)
            for i in 0..<smallCache { FoundationCache.store(cache, i) }
            let order = Fixture.lookups(hitCount, below: smallCache)
            let requests = memoryHitRequests()
            var total = 0
            let time = microsecondsPerOperation(hitCount) { for i in order { total += cache.cachedResponse(for: requests[i])?.data.count ?? 0 } }
            if total == 0 { fail("Foundation's memory cache missed every lookup") }
            return time
        }()
        rows.append(("memory-hit", oursMemory, rawWarm, foundationMemory))

        // Caches for the new-process figures.
        let oursBig = scratchDirectory("big-ours"), oursSmall = scratchDirectory("small-ours")
        populateOurs(oursBig, bigCache)
        populateOurs(oursSmall, smallCache)
        let rawBig = scratchDirectory("big-raw") + "/raw.sqlite", rawSmall = scratchDirectory("small-raw") + "/raw.sqlite"
        RawSQLite(path: rawBig).populate(bigCache)
        RawSQLite(path: rawSmall).populate(smallCache)
        let foundationDirectory = scratchDirectory("disk-foundation")
        do {
            let cache = FoundationCache.make(path: foundationDirectory, memory: 0, disk: 1 << 30)
            for i in 0..<foundationEntries { FoundationCache.store(cache, i) }
        }

        // disk-hit from a new process
        let oursDisk = runChild(["child-disk-hit", "ours", oursBig, "\(bigCache)", "\(diskLookups)"])
        let rawDisk = runChild(["child-disk-hit", "raw", rawBig, "\(bigCache)", "\(diskLookups)"])
        let foundationDisk = runChild(["child-disk-hit", "foundation", foundationDirectory, "\(foundationEntries)", "\(foundationLookups)"])
        rows.append(("disk-hit", oursDisk, rawDisk, foundationDisk))

        // open-100k: a new process opens the cache and serves its first hit;
        // open-100k-warm: the same after the process filled one Swift
        // dictionary, as any program does before it opens a cache. The
        // first generic type a process instantiates with a conformance
        // (String: Hashable for a dictionary's storage) makes the Swift
        // runtime scan every loaded library's conformance records, once
        // per process; raw SQLite's child never asks the runtime for one.
        func opening(_ kind: String, _ path: String, _ entries: Int, warm: Bool = false) -> Double {
            median((0..<5).map { _ in runChild(["child-open", kind, path, "\(entries)"] + (warm ? ["warm"] : [])) })
        }
        let oursOpenBig = opening("ours", oursBig, bigCache)
        let oursOpenSmall = opening("ours", oursSmall, smallCache)
        let rawOpenBig = opening("raw", rawBig, bigCache)
        let foundationOpen = opening("foundation", foundationDirectory, foundationEntries)
        rows.append(("open-100k", oursOpenBig, rawOpenBig, foundationOpen))
        let oursOpenWarm = opening("ours", oursBig, bigCache, warm: true)
        let rawOpenWarm = opening("raw", rawBig, bigCache, warm: true)
        let foundationOpenWarm = opening("foundation", foundationDirectory, foundationEntries, warm: true)
        rows.append(("open-100k-warm", oursOpenWarm, rawOpenWarm, foundationOpenWarm))

        // evict: storing into a full cache
        let oursEvict: Double = {
            let directory = scratchDirectory("evict-ours")
            let probe = ours(scratchDirectory("evict-probe"))
            storeOurs(probe, 0)
            let cost = probe.currentDiskUsage
            let cache = ours(directory, disk: cost * evictCapacityEntries)
            for i in 0..<evictCapacityEntries { storeOurs(cache, i) }
            let time = microsecondsPerOperation(evictCount) {
                for i in evictCapacityEntries..<(evictCapacityEntries + evictCount) { storeOurs(cache, i) }
            }
            if cache.currentDiskUsage > cache.diskCapacity { fail("our cache went over its capacity") }
            return time
        }()
        let rawEvict: Double = {
            let raw = RawSQLite(path: scratchDirectory("evict-raw") + "/raw.sqlite")
            raw.populate(evictCapacityEntries)
            return microsecondsPerOperation(evictCount) {
                for i in evictCapacityEntries..<(evictCapacityEntries + evictCount) { raw.storeEvicting(i) }
            }
        }()
        let foundationEvict: Double = {
            let cache = FoundationCache.make(path: scratchDirectory("evict-foundation"), memory: 0, disk: 200 * 1400)
            for i in 0..<200 { FoundationCache.store(cache, i) }
            return microsecondsPerOperation(foundationStoreCount) { for i in 200..<(200 + foundationStoreCount) { FoundationCache.store(cache, i) } }
        }()
        rows.append(("evict", oursEvict, rawEvict, foundationEvict))

        // disk-hit-busy: lookups while another thread of the process stores
        // (last: it adds entries to the 100,000-entry files).
        let oursBusy = runChild(["child-disk-hit-busy", "ours", oursBig, "\(bigCache)", "\(diskLookups)"])
        let rawBusy = runChild(["child-disk-hit-busy", "raw", rawBig, "\(bigCache)", "\(diskLookups)"])

        print("figure          ours µs    raw-sqlite µs    foundation µs")
        for row in rows {
            print(
                row.figure.padding(toLength: 14, withPad: " ", startingAt: 0),
                formatted(row.ours).leftPadded(9), formatted(row.raw).leftPadded(16), formatted(row.foundation).leftPadded(16))
        }
        print("open-1k (ours) \(formatted(oursOpenSmall)) µs\n")
        for row in rows {
            print("bench cache \(row.figure): \(String(format: "%.2f", row.ours / row.raw))x raw-sqlite")
            print("bench cache \(row.figure): \(String(format: "%.4f", row.ours / row.foundation))x foundation")
        }
        print("bench cache open-scaling: \(String(format: "%.2f", oursOpenBig / oursOpenSmall))x open-1k")
        print(
            "disk-hit-busy (a disk hit while another thread stores without pause): ours \(formatted(oursBusy)) µs, "
                + "raw SQLite (the writer on a second connection) \(formatted(rawBusy)) µs; ours without the writer \(formatted(oursDisk)) µs")
        print("bench cache disk-hit-busy: \(String(format: "%.2f", oursBusy / rawBusy))x raw-sqlite")
        print("bench cache disk-hit-busy: \(String(format: "%.2f", oursBusy / oursDisk))x disk-hit")
        print("\nFoundation's figures use \(foundationEntries) entries (stores: \(foundationStoreCount)); ours and raw SQLite use \(bigCache).")
    }

    /// Microseconds per memory-tier hit over `lookups` lookups among
    /// `smallCache` entries; with `disk`, of a cache that also has a disk tier there.
    static func memoryHitOurs(_ lookups: Int, disk: String? = nil) -> Double {
        let cache = disk.map { ours($0, memory: 256 << 20) } ?? ResponseCache(memoryCapacity: 256 << 20)
        for i in 0..<smallCache { storeOurs(cache, i) }
        let order = Fixture.lookups(lookups, below: smallCache)
        let requests = memoryHitRequests()
        var total = 0
        // The call Foundation's figure makes.
        let time = microsecondsPerOperation(lookups) { for i in order { total += cache.cachedResponse(for: requests[i])?.data.count ?? 0 } }
        if total != lookups * Fixture.body.count { fail("memory hits missed") }
        return time
    }

    static func populateOurs(_ path: String, _ count: Int) {
        let cache = ours(path)
        for i in 0..<count { storeOurs(cache, i) }
        cache.flush()
    }

    // MARK: Children

    /// What any Swift program has done before it opens a cache: filled a
    /// dictionary. Kept from being optimized away by its result.
    @inline(never)
    static func runtimeWarmUp() {
        var seen: [String: Int] = [:]
        seen[CommandLine.arguments.first ?? ""] = 1
        if seen.isEmpty { fail("the warm-up dictionary is empty") }
    }

    static func childDiskHit(kind: String, path: String, entries: Int, lookups: Int) -> Double {
        let order = Fixture.lookups(lookups, below: entries)
        var total = 0
        let time: Double
        switch kind {
        case "ours":
            let cache = ours(path)
            time = microsecondsPerOperation(lookups) { for i in order { total += lookupOurs(cache, i) } }
        case "raw":
            let raw = RawSQLite(path: path)
            time = microsecondsPerOperation(lookups) { for i in order { total += raw.lookup(i) } }
        default:
            let cache = FoundationCache.make(path: path, memory: 0, disk: 1 << 30)
            time = microsecondsPerOperation(lookups) { for i in order { total += FoundationCache.lookup(cache, i) } }
        }
        if total == 0 { fail("\(kind): every disk lookup missed") }
        return time
    }

    /// Microseconds per disk lookup while a thread of the same process
    /// stores new entries without pause (a session's tasks looking up while
    /// others store): ours on one cache, raw SQLite with a second
    /// connection for the writer (WAL: its reader never waits for it).
    static func childDiskHitBusy(kind: String, path: String, entries: Int, lookups: Int) -> Double {
        let order = Fixture.lookups(lookups, below: entries)
        let stop = Atomic<Bool>(false)
        let stopped = DispatchSemaphore(value: 0)
        let stored = Atomic<Int>(0)
        var total = 0
        let time: Double
        func writing(_ store: @escaping @Sendable (Int) -> Void) {
            Thread.detachNewThread {
                var index = entries
                while !stop.load(ordering: .relaxed) {
                    store(index)
                    index += 1
                }
                stored.store(index - entries, ordering: .relaxed)
                stopped.signal()
            }
        }
        switch kind {
        case "ours":
            let cache = ours(path)
            writing { storeOurs(cache, $0) }
            time = microsecondsPerOperation(lookups) { for i in order { total += lookupOurs(cache, i) } }
        default:
            /// The writer's connection, used by the writer's thread only once handed over.
            final class Writer: @unchecked Sendable {
                let raw: RawSQLite
                init(_ raw: RawSQLite) { self.raw = raw }
            }
            let writer = Writer(RawSQLite(path: path))
            let raw = RawSQLite(path: path)
            writing { writer.raw.store($0) }
            time = microsecondsPerOperation(lookups) { for i in order { total += raw.lookup(i) } }
        }
        stop.store(true, ordering: .relaxed)
        stopped.wait()
        if total == 0 { fail("\(kind): every disk lookup missed") }
        if stored.load(ordering: .relaxed) == 0 { fail("\(kind): the writer stored nothing during the lookups") }
        return time
    }

    /// - Parameter warm: The process first fills a dictionary (the Swift
    ///   runtime's one scan of conformance records is then behind it).
    static func childOpen(kind: String, path: String, entries: Int, warm: Bool = false) -> Double {
        if warm { runtimeWarmUp() }
        let start = now()
        let size: Int
        switch kind {
        case "ours":
            size = lookupOurs(ours(path), entries / 2)
        case "ours-phases":
            // For profiling: where the open's time goes, printed to stderr.
            var cache: ResponseCache? = ours(path)
            let opened = now()
            let first = cache.map { lookupOurs($0, entries / 2) } ?? 0
            let looked = now()
            size = min(first, cache.map { lookupOurs($0, entries / 2 + 1) } ?? 0)
            let second = now()
            cache = nil
            FileHandle.standardError.write(
                Data(
                    ("open \(Double(opened - start) / 1000) µs, first lookup \(Double(looked - opened) / 1000) µs, "
                        + "second \(Double(second - looked) / 1000) µs, release \(Double(now() - second) / 1000) µs\n").utf8))
        case "raw":
            size = RawSQLite(path: path).lookup(entries / 2)
        default:
            size = FoundationCache.lookup(FoundationCache.make(path: path, memory: 0, disk: 1 << 30), entries / 2)
        }
        if size == 0 { fail("\(kind): the first lookup after opening missed") }
        return Double(now() - start) / 1000
    }
}

extension String {
    func leftPadded(_ width: Int) -> String {
        count >= width ? self : String(repeating: " ", count: width - count) + self
    }
}
