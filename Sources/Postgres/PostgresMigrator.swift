package import Storage

/// Brings a database's schema up to date with a list of migrations (the
/// same `Migration` values and rules as SQLite's migrator): each applied
/// once, in order, recorded with its name in `urlloading_migrations`; a
/// database with a version this code does not know, or another name for a
/// known version, is refused. Workers starting together take turns on an
/// advisory lock, so a migration runs once across the fleet.
package enum PostgresMigrator {
    /// The advisory lock key of migrations (any constant of ours).
    static let lockKey: Int64 = 0x5552_4C4C_4D49_4752  // "URLLMIGR"

    /// Applies what is missing of `migrations` for the store named `store`
    /// ("cache", "cookies", "credentials").
    package static func migrate(_ connection: PostgresConnection, store: String, migrations: [Migration]) throws(PostgresError) {
        try connection.transaction { (connection) throws(PostgresError) in
            try connection.run("SELECT pg_advisory_xact_lock($1)", [.int(lockKey)])
            try connection.run(
                """
                CREATE TABLE IF NOT EXISTS urlloading_migrations(
                    store TEXT NOT NULL, version INTEGER NOT NULL, name TEXT NOT NULL, applied DOUBLE PRECISION NOT NULL,
                    PRIMARY KEY (store, version))
                """)
            let recorded = try connection.query(
                "SELECT version, name FROM urlloading_migrations WHERE store = $1 ORDER BY version", [.text(store)]
            ) { row in (row.int(0) ?? 0, row.text(1) ?? "") }
            for (version, name) in recorded {
                guard let known = migrations.first(where: { $0.version == version }) else {
                    throw PostgresError(
                        .newerSchema,
                        "the \(store) store in this database has schema version \(version) but this program knows versions up to \(migrations.last?.version ?? 0); it was written by a newer version of URLLoading"
                    )
                }
                guard known.name == name else {
                    throw PostgresError(
                        .unknownMigration,
                        "schema version \(version) of the \(store) store is \"\(name)\" but this program's is \"\(known.name)\"; the tables belong to another program")
                }
            }
            let done = Set(recorded.map(\.0))
            for migration in migrations where !done.contains(migration.version) {
                try connection.runScript(migration.sql)
                try connection.run(
                    "INSERT INTO urlloading_migrations(store, version, name, applied) VALUES ($1, $2, $3, extract(epoch FROM now()))",
                    [.text(store), .int(Int64(migration.version)), .text(migration.name)])
            }
        }
    }
}
