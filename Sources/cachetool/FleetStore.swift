import ArgumentParser
import Foundation
@_spi(Tools) import URLLoading
@_spi(Tools) import URLLoadingPostgres

/// The cache commands on either store: the cache folder, or the fleet's
/// PostgreSQL database given with `--postgres` or `URLLOADING_POSTGRES`.
/// The connection string is never printed.
extension StoreOptions {
    /// The fleet's database, if one was given.
    var postgresURL: String? {
        postgres ?? ProcessInfo.processInfo.environment["URLLOADING_POSTGRES"].flatMap { $0.isEmpty ? nil : $0 }
    }

    func createCache() throws -> CacheStoreSummary {
        if let postgresURL { return try PostgresCacheMaintenance.create(url: postgresURL) }
        return try CacheMaintenance.create(in: cacheDirectory)
    }

    func cacheSnapshot(_ url: URL, requestHeaders: [(name: String, value: String)]) throws -> CacheEntrySnapshot? {
        if let postgresURL { return try PostgresCacheMaintenance.snapshot(url: postgresURL, target: url, requestHeaders: requestHeaders) }
        return try CacheMaintenance.snapshot(in: cacheDirectory, url: url, requestHeaders: requestHeaders)
    }

    func explainCache(_ url: URL, requestHeaders: [(name: String, value: String)]) throws -> CacheExplanation {
        if let postgresURL { return try PostgresCacheMaintenance.explain(url: postgresURL, target: url, requestHeaders: requestHeaders) }
        return try CacheMaintenance.explain(in: cacheDirectory, url: url, requestHeaders: requestHeaders)
    }

    func verifyCache(repair: Bool) throws -> CacheVerification {
        if let postgresURL { return try PostgresCacheMaintenance.verify(url: postgresURL, repair: repair) }
        return try CacheMaintenance.verifyStore(in: cacheDirectory, repair: repair)
    }

    func vacuumCache() throws {
        if let postgresURL { return try PostgresCacheMaintenance.vacuum(url: postgresURL) }
        try CacheMaintenance.vacuum(in: cacheDirectory)
    }

    func cacheSummary() throws -> CacheStoreSummary {
        if let postgresURL { return try PostgresCacheMaintenance.summary(url: postgresURL) }
        return try CacheMaintenance.summary(in: cacheDirectory)
    }

    func cacheEntries(_ query: CacheListQuery, _ each: (CacheEntryInfo) -> Bool) throws {
        if let postgresURL { return try PostgresCacheMaintenance.entries(url: postgresURL, query, each) }
        try CacheMaintenance.entries(in: cacheDirectory, query, each)
    }

    func cacheStats() throws -> CacheStats {
        if let postgresURL { return try PostgresCacheMaintenance.stats(url: postgresURL) }
        return try CacheMaintenance.stats(in: cacheDirectory)
    }

    func removeCached(_ url: URL) throws -> Int {
        if let postgresURL { return try PostgresCacheMaintenance.remove(url: postgresURL, target: url) }
        return try CacheMaintenance.remove(in: cacheDirectory, url: url)
    }

    func pruneCache(_ rule: CacheMaintenance.PruneRule, progress: (Int) -> Void = { _ in }) throws -> Int {
        if let postgresURL { return try PostgresCacheMaintenance.prune(url: postgresURL, rule) }
        return try CacheMaintenance.prune(in: cacheDirectory, rule, progress: progress)
    }

    /// The cookie store: the folder's file (which must exist), or the fleet's database.
    func existingCookies() throws -> CookieStore {
        if let postgresURL { return try CookieStore(database: PostgresDatabase(url: postgresURL, maximumConnections: 2)) }
        return try existingStore(dataDirectory, CookieStore.fileName) { try CookieStore(directory: $0, keepSessionCookies: true) }
    }

    /// The fleet's credential store, when `--postgres` names one.
    func fleetCredentials() throws -> CredentialStore? {
        try postgresURL.map { try CredentialStore(database: PostgresDatabase(url: $0, maximumConnections: 2)) }
    }
}
