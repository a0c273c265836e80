import Foundation
import Storage
import Testing
import TestSupport
@_spi(Tools) @testable import URLLoading

/// A cache database crafted by somebody else (issue 18): names read from it
/// never become paths outside the cache's folder.
@Suite(.timeLimit(.minutes(2))) struct HostileStoreTests {
    @Test("Body file names from the database that are not the library's own touch nothing outside the folder; verify reports them")
    func craftedNamesTouchNothing() async throws {
        let root = TemporaryDirectory()
        let cacheDirectory = root.url.appendingPathComponent("cache", isDirectory: true)
        try CacheToolCommandTests.makeCache(cacheDirectory)
        let victims = ["victim1.txt", "victim2.txt", "victim3.txt"].map { root.url.appendingPathComponent($0) }
        for victim in victims { try Data("keep me".utf8).write(to: victim) }
        let connection = try Connection(path: cacheDirectory.appendingPathComponent("Cache.sqlite").path, busyTimeout: .seconds(5))
        try connection.execute("INSERT INTO pending_files(name, created) VALUES ('../../victim1.txt', 0)")
        try connection.execute("INSERT INTO pending_files(name, created) VALUES ('../../victim2.txt', 0)")
        try connection.execute("UPDATE entries SET body_file = '../../victim3.txt', body_size = 7 WHERE url = 'https://a.test/fresh'")
        for arguments in [["info"], ["verify"], ["verify", "--repair"], ["show", "https://a.test/fresh"], ["prune", "--to-size", "0"]] {
            let result = try await ChildProcess.run(CacheToolCommandTests.cachetool, arguments + ["--cache-dir", cacheDirectory.path])
            for victim in victims {
                #expect(FileManager.default.fileExists(atPath: victim.path), "\(arguments) removed \(victim.lastPathComponent): \(result.standardError)")
            }
        }
        // The library itself, opening the store and reading the entry.
        let cache = try ResponseCache(memoryCapacity: 0, diskCapacity: 1 << 30, directory: cacheDirectory)
        _ = cache.lookup(key: "https://a.test/fresh", requestHeaders: [])
        cache.flush()
        for victim in victims {
            #expect(try Data(contentsOf: victim) == Data("keep me".utf8), "the library touched \(victim.lastPathComponent)")
        }
    }

    @Test("verify reports a body file name that is not one the library writes as damage")
    func verifyReportsCraftedNames() async throws {
        let root = TemporaryDirectory()
        let cacheDirectory = root.url.appendingPathComponent("cache", isDirectory: true)
        try CacheToolCommandTests.makeCache(cacheDirectory)
        let connection = try Connection(path: cacheDirectory.appendingPathComponent("Cache.sqlite").path, busyTimeout: .seconds(5))
        try connection.execute("UPDATE entries SET body_file = '../elsewhere' WHERE url = 'https://a.test/fresh'")
        let result = try await ChildProcess.run(CacheToolCommandTests.cachetool, ["verify", "--cache-dir", cacheDirectory.path, "--json"])
        #expect(result.status == 5, "a damaged store: \(result.standardOutput) \(result.standardError)")
        #expect(result.standardOutput.contains("not a name this library writes"), "\(result.standardOutput)")
    }
}
