import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
import TestSupport
@testable import URLLoading

/// Apple's `URLCache(memoryCapacity:diskCapacity:directory:)` cannot fail;
/// neither can ours. `open` is the form that throws.
@Suite struct ResponseCacheOpeningTests {
    @Test("A disk tier that cannot be opened leaves a memory-only cache with the reason in startupError; open(...) throws it")
    func unopenableDirectory() throws {
        let folder = TemporaryDirectory()
        // A file where the cache's folder would be.
        let blocked = folder.url.appendingPathComponent("not-a-folder")
        try Data("x".utf8).write(to: blocked)
        let cache = ResponseCache(memoryCapacity: 1 << 20, diskCapacity: 1 << 20, directory: blocked)
        let error = try #require(cache.startupError)
        #expect(error.path?.hasPrefix(blocked.path) == true, "\(error)")
        #expect(cache.directory == nil)
        cache.store(ResponseCacheTests.stored("https://example.test/a", body: Data("a".utf8)))
        #expect(cache.cachedResponse(for: URLRequest(url: try #require(URL(string: "https://example.test/a"))))?.data == Data("a".utf8))
        #expect(throws: StoreError.self) { try ResponseCache.open(memoryCapacity: 0, diskCapacity: 1 << 20, directory: blocked) }
        // A folder that can be opened: a disk tier and no error.
        let good = ResponseCache(memoryCapacity: 0, diskCapacity: 1 << 20, directory: folder.url.appendingPathComponent("cache"))
        #expect(good.startupError == nil && good.directory != nil)
    }
}
