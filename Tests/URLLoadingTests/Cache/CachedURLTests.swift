import Foundation
import Testing
@_spi(Tools) @testable import URLLoading

/// URLs as the cache stores and tools show them.
@Suite struct CachedURLTests {
    @Test("Stored URLs lose their password; shown ones also their secret query values")
    func redaction() throws {
        #expect(CachedURL.stored(try #require(URL(string: "http://alice:pw@a.test/p?x=1"))) == "http://alice@a.test/p?x=1")
        #expect(CachedURL.stored(try #require(URL(string: "http://a.test/p?token=1"))) == "http://a.test/p?token=1")
        #expect(CachedURL.displayed("http://alice:pw@a.test/p?token=abc&page=2") == "http://alice@a.test/p?token=…&page=2")
        #expect(
            CachedURL.displayed("https://b.test/q?api_key=k&X-Amz-Signature=s&plain=v&flag")
                == "https://b.test/q?api_key=…&X-Amz-Signature=…&plain=v&flag")
        #expect(CachedURL.displayed("https://b.test/q?plain=v") == "https://b.test/q?plain=v")
        #expect(CachedURL.displayed("https://b.test/%E2%80%A6?a%5Fkey=1") == "https://b.test/%E2%80%A6?a%5Fkey=…")
    }
}
