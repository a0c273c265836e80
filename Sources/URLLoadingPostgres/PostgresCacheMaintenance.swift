public import Foundation
import Postgres
@_spi(Tools) public import URLLoading

/// What `cachetool --postgres` does with a fleet's cache: the
/// same listing, figures and pruning as on a cache folder, with the same
/// output types, over the tables in the database.
@_spi(Tools)
public enum PostgresCacheMaintenance {
    private static let table = "urlloading_cache_entries"

    /// The cache's tables, which must exist (a tool never creates them by looking).
    private static func existing(_ url: String) throws -> PostgresDatabase {
        let database = try PostgresDatabase(url: url, maximumConnections: 2)
        let found = try database.withConnection { (connection) throws(PostgresError) in
            try connection.scalarInt("SELECT count(*) FROM pg_tables WHERE tablename = 'urlloading_cache_entries'")
        }
        guard found == 1 else {
            throw StoreError(kind: .notFound, message: "no cache tables in this database; check --postgres", path: nil)
        }
        return database
    }

    /// Makes the cache's tables if they are missing (what a worker does on
    /// first use) and returns the summary.
    public static func create(url: String) throws -> CacheStoreSummary {
        _ = try PostgresCacheStorage(database: PostgresDatabase(url: url, maximumConnections: 2), capacity: 0)
        return try summary(url: url)
    }

    /// The stored response for `target` that the request fields select.
    public static func snapshot(url: String, target: URL, requestHeaders: [(name: String, value: String)]) throws -> CacheEntrySnapshot? {
        CacheMaintenance.snapshot(from: try storage(url), url: target, requestHeaders: requestHeaders)
    }

    /// Whether a request for `target` would be served from the cache now, and why.
    public static func explain(url: String, target: URL, requestHeaders: [(name: String, value: String)]) throws -> CacheExplanation {
        try CacheMaintenance.explain(from: try storage(url), url: target, requestHeaders: requestHeaders)
    }

    /// The existing cache as a storage of this process (no capacity: nothing is evicted by looking).
    private static func storage(_ url: String) throws -> PostgresCacheStorage {
        try PostgresCacheStorage(database: existing(url), capacity: Int.max)
    }

    /// Checks the usage row against the entries (what the triggers keep);
    /// with `repair`, sets it right. The database's own consistency is the
    /// server's (`amcheck`), not a client's.
    public static func verify(url: String, repair: Bool) throws -> CacheVerification {
        let database = try existing(url)
        return try database.withConnection { (connection) throws(PostgresError) in
            try connection.transaction { (connection) throws(PostgresError) in
                let kept = try connection.query("SELECT entries, bytes FROM urlloading_cache_usage WHERE id = 1 FOR UPDATE") {
                    ($0.int64(0) ?? -1, $0.int64(1) ?? -1)
                }.first
                let actual =
                    try connection.query("SELECT count(*), coalesce(sum(cost), 0)::int8 FROM \(table)") { ($0.int64(0) ?? 0, $0.int64(1) ?? 0) }
                    .first ?? (0, 0)
                var problems: [String] = []
                if let kept {
                    if kept.0 != actual.0 || kept.1 != actual.1 {
                        problems.append("usage says \(kept.0) entries and \(kept.1) bytes; the entries are \(actual.0) and \(actual.1) bytes")
                    }
                } else {
                    problems.append("the usage row is missing")
                }
                if repair, !problems.isEmpty {
                    try connection.run("DELETE FROM urlloading_cache_usage")
                    try connection.run("INSERT INTO urlloading_cache_usage(id, entries, bytes) VALUES (1, $1, $2)", [.int(actual.0), .int(actual.1)])
                }
                return CacheVerification(
                    path: database.description, integrityProblems: [], orphanFiles: [], missingBodies: [], inconsistencies: problems,
                    repaired: repair && !problems.isEmpty)
            }
        }
    }

    /// `VACUUM` of the cache's table: its dead rows' space for new ones.
    public static func vacuum(url: String) throws {
        let database = try existing(url)
        try database.withConnection { (connection) throws(PostgresError) in try connection.runScript("VACUUM \(table)") }
    }

    /// Entries, bytes and schema version.
    public static func summary(url: String) throws -> CacheStoreSummary {
        let database = try existing(url)
        return try database.withConnection { (connection) throws(PostgresError) in
            let usage = try connection.query("SELECT entries, bytes FROM urlloading_cache_usage WHERE id = 1") { ($0.int(0) ?? 0, $0.int(1) ?? 0) }.first
            let version = try connection.scalarInt("SELECT max(version) FROM urlloading_migrations WHERE store = 'cache'") ?? 0
            return CacheStoreSummary(path: database.description, schemaVersion: Int(version), entries: usage?.0 ?? 0, bytes: usage?.1 ?? 0)
        }
    }

    /// Calls `each` for the entries the query selects, in its order, read in
    /// pages of 500 (memory does not grow with the store); `each` returns false to stop.
    public static func entries(url: String, _ query: CacheListQuery, now: Date = Date(), _ each: (CacheEntryInfo) -> Bool) throws {
        let database = try existing(url)
        var conditions: [String] = []
        var parameters: [PostgresValue] = []
        if let host = query.host {
            parameters.append(.text(host.lowercased()))
            conditions.append("host = $\(parameters.count)")
        }
        if let status = query.status {
            parameters.append(.int(Int64(status)))
            conditions.append("status = $\(parameters.count)")
        }
        let column = query.order.column
        let current = now.timeIntervalSince1970
        var emitted = 0
        var offset = 0
        while true {
            let sql = """
                SELECT url, host, status, body_size, cost, stored_at, last_used, response_headers, request_time, response_time
                FROM \(table) \(conditions.isEmpty ? "" : "WHERE " + conditions.joined(separator: " AND "))
                ORDER BY \(column) \(query.descending ? "DESC" : "ASC"), id LIMIT 500 OFFSET \(offset)
                """
            let page = try database.withConnection { (connection) throws(PostgresError) in
                try connection.query(sql, parameters) { row in
                    CacheEntryInfo(
                        url: row.text(0) ?? "", host: row.text(1) ?? "", status: row.int(2) ?? 0, bodySize: row.int(3) ?? 0, cost: row.int(4) ?? 0,
                        storedAt: row.double(5) ?? 0, lastUsed: row.double(6) ?? 0, responseHeaders: row.data(7), requestTime: row.double(8) ?? 0,
                        responseTime: row.double(9) ?? 0, selectedBy: query, now: current)
                }
            }
            for info in page.compactMap({ $0 }) {
                guard each(info) else { return }
                emitted += 1
                if let limit = query.limit, emitted >= limit { return }
            }
            if page.count < 500 { return }
            offset += page.count
        }
    }

    /// Counters and shapes of the cache.
    public static func stats(url: String, now: Date = Date()) throws -> CacheStats {
        let database = try existing(url)
        let current = now.timeIntervalSince1970
        return try database.withConnection { (connection) throws(PostgresError) in
            let usage = try connection.query("SELECT entries, bytes FROM urlloading_cache_usage WHERE id = 1") { ($0.int(0) ?? 0, $0.int(1) ?? 0) }.first
            let counters = Dictionary(
                try connection.query("SELECT name, value FROM urlloading_cache_counters") { ($0.text(0) ?? "", $0.int(1) ?? 0) },
                uniquingKeysWith: { $0 &+ $1 })
            let hosts = try connection.query(
                "SELECT host, count(*), sum(cost)::int8 FROM \(table) GROUP BY host ORDER BY 2 DESC, 1 LIMIT 10"
            ) { CacheStats.Host(host: $0.text(0) ?? "", entries: $0.int(1) ?? 0, bytes: $0.int(2) ?? 0) }
            let bounds: [(String, Double)] = [("< 1 hour", 3600), ("< 1 day", 86_400), ("< 1 week", 604_800), ("< 30 days", 2_592_000)]
            var ages: [CacheStats.AgeBucket] = []
            var lower = 0.0
            for (label, upper) in bounds + [(">= 30 days", .infinity)] {
                let count = try connection.scalarInt(
                    "SELECT count(*) FROM \(table) WHERE $1 - stored_at >= $2 AND $1 - stored_at < $3", [.double(current), .double(lower), .double(upper)])
                ages.append(.init(age: label, entries: Int(count ?? 0)))
                lower = upper
            }
            return CacheStats(
                path: database.description, entries: usage?.0 ?? 0, diskBytes: usage?.1 ?? 0, inlineBodies: usage?.0 ?? 0, fileBodies: 0,
                counters: counters, topHosts: hosts, ages: ages)
        }
    }

    /// Removes every variant stored for `target`; returns how many.
    @discardableResult
    public static func remove(url: String, target: URL) throws -> Int {
        guard let key = CachePolicy.primaryKey(target) else { return 0 }
        return try delete(existing(url), where: "key = $1", [.text(key)])
    }

    /// Removes entries by rule; returns how many went. The other workers'
    /// memory tiers hear of it.
    @discardableResult
    public static func prune(url: String, _ rule: CacheMaintenance.PruneRule, now: Date = Date()) throws -> Int {
        let database = try existing(url)
        let current = now.timeIntervalSince1970
        switch rule {
        case .olderThan(let age): return try delete(database, where: "stored_at < $1", [.double(current - age)])
        case .host(let host): return try delete(database, where: "host = $1", [.text(host.lowercased())])
        case .all: return try delete(database, where: "true", [])
        case .toSize(let size):
            let storage = try PostgresCacheStorage(database: database, capacity: max(0, size))
            let before = try storage.usage().entries
            storage.capacity = max(0, size)
            return before - (try storage.usage().entries)
        case .stale:
            let stale = try database.withConnection { (connection) throws(PostgresError) in
                try connection.query("SELECT id, status, response_headers, request_time, response_time FROM \(table)") { row in
                    CacheEntryInfo.isStale(
                        status: row.int(1) ?? 0, responseHeaders: row.data(2), requestTime: row.double(3) ?? 0, responseTime: row.double(4) ?? 0,
                        now: current) ? row.int64(0) : nil
                }.compactMap { $0 }
            }
            return try delete(database, where: "id = ANY($1)", [.intArray(stale)])
        }
    }

    private static func delete(_ database: PostgresDatabase, where condition: String, _ parameters: [PostgresValue]) throws -> Int {
        try database.withConnection { (connection) throws(PostgresError) in
            try connection.transaction { (connection) throws(PostgresError) in
                let removed = try connection.run("DELETE FROM \(table) WHERE \(condition)", parameters)
                if removed > 0 {
                    try connection.run("SELECT pg_notify($1, $2)", [.text(PostgresListener.cacheChannel), .text("cachetool *")])
                }
                return removed
            }
        }
    }
}
