public import Foundation

/// Read-only facts about a cache store on disk, for `cachetool` and for
/// applications that report on their cache.
@_spi(Tools)
public struct CacheStoreSummary: Sendable, Codable, Equatable {
    /// The database file.
    public var path: String
    /// The schema version recorded in the file.
    public var schemaVersion: Int
    /// Stored responses.
    public var entries: Int
    /// Bytes the stored responses count against the disk capacity.
    public var bytes: Int

    package init(path: String, schemaVersion: Int, entries: Int, bytes: Int) {
        self.path = path
        self.schemaVersion = schemaVersion
        self.entries = entries
        self.bytes = bytes
    }
}

/// Maintenance of a cache directory that needs no HTTP semantics: create,
/// summarise, verify.
@_spi(Tools)
public enum CacheMaintenance {
    /// Creates the cache store in `directory` if it does not exist (what an
    /// application does on first use) and returns its summary.
    ///
    /// - Throws: `StoreError`.
    public static func create(in directory: URL) throws -> CacheStoreSummary {
        try summary(of: DiskTier(directory: directory, capacity: 0))
    }

    /// The summary of an existing store.
    ///
    /// - Throws: `StoreError` with kind `.notFound` when there is none.
    public static func summary(in directory: URL) throws -> CacheStoreSummary {
        try summary(of: openExisting(directory))
    }

    /// SQLite's integrity check of an existing store: empty when sound,
    /// else the problems it lists.
    ///
    /// - Throws: `StoreError`.
    public static func verify(in directory: URL) throws -> [String] {
        let file = try openExisting(directory)
        let lines = try file.integrityCheck()
        return lines == ["ok"] ? [] : lines
    }

    static func openExisting(_ directory: URL) throws -> DiskTier {
        guard DiskTier.exists(in: directory) else {
            throw StoreError(
                kind: .notFound,
                message: "no cache store here; check --cache-dir or the application identifier",
                path: directory.appendingPathComponent(DiskTier.databaseName).path)
        }
        // A tool must report damage, never repair it silently.
        return try DiskTier(directory: directory, capacity: Int.max, recreateIfDamaged: false)
    }

    private static func summary(of file: DiskTier) throws -> CacheStoreSummary {
        let usage = try file.usage()
        return CacheStoreSummary(
            path: file.database.path, schemaVersion: try file.schemaVersion(),
            entries: usage.entries, bytes: usage.bytes)
    }
}
