public import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif
import Logging
import Locking
import Synchronization

/// The HTTP cache (Apple's `URLCache`): a memory tier and an
/// SQLite disk tier, each bounded by a capacity in bytes and evicting the
/// least recently used entries, each storing only responses no larger than
/// 5% of its capacity.
///
/// Thread-safe; several processes may share one disk cache (an application
/// and `cachetool`). Failures of the disk (full, damaged, locked) never
/// reach callers as errors: a store that fails is logged and skipped, a
/// lookup that fails is a miss.
public final class ResponseCache: Sendable, CustomStringConvertible {
    private let memory: MemoryTier
    private let disk: (any CacheStorage)?
    private let logger: Logger
    /// The disk's writes are failing (full, read-only): logged once, until one works again.
    private let writesFailing = Atomic<Bool>(false)
    /// Lookups begun (tests check that `resume()` does none).
    private let lookups = Atomic<Int>(0)

    /// A cache with a memory tier and, when `directory` is given, a disk tier
    /// in that directory (created if needed, mode 0700; a damaged database
    /// there is recreated empty). Apple's initializer: it never fails. When
    /// the disk tier cannot be opened (permissions, a newer schema, a lock
    /// held for too long) the cache keeps memory only, logs why, and says
    /// so in `startupError`; `open(memoryCapacity:diskCapacity:directory:)`
    /// throws instead.
    ///
    /// - Parameters:
    ///   - memoryCapacity: Bytes the memory tier may hold.
    ///   - diskCapacity: Bytes the disk tier may hold.
    ///   - directory: The disk tier's directory; nil for memory only.
    public convenience init(memoryCapacity: Int, diskCapacity: Int, directory: URL?) {
        let logger = Logger(label: "urlloading.cache")
        guard let directory else {
            self.init(memory: MemoryTier(capacity: memoryCapacity), disk: nil, logger: logger)
            return
        }
        do throws(StoreError) {
            let disk = try DiskTier(directory: directory, capacity: diskCapacity, logger: logger)
            self.init(memory: MemoryTier(capacity: memoryCapacity), disk: disk, logger: logger)
        } catch {
            let failure = error
            logger.error("the cache's disk tier could not be opened; it keeps memory only", metadata: ["error": "\(failure)"])
            self.init(memory: MemoryTier(capacity: memoryCapacity), disk: nil, logger: logger, startupError: failure)
        }
    }

    /// A cache with a disk tier in `directory`, or the reason it cannot be
    /// opened.
    ///
    /// - Throws: `StoreError` when the directory or database cannot be
    ///   opened (permissions, a newer schema, a lock held for too long).
    public static func open(memoryCapacity: Int, diskCapacity: Int, directory: URL) throws -> ResponseCache {
        try open(memoryCapacity: memoryCapacity, diskCapacity: diskCapacity, directory: directory, busyTimeout: .seconds(5))
    }

    /// `open(memoryCapacity:diskCapacity:directory:)` whose writers wait up to
    /// `busyTimeout` for another process's lock (tests make it long), and
    /// whose gathered uses wait up to `usesWriteDelay` for a write.
    package static func open(
        memoryCapacity: Int, diskCapacity: Int, directory: URL, busyTimeout: Duration,
        usesWriteDelay: Duration = .seconds(CacheLedger.writeDelaySeconds)
    ) throws -> ResponseCache {
        let logger = Logger(label: "urlloading.cache")
        let disk = try DiskTier(
            directory: directory, capacity: diskCapacity, busyTimeout: busyTimeout, usesWriteDelay: usesWriteDelay, logger: logger)
        return ResponseCache(memory: MemoryTier(capacity: memoryCapacity), disk: disk, logger: logger)
    }

    /// Apple's initializer (`URLCache(memoryCapacity:diskCapacity:diskPath:)`):
    /// an absolute `diskPath` is the disk tier's folder; a relative one is a
    /// folder under the application's cache folder (`$XDG_CACHE_HOME/<app>/`),
    /// as Apple's is under the app's Caches. A relative path that would leave
    /// that folder (`..`) keeps memory only and says why in `startupError`;
    /// nil is memory only.
    public convenience init(memoryCapacity: Int, diskCapacity: Int, diskPath: String?) {
        guard let diskPath else {
            self.init(memoryCapacity: memoryCapacity, diskCapacity: diskCapacity, directory: nil)
            return
        }
        if diskPath.hasPrefix("/") {
            self.init(memoryCapacity: memoryCapacity, diskCapacity: diskCapacity, directory: URL(fileURLWithPath: diskPath, isDirectory: true))
            return
        }
        let components = diskPath.split(separator: "/", omittingEmptySubsequences: true)
        guard !components.isEmpty, !components.contains(where: { $0 == ".." || $0 == "." || $0.contains("\0") }) else {
            let failure = StoreError(
                kind: .configuration, message: "the cache's diskPath leaves the application's cache folder: give a folder name under it, or an absolute path",
                path: diskPath)
            Logger(label: "urlloading.cache").error("the cache keeps memory only", metadata: ["error": "\(failure)"])
            self.init(memory: MemoryTier(capacity: memoryCapacity), disk: nil, logger: Logger(label: "urlloading.cache"), startupError: failure)
            return
        }
        let directory = components.reduce(StoreLocations().cacheDirectory) { $0.appendingPathComponent(String($1), isDirectory: true) }
        self.init(memoryCapacity: memoryCapacity, diskCapacity: diskCapacity, directory: directory)
    }

    /// A cache held in memory only.
    ///
    /// - Parameter capacity: Bytes the memory tier may hold.
    public convenience init(memoryCapacity capacity: Int) {
        self.init(memory: MemoryTier(capacity: capacity), disk: nil, logger: Logger(label: "urlloading.cache"))
    }

    init(memory: MemoryTier, disk: (any CacheStorage)?, logger: Logger, startupError: StoreError? = nil) {
        self.memory = memory
        self.disk = disk
        self.logger = logger
        self.startupError = startupError
    }

    /// A cache whose persistent tier is `storage` (a fleet's database:
    /// URLLoadingPostgres makes one), with a memory tier of its own.
    /// Changes other processes make to it drop the keys from the memory tier.
    package convenience init(memoryCapacity: Int, storage: any CacheStorage) {
        let memory = MemoryTier(capacity: memoryCapacity)
        storage.observeOthers { [weak memory] change in
            switch change {
            case .key(let key): memory?.remove(key: key)
            case .all: memory?.removeAll()
            }
        }
        self.init(memory: memory, disk: storage, logger: Logger(label: "urlloading.cache"))
    }

    /// The application's shared cache (Apple's `URLCache.shared`): the one
    /// default sessions use, under `$XDG_CACHE_HOME/<app>/`, 512 KiB in
    /// memory and 10 MiB on disk; memory only when its folder cannot be
    /// opened (see `startupError`).
    public static var shared: ResponseCache {
        SharedStores.cache(for: StoreLocations.defaultApplicationIdentifier)
    }

    /// Why the disk tier asked for could not be opened; nil when it was (or
    /// none was asked for).
    public let startupError: StoreError?

    /// The directory of the disk tier, if it is a folder's.
    public var directory: URL? { (disk as? DiskTier)?.directory }

    /// Bytes the memory tier may hold; lowering it evicts at once.
    public var memoryCapacity: Int {
        get { memory.capacity }
        set { memory.capacity = newValue }
    }

    /// Bytes the disk tier may hold (0 without one); lowering it evicts at once.
    public var diskCapacity: Int {
        get { disk?.capacity ?? 0 }
        set { disk?.capacity = newValue }
    }

    /// Bytes held by the memory tier.
    public var currentMemoryUsage: Int { memory.usage }

    /// Bytes held by the disk tier, exact across processes.
    public var currentDiskUsage: Int {
        guard let disk else { return 0 }
        do {
            return try disk.usage().bytes
        } catch {
            logger.warning("cache usage unavailable", metadata: ["error": "\(error)"])
            return 0
        }
    }

    /// The stored response for `request`, whatever its freshness (the
    /// session applies RFC 9111 before using it), or nil.
    ///
    /// - Parameter request: A GET request; its header fields select among
    ///   variants when the stored response has Vary.
    public func cachedResponse(for request: URLRequest) -> CachedResponse? {
        guard let url = request.url, let key = CachePolicy.primaryKey(url) else { return nil }
        return hit(key: key, requestHeaders: HeaderFields(request.allHTTPHeaderFields ?? [:]))?.cachedResponse()
    }

    /// Stores `cachedResponse` for `request`, in the tiers its storage
    /// policy allows and the 5% rule admits. Replaces an earlier response
    /// for the same URL and Vary variant.
    public func storeCachedResponse(_ cachedResponse: CachedResponse, for request: URLRequest) {
        guard let url = request.url, let key = CachePolicy.primaryKey(url) else { return }
        let (status, headers) = cachedResponse.statusAndFields
        let now = Date().timeIntervalSince1970
        store(
            StoredResponse(
                url: CachedURL.stored(url), key: key, status: status,
                responseHeaders: headers, requestHeaders: HeaderFields(request.allHTTPHeaderFields ?? [:]),
                body: cachedResponse.data, requestTime: now, responseTime: now, storedAt: now,
                storagePolicy: cachedResponse.storagePolicy, userInfo: cachedResponse.storedUserInfo))
    }

    /// Removes the stored responses (all variants) for `request`'s URL.
    public func removeCachedResponse(for request: URLRequest) {
        guard let url = request.url, let key = CachePolicy.primaryKey(url) else { return }
        remove(key: key)
    }

    /// Removes every stored response from both tiers.
    public func removeAllCachedResponses() {
        memory.removeAll()
        logging("remove all") { try disk?.removeAll() }
    }

    /// Removes the responses stored at or after `date` from both tiers.
    public func removeCachedResponses(since date: Date) {
        let seconds = date.timeIntervalSince1970
        memory.removeStored(since: seconds)
        logging("remove since a date") { try disk?.removeStored(since: seconds) }
    }

    /// Writes pending LRU bookkeeping to disk.
    public func flush() {
        disk?.flushTouches()
    }

    /// Names the tiers and their capacities.
    public var description: String {
        "ResponseCache(memory: \(memoryCapacity) bytes, disk: \(diskCapacity) bytes\(disk.map { " at \($0.location)" } ?? ""))"
    }

    // MARK: For the session and tools

    /// The stored response for a primary key whose Vary matches the request's
    /// fields: memory tier first, then disk (promoted to memory on a hit).
    package func lookup(key: String, requestHeaders: HeaderFields, now: Double? = nil) -> StoredResponse? {
        hit(key: key, requestHeaders: requestHeaders, now: now)?.response
    }

    /// `lookup`'s response as the memory tier's entry, which keeps the
    /// `HTTPURLResponse` it is handed out as. `now` (the clock's by
    /// default) matters to the disk tier's LRU only.
    func hit(key: String, requestHeaders: HeaderFields, now: Double? = nil) -> MemoryTier.Entry? {
        lookups.add(1, ordering: .relaxed)
        var comparable: HeaderFields?
        let hasCredentials = requestHeaders.contains(StoredResponse.credentialsField)
        func matching<Variants: BidirectionalCollection<MemoryTier.Entry>>(_ variants: Variants) -> MemoryTier.Entry? {
            func selects(_ candidate: MemoryTier.Entry) -> Bool {
                guard candidate.selectsByRequest else { return true }
                let stored = candidate.response
                if comparable == nil { comparable = StoredResponse.comparableRequestHeaders(requestHeaders) }
                return CachePolicy.varyMatches(stored.entry, requestHeaders: comparable ?? requestHeaders).allowed
            }
            // A request with credentials takes the entry stored for them
            // before one stored without any.
            if hasCredentials, variants.count > 1,
                let own = variants.last(where: { $0.response.entry.requestHeaders.contains(StoredResponse.credentialsField) && selects($0) })
            {
                return own
            }
            return variants.last(where: selects)
        }
        if let hit = matching(memory.entries(for: key)) {
            disk?.count("hits")
            return hit
        }
        guard let disk else { return nil }
        do {
            let variants = try disk.variants(for: key, now: now ?? Date().timeIntervalSince1970)
            // A key has one variant but for Vary: that one needs no array of entries.
            let found =
                variants.count == 1
                ? matching(CollectionOfOne(MemoryTier.Entry(variants[0]))) : matching(variants.map { MemoryTier.Entry($0) })
            guard let hit = found else {
                disk.count("misses")
                return nil
            }
            disk.count("hits")
            if hit.response.storagePolicy != .notAllowed { storeInMemory(hit) }
            return hit
        } catch {
            logger.warning("cache lookup failed; treated as a miss", metadata: ["error": "\(error)"])
            return nil
        }
    }

    /// Stores in the tiers the storage policy allows; the 5% rule per tier.
    package func store(_ response: StoredResponse, now: Double = Date().timeIntervalSince1970) {
        switch response.storagePolicy {
        case .notAllowed:
            remove(key: response.key, variant: response.variant)
        case .allowedInMemoryOnly:
            storeInMemory(response)
            logging("store") { try disk?.remove(key: response.key, variant: response.variant) }
        case .allowed:
            storeInMemory(response)
            logging("store") { try disk?.store(response, now: now) }
        }
    }

    /// The memory tier holds bodies, never a disk file's descriptor: a
    /// file-backed body is read in only when the tier admits its size.
    private func storeInMemory(_ response: StoredResponse) {
        storeInMemory(MemoryTier.Entry(response))
    }

    /// As `storeInMemory(_:)` for a response; the entry itself is kept
    /// (with the `HTTPURLResponse` it may have built) unless its body must be read in.
    private func storeInMemory(_ entry: MemoryTier.Entry) {
        let response = entry.response
        guard response.bodyFile != nil else {
            memory.store(entry)
            return
        }
        guard memory.admits(response.cost), let inMemory = response.materialized() else { return }
        memory.store(inMemory)
    }

    /// Whether lookups may read the disk (and wait for another process's lock).
    package var hasDiskTier: Bool { disk != nil }

    /// Coalescing of misses across a fleet, when the persistent tier is shared.
    package var fleet: (any FleetCoalescing)? { disk?.fleet }

    /// How many lookups began in this process.
    package var lookupCount: Int { lookups.load(ordering: .relaxed) }

    /// Counts an event for `cachetool stats`: "revalidations", "not-modified", ...
    package func count(_ counter: String) {
        disk?.count(counter)
    }

    package func remove(key: String) {
        memory.remove(key: key)
        logging("remove") { try disk?.remove(key: key) }
    }

    package func remove(key: String, variant: String) {
        memory.remove(key: key, variant: variant)
        logging("remove") { try disk?.remove(key: key, variant: variant) }
    }

    /// Key and URL of every entry of the disk tier, least recently used first.
    package func diskListing() throws -> [(key: String, url: String)] {
        try disk?.listing() ?? []
    }

    /// Entries and bytes of the disk tier.
    package func diskUsage() throws -> (entries: Int, bytes: Int) {
        try disk?.usage() ?? (0, 0)
    }

    /// Runs a disk write. A failure is logged once, not per request (a
    /// full disk fails every store until there is room), and again after a
    /// write has worked in between; the caller's fetch never fails for it.
    private func logging(_ operation: String, _ body: () throws -> Void) {
        do {
            try body()
            if writesFailing.exchange(false, ordering: .relaxed) {
                logger.notice("cache writes work again")
            }
        } catch {
            if !writesFailing.exchange(true, ordering: .relaxed) {
                logger.error(
                    "cache \(operation) failed; further failures are not logged until a write works",
                    metadata: ["error": "\(error)"])
            }
        }
    }
}

extension ResponseCache: Equatable {
    /// Whether both are the same store object (as Apple's store objects
    /// compare): a test compares a configuration's store with the one it set.
    public static func == (a: ResponseCache, b: ResponseCache) -> Bool { a === b }
}
