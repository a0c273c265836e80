public import Foundation
import Logging
import Storage
#if canImport(Glibc)
import Glibc
#endif

/// One stored response as `cachetool list` shows it, read without its body.
@_spi(Tools)
public struct CacheEntryInfo: Sendable, Codable, Equatable {
    /// The request URL.
    public var url: String
    /// The host part, lower case.
    public var host: String
    /// The status code.
    public var status: Int
    /// Bytes of the body.
    public var bodySize: Int
    /// Bytes counted against the disk capacity.
    public var cost: Int
    /// When the response was stored and last used (seconds since 1970).
    public var storedAt: Double
    public var lastUsed: Double
    /// When the response stops being fresh (seconds since 1970); in the past for a stale one.
    public var freshUntil: Double
    /// Fresh now.
    public var isFresh: Bool
    /// Where its freshness lifetime comes from (max-age, Expires, heuristic, none).
    public var freshnessSource: String
    /// The Content-Type, if any.
    public var contentType: String?
    /// The tier it was read from: always "disk" for a tool (a memory tier lives in its process).
    public var tier: String
}

extension CacheEntryInfo {
    /// An entry as a row gives it, with its freshness now; nil when the
    /// query's URL glob or freshness leaves it out (what every store's
    /// listing shares).
    package init?(
        url: String, host: String, status: Int, bodySize: Int, cost: Int, storedAt: Double, lastUsed: Double, responseHeaders: Data?,
        requestTime: Double, responseTime: Double, selectedBy query: CacheListQuery, now current: Double
    ) {
        if let glob = query.urlGlob, fnmatch(glob, url, 0) != 0 { return nil }
        let headers = responseHeaders.flatMap(FieldCoding.decodeFields) ?? []
        let entry = CachePolicy.Entry(status: status, responseHeaders: headers, requestHeaders: [], requestTime: requestTime, responseTime: responseTime)
        let lifetime = CachePolicy.freshnessLifetime(entry)
        let age = CachePolicy.currentAge(entry, now: current)
        let isFresh = lifetime.seconds > age
        if let fresh = query.fresh, fresh != isFresh { return nil }
        self.init(
            url: CachedURL.displayed(url), host: host, status: status, bodySize: bodySize, cost: cost, storedAt: storedAt, lastUsed: lastUsed,
            freshUntil: current + lifetime.seconds - age, isFresh: isFresh, freshnessSource: lifetime.source.rawValue,
            contentType: headers["Content-Type"], tier: "disk")
    }

    /// Whether a stored response with these fields is stale now (prune --stale).
    package static func isStale(status: Int, responseHeaders: Data?, requestTime: Double, responseTime: Double, now: Double) -> Bool {
        let entry = CachePolicy.Entry(
            status: status, responseHeaders: responseHeaders.flatMap(FieldCoding.decodeFields) ?? [], requestHeaders: [],
            requestTime: requestTime, responseTime: responseTime)
        return CachePolicy.freshnessLifetime(entry).seconds <= CachePolicy.currentAge(entry, now: now)
    }
}

/// What `cachetool list` selects and how it orders.
@_spi(Tools)
public struct CacheListQuery: Sendable {
    /// The ordering.
    public enum Order: String, Sendable, CaseIterable {
        case lastUsed = "last-used", stored, size, url

        /// The column PostgreSQL orders by (SQLite orders `lastUsed` by row id, its use order).
        package var column: String {
            switch self {
            case .lastUsed: "last_used"
            case .stored: "stored_at"
            case .size: "body_size"
            case .url: "url"
            }
        }
    }

    public var host: String?
    /// A shell glob (`fnmatch`) over the whole URL.
    public var urlGlob: String?
    public var status: Int?
    /// true: only fresh; false: only stale; nil: both.
    public var fresh: Bool?
    public var order: Order = .lastUsed
    /// Largest, newest or most recently used first.
    public var descending = true
    public var limit: Int?

    public init() {}
}

/// Counters and shapes of a store, for `cachetool stats`.
@_spi(Tools)
public struct CacheStats: Sendable, Codable, Equatable {
    public struct Host: Sendable, Codable, Equatable {
        public var host: String
        public var entries: Int
        public var bytes: Int

        package init(host: String, entries: Int, bytes: Int) {
            self.host = host
            self.entries = entries
            self.bytes = bytes
        }
    }

    public struct AgeBucket: Sendable, Codable, Equatable {
        /// "< 1 hour", "< 1 day", "< 1 week", "< 30 days", ">= 30 days".
        public var age: String
        public var entries: Int

        package init(age: String, entries: Int) {
            self.age = age
            self.entries = entries
        }
    }

    public var path: String
    public var entries: Int
    /// Bytes counted against the disk capacity.
    public var diskBytes: Int
    /// Bodies kept inline in the database and in files beside it.
    public var inlineBodies: Int
    public var fileBodies: Int
    /// Counters the library keeps: hits, misses, revalidations-not-modified, revalidations-replaced.
    public var counters: [String: Int]
    public var topHosts: [Host]
    public var ages: [AgeBucket]

    package init(
        path: String, entries: Int, diskBytes: Int, inlineBodies: Int, fileBodies: Int, counters: [String: Int], topHosts: [Host], ages: [AgeBucket]
    ) {
        self.path = path
        self.entries = entries
        self.diskBytes = diskBytes
        self.inlineBodies = inlineBodies
        self.fileBodies = fileBodies
        self.counters = counters
        self.topHosts = topHosts
        self.ages = ages
    }
}

/// The verdict of `cachetool explain`.
@_spi(Tools)
public struct CacheExplanation: Sendable, Codable, Equatable {
    /// "serve from cache", "revalidate with the origin", "fetch from the origin", ...
    public var action: String
    /// Why.
    public var reasons: [String]
    /// The stored response's figures; nil when nothing is stored for the URL.
    public var freshnessLifetime: Double?
    public var freshnessSource: String?
    public var currentAge: Double?
    public var varyMatch: String?
}

/// What `cachetool verify` found and repaired.
@_spi(Tools)
public struct CacheVerification: Sendable, Codable, Equatable {
    public var path: String
    /// SQLite's integrity check (empty when sound).
    public var integrityProblems: [String]
    /// Files in Bodies/ that no entry references.
    public var orphanFiles: [String]
    /// Entries whose body file is gone.
    public var missingBodies: [String]
    /// Figures the store keeps that disagree with its entries (a fleet's
    /// usage row); repairable.
    public var inconsistencies: [String] = []
    /// Whether the problems found were repaired.
    public var repaired: Bool
    public var ok: Bool { integrityProblems.isEmpty && orphanFiles.isEmpty && missingBodies.isEmpty && inconsistencies.isEmpty }

    package init(path: String, integrityProblems: [String], orphanFiles: [String], missingBodies: [String], inconsistencies: [String], repaired: Bool) {
        self.path = path
        self.integrityProblems = integrityProblems
        self.orphanFiles = orphanFiles
        self.missingBodies = missingBodies
        self.inconsistencies = inconsistencies
        self.repaired = repaired
    }
}

@_spi(Tools)
extension CacheMaintenance {
    /// Calls `each` for the entries the query selects, in its order,
    /// streaming from the database (memory does not grow with the store);
    /// `each` returns false to stop.
    public static func entries(in directory: URL, _ query: CacheListQuery, now: Date = Date(), _ each: (CacheEntryInfo) -> Bool) throws {
        let file = try openExisting(directory)
        var conditions: [String] = []
        var arguments: [SQLiteValue] = []
        if let host = query.host {
            conditions.append("host = ?")
            arguments.append(.text(host.lowercased()))
        }
        if let status = query.status {
            conditions.append("status = ?")
            arguments.append(.integer(Int64(status)))
        }
        // The row id is the use order on SQLite (see DiskTier); no index on last_used.
        let column = query.order == .lastUsed ? "id" : query.order.column
        let sql = """
            SELECT url, host, status, body_size, cost, stored_at, last_used, response_headers, request_time, response_time
            FROM entries \(conditions.isEmpty ? "" : "WHERE " + conditions.joined(separator: " AND "))
            ORDER BY \(column) \(query.descending ? "DESC" : "ASC"), id
            """
        let current = now.timeIntervalSince1970
        try file.reading { (connection: Connection) throws(SQLiteError) in
            let statement = try connection.makeStatement(sql)
            try statement.bind(arguments)
            var emitted = 0
            while try statement.step() {
                guard
                    let info = CacheEntryInfo(
                        url: statement.text(0) ?? "", host: statement.text(1) ?? "", status: statement.int(2), bodySize: statement.int(3),
                        cost: statement.int(4), storedAt: statement.double(5), lastUsed: statement.double(6),
                        responseHeaders: statement.data(7), requestTime: statement.double(8), responseTime: statement.double(9),
                        selectedBy: query, now: current)
                else { continue }
                guard each(info) else { break }
                emitted += 1
                if let limit = query.limit, emitted >= limit { break }
            }
        }
    }

    /// The stored response for `url` that the request fields select.
    public static func snapshot(in directory: URL, url: URL, requestHeaders: [(name: String, value: String)] = []) throws -> CacheEntrySnapshot? {
        try snapshot(from: openExisting(directory), url: url, requestHeaders: requestHeaders)
    }

    /// `snapshot(in:url:requestHeaders:)` over any store (a fleet's database too).
    package static func snapshot(from storage: any CacheStorage, url: URL, requestHeaders: [(name: String, value: String)]) -> CacheEntrySnapshot? {
        let cache = ResponseCache(memory: MemoryTier(capacity: 0), disk: storage, logger: Logger(label: "urlloading.cachetool"))
        return cache.snapshot(for: url, requestHeaders: requestHeaders)
    }

    /// Whether a request for `url` would be served from the store now, and why.
    public static func explain(in directory: URL, url: URL, requestHeaders: [(name: String, value: String)], now: Date = Date()) throws -> CacheExplanation {
        try explain(from: openExisting(directory), url: url, requestHeaders: requestHeaders, now: now)
    }

    /// `explain(in:url:requestHeaders:now:)` over any store (a fleet's database too).
    package static func explain(
        from file: any CacheStorage, url: URL, requestHeaders: [(name: String, value: String)], now: Date = Date()
    ) throws -> CacheExplanation {
        let headers = HeaderFields(requestHeaders.map { HeaderFields.Field($0.name, $0.value) })
        guard let key = CachePolicy.primaryKey(url) else {
            return CacheExplanation(action: CachePolicy.Action.fetch.rawValue, reasons: ["the URL is not cacheable (not http or https)"])
        }
        let variants: [StoredResponse]
        variants = try file.variants(for: key, now: 0)
        guard !variants.isEmpty else {
            return CacheExplanation(action: CachePolicy.Action.fetch.rawValue, reasons: ["nothing is stored for this URL"])
        }
        let comparable = StoredResponse.comparableRequestHeaders(headers)
        let matching = variants.last { CachePolicy.varyMatches($0.entry, requestHeaders: comparable).allowed }
        guard let stored = matching else {
            let reasons = variants.map { CachePolicy.varyMatches($0.entry, requestHeaders: comparable).reason }
            return CacheExplanation(
                action: CachePolicy.Action.fetch.rawValue,
                reasons: ["\(variants.count) stored variant(s), none selected by this request"] + reasons)
        }
        let evaluation = CachePolicy.evaluate(stored.entry, requestHeaders: comparable, now: now.timeIntervalSince1970)
        var reasons = [evaluation.reason]
        if !stored.entry.responseHeaders.values("Cache-Control").isEmpty {
            reasons.append("response Cache-Control: \(stored.entry.responseHeaders.values("Cache-Control").joined(separator: ", "))")
        }
        return CacheExplanation(
            action: evaluation.action.rawValue, reasons: reasons, freshnessLifetime: evaluation.lifetime.seconds,
            freshnessSource: evaluation.lifetime.source.rawValue, currentAge: evaluation.currentAge,
            varyMatch: CachePolicy.varyMatches(stored.entry, requestHeaders: comparable).reason)
    }

    /// Counters and shapes of the store.
    public static func stats(in directory: URL, now: Date = Date()) throws -> CacheStats {
        let file = try openExisting(directory)
        let current = now.timeIntervalSince1970
        // One moment of the file: the totals, hosts and ages agree.
        return try file.readingSnapshot { (connection: Connection) throws(SQLiteError) in
            let usage = try CacheUsage.read(connection)
            // Rows of a crafted file may repeat a name: summed, never trapped on.
            let counters = Dictionary(
                try connection.query("SELECT name, value FROM counters") {
                    ($0.text(0) ?? "", $0.int(1))
                }, uniquingKeysWith: { $0 &+ $1 })
            let hosts = try connection.query(
                "SELECT host, COUNT(*), SUM(cost) FROM entries GROUP BY host ORDER BY 2 DESC, 1 LIMIT 10"
            ) { CacheStats.Host(host: $0.text(0) ?? "", entries: $0.int(1), bytes: $0.int(2)) }
            let bodies =
                try connection.query(
                    "SELECT SUM(body_file IS NULL), SUM(body_file IS NOT NULL) FROM entries"
                ) { ($0.int(0), $0.int(1)) }.first ?? (0, 0)
            let bounds: [(String, Double)] = [("< 1 hour", 3600), ("< 1 day", 86_400), ("< 1 week", 604_800), ("< 30 days", 2_592_000)]
            var ages: [CacheStats.AgeBucket] = []
            var lower = 0.0
            for (label, upper) in bounds {
                let count =
                    try connection.scalarInt(
                        "SELECT COUNT(*) FROM entries WHERE ? - stored_at >= ? AND ? - stored_at < ?",
                        [.real(current), .real(lower), .real(current), .real(upper)]) ?? 0
                ages.append(.init(age: label, entries: Int(count)))
                lower = upper
            }
            let older = try connection.scalarInt("SELECT COUNT(*) FROM entries WHERE ? - stored_at >= ?", [.real(current), .real(lower)]) ?? 0
            ages.append(.init(age: ">= 30 days", entries: Int(older)))
            return CacheStats(
                path: file.database.path, entries: usage.entries, diskBytes: usage.bytes, inlineBodies: bodies.0,
                fileBodies: bodies.1, counters: counters, topHosts: hosts, ages: ages)
        }
    }

    /// Removes every variant stored for `url`; returns how many.
    @discardableResult
    public static func remove(in directory: URL, url: URL) throws -> Int {
        let file = try openExisting(directory)
        guard let key = CachePolicy.primaryKey(url) else { return 0 }
        return try counting(file) { () throws(StoreError) in try file.remove(key: key) }
    }

    /// What a prune removes.
    public enum PruneRule: Sendable {
        case olderThan(TimeInterval)
        case toSize(Int)
        case host(String)
        case stale
        case all
    }

    /// Removes entries by rule, in batches (memory does not grow with the
    /// store); `progress(done)` is called after each batch. Returns how many went.
    @discardableResult
    public static func prune(in directory: URL, _ rule: PruneRule, now: Date = Date(), progress: (Int) -> Void = { _ in }) throws -> Int {
        let file = try openExisting(directory)
        let current = now.timeIntervalSince1970
        switch rule {
        case .olderThan(let age):
            return try counting(file) { () throws(StoreError) in try file.removeRows(where: "stored_at < ?", [.real(current - age)]) }
        case .host(let host):
            return try counting(file) { () throws(StoreError) in try file.removeRows(where: "host = ?", [.text(host.lowercased())]) }
        case .all:
            return try counting(file) { () throws(StoreError) in try file.removeAll() }
        case .toSize(let size):
            return try counting(file) { () throws(StoreError) in
                var removed = 0
                while true {
                    let doomed = try file.writing { (connection: Connection) throws(SQLiteError) -> (files: [String], rows: Int) in
                        let bytes = try CacheUsage.read(connection).bytes
                        guard bytes > size else { return ([], 0) }
                        let victims = try connection.query(
                            "SELECT id, body_file, cost FROM entries ORDER BY id LIMIT 1000"
                        ) { ($0.int64(0), $0.text(1), $0.int(2)) }
                        let (difference, overflow) = bytes.subtractingReportingOverflow(size)
                        var excess = overflow ? 0 : difference
                        var files: [String] = []
                        var rows = 0
                        for (id, bodyFile, cost) in victims where excess > 0 {
                            try connection.run("DELETE FROM entries WHERE id = ?", [.integer(id)])
                            if let bodyFile { files.append(bodyFile) }
                            let (left, overflow) = excess.subtractingReportingOverflow(cost)
                            excess = overflow ? 0 : left
                            rows += 1
                        }
                        try DiskTier.register(files, connection, now: current)
                        return (files, rows)
                    }
                    file.deleteFiles(doomed.files)
                    guard doomed.rows > 0 else { break }
                    removed += doomed.rows
                    progress(removed)
                }
            }
        case .stale:
            return try counting(file) { () throws(StoreError) in
                var lastID: Int64 = 0
                var scanned = 0
                while true {
                    let batch = try file.reading { (connection: Connection) throws(SQLiteError) in
                        try connection.query(
                            "SELECT id, status, response_headers, request_time, response_time FROM entries WHERE id > ? ORDER BY id LIMIT 1000",
                            [.integer(lastID)]
                        ) { row in
                            (
                                row.int64(0),
                                CachePolicy.Entry(
                                    status: row.int(1), responseHeaders: row.data(2).flatMap(FieldCoding.decodeFields) ?? [],
                                    requestHeaders: [], requestTime: row.double(3), responseTime: row.double(4))
                            )
                        }
                    }
                    guard let last = batch.last else { break }
                    lastID = last.0
                    let stale = batch.filter { CachePolicy.freshnessLifetime($0.1).seconds <= CachePolicy.currentAge($0.1, now: current) }
                    try file.remove(ids: stale.map(\.0))
                    scanned += batch.count
                    progress(scanned)
                }
            }
        }
    }

    /// `VACUUM`: gives the file's free pages back to the file system.
    public static func vacuum(in directory: URL) throws {
        let file = try openExisting(directory)
        try file.writingOutsideTransaction { (connection: Connection) throws(SQLiteError) in try connection.execute("VACUUM") }
    }

    /// Integrity, body files against the index; with `repair`, orphan files
    /// are deleted and entries without their body file removed.
    public static func verifyStore(in directory: URL, repair: Bool) throws -> CacheVerification {
        let file = try openExisting(directory)
        let integrity = try file.integrityCheck()
        // Another process may be storing and evicting meanwhile: a file is
        // listed before the references are read (a new body is registered
        // before it is written) and counts as an orphan only if it is
        // still there after them (a replaced body is unlinked before it is
        // unregistered), and an entry counts as missing its body only if,
        // read again after the second listing, it still is.
        // A listing that fails is an error, never an empty folder: repair
        // must not remove entries on the strength of a failed read.
        func files() throws -> Set<String> {
            guard FileManager.default.fileExists(atPath: file.bodiesDirectory.path) else { return [] }
            return Set(try FileManager.default.contentsOfDirectory(atPath: file.bodiesDirectory.path))
        }
        let listedFirst = try files()
        let referenced = Set(
            try file.reading { (connection: Connection) throws(SQLiteError) in
                try connection.query("SELECT body_file FROM entries WHERE body_file IS NOT NULL UNION SELECT name FROM pending_files") {
                    $0.text(0) ?? ""
                }
            })
        let unreferenced = listedFirst.filter { !referenced.contains($0) && !referenced.contains(String($0.dropLast(4))) }
        func rowsWithFiles() throws -> [(Int64, String, String)] {
            try file.reading { (connection: Connection) throws(SQLiteError) in
                try connection.query("SELECT id, url, body_file FROM entries WHERE body_file IS NOT NULL") {
                    ($0.int64(0), $0.text(1) ?? "", $0.text(2) ?? "")
                }
            }
        }
        let candidates = try rowsWithFiles()
        // Names another program wrote into the database: damage, never paths.
        let crafted = candidates.filter { !DiskTier.isBodyFileName($0.2) }
        let listedSecond = try files()
        let orphans = unreferenced.filter { listedSecond.contains($0) }.sorted()
        let stillThere = Set(try rowsWithFiles().map(\.0))
        let listedThird = try files()
        let missing = candidates.filter {
            DiskTier.isBodyFileName($0.2) && !listedSecond.contains($0.2) && stillThere.contains($0.0) && !listedThird.contains($0.2)
        }
        if repair {
            for name in orphans { unlink(file.bodiesDirectory.appendingPathComponent(name).path) }
            try file.remove(ids: missing.map(\.0) + crafted.map(\.0))
        }
        let damage = crafted.map { "entry \($0.0): its body file name is not a name this library writes" }
        return CacheVerification(
            path: file.database.path, integrityProblems: (integrity == ["ok"] ? [] : integrity) + damage,
            orphanFiles: orphans, missingBodies: missing.map { CachedURL.displayed($0.1) }, inconsistencies: [], repaired: repair)
    }

    private static func counting(_ file: DiskTier, _ body: () throws(StoreError) -> Void) throws(StoreError) -> Int {
        let before = try file.usage().entries
        try body()
        return before - (try file.usage().entries)
    }
}
