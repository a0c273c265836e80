import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import URLLoading

/// The cache's side of an exchange as pure decisions: no
/// socket, no store, the time given.
@Suite struct CacheExchangeTests {
    static let url = URL(string: "http://example.test/r")!
    static let now = 1_000_000.0

    static func fields(_ pairs: [(String, String)]) -> HeaderFields {
        var fields = HeaderFields()
        for (name, value) in pairs { fields.append(name, value) }
        return fields
    }

    /// A response stored `age` seconds ago with these fields.
    static func stored(_ pairs: [(String, String)], age: Double = 10, body: String = "0123456789", status: Int = 200) -> StoredResponse {
        StoredResponse(
            url: url.absoluteString, key: url.absoluteString, status: status, responseHeaders: fields(pairs), requestHeaders: [],
            body: Data(body.utf8), requestTime: now - age, responseTime: now - age, storedAt: now - age)
    }

    @Test("The request cache policies before the network, with Apple's meanings")
    func policies() {
        let fresh = Self.stored([("Cache-Control", "max-age=100")])
        #expect(
            CacheExchange.before(policy: .returnCacheDataDontLoad, requestHeaders: [], stored: nil, now: Self.now)
                == .fail("nothing is stored for this request and the policy forbids loading it"))
        #expect(
            CacheExchange.before(policy: .returnCacheDataDontLoad, requestHeaders: [], stored: fresh, now: Self.now)
                == .serve(fresh, cacheStatus: "URLLoading; hit", revalidate: false))
        #expect(
            CacheExchange.before(policy: .reloadIgnoringLocalCacheData, requestHeaders: [], stored: fresh, now: Self.now)
                == .network(revalidating: nil, cacheStatus: "URLLoading; fwd=request"))
        #expect(
            CacheExchange.before(policy: .useProtocolCachePolicy, requestHeaders: [], stored: fresh, now: Self.now)
                == .serve(fresh, cacheStatus: "URLLoading; hit", revalidate: false))
        let stale = Self.stored([("Cache-Control", "max-age=5"), ("ETag", "\"v1\"")])
        #expect(
            CacheExchange.before(policy: .useProtocolCachePolicy, requestHeaders: [], stored: stale, now: Self.now)
                == .network(revalidating: stale, cacheStatus: "URLLoading; fwd=stale"))
        let staleWithoutValidators = Self.stored([("Cache-Control", "max-age=5")])
        #expect(
            CacheExchange.before(policy: .useProtocolCachePolicy, requestHeaders: [], stored: staleWithoutValidators, now: Self.now)
                == .network(revalidating: nil, cacheStatus: "URLLoading; fwd=stale"))
        let onlyIfCached = Self.fields([("Cache-Control", "only-if-cached")])
        #expect(
            CacheExchange.before(policy: .useProtocolCachePolicy, requestHeaders: onlyIfCached, stored: nil, now: Self.now)
                == .gatewayTimeout(cacheStatus: "URLLoading; fwd=miss; detail=only-if-cached"))
        let swr = Self.stored([("Cache-Control", "max-age=5, stale-while-revalidate=60")])
        #expect(
            CacheExchange.before(policy: .useProtocolCachePolicy, requestHeaders: [], stored: swr, now: Self.now)
                == .serve(swr, cacheStatus: "URLLoading; hit; detail=stale-while-revalidate", revalidate: true))
    }

    @Test("A Range request is served a 206 of a complete stored response; anything else whole")
    func ranges() {
        let whole = Self.stored([("Cache-Control", "max-age=100")])
        let served = CacheExchange.ranged(whole, requestHeaders: Self.fields([("Range", "bytes=2-4")]))
        #expect(served.entry.status == 206 && served.body == Data("234".utf8))
        #expect(served.entry.responseHeaders["Content-Range"] == "bytes 2-4/10")
        #expect(CacheExchange.ranged(whole, requestHeaders: Self.fields([("Range", "bytes=2-4,6-7")])) == whole)
        #expect(CacheExchange.ranged(whole, requestHeaders: Self.fields([("Range", "bytes=20-")])) == whole)
        #expect(CacheExchange.byteRange("bytes=-3", length: 10) == 7..<10)
    }

    @Test("A 304 refreshes the entry it selects; one with another validator changes nothing")
    func notModified() {
        let stored = Self.stored([("Cache-Control", "max-age=5"), ("ETag", "\"v1\""), ("X-Old", "1")], age: 100)
        let (served, refreshed) = CacheExchange.notModified(
            stored, notModifiedHeaders: Self.fields([("ETag", "\"v1\""), ("Cache-Control", "max-age=600")]), requestTime: Self.now - 1, now: Self.now)
        #expect(refreshed && served.entry.responseTime == Self.now && served.entry.requestTime == Self.now - 1)
        #expect(served.entry.responseHeaders["Cache-Control"] == "max-age=600" && served.entry.responseHeaders["X-Old"] == "1")
        #expect(served.body == stored.body)
        let other = CacheExchange.notModified(stored, notModifiedHeaders: Self.fields([("ETag", "\"v2\"")]), requestTime: 0, now: Self.now)
        #expect(!other.refreshed && other.served == stored)
    }

    @Test("RFC 9111 §4.3.5: HEAD refreshes the GET entry it selects; another Content-Length removes it")
    func headUpdates() {
        let stored = Self.stored([("Cache-Control", "max-age=5"), ("ETag", "\"v1\""), ("Content-Length", "10")], age: 100)
        #expect(CacheExchange.headUpdate(stored, headHeaders: Self.fields([("Content-Length", "11")]), requestTime: 0, now: Self.now) == .remove)
        guard
            case .refresh(let updated) = CacheExchange.headUpdate(
                stored, headHeaders: Self.fields([("ETag", "\"v1\""), ("Content-Length", "10"), ("Cache-Control", "max-age=60")]),
                requestTime: 0, now: Self.now)
        else {
            Issue.record("no refresh")
            return
        }
        #expect(updated.entry.responseHeaders["Cache-Control"] == "max-age=60" && updated.entry.requestTime == Self.now)
        #expect(CacheExchange.headUpdate(nil, headHeaders: [], requestTime: 0, now: Self.now) == .none)
    }

    @Test("RFC 5861 §4: stale-if-error serves within its window only")
    func staleIfError() {
        let stored = Self.stored([("Cache-Control", "max-age=5, stale-if-error=60")], age: 30)
        #expect(CacheExchange.staleIfError(stored, requestHeaders: [], now: Self.now) == stored)
        #expect(CacheExchange.staleIfError(stored, requestHeaders: [], now: Self.now + 100) == nil)
        #expect(CacheExchange.staleIfError(nil, requestHeaders: [], now: Self.now) == nil)
    }

    @Test("Unsafe methods invalidate; storable responses become candidates, no-store ones do not")
    func afterTheNetwork() {
        #expect(CacheExchange.invalidatedKeys(method: "POST", status: 200, url: Self.url, responseHeaders: []) == ["http://example.test/r"])
        #expect(CacheExchange.invalidatedKeys(method: "GET", status: 200, url: Self.url, responseHeaders: []).isEmpty)
        #expect(CacheExchange.invalidatedKeys(method: "POST", status: 500, url: Self.url, responseHeaders: []).isEmpty)
        let candidate = CacheExchange.storeCandidate(
            url: Self.url, key: "k", method: "GET", status: 200, responseHeaders: Self.fields([("Cache-Control", "max-age=60")]),
            requestHeaders: [], body: Data("b".utf8), requestTime: Self.now - 1, now: Self.now)
        #expect(candidate?.entry.responseTime == Self.now && candidate?.body == Data("b".utf8))
        #expect(
            CacheExchange.storeCandidate(
                url: Self.url, key: "k", method: "GET", status: 200, responseHeaders: Self.fields([("Cache-Control", "no-store")]),
                requestHeaders: [], body: Data(), requestTime: 0, now: Self.now) == nil)
    }
}
