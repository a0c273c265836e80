import Foundation
import Migrations
import Storage

/// The SQLite database of the cache's disk tier: opening it with the cache's
/// recovery rule (a damaged cache is recreated empty; its content can be
/// fetched again) and the maintenance queries that need no HTTP semantics.
final class DiskCacheFile: Sendable {
    /// The name of the database file inside the cache directory.
    static let databaseName = "Cache.sqlite"

    let database: Database
    let directory: URL

    /// Opens, creating and migrating as needed.
    init(directory: URL, recreateIfDamaged: Bool = true) throws {
        self.directory = directory
        var options = Database.Options()
        // Cached responses may be private to the user: owner only.
        options.fileMode = 0o600
        options.directoryMode = 0o700
        options.onCorruption = recreateIfDamaged ? .recreate : .fail
        let path = directory.appendingPathComponent(Self.databaseName).path
        do {
            database = try Database(path: path, migrations: Schema.cache, options: options)
        } catch {
            throw StoreError.wrapping(error, path: path)
        }
    }

    /// Whether a cache database exists in `directory`.
    static func exists(in directory: URL) -> Bool {
        FileManager.default.fileExists(atPath: directory.appendingPathComponent(databaseName).path)
    }

    /// Entry count and bytes, as the triggers keep them.
    func usage() throws -> (entries: Int, bytes: Int) {
        try database.read { connection in
            let rows = try connection.query("SELECT entries, bytes FROM usage WHERE id = 1") { ($0.int(0), $0.int(1)) }
            return rows.first ?? (0, 0)
        }
    }

    /// The schema version recorded in the file.
    func schemaVersion() throws -> Int {
        try database.read { Int(try $0.scalarInt("PRAGMA user_version") ?? 0) }
    }

    /// SQLite's `PRAGMA integrity_check` lines; `["ok"]` when sound.
    func integrityCheck() throws -> [String] {
        try database.read { connection in
            try connection.query("PRAGMA integrity_check") { $0.text(0) ?? "" }
        }
    }
}
