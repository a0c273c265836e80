/// Where `ResponseCache` keeps its persistent tier: the SQLite
/// database in a folder (`DiskTier`, the default) or a shared database of a
/// fleet (URLLoadingPostgres). The cache's rules (RFC 9111, Vary, storage
/// policies) stay in `ResponseCache`; a storage keeps entries by key and
/// variant, its capacity with the 5% rule and LRU eviction, exact usage,
/// and counters for `cachetool stats`.
///
/// Calls come from any thread, never from the transport thread; each may
/// block on I/O. Failures are `StoreError`s, which the cache logs.
package protocol CacheStorage: AnyObject, Sendable {
    /// Bytes the storage may hold; lowering it evicts at once.
    var capacity: Int { get set }
    /// Where it lives, for descriptions (a folder, a database; never a password).
    var location: String { get }
    /// The 5% rule: whether an entry of `cost` bytes may be stored.
    func admits(_ cost: Int) -> Bool
    /// The variants stored under `key`, whole, marking them used at `now`.
    func variants(for key: String, now: Double) throws(StoreError) -> [StoredResponse]
    /// Stores `response`, replacing the same key and variant, evicting the
    /// least recently used entries to stay within the capacity; false when
    /// the 5% rule keeps it out (an older copy is removed then).
    @discardableResult
    func store(_ response: StoredResponse, now: Double) throws(StoreError) -> Bool
    /// Removes every variant of `key`.
    func remove(key: String) throws(StoreError)
    /// Removes one variant of `key`.
    func remove(key: String, variant: String) throws(StoreError)
    /// Removes every entry.
    func removeAll() throws(StoreError)
    /// Removes the entries stored at or after `date` (seconds since 1970).
    func removeStored(since date: Double) throws(StoreError)
    /// Entries and bytes held, exact.
    func usage() throws(StoreError) -> (entries: Int, bytes: Int)
    /// Key and URL of every entry, least recently used first.
    func listing() throws(StoreError) -> [(key: String, url: String)]
    /// Counts an event ("hits", "misses", ...) for `cachetool stats`.
    func count(_ counter: String)
    /// Writes gathered LRU updates and counters.
    func flushTouches()
    /// Coalescing of misses across the processes sharing the storage, if it can.
    var fleet: (any FleetCoalescing)? { get }
    /// Tells `handler` of keys other processes stored or removed (a memory
    /// tier's copies of them are stale); a storage of one folder never calls it.
    func observeOthers(_ handler: @escaping @Sendable (CacheChange) -> Void)
}

/// A change another process made to a shared storage.
package enum CacheChange: Sendable, Equatable {
    /// Every variant of this key.
    case key(String)
    /// Anything: the whole memory tier is stale (removal of all or by date,
    /// notifications missed while the connection was down).
    case all
}

extension DiskTier: CacheStorage {
    var location: String { directory.path }
}

/// Coalescing across processes: a storage a fleet shares lets
/// one worker fetch a key while the others wait for its stored response.
package protocol FleetCoalescing: Sendable {
    /// Claims `key` for this process and calls `granted` (on a thread of its
    /// own) once this process may fetch it: at once when no other process
    /// holds it, else when the holder releases it — having stored its
    /// response, or having died — or when the bounded wait is over. The
    /// caller looks in the cache again, fetches if it must, stores, and
    /// releases the claim.
    func claim(key: String, granted: @escaping @Sendable (any FleetClaim) -> Void)
}

/// A key claimed across the fleet, held until released (or its process dies).
package protocol FleetClaim: Sendable {
    /// Lets the next waiting process go; safe to call more than once.
    func release()
}

extension CacheStorage {
    /// None: a storage of one machine's folder coalesces in the process only.
    package var fleet: (any FleetCoalescing)? { nil }
    /// Nothing to observe: processes sharing a folder keep no shared memory tier.
    package func observeOthers(_ handler: @escaping @Sendable (CacheChange) -> Void) {}
}
