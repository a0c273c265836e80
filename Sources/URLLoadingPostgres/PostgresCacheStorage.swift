import Foundation
import Locking
import Logging
import Postgres
@_spi(Tools) public import URLLoading

/// The HTTP cache's persistent tier in a PostgreSQL database that a fleet
/// shares: the SQLite disk tier's rules — the 5% rule, LRU
/// eviction by size, exact usage, counters — over one table for every
/// worker. Bodies are inline (`bytea`); the LRU order is kept to the minute
/// and written in batches, as on SQLite, so a hit costs one read.
final class PostgresCacheStorage: CacheStorage, Sendable {
    let database: PostgresDatabase
    /// One origin fetch per key across the fleet.
    let fleet: (any FleetCoalescing)?
    /// Other workers' changes, for the memory tier.
    let listener: PostgresListener
    private let state: Lock<Int>
    /// LRU touches and counters not yet written.
    private let ledger = CacheLedger()
    private let logger = Logger(label: "urlloading.cache")

    private static let table = "urlloading_cache_entries"
    private static let columns = """
        id, url, variant, status, response_headers, request_headers, body, request_time, response_time, stored_at,
        storage_policy, user_info, last_used
        """

    /// Opens the cache tables of `database` (created or migrated as needed).
    /// - Parameter fleetWaitBound: How long a worker waits for another's
    ///   fetch of a key before fetching itself.
    init(database: PostgresDatabase, capacity: Int, fleetWaitBound: TimeInterval = 30) throws(StoreError) {
        self.database = database
        state = Lock(max(0, capacity))
        fleet = try PostgresFleetLocks(database: database, waitBound: fleetWaitBound)
        listener = try database.openStore("cache", migrations: PostgresSchema.cache, channel: PostgresListener.cacheChannel)
        // Its transaction waits for row locks only while another writer holds them.
        ledger.writes { [weak self] _ in self?.flushTouches() }
    }

    deinit {
        listener.stop()
        flushTouches()
    }

    func observeOthers(_ handler: @escaping @Sendable (CacheChange) -> Void) {
        listener.observe { payload in handler(payload.flatMap(Self.change) ?? .all) }
    }

    /// Tells the other workers, when the transaction commits: "k <key>", or
    /// "*" for anything (a key too long for a notice included).
    private func announce(_ change: CacheChange, _ connection: PostgresConnection) throws(PostgresError) {
        switch change {
        case .key(let key) where key.utf8.count < PostgresListener.longestPayload: try listener.announce("k \(key)", on: connection)
        case .key, .all: try listener.announce("*", on: connection)
        }
    }

    /// The change another worker's payload announces.
    static func change(_ payload: String) -> CacheChange {
        payload.hasPrefix("k ") ? .key(String(payload.dropFirst(2))) : .all
    }

    var location: String { database.description }

    var capacity: Int {
        get { state.withLock { $0 } }
        set {
            state.withLock { $0 = max(0, newValue) }
            do {
                let capacity = self.capacity
                try database.withConnection { (connection) throws(PostgresError) in
                    try connection.transaction { (connection) throws(PostgresError) in try Self.evict(connection, capacity: capacity, keeping: nil) }
                }
            } catch {
                logger.error("cache eviction failed", metadata: ["error": "\(error)"])
            }
        }
    }

    func admits(_ cost: Int) -> Bool {
        let capacity = self.capacity
        return capacity > 0 && cost <= capacity / 20
    }

    // MARK: Reading

    func variants(for key: String, now: Double) throws(StoreError) -> [StoredResponse] {
        let rows = try database.withConnection { (connection) throws(PostgresError) in
            try connection.query("SELECT \(Self.columns) FROM \(Self.table) WHERE key = $1 ORDER BY id", [.text(key)]) { row in
                (row.int64(0) ?? -1, row.double(12) ?? 0, Self.response(row, key: key))
            }
        }
        var responses: [StoredResponse] = []
        var touched: [Int64] = []
        var damaged: [Int64] = []
        for (id, lastUsed, response) in rows {
            guard let response else {
                damaged.append(id)
                continue
            }
            responses.append(response)
            if now - lastUsed >= CacheLedger.touchResolution { touched.append(id) }
        }
        if !damaged.isEmpty {
            logger.warning("damaged cache entries removed", metadata: ["ids": "\(damaged)"])
            _ = try database.withConnection { (connection) throws(PostgresError) in
                try connection.run("DELETE FROM \(Self.table) WHERE id = ANY($1)", [.intArray(damaged)])
            }
        }
        if !touched.isEmpty { ledger.touch(touched, at: now) }
        return responses
    }

    /// A row as a stored response; nil when its encoded fields are damaged.
    private static func response(_ row: PostgresRow, key: String) -> StoredResponse? {
        guard let responseHeaders = row.data(4).flatMap(FieldCoding.decodeFields),
            let requestHeaders = row.data(5).flatMap(FieldCoding.decodeFields), let status = row.int(3), let body = row.data(6)
        else { return nil }
        return StoredResponse(
            url: row.text(1) ?? "", key: key, variant: row.text(2) ?? "",
            entry: CachePolicy.Entry(
                status: status, responseHeaders: responseHeaders, requestHeaders: requestHeaders,
                requestTime: row.double(7) ?? 0, responseTime: row.double(8) ?? 0),
            body: body, storedAt: row.double(9) ?? 0,
            storagePolicy: row.int(10).flatMap(CacheStoragePolicy.init(rawValue:)) ?? .allowed,
            userInfo: row.data(11).map(CacheUserInfo.init(stored:)) ?? .none)
    }

    // MARK: Writing

    @discardableResult
    func store(_ response: StoredResponse, now: Double) throws(StoreError) -> Bool {
        let cost = response.cost
        guard admits(cost) else {
            try remove(key: response.key, variant: response.variant)
            return false
        }
        let body: Data
        do {
            body = try response.wholeBody()
        } catch {
            throw StoreError(kind: .ioError, message: "the body to store could not be read: \(error.localizedDescription)", path: nil)
        }
        let touches = ledger.takeTouches()
        let capacity = self.capacity
        try database.withConnection { (connection) throws(PostgresError) in
            try connection.transaction { (connection) throws(PostgresError) in
                try Self.applyTouches(touches, connection)
                try connection.run("DELETE FROM \(Self.table) WHERE key = $1 AND variant = $2", [.text(response.key), .text(response.variant)])
                let inserted = try connection.scalarInt(
                    """
                    INSERT INTO \(Self.table)(key, variant, url, host, status, response_headers, request_headers, body, body_size, cost,
                        request_time, response_time, stored_at, last_used, storage_policy, user_info)
                    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16) RETURNING id
                    """,
                    [
                        .text(response.key), .text(response.variant), .text(response.url), .text(CachePolicy.host(ofKey: response.key)),
                        .int(Int64(response.entry.status)), .bytes(FieldCoding.encode(response.entry.responseHeaders)),
                        .bytes(FieldCoding.encode(response.entry.requestHeaders)), .bytes(body), .int(Int64(body.count)),
                        .int(Int64(cost)), .double(response.entry.requestTime), .double(response.entry.responseTime),
                        .double(response.storedAt), .double(now), .int(Int64(response.storagePolicy.rawValue)),
                        response.userInfo.isEmpty ? .null : .bytes(response.userInfo.encoded),
                    ])
                try Self.evict(connection, capacity: capacity, keeping: inserted)
                try self.announce(.key(response.key), connection)
            }
        }
        return true
    }

    func remove(key: String) throws(StoreError) {
        try delete(where: "key = $1", [.text(key)], announcing: .key(key))
    }

    func remove(key: String, variant: String) throws(StoreError) {
        try delete(where: "key = $1 AND variant = $2", [.text(key), .text(variant)], announcing: .key(key))
    }

    func removeAll() throws(StoreError) {
        try delete(where: "true", [], announcing: .all)
    }

    func removeStored(since date: Double) throws(StoreError) {
        try delete(where: "stored_at >= $1", [.double(date)], announcing: .all)
    }

    /// Deletes rows; when some went, the other workers hear of it.
    private func delete(where condition: String, _ parameters: [PostgresValue], announcing change: CacheChange) throws(StoreError) {
        try database.withConnection { (connection) throws(PostgresError) in
            try connection.transaction { (connection) throws(PostgresError) in
                if try connection.run("DELETE FROM \(Self.table) WHERE \(condition)", parameters) > 0 { try self.announce(change, connection) }
            }
        }
    }

    func usage() throws(StoreError) -> (entries: Int, bytes: Int) {
        try database.withConnection { (connection) throws(PostgresError) in
            try connection.query("SELECT entries, bytes FROM urlloading_cache_usage WHERE id = 1") { ($0.int(0) ?? 0, $0.int(1) ?? 0) }.first ?? (0, 0)
        }
    }

    func listing() throws(StoreError) -> [(key: String, url: String)] {
        try database.withConnection { (connection) throws(PostgresError) in
            try connection.query("SELECT key, url FROM \(Self.table) ORDER BY last_used, id") { ($0.text(0) ?? "", $0.text(1) ?? "") }
        }
    }

    /// Deletes least recently used rows (never `kept`) until usage fits
    /// `capacity`. Run inside the store's transaction: the usage row it
    /// reads is locked by the insert's trigger, so two workers never evict
    /// for the same bytes.
    private static func evict(_ connection: PostgresConnection, capacity: Int, keeping kept: Int64?) throws(PostgresError) {
        while let bytes = try connection.scalarInt("SELECT bytes FROM urlloading_cache_usage WHERE id = 1 FOR UPDATE"), bytes > Int64(capacity) {
            let removed = try connection.run(
                """
                DELETE FROM \(table) WHERE id IN (
                    SELECT id FROM (
                        SELECT id, sum(cost) OVER (ORDER BY last_used, id) AS running FROM (
                            SELECT id, cost, last_used FROM \(table) WHERE id <> $1 ORDER BY last_used, id LIMIT 256) oldest) ranked
                    WHERE running - cost < $2)
                """, [.int(kept ?? -1), .int(bytes - Int64(capacity))])
            if removed == 0 { break }
        }
    }

    // MARK: LRU touches and counters (written in batches, as on SQLite)

    func count(_ counter: String) {
        ledger.count(counter)
    }

    func flushTouches() {
        let touches = ledger.takeTouches()
        let counters = ledger.takeCounters()
        guard !touches.isEmpty || !counters.isEmpty else { return }
        do {
            try database.withConnection { (connection) throws(PostgresError) in
                try connection.transaction { (connection) throws(PostgresError) in
                    try Self.applyTouches(touches, connection)
                    for (name, delta) in counters.sorted(by: { $0.name < $1.name }) {
                        try connection.run(
                            """
                            INSERT INTO urlloading_cache_counters(name, value) VALUES ($1, $2)
                            ON CONFLICT (name) DO UPDATE SET value = urlloading_cache_counters.value + EXCLUDED.value
                            """, [.text(name), .int(Int64(delta))])
                    }
                }
            }
        } catch {
            logger.warning("cache LRU update failed", metadata: ["error": "\(error)"])
        }
    }

    /// One statement per distinct time (touches of one batch share a few):
    /// rows in id order, so two workers' batches never deadlock.
    private static func applyTouches(_ touches: CacheLedger.Touches, _ connection: PostgresConnection) throws(PostgresError) {
        let ordered = touches.sorted { ($0.value, $0.key) < ($1.value, $1.key) }
        var start = ordered.startIndex
        while start < ordered.endIndex {
            let time = ordered[start].value
            let end = ordered[start...].firstIndex { $0.value != time } ?? ordered.endIndex
            try connection.run(
                """
                UPDATE \(table) SET last_used = greatest(last_used, $1)
                WHERE id IN (SELECT id FROM \(table) WHERE id = ANY($2) ORDER BY id FOR UPDATE)
                """, [.double(time), .intArray(ordered[start..<end].map(\.key))])
            start = end
        }
    }
}

extension ResponseCache {
    /// A cache whose persistent tier is the fleet's PostgreSQL database, with
    /// a memory tier of its own; every worker with a cache on the same
    /// database shares its entries, its capacity rules and its usage.
    ///
    /// - Parameters:
    ///   - memoryCapacity: Bytes this process's memory tier may hold.
    ///   - diskCapacity: Bytes the database may hold for the whole fleet
    ///     (give every worker the same value).
    ///   - database: The fleet's database.
    /// - Throws: `StoreError` when its tables cannot be made or are of a newer schema.
    public convenience init(memoryCapacity: Int, diskCapacity: Int, database: PostgresDatabase) throws(StoreError) {
        self.init(memoryCapacity: memoryCapacity, storage: try PostgresCacheStorage(database: database, capacity: diskCapacity))
    }
}
