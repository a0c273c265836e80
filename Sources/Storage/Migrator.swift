import Foundation

/// One schema version: the SQL that takes a database from `version - 1` to
/// `version`.
package struct Migration: Sendable, Equatable {
    /// 1-based, consecutive.
    package let version: Int
    /// A stable name, recorded in the database so a file of another store or
    /// program is recognised.
    package let name: String
    /// One or more SQL statements.
    package let sql: String

    package init(version: Int, name: String, sql: String) {
        self.version = version
        self.name = name
        self.sql = sql
    }
}

/// Applies migrations in order, each in its own immediate transaction.
///
/// The version lives in `PRAGMA user_version` (written in the same transaction
/// as the migration, so a crash never leaves it half-applied) and each applied
/// migration's name in `schema_migrations`, so that a database written by a
/// newer program, or belonging to another store, is refused with a clear error.
package struct Migrator: Sendable {
    package let migrations: [Migration]

    /// - Throws: `StorageError` when versions are not 1, 2, 3, ...
    package init(_ migrations: [Migration]) throws(StorageError) {
        for (index, migration) in migrations.enumerated() where migration.version != index + 1 {
            throw .invalidMigrations("migration \"\(migration.name)\" has version \(migration.version), expected \(index + 1)")
        }
        self.migrations = migrations
    }

    /// The version a fully migrated database has.
    package var latestVersion: Int { migrations.count }

    /// The outcome of `migrate`.
    package struct Outcome: Sendable, Equatable {
        package let from: Int
        package let to: Int
    }

    /// Brings the database up to `latestVersion`.
    ///
    /// Safe against concurrent migrators in other processes: each step
    /// re-reads the version under the write lock.
    ///
    /// - Throws: `StorageError`: a newer or foreign schema, or the SQLite
    ///   error of a failed step as its cause.
    package func migrate(_ connection: Connection) throws(StorageError) -> Outcome {
        let outcome: Result<Outcome, StorageError>
        do throws(SQLiteError) {
            outcome = try steps(connection)
        } catch {
            throw StorageError.sqlite(error, path: connection.path)
        }
        return try outcome.get()
    }

    /// The steps of `migrate`: its outcome or a refusal; SQLite's failures thrown.
    private func steps(_ connection: Connection) throws(SQLiteError) -> Result<Outcome, StorageError> {
        let initial = try currentVersion(connection)
        if case .failure(let refusal) = try checkKnown(connection, version: initial) { return .failure(refusal) }
        var version = initial
        while version < latestVersion {
            // A schema this program does not know is found before anything is written.
            let step = try connection.immediateTransaction { () throws(SQLiteError) -> Result<Int, StorageError> in
                let current = try currentVersion(connection)
                if case .failure(let refusal) = try checkKnown(connection, version: current) { return .failure(refusal) }
                guard current < latestVersion else { return .success(current) }
                let migration = migrations[current]
                try connection.execute(Self.bookkeepingTable)
                try connection.execute(migration.sql)
                try connection.run(
                    "INSERT OR REPLACE INTO schema_migrations(version, name, applied_at) VALUES (?, ?, ?)",
                    [.integer(Int64(migration.version)), .text(migration.name), .real(Date().timeIntervalSince1970)])
                try connection.execute("PRAGMA user_version = \(migration.version)")
                return .success(migration.version)
            }
            switch step {
            case .success(let reached): version = reached
            case .failure(let refusal): return .failure(refusal)
            }
        }
        return .success(Outcome(from: initial, to: version))
    }

    /// The schema version recorded in the file (0 for a new file).
    package func currentVersion(_ connection: Connection) throws(SQLiteError) -> Int {
        Int(try connection.scalarInt("PRAGMA user_version") ?? 0)
    }

    private static let bookkeepingTable = """
        CREATE TABLE IF NOT EXISTS schema_migrations(
            version INTEGER PRIMARY KEY,
            name TEXT NOT NULL,
            applied_at REAL NOT NULL
        )
        """

    /// Whether a database at `version` is one of ours: a refusal, or the
    /// SQLite error that kept it from being read.
    private func checkKnown(_ connection: Connection, version: Int) throws(SQLiteError) -> Result<Void, StorageError> {
        if version > latestVersion {
            return .failure(StorageError.newerSchema(found: version, supported: latestVersion, path: connection.path))
        }
        guard version > 0 else { return .success(()) }
        // The newest applied migration must be ours under the same name.
        let hasTable =
            try connection.scalarInt(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'") ?? 0
        let recorded =
            hasTable == 0
            ? []
            : try connection.query(
                "SELECT name FROM schema_migrations WHERE version = ?", [.integer(Int64(version))]
            ) { $0.text(0) ?? "" }
        let expected = migrations[version - 1].name
        if recorded.first != expected {
            return .failure(
                StorageError.unknownMigration(
                    version: version, recorded: recorded.first ?? "(none)", expected: expected, path: connection.path))
        }
        return .success(())
    }
}
