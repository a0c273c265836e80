import CSQLite
import Foundation

/// One SQLite connection. Owns its `sqlite3*` handle and closes it in `deinit`.
///
/// Not thread-safe on its own: `Database` is its serial owner, and code only
/// reaches a connection inside `Database.read` or `Database.write`.
package final class Connection {
    let handle: OpaquePointer
    /// The database file.
    package let path: String
    /// Prepared statements by their SQL, kept for the connection's lifetime.
    private var statementCache = KeyedTable<String, Statement>()
    /// How long SQLite waits for another connection's lock, as opened with.
    private let busyMilliseconds: Int32

    /// Opens (creating if needed) the database at `path` with the pragmas this
    /// project relies on: WAL, `busy_timeout`, foreign keys, NORMAL sync.
    ///
    /// - Throws: `SQLiteError`; `isCorruption` is true when the file is not a
    ///   database or its header is damaged.
    package init(path: String, busyTimeout: Duration, readOnly: Bool = false) throws(SQLiteError) {
        var db: OpaquePointer?
        let flags =
            (readOnly ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE))
            | SQLITE_OPEN_NOMUTEX
        let rc = sqlite3_open_v2(path, &db, flags, nil)
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(rc))
            if let db { sqlite3_close_v2(db) }
            throw SQLiteError(extendedCode: rc, message: message, path: path)
        }
        self.handle = db
        self.path = path
        sqlite3_extended_result_codes(db, 1)
        let (seconds, attoseconds) = busyTimeout.components
        busyMilliseconds = Int32(clamping: seconds * 1000 + attoseconds / 1_000_000_000_000_000)
        sqlite3_busy_timeout(db, busyMilliseconds)
        // The first statement reads the header: a non-database file fails here.
        if !readOnly {
            try switchToWAL(busyTimeout: busyTimeout)
        } else {
            try execute("SELECT count(*) FROM sqlite_master")
        }
        try execute("PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON")
    }

    deinit {
        statementCache.removeAll()
        sqlite3_close_v2(handle)
    }

    /// `PRAGMA journal_mode=WAL`, waiting out another connection's lock as
    /// `busy_timeout` would. On a new, empty file the switch reads the header
    /// and then upgrades to a write; SQLite fails that upgrade at once, without
    /// calling the busy handler, while another opener holds the write lock
    /// doing the same switch (a waiting reader could deadlock a writer). The
    /// other opener is done within milliseconds, so try again until the
    /// timeout.
    private func switchToWAL(busyTimeout: Duration) throws(SQLiteError) {
        let deadline = ContinuousClock.now + busyTimeout
        var pause = Duration.milliseconds(1)
        while true {
            do {
                try execute("PRAGMA journal_mode=WAL")
                return
            } catch  where error.isBusy && ContinuousClock.now + pause < deadline {
                // Milliseconds at most: a thread that opens a store may block.
                let (seconds, attoseconds) = pause.components
                usleep(useconds_t(clamping: seconds * 1_000_000 + attoseconds / 1_000_000_000_000))
                pause = min(pause * 2, .milliseconds(50))
            }
        }
    }

    /// Runs one or more statements that take no arguments (migrations, pragmas).
    package func execute(_ sql: String) throws(SQLiteError) {
        var errorMessage: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(handle, sql, nil, nil, &errorMessage)
        if rc != SQLITE_OK {
            let message = errorMessage.map { String(cString: $0) } ?? String(cString: sqlite3_errmsg(handle))
            sqlite3_free(errorMessage)
            throw SQLiteError(extendedCode: sqlite3_extended_errcode(handle), message: message, sql: sql, path: path)
        }
    }

    /// A statement prepared once and kept for the connection's lifetime,
    /// reset and with bindings cleared.
    package func cachedStatement(_ sql: String) throws(SQLiteError) -> Statement {
        if let statement = statementCache[sql] {
            statement.reset()
            return statement
        }
        let statement = try Statement(connection: self, sql: sql)
        statementCache.set(statement, for: sql)
        return statement
    }

    /// A statement prepared for one use.
    package func makeStatement(_ sql: String) throws(SQLiteError) -> Statement {
        try Statement(connection: self, sql: sql)
    }

    /// Runs a cached statement with `arguments` to completion.
    package func run(_ sql: String, _ arguments: [SQLiteValue] = []) throws(SQLiteError) {
        let statement = try cachedStatement(sql)
        try statement.bind(arguments)
        try statement.run()
        statement.reset()
    }

    /// Runs a cached statement and maps each row.
    package func query<T>(
        _ sql: String, _ arguments: [SQLiteValue] = [], row: (Statement) throws(SQLiteError) -> T
    ) throws(SQLiteError) -> [T] {
        let statement = try cachedStatement(sql)
        defer { statement.reset() }
        try statement.bind(arguments)
        return try Self.rows(of: statement, row)
    }

    /// `query` with its one argument bound as parameter 1, without an
    /// array to carry it (a cache lookup by key runs on every disk hit).
    package func query<T>(
        _ sql: String, binding argument: SQLiteValue, row: (Statement) throws(SQLiteError) -> T
    ) throws(SQLiteError) -> [T] {
        var rows: [T] = []
        try forEachRow(sql, binding: argument) { (statement: Statement) throws(SQLiteError) in rows.append(try row(statement)) }
        return rows
    }

    /// `query(_:binding:row:)` handing each row to `row` as it is read,
    /// with no array and nothing generic (other modules call this module's
    /// generic functions unspecialised, which looks up types at run time).
    package func forEachRow(_ sql: String, binding argument: SQLiteValue, _ row: (Statement) throws(SQLiteError) -> Void) throws(SQLiteError) {
        let statement = try cachedStatement(sql)
        defer { statement.reset() }
        try statement.bind(argument, at: 1)
        while try statement.step() { try row(statement) }
    }

    private static func rows<T>(of statement: Statement, _ row: (Statement) throws(SQLiteError) -> T) throws(SQLiteError) -> [T] {
        var rows: [T] = []
        while try statement.step() {
            rows.append(try row(statement))
        }
        return rows
    }

    /// The first column of the first row, as an integer, or nil without rows.
    package func scalarInt(_ sql: String, _ arguments: [SQLiteValue] = []) throws(SQLiteError) -> Int64? {
        let statement = try cachedStatement(sql)
        defer { statement.reset() }
        try statement.bind(arguments)
        guard try statement.step(), !statement.isNull(0) else { return nil }
        return statement.int64(0)
    }

    /// Rows changed by the last INSERT, UPDATE or DELETE.
    package var changes: Int { Int(sqlite3_changes64(handle)) }

    /// The rowid of the last successful INSERT.
    package var lastInsertRowID: Int64 { sqlite3_last_insert_rowid(handle) }

    /// Whether a transaction is open.
    package var isInTransaction: Bool { sqlite3_get_autocommit(handle) == 0 }

    /// Runs `body` in a `BEGIN IMMEDIATE` transaction: committed when `body`
    /// returns, rolled back when it throws. Takes the write lock up front, so
    /// concurrent writers wait on `busy_timeout` instead of failing with
    /// `SQLITE_BUSY_SNAPSHOT` half way.
    package func immediateTransaction<T>(_ body: () throws(SQLiteError) -> T) throws(SQLiteError) -> T {
        try transaction("BEGIN IMMEDIATE", body)
    }

    /// Runs `body` in a deferred transaction that only reads: every
    /// statement in it sees the database as it was at the first one (a WAL
    /// snapshot), whatever other connections commit meanwhile.
    package func readTransaction<T>(_ body: () throws(SQLiteError) -> T) throws(SQLiteError) -> T {
        try transaction("BEGIN", body)
    }

    private func transaction<T>(_ begin: String, _ body: () throws(SQLiteError) -> T) throws(SQLiteError) -> T {
        // Cached statements: parsing BEGIN and COMMIT on every write costs
        // more than running them.
        try cachedStatement(begin).run()
        do {
            let result = try body()
            try cachedStatement("COMMIT").run()
            return result
        } catch {
            // The original error is the one to report; a failed ROLLBACK
            // leaves nothing more to undo (SQLite rolls back on close).
            if isInTransaction { try? cachedStatement("ROLLBACK").run() }
            throw error
        }
    }

    /// Runs `body` with SQLite failing at once (`SQLITE_BUSY`) where it
    /// would wait for another connection's lock.
    func withoutWaitingForLocks<T>(_ body: () throws(SQLiteError) -> T) throws(SQLiteError) -> T {
        sqlite3_busy_timeout(handle, 0)
        defer { sqlite3_busy_timeout(handle, busyMilliseconds) }
        return try body()
    }

    func error(_ rc: Int32, sql: String?) -> SQLiteError {
        let extended = sqlite3_extended_errcode(handle)
        return SQLiteError(
            extendedCode: extended != 0 ? extended : rc,
            message: String(cString: sqlite3_errmsg(handle)),
            sql: sql, path: path)
    }
}

@available(*, unavailable)
extension Connection: Sendable {}
