import Foundation
import Logging
import Migrations
import Storage
import Locking

/// The disk tier: an SQLite database (WAL) of stored responses, with bodies
/// above `inlineBodyLimit` in files beside it, LRU eviction in
/// row id order (a store takes the next id, a batched touch moves its row to
/// the next id: no index written per store, no table scan), and usage kept
/// exact by triggers, so several processes can share one cache.
///
/// Crash safety: a body file is registered in `pending_files` before it is
/// written and becomes referenced by its row in the same transaction that
/// unregisters it; files of removed rows are registered before they are
/// unlinked. A crash at any instant leaves at worst registered orphans,
/// which a later open deletes; a row never points at a partial file (a file
/// whose size is not the row's is treated as missing).
final class DiskTier: Sendable {
    /// The database file's name in the cache directory.
    static let databaseName = "Cache.sqlite"
    /// The folder of body files in the cache directory.
    static let bodiesDirectoryName = "Bodies"
    /// Bodies up to this size live in the database: SQLite reads blobs of
    /// this size faster than separate files ("35% Faster Than The Filesystem",
    /// sqlite.org/fasterthanfs.html), and a row is written atomically.
    static let inlineBodyLimit = 128 * 1024
    /// A pending body file younger than this may belong to another process's
    /// store in progress; cleanup leaves it alone.
    static let pendingGrace: Double = 600

    let database: Database
    let directory: URL
    let bodiesDirectory: URL
    /// `bodiesDirectory`'s path: file names are joined to it as strings
    /// (URL's appending checks the file system and parses again).
    let bodiesPath: String
    private let state: Lock<Int>
    /// What this process knows of the rows its usage row does not count yet.
    let pastRows = CacheUsage.Memo()
    /// LRU touches and counters not yet written.
    let ledger: CacheLedger
    let logger: Logger

    /// Opens (creating and migrating as needed) the cache in `directory`.
    ///
    /// - Parameter recreateIfDamaged: Delete and recreate a damaged database
    ///   (a cache's content can be fetched again); `cachetool` passes false
    ///   to report damage instead.
    /// - Throws: `StoreError`.
    init(
        directory: URL, capacity: Int, recreateIfDamaged: Bool = true, busyTimeout: Duration = .seconds(5),
        usesWriteDelay: Duration = .seconds(CacheLedger.writeDelaySeconds), logger: Logger = Logger(label: "urlloading.cache")
    ) throws(StoreError) {
        ledger = CacheLedger(writeDelay: usesWriteDelay)
        self.directory = directory
        // `path(percentEncoded:)`, not `path`: swift-foundation's `path` builds
        // a Set on every call, and its first call in a process costs ~0.2 ms
        // of type look-ups, a sixth of opening a cache.
        let folder = directory.path(percentEncoded: false)
        let directoryPath = folder.hasSuffix("/") ? folder : folder + "/"
        self.bodiesPath = directoryPath + Self.bodiesDirectoryName
        self.bodiesDirectory = URL(fileURLWithPath: bodiesPath, isDirectory: true)
        self.logger = logger
        self.state = Lock(max(0, capacity))
        var options = Database.Options()
        // Cached responses may be private to the user: owner only.
        options.fileMode = 0o600
        options.directoryMode = 0o700
        // Cached responses may be private pages: a file others can read is refused.
        options.requirePrivateFile = true
        options.onCorruption = recreateIfDamaged ? .recreate : .fail
        options.busyTimeout = busyTimeout
        options.logger = logger
        // Lookups from many tasks go on while a store, a batch of uses or
        // a checkpoint holds the writing connection.
        options.readers = 2
        let path = directoryPath + Self.databaseName
        // A tier of this file released in this process may still be writing its last uses.
        ReleasedWrites.wait(for: path)
        do throws(StorageError) {
            database = try Database(path: path, migrations: Schema.cache, options: options)
        } catch {
            throw StoreError(error, path: path)
        }
        if database.openReport.recreated {
            // The old rows are gone; so must their body files be.
            try? FileManager.default.removeItem(at: bodiesDirectory)
        }
        try Self.makeBodiesDirectory(bodiesPath)
        cleanUpPendingFiles()
        ledger.writes { [weak self] waits in self?.writeGathered(waitsForLocks: waits) }
    }

    deinit {
        let (touches, counters) = (ledger.takeTouches(), ledger.takeCounters())
        guard !touches.isEmpty || !counters.isEmpty else { return }
        // The write holds the database, which closes after it.
        ReleasedWrites.run(path: database.path) { [database, logger] in
            Self.write(touches: touches, counters: counters, to: database, logger: logger)
        }
    }

    /// Creates the body folder, owner only, unless it is there: one system
    /// call on every open after the first.
    private static func makeBodiesDirectory(_ path: String) throws(StoreError) {
        if mkdir(path, 0o700) == 0 {
            // The umask may have narrowed the mode; set it exactly.
            guard chmod(path, 0o700) == 0 else { throw StoreError(StorageError.fileSystem("cannot set the body folder's mode", errno: errno, path: path), path: path) }
            return
        }
        let failure = errno
        var info = stat()
        guard failure == EEXIST, stat(path, &info) == 0, info.st_mode & S_IFMT == S_IFDIR else {
            throw StoreError(StorageError.fileSystem("cannot create the body folder", errno: failure, path: path), path: path)
        }
    }

    /// Runs `body` on the database (no transaction; it must only read); its
    /// failures as the store's.
    func reading<T: Sendable>(_ body: (Connection) throws(SQLiteError) -> T) throws(StoreError) -> T {
        do throws(StorageError) {
            return try database.read(body)
        } catch {
            throw StoreError(error, path: database.path)
        }
    }

    /// `reading`, for a `body` of several statements: they see one moment
    /// of the file (another connection's uses and stores commit between
    /// statements otherwise).
    func readingSnapshot<T: Sendable>(_ body: (Connection) throws(SQLiteError) -> T) throws(StoreError) -> T {
        do throws(StorageError) {
            return try database.readSnapshot(body)
        } catch {
            throw StoreError(error, path: database.path)
        }
    }

    /// Runs `body` on the writing connection outside a transaction, for a
    /// statement that writes but cannot run in one (`VACUUM`); its failures
    /// as the store's.
    func writingOutsideTransaction<T: Sendable>(_ body: (Connection) throws(SQLiteError) -> T) throws(StoreError) -> T {
        do throws(StorageError) {
            return try database.withoutTransaction(body)
        } catch {
            throw StoreError(error, path: database.path)
        }
    }

    /// Runs `body` in a write transaction; its failures as the store's.
    func writing<T: Sendable>(_ body: (Connection) throws(SQLiteError) -> T) throws(StoreError) -> T {
        // Whatever it changes, what this process knew of the newest rows is forgotten.
        try writingKnowingPastRows { (connection: Connection, _: inout CacheUsage.PastRows?) throws(SQLiteError) in try body(connection) }
    }

    /// `writing`, with what this process knows of the rows past the usage
    /// row's count (`CacheUsage.PastRows`, nil when unknown): what `body`
    /// leaves in it is kept for the next store if the transaction commits.
    func writingKnowingPastRows<T: Sendable>(
        _ body: (Connection, inout CacheUsage.PastRows?) throws(SQLiteError) -> T
    ) throws(StoreError) -> T {
        var generation: UInt64 = 0
        var left: CacheUsage.PastRows?
        let result: T
        do throws(StorageError) {
            result = try database.write { (connection: Connection) throws(SQLiteError) -> T in
                var known: CacheUsage.PastRows?
                (known, generation) = pastRows.take()
                let value = try body(connection, &known)
                left = known
                return value
            }
        } catch {
            throw StoreError(error, path: database.path)
        }
        pastRows.putBack(left, generation: generation)
        return result
    }

    /// Whether a cache database exists in `directory`.
    static func exists(in directory: URL) -> Bool {
        FileManager.default.fileExists(atPath: directory.appendingPathComponent(databaseName).path)
    }

    var capacity: Int {
        get { state.withLock { $0 } }
        set {
            state.withLock { $0 = max(0, newValue) }
            do {
                try evictToCapacity()
            } catch {
                logger.error("cache eviction failed", metadata: ["error": "\(error)"])
            }
        }
    }

    /// The 5% rule.
    func admits(_ cost: Int) -> Bool {
        let capacity = self.capacity
        return capacity > 0 && cost <= capacity / 20
    }

    // MARK: Reading

    private static let columns = """
        id, url, variant, status, response_headers, request_headers, body, body_file, body_size,
        request_time, response_time, stored_at, storage_policy, user_info, last_used
        """

    /// A key's variants (built once: the statement cache looks it up by its text).
    private static let lookup = "SELECT \(columns) FROM entries WHERE key = ?"

    /// The variants stored under `key`, whole, marking them used.
    func variants(for key: String, now: Double) throws(StoreError) -> [StoredResponse] {
        var rows: [Row] = []
        do throws(StorageError) {
            try database.withReader { (connection: Connection) throws(SQLiteError) in
                try connection.forEachRow(Self.lookup, binding: .text(key)) { rows.append(Row($0, key: key)) }
            }
        } catch {
            throw StoreError(error, path: database.path)
        }
        var responses: [StoredResponse] = []
        responses.reserveCapacity(rows.count)
        var touched: [Int64] = []
        for row in rows {
            guard let response = try load(row) else { continue }
            responses.append(response)
            if now - row.lastUsed >= CacheLedger.touchResolution { touched.append(row.id) }
        }
        if !touched.isEmpty { ledger.touch(touched, at: now) }
        return responses
    }

    /// A row as read, before its body file (if any) is read.
    private struct Row: Sendable {
        var id: Int64
        var url: String
        var key: String
        var variant: String
        var status: Int
        /// nil when the stored list is damaged.
        var responseHeaders: HeaderFields?
        var requestHeaders: HeaderFields?
        var body: Data?
        var bodyFile: String?
        var bodySize: Int
        var requestTime: Double
        var responseTime: Double
        var storedAt: Double
        var storagePolicy: Int
        var userInfo: Data?
        var lastUsed: Double

        init(_ s: Statement, key: String) {
            id = s.int64(0)
            url = s.text(1) ?? ""
            self.key = key
            variant = s.text(2) ?? ""
            status = s.int(3)
            // Decoded where SQLite holds them: the stored lists are not copied first.
            responseHeaders = s.withBytes(4) { FieldCoding.decodeFields($0) }
            requestHeaders = s.withBytes(5) { FieldCoding.decodeFields($0) }
            body = s.data(6)
            bodyFile = s.text(7)
            bodySize = s.int(8)
            requestTime = s.double(9)
            responseTime = s.double(10)
            storedAt = s.double(11)
            storagePolicy = s.int(12)
            userInfo = s.data(13)
            lastUsed = s.double(14)
        }
    }

    private func load(_ row: Row) throws(StoreError) -> StoredResponse? {
        guard let responseHeaders = row.responseHeaders, let requestHeaders = row.requestHeaders
        else {
            logger.warning("damaged cache entry removed", metadata: ["id": "\(row.id)"])
            try remove(ids: [row.id])
            return nil
        }
        var body = Data()
        var opened: StoredBodyFile?
        if let name = row.bodyFile {
            guard let file = bodyFileURL(name) else {
                logger.warning("cache entry with a body file name this library does not write removed", metadata: ["id": "\(row.id)"])
                try remove(ids: [row.id])
                return nil
            }
            // Opened, not read: the task reads it in chunks as it delivers.
            guard let handle = StoredBodyFile.open(file.path, count: row.bodySize) else {
                // Removed by another process meanwhile, or lost: a miss, never a partial body.
                if (try? database.read({ (connection: Connection) throws(SQLiteError) in try connection.scalarInt("SELECT count(*) FROM entries WHERE id = ?", [.integer(row.id)]) })) == 1 {
                    try remove(ids: [row.id])
                }
                return nil
            }
            opened = handle
        } else {
            body = row.body ?? Data()
        }
        return StoredResponse(
            url: row.url, key: row.key, variant: row.variant,
            entry: CachePolicy.Entry(
                status: row.status, responseHeaders: responseHeaders, requestHeaders: requestHeaders,
                requestTime: row.requestTime, responseTime: row.responseTime),
            body: body, bodyFile: opened, storedAt: row.storedAt,
            storagePolicy: CacheStoragePolicy(rawValue: row.storagePolicy) ?? .allowed,
            userInfo: row.userInfo.map(CacheUserInfo.init(stored:)) ?? .none)
    }

    // MARK: Writing

    /// Stores `response`, replacing the same key and variant; evicts least
    /// recently used entries to stay within the capacity. Returns false when
    /// the 5% rule keeps it out (an older copy is removed then).
    @discardableResult
    func store(_ response: StoredResponse, now: Double) throws(StoreError) -> Bool {
        let cost = response.cost
        guard admits(cost) else {
            try remove(key: response.key, variant: response.variant)
            return false
        }
        var bodyFile: String?
        if let file = response.bodyFile {
            // A stored entry stored again (a 304's refresh): its body is copied from its file.
            bodyFile = try writeBodyFile(now: now) { try PrivateFile.write(file, to: $0) }
        } else if response.body.count > Self.inlineBodyLimit {
            bodyFile = try writeBodyFile(now: now) { try PrivateFile.write(response.body, to: $0) }
        }
        let touches = ledger.takeTouches()
        let capacity = self.capacity
        let doomed: [String] = try writingKnowingPastRows { (connection: Connection, known: inout CacheUsage.PastRows?) throws(SQLiteError) in
            // Touches move rows past the usage row's count: read them again then.
            if !touches.isEmpty { known = nil }
            try Self.applyTouches(touches, connection)
            var past: CacheUsage.PastRows? = try CacheUsage.PastRows.current(connection, known: known)
            // The entry this one replaces, if any: found first, so that a
            // new key (most stores) runs no DELETE, whose statement
            // journal and trigger cost more than the lookup.
            var doomed: [String] = []
            let replaced = try connection.query(
                "SELECT id, body_file, cost FROM entries WHERE key = ? AND variant = ?", [.text(response.key), .text(response.variant)]
            ) { ($0.int64(0), $0.text(1), $0.int(2)) }
            for (id, file, replacedCost) in replaced {
                try connection.run("DELETE FROM entries WHERE id = ?", [.integer(id)])
                past?.removed(id: id, cost: replacedCost)
                if let file { doomed.append(file) }
            }
            try connection.run(
                """
                INSERT INTO entries(key, variant, url, host, status, response_headers, request_headers, body, body_file,
                    body_size, cost, request_time, response_time, stored_at, last_used, storage_policy, user_info)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
                [
                    .text(response.key), .text(response.variant), .text(response.url),
                    .text(CachePolicy.host(ofKey: response.key)), .integer(Int64(response.entry.status)),
                    .blob(FieldCoding.encode(response.entry.responseHeaders)),
                    .blob(FieldCoding.encode(response.entry.requestHeaders)),
                    bodyFile == nil ? .blob(response.body) : .null, bodyFile.map { .text($0) } ?? .null,
                    .integer(Int64(response.bodyCount)), .integer(Int64(cost)),
                    .real(response.entry.requestTime), .real(response.entry.responseTime),
                    .real(response.storedAt), .real(now), .integer(Int64(response.storagePolicy.rawValue)),
                    response.userInfo.isEmpty ? .null : .blob(response.userInfo.encoded),
                ])
            let inserted = connection.lastInsertRowID
            past?.added(id: inserted, cost: cost)
            if let bodyFile {
                try connection.run("DELETE FROM pending_files WHERE name = ?", [.text(bodyFile)])
            }
            doomed += try Self.evict(connection, capacity: capacity, keeping: inserted, past: &past)
            try Self.register(doomed, connection, now: now)
            known = past
            return doomed
        }
        deleteFiles(doomed)
        return true
    }

    func remove(key: String) throws(StoreError) {
        try removeRows(where: "key = ?", [.text(key)])
    }

    func remove(key: String, variant: String) throws(StoreError) {
        try removeRows(where: "key = ? AND variant = ?", [.text(key), .text(variant)])
    }

    func removeAll() throws(StoreError) {
        try removeRows(where: "1", [])
    }

    /// Removes the entries stored at or after `date` (seconds since 1970).
    func removeStored(since date: Double) throws(StoreError) {
        try removeRows(where: "stored_at >= ?", [.real(date)])
    }

    func remove(ids: [Int64]) throws(StoreError) {
        for id in ids { try removeRows(where: "id = ?", [.integer(id)]) }
    }

    func removeRows(where condition: String, _ arguments: [SQLiteValue]) throws(StoreError) {
        let now = Date().timeIntervalSince1970
        let doomed = try writing { (connection: Connection) throws(SQLiteError) in
            let doomed = try Self.deleteRows(connection, where: condition, arguments)
            try Self.register(doomed, connection, now: now)
            return doomed
        }
        deleteFiles(doomed)
    }

    /// Entries and bytes, exact in every process (see `CacheUsage`).
    func usage() throws(StoreError) -> (entries: Int, bytes: Int) {
        // The usage row and the rows past its count, read at one moment.
        try readingSnapshot { (connection: Connection) throws(SQLiteError) in
            let usage = try CacheUsage.read(connection)
            return (usage.entries, usage.bytes)
        }
    }

    func evictToCapacity() throws(StoreError) {
        let capacity = self.capacity
        let now = Date().timeIntervalSince1970
        let touches = ledger.takeTouches()
        let doomed = try writing { (connection: Connection) throws(SQLiteError) in
            try Self.applyTouches(touches, connection)
            var unknown: CacheUsage.PastRows?
            let doomed = try Self.evict(connection, capacity: capacity, keeping: nil, past: &unknown)
            try Self.register(doomed, connection, now: now)
            return doomed
        }
        deleteFiles(doomed)
    }

    /// Key and URL of every stored entry, oldest use first.
    func listing() throws(StoreError) -> [(key: String, url: String)] {
        try reading { (connection: Connection) throws(SQLiteError) in
            try connection.query("SELECT key, url FROM entries ORDER BY id") { ($0.text(0) ?? "", $0.text(1) ?? "") }
        }
    }

    /// The schema version recorded in the file.
    func schemaVersion() throws(StoreError) -> Int {
        try reading { (connection: Connection) throws(SQLiteError) in Int(try connection.scalarInt("PRAGMA user_version") ?? 0) }
    }

    /// SQLite's `PRAGMA integrity_check` lines; `["ok"]` when sound.
    func integrityCheck() throws(StoreError) -> [String] {
        try reading { (connection: Connection) throws(SQLiteError) in
            try connection.query("PRAGMA integrity_check") { $0.text(0) ?? "" }
        }
    }

    // MARK: Rows and files

    /// Deletes rows, returning their body files.
    private static func deleteRows(_ connection: Connection, where condition: String, _ arguments: [SQLiteValue]) throws(SQLiteError) -> [String] {
        try connection.query("DELETE FROM entries WHERE \(condition) RETURNING body_file", arguments) { $0.text(0) }.compactMap { $0 }
    }

    /// Deletes least recently used rows until usage fits `capacity`;
    /// folds the newest rows into the usage row when there are enough.
    /// `past` (in a store's transaction) is what is known of those rows,
    /// kept up to date; without it they are read.
    private static func evict(
        _ connection: Connection, capacity: Int, keeping kept: Int64?, past: inout CacheUsage.PastRows?
    ) throws(SQLiteError) -> [String] {
        let known: CacheUsage.PastRows
        if let past { known = past } else { known = try CacheUsage.PastRows.current(connection, known: nil) }
        let usage = try CacheUsage.read(connection, past: known)
        if usage.uncounted >= CacheUsage.foldThreshold {
            let folded = try CacheUsage.fold(connection, version: known.version)
            if past != nil { past = folded }
        }
        var bytes = usage.bytes
        var files: [String] = []
        while bytes > capacity {
            let victims = try connection.query(
                "SELECT id, body_file, cost FROM entries WHERE id != ? ORDER BY id LIMIT 32", [.integer(kept ?? -1)]
            ) { ($0.int64(0), $0.text(1), $0.int(2)) }
            guard !victims.isEmpty else { break }
            for (id, file, cost) in victims where bytes > capacity {
                try connection.run("DELETE FROM entries WHERE id = ?", [.integer(id)])
                past?.removed(id: id, cost: cost)
                if let file { files.append(file) }
                // A cost read from the file: never trusted with a trap.
                let (left, overflow) = bytes.subtractingReportingOverflow(cost)
                bytes = overflow ? 0 : left
            }
        }
        return files
    }

    /// Registers files about to be unlinked, in the transaction that made
    /// them unreferenced.
    static func register(_ files: [String], _ connection: Connection, now: Double) throws(SQLiteError) {
        for file in files {
            try connection.run("INSERT OR REPLACE INTO pending_files(name, created) VALUES (?, ?)", [.text(file), .real(0)])
        }
    }

    /// Whether `name` is one this library gives a body file: a lowercase
    /// UUID. Names are read back from the database, which another program
    /// may have written: anything else is damage, never a path.
    static func isBodyFileName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard bytes.count == 36 else { return false }
        for (index, byte) in bytes.enumerated() {
            if [8, 13, 18, 23].contains(index) {
                guard byte == UInt8(ascii: "-") else { return false }
            } else {
                guard (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "f")) else {
                    return false
                }
            }
        }
        return true
    }

    /// The path of body file `name` in the folder, or nil for a name this
    /// library does not write (see `isBodyFileName`).
    func bodyFileURL(_ name: String) -> URL? {
        Self.isBodyFileName(name) ? URL(fileURLWithPath: bodiesPath + "/" + name, isDirectory: false) : nil
    }

    private func writeBodyFile(now: Double, _ write: (String) throws -> Void) throws(StoreError) -> String {
        let name = UUID().uuidString.lowercased()
        try writing { (connection: Connection) throws(SQLiteError) in try connection.run("INSERT INTO pending_files(name, created) VALUES (?, ?)", [.text(name), .real(now)]) }
        let final = URL(fileURLWithPath: bodiesPath + "/" + name, isDirectory: false)
        let temporary = URL(fileURLWithPath: bodiesPath + "/" + name + ".tmp", isDirectory: false)
        do {
            // 0600 from the first byte: cached bodies may be private pages.
            try write(temporary.path)
            try FileManager.default.moveItem(at: temporary, to: final)
        } catch {
            try? FileManager.default.removeItem(at: temporary)
            throw StoreError(kind: .ioError, message: "cannot write a cached body: \(error.localizedDescription)", path: final.path)
        }
        return name
    }

    /// Unlinks files already unreferenced and registered, then unregisters them.
    func deleteFiles(_ names: [String]) {
        guard !names.isEmpty else { return }
        for name in names {
            // A crafted name is unregistered below, never unlinked.
            if let file = bodyFileURL(name) { unlink(file.path) }
        }
        do {
            try writing { (connection: Connection) throws(SQLiteError) in
                for name in names { try connection.run("DELETE FROM pending_files WHERE name = ?", [.text(name)]) }
            }
        } catch {
            logger.warning("cache file bookkeeping failed; the next open finishes it", metadata: ["error": "\(error)"])
        }
    }

    /// Finishes what a crashed process left: registered files that no row
    /// references (and are older than `pendingGrace`) are deleted.
    private func cleanUpPendingFiles() {
        let cutoff = Date().timeIntervalSince1970 - Self.pendingGrace
        do {
            let orphans = try reading { (connection: Connection) throws(SQLiteError) in
                try connection.query(
                    "SELECT name FROM pending_files WHERE created < ? AND name NOT IN (SELECT body_file FROM entries WHERE body_file IS NOT NULL)",
                    [.real(cutoff)]
                ) { $0.text(0) ?? "" }
            }
            for name in orphans where Self.isBodyFileName(name) {
                unlink(bodiesPath + "/" + name + ".tmp")
            }
            deleteFiles(orphans)
        } catch {
            logger.warning("cache cleanup failed", metadata: ["error": "\(error)"])
        }
    }
}
