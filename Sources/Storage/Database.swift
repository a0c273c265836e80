import Foundation
package import Logging
import Locking

/// The serial owner of one SQLite connection (GRDB's `DatabaseQueue` model):
/// every use of the connection happens inside `read` or `write`, one at a
/// time, from any thread. With `Options.readers`, a read that finds that
/// connection busy (a write transaction, a checkpoint) runs on a read-only
/// connection of its own instead (`DatabasePool`'s model: in WAL mode
/// readers never wait for the writer), opened when first needed.
package final class Database: Sendable {
    /// Serialises every use of `connection`.
    private let lock = Lock(())
    /// Only touched inside `lock` (`read`/`write`): `Lock<Connection>` cannot
    /// lend a non-Sendable value to a caller's closure, so the lock guards it
    /// from beside it.
    private nonisolated(unsafe) let connection: Connection
    /// The read-only connections not in use.
    private let readers = Lock(ReaderPool())
    /// How many read-only connections may be open (`Options.readers`).
    private let readerLimit: Int
    /// One turn per read-only connection: a read beyond them waits for
    /// one to come back (microseconds), not for the writer (a whole write).
    private let readerTurns: DispatchSemaphore
    private let busyTimeout: Duration
    private let logger: Logger
    /// The database file.
    package let path: String
    /// What opening the file found and did.
    package let openReport: OpenReport

    /// What to do when the file at the path is damaged or is not a database.
    package enum CorruptionPolicy: Sendable, Equatable {
        /// Throw `StorageError` with kind `.corrupt`; touch nothing.
        case fail
        /// Delete the file (and its WAL and shared-memory files) and start
        /// empty. For caches, whose content can be fetched again.
        case recreate
        /// Rename the file (and its companions) to `<name>.corrupt-<time>`
        /// and start empty, logging where it went. For stores whose content
        /// cannot be fetched again (cookies, credentials).
        case moveAside
    }

    /// How to open a database.
    package struct Options: Sendable {
        /// Mode of the database file when created, applied exactly (not
        /// reduced by the umask). SQLite gives the WAL files the same mode.
        package var fileMode: UInt32 = 0o644
        /// Mode of directories created on the way to the file.
        package var directoryMode: UInt32 = 0o755
        /// Refuse to open an existing file that group or others can access.
        package var requirePrivateFile = false
        /// How long to wait for another connection's lock before `SQLITE_BUSY`.
        /// Five seconds: long enough for any single write of ours, short
        /// enough that a stuck process is reported rather than hung on.
        package var busyTimeout: Duration = .seconds(5)
        /// What to do with a damaged file.
        package var onCorruption: CorruptionPolicy = .fail
        /// Where to report recoveries.
        package var logger = Logger(label: "urlloading.storage")
        /// Read-only connections beside the writer's, for reads that find
        /// it busy: none by default (every read waits its turn). Each is
        /// opened on first need and kept; a read beyond them waits for one.
        package var readers = 0

        package init() {}

        /// A store private to its user: file 0600 in 0700 directories, a
        /// file others can access refused, a damaged one moved aside (kept
        /// for inspection) for a new one; what every store of secrets uses.
        package static func privateStore(logger: Logger) -> Options {
            var options = Options()
            options.fileMode = 0o600
            options.directoryMode = 0o700
            options.requirePrivateFile = true
            options.onCorruption = .moveAside
            options.logger = logger
            return options
        }
    }

    /// What `open` found and did.
    package struct OpenReport: Sendable, Equatable {
        /// Schema version before and after migrating.
        package var migrated: Migrator.Outcome
        /// The file did not exist and was created.
        package var created: Bool
        /// The file was damaged and recreated empty.
        package var recreated: Bool = false
        /// The file was damaged and moved to this path; a new one was created.
        package var movedAsideTo: String?
    }

    /// Opens or creates the database at `path`, migrates it, and applies the
    /// corruption policy if the file is damaged.
    ///
    /// - Throws: `StorageError` (newer schema, foreign schema, corrupt with
    ///   `.fail`, file accessible by others, file system, or SQLite's error
    ///   as the cause).
    package init(path: String, migrations: [Migration], options: Options = Options()) throws(StorageError) {
        let migrator = try Migrator(migrations)
        self.path = path
        let directory = (path as NSString).deletingLastPathComponent
        try Self.ensureDirectory(directory, mode: options.directoryMode)
        var created = try Self.prepareFile(path, options: options)
        var report: OpenReport
        var connection: Connection
        do {
            (connection, report) = try Self.connect(path, migrator: migrator, options: options, created: created)
        } catch  where error.kind == .corrupt && error.underlying != nil {
            switch options.onCorruption {
            case .fail:
                throw error
            case .recreate:
                try Self.removeFiles(of: path)
                options.logger.warning(
                    "damaged database deleted and recreated",
                    metadata: [
                        "path": "\(path)", "error": "\(error)",
                    ])
                created = try Self.prepareFile(path, options: options)
                (connection, report) = try Self.connect(path, migrator: migrator, options: options, created: created)
                report.recreated = true
            case .moveAside:
                let aside = try Self.moveFilesAside(of: path)
                options.logger.error(
                    "damaged database moved aside; a new empty one was created",
                    metadata: [
                        "path": "\(path)", "movedTo": "\(aside)", "error": "\(error)",
                    ])
                created = try Self.prepareFile(path, options: options)
                (connection, report) = try Self.connect(path, migrator: migrator, options: options, created: created)
                report.movedAsideTo = aside
            }
        }
        self.openReport = report
        self.connection = connection
        self.readerLimit = max(0, options.readers)
        self.readerTurns = DispatchSemaphore(value: max(0, options.readers))
        self.busyTimeout = options.busyTimeout
        self.logger = options.logger
    }

    deinit {
        // Closed before the writer's: the last connection to close
        // checkpoints and removes the WAL files, which a read-only one cannot.
        readers.withLock { $0.idle.removeAll() }
    }

    /// Runs `body` with a connection, outside any explicit transaction
    /// (each statement is its own implicit transaction; WAL readers never
    /// block writers): the writer's when it is free, else a read-only one
    /// when the options allow (`body` must only read), else the writer's
    /// once it is free.
    ///
    /// - Throws: `StorageError`, SQLite's error as its cause.
    package func read<T: Sendable>(_ body: (Connection) throws(SQLiteError) -> T) throws(StorageError) -> T {
        try onReadingConnection { Self.run(body, on: $0) }.mapError { StorageError.sqlite($0, path: path) }.get()
    }

    /// `read` for a `body` that keeps what it reads in its caller's
    /// variables. Not generic: other modules call this module's generic
    /// functions unspecialised, and each such call looks up its types at
    /// run time (a disk hit of the cache runs through here).
    ///
    /// - Throws: `StorageError`, SQLite's error as its cause.
    package func withReader(_ body: (Connection) throws(SQLiteError) -> Void) throws(StorageError) {
        try onReadingConnection { Self.run(body, on: $0) }.mapError { StorageError.sqlite($0, path: path) }.get()
    }

    /// Runs `work` on the connection `read` chooses.
    private func onReadingConnection<R: Sendable>(_ work: (Connection) -> R) -> R {
        if readerLimit > 0, let done = lock.withLockIfAvailable({ _ in work(connection) }) {
            return done
        }
        if readerLimit > 0, let reader = takeReader() {
            defer {
                readers.withLock { $0.idle.append(reader) }
                readerTurns.signal()
            }
            return work(reader.connection)
        }
        return lock.withLock { _ in work(connection) }
    }

    /// `read`, in one read transaction: a `body` of several statements
    /// sees one moment of the database, none of another connection's
    /// commits in between.
    ///
    /// - Throws: `StorageError`, SQLite's error as its cause.
    package func readSnapshot<T: Sendable>(_ body: (Connection) throws(SQLiteError) -> T) throws(StorageError) -> T {
        try read { (connection: Connection) throws(SQLiteError) -> T in
            try connection.readTransaction { () throws(SQLiteError) -> T in try body(connection) }
        }
    }

    /// Runs `body` on the writer's connection outside a transaction: for
    /// statements that write but cannot run inside one (`VACUUM`).
    ///
    /// - Throws: `StorageError`, SQLite's error as its cause.
    package func withoutTransaction<T: Sendable>(_ body: (Connection) throws(SQLiteError) -> T) throws(StorageError) -> T {
        try lock.withLock { _ in Self.run(body, on: connection) }.mapError { StorageError.sqlite($0, path: path) }.get()
    }

    private static func run<T>(_ body: (Connection) throws(SQLiteError) -> T, on connection: Connection) -> Result<T, SQLiteError> {
        do throws(SQLiteError) {
            return .success(try body(connection))
        } catch {
            return .failure(error)
        }
    }

    /// Runs `body` in an immediate transaction: all of it is committed, or
    /// none of it.
    ///
    /// - Parameter waitsForLocks: Whether to wait (up to the busy timeout)
    ///   for another process's write lock; without, the write fails at once
    ///   with a busy error and holds the connection no longer than that.
    /// - Throws: `StorageError`, SQLite's error as its cause.
    package func write<T: Sendable>(
        waitsForLocks: Bool = true, _ body: (Connection) throws(SQLiteError) -> T
    ) throws(StorageError) -> T {
        let result = lock.withLock { _ -> Result<T, SQLiteError> in
            do throws(SQLiteError) {
                let connection = self.connection
                func transaction() throws(SQLiteError) -> T {
                    try connection.immediateTransaction { () throws(SQLiteError) -> T in try body(connection) }
                }
                return .success(waitsForLocks ? try transaction() : try connection.withoutWaitingForLocks(transaction))
            } catch {
                return .failure(error)
            }
        }
        return try result.mapError { StorageError.sqlite($0, path: path) }.get()
    }

    // MARK: Read-only connections

    /// A read-only connection, used by one read at a time: taken from the
    /// pool, used, put back.
    private final class Reader: @unchecked Sendable {
        let connection: Connection
        init(_ connection: Connection) { self.connection = connection }
    }

    private struct ReaderPool {
        var idle: [Reader] = []
        /// One failed to open for a reason that lasts (the folder's
        /// permissions, a file gone): reads wait for the writer's
        /// connection, as without readers.
        var failed = false
    }

    /// An idle read-only connection, or a new one while fewer than the
    /// limit are open (a turn is one of them), once a turn is free; nil
    /// when none could be opened.
    private func takeReader() -> Reader? {
        guard !readers.withLock({ $0.failed }) else { return nil }
        readerTurns.wait()
        if let idle = readers.withLock({ $0.idle.popLast() }) { return idle }
        do throws(SQLiteError) {
            return Reader(try Connection(path: path, busyTimeout: busyTimeout, readOnly: true))
        } catch {
            // Busy (another process recovering the WAL) passes: the next read tries again.
            if !error.isBusy {
                readers.withLock { $0.failed = true }
                logger.notice("no read-only connection beside the writer's; reads wait for it", metadata: ["path": "\(path)", "error": "\(error)"])
            }
            readerTurns.signal()
            return nil
        }
    }

    // MARK: Opening

    private static func connect(
        _ path: String, migrator: Migrator, options: Options, created: Bool
    ) throws(StorageError) -> (Connection, OpenReport) {
        let connection: Connection
        do throws(SQLiteError) {
            connection = try Connection(path: path, busyTimeout: options.busyTimeout)
        } catch {
            throw StorageError.sqlite(error, path: path)
        }
        let outcome = try migrator.migrate(connection)
        if outcome.from != outcome.to {
            // Each step wrote its pages to the WAL: copied into the file now,
            // a new file's WAL gives its room back (on a nearly full disk,
            // room the next store needs). An upgraded file's may have
            // readers in other processes: copied without waiting for them.
            // Best effort either way.
            try? connection.execute(created ? "PRAGMA wal_checkpoint(TRUNCATE)" : "PRAGMA wal_checkpoint(PASSIVE)")
        }
        return (connection, OpenReport(migrated: outcome, created: created))
    }

    private static func ensureDirectory(_ directory: String, mode: UInt32) throws(StorageError) {
        guard !directory.isEmpty else { return }
        // Usually there: one stat, without FileManager's start-up.
        var info = stat()
        if stat(directory, &info) == 0, info.st_mode & S_IFMT == S_IFDIR { return }
        do {
            try FileManager.default.createDirectory(
                atPath: directory, withIntermediateDirectories: true,
                attributes: [.posixPermissions: Int(mode)])
        } catch {
            throw StorageError(kind: .fileSystem, message: "cannot create the directory: \(error.localizedDescription)", path: directory, underlying: nil)
        }
    }

    /// Creates the file with the exact mode if missing; checks the mode of an
    /// existing one. Returns whether the file was created.
    private static func prepareFile(_ path: String, options: Options) throws(StorageError) -> Bool {
        let fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, mode_t(options.fileMode))
        if fd >= 0 {
            defer { close(fd) }
            // The umask may have narrowed the mode; set it exactly.
            if fchmod(fd, mode_t(options.fileMode)) != 0 {
                throw StorageError.fileSystem("cannot set the file mode", errno: errno, path: path)
            }
            return true
        }
        guard errno == EEXIST else {
            throw StorageError.fileSystem("cannot create the file", errno: errno, path: path)
        }
        if options.requirePrivateFile {
            var info = stat()
            guard stat(path, &info) == 0 else {
                throw StorageError.fileSystem("cannot read the file's attributes", errno: errno, path: path)
            }
            if UInt32(info.st_mode) & 0o077 != 0 {
                throw StorageError.accessibleByOthers(mode: UInt32(info.st_mode), path: path)
            }
        }
        return false
    }

    /// The database file and the companions SQLite keeps beside it.
    static func companionPaths(of path: String) -> [String] {
        [path, path + "-wal", path + "-shm", path + "-journal"]
    }

    private static func removeFiles(of path: String) throws(StorageError) {
        for file in companionPaths(of: path) where unlink(file) != 0 && errno != ENOENT {
            throw StorageError.fileSystem("cannot delete the damaged file", errno: errno, path: file)
        }
    }

    private static func moveFilesAside(of path: String) throws(StorageError) -> String {
        let stamp = ISO8601DateFormatter.string(
            from: Date(), timeZone: TimeZone(identifier: "UTC") ?? .current,
            formatOptions: [.withYear, .withMonth, .withDay, .withTime])
        var aside = "\(path).corrupt-\(stamp)"
        var suffix = 1
        while FileManager.default.fileExists(atPath: aside) {
            suffix += 1
            aside = "\(path).corrupt-\(stamp)-\(suffix)"
        }
        for (file, target) in zip(companionPaths(of: path), companionPaths(of: aside)) {
            if rename(file, target) != 0 && errno != ENOENT {
                throw StorageError.fileSystem("cannot move the damaged file aside", errno: errno, path: file)
            }
        }
        return aside
    }
}
