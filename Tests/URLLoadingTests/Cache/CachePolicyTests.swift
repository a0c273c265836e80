import Foundation
import Testing
@testable import URLLoading

/// The RFC 9111 decisions, each named by its section.
@Suite struct CachePolicyTests {
    static let t0 = 1_800_000_000.0

    static func entry(
        status: Int = 200, _ headers: [(String, String)], request: [(String, String)] = [],
        requestTime: Double = t0, responseTime: Double = t0
    ) -> CachePolicy.Entry {
        CachePolicy.Entry(
            status: status, responseHeaders: HeaderFields(headers.map { HeaderFields.Field($0.0, $0.1) }),
            requestHeaders: HeaderFields(request.map { HeaderFields.Field($0.0, $0.1) }),
            requestTime: requestTime, responseTime: responseTime)
    }

    static func date(_ offset: Double) -> String { HTTPDate.format(t0 + offset) }

    static func storable(status: Int = 200, _ headers: [(String, String)], request: [(String, String)] = [], method: String = "GET") -> Bool {
        CachePolicy.storability(
            method: method, requestHeaders: HeaderFields(request.map { HeaderFields.Field($0.0, $0.1) }),
            status: status, responseHeaders: HeaderFields(headers.map { HeaderFields.Field($0.0, $0.1) })
        ).allowed
    }

    // MARK: §3 Storing

    @Test("§3: only GET responses are stored")
    func methods() {
        #expect(Self.storable([("Cache-Control", "max-age=60")]))
        #expect(!Self.storable([("Cache-Control", "max-age=60")], method: "POST"))
        #expect(!Self.storable([("Cache-Control", "max-age=60")], method: "HEAD"))
    }

    @Test("§3: heuristically cacheable statuses need no explicit freshness; others do")
    func statuses() {
        for status in [200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501] {
            #expect(Self.storable(status: status, [("Last-Modified", Self.date(-86_400))]), "\(status)")
        }
        for status in [201, 202, 302, 303, 307, 403, 500, 502, 503, 599] {
            #expect(!Self.storable(status: status, [("Last-Modified", Self.date(-86_400))]), "\(status)")
            #expect(Self.storable(status: status, [("Cache-Control", "max-age=60")]), "\(status) with max-age")
        }
        #expect(Self.storable(status: 599, [("Cache-Control", "public")]))
    }

    @Test("§3: 206, 304 and 1xx are never stored as new entries")
    func neverStored() {
        #expect(!Self.storable(status: 206, [("Cache-Control", "max-age=60")]))
        #expect(!Self.storable(status: 304, [("Cache-Control", "max-age=60")]))
        #expect(!Self.storable(status: 100, [("Cache-Control", "max-age=60")]))
    }

    @Test("§5.2.2.5, §5.2.1.5: no-store in the response or the request")
    func noStore() {
        #expect(!Self.storable([("Cache-Control", "max-age=60, no-store")]))
        #expect(!Self.storable([("Cache-Control", "max-age=60")], request: [("Cache-Control", "no-store")]))
    }

    @Test("§5.2.2.7: private may be stored by a private cache; §5.2.2.3 must-understand")
    func privateAndMustUnderstand() {
        #expect(Self.storable(status: 599, [("Cache-Control", "private")]))
        #expect(Self.storable([("Cache-Control", "must-understand, no-store, max-age=60")]))
        #expect(!Self.storable(status: 299, [("Cache-Control", "must-understand, no-store, max-age=60")]))
    }

    @Test("§4.1: Vary: * is not stored")
    func varyStar() {
        #expect(!Self.storable([("Cache-Control", "max-age=60"), ("Vary", "Accept, *")]))
        #expect(!Self.storable([("Cache-Control", "max-age=60"), ("Vary", ""), ("Vary", "*")]))
    }

    // MARK: §4.2 Freshness

    @Test("§4.2.1: max-age wins over Expires; s-maxage is ignored by a private cache")
    func lifetimeOrder() {
        let both = Self.entry([("Cache-Control", "max-age=10, s-maxage=1000"), ("Expires", Self.date(500)), ("Date", Self.date(0))])
        #expect(CachePolicy.freshnessLifetime(both) == .init(seconds: 10, source: .maxAge))
        let sOnly = Self.entry([("Cache-Control", "s-maxage=1000"), ("Date", Self.date(0))])
        #expect(CachePolicy.freshnessLifetime(sOnly).source == .none)
    }

    @Test("§4.2.1, §5.3: Expires minus Date; invalid or several Expires lines are stale")
    func expires() {
        let valid = Self.entry([("Expires", Self.date(500)), ("Date", Self.date(100))])
        #expect(CachePolicy.freshnessLifetime(valid) == .init(seconds: 400, source: .expires))
        let invalid = Self.entry([("Expires", "0"), ("Date", Self.date(0))])
        #expect(CachePolicy.freshnessLifetime(invalid) == .init(seconds: 0, source: .invalid))
        let twice = Self.entry([("Expires", Self.date(500)), ("Expires", Self.date(600))])
        #expect(CachePolicy.freshnessLifetime(twice).seconds == 0)
        let noDate = Self.entry([("Expires", Self.date(300))])
        #expect(CachePolicy.freshnessLifetime(noDate).seconds == 300)
    }

    @Test("§4.2.2: heuristic freshness is 10% of Date minus Last-Modified")
    func heuristic() {
        let entry = Self.entry([("Last-Modified", Self.date(-86_400)), ("Date", Self.date(0))])
        #expect(CachePolicy.freshnessLifetime(entry) == .init(seconds: 8640, source: .heuristic))
        let notHeuristic = Self.entry(status: 201, [("Last-Modified", Self.date(-86_400)), ("Date", Self.date(0))])
        #expect(CachePolicy.freshnessLifetime(notHeuristic).seconds == 0)
    }

    @Test("§4.2.3: current age from Age, Date, request and response times")
    func currentAge() {
        // Apparent age: the response was dated 30 s before it arrived.
        let apparent = Self.entry([("Date", Self.date(-30))])
        #expect(CachePolicy.currentAge(apparent, now: Self.t0 + 10) == 40)
        // Age plus the response delay wins when larger.
        let aged = Self.entry([("Date", Self.date(0)), ("Age", "100")], requestTime: Self.t0 - 2)
        #expect(CachePolicy.currentAge(aged, now: Self.t0) == 102)
    }

    @Test("§5.1: Age is a non-negative integer; anything else is ignored; huge values clamp to 2^31")
    func ageParsing() {
        func age(_ lines: [String]) -> Double? {
            CachePolicy.ageValue(HeaderFields(lines.map { HeaderFields.Field("Age", $0) }))
        }
        #expect(age(["120"]) == 120)
        #expect(age(["abc"]) == nil)
        #expect(age(["-7200"]) == nil)
        #expect(age(["7200.0"]) == nil)
        #expect(age(["0, 7200"]) == 0)
        #expect(age(["7200", "0"]) == 7200)
        #expect(age(["2147483649"]) == 2_147_483_648)
        #expect(age(["7200;foo=bar"]) == 7200)
    }

    // MARK: §4.2.4, §5.2 Serving

    static func action(_ entry: CachePolicy.Entry, request: [(String, String)] = [], at offset: Double) -> CachePolicy.Action {
        CachePolicy.evaluate(entry, requestHeaders: HeaderFields(request.map { HeaderFields.Field($0.0, $0.1) }), now: t0 + offset).action
    }

    @Test("§4.2: a fresh response is served; a stale one revalidated")
    func freshAndStale() {
        let entry = Self.entry([("Cache-Control", "max-age=60"), ("Date", Self.date(0))])
        #expect(Self.action(entry, at: 59) == .useStored)
        #expect(Self.action(entry, at: 60) == .revalidate)
    }

    @Test("§5.2.2.4, §5.2.1.4, §5.4: no-cache in the response, the request, or Pragma")
    func noCache() {
        let fresh = Self.entry([("Cache-Control", "max-age=60")])
        #expect(Self.action(Self.entry([("Cache-Control", "max-age=60, no-cache")]), at: 1) == .revalidate)
        #expect(Self.action(fresh, request: [("Cache-Control", "no-cache")], at: 1) == .revalidate)
        #expect(Self.action(fresh, request: [("Pragma", "no-cache")], at: 1) == .revalidate)
        #expect(Self.action(fresh, request: [("Pragma", "no-cache"), ("Cache-Control", "max-stale")], at: 1) == .useStored)
    }

    @Test("§5.2.1.1, §5.2.1.3: request max-age and min-fresh")
    func requestLimits() {
        let entry = Self.entry([("Cache-Control", "max-age=100")])
        #expect(Self.action(entry, request: [("Cache-Control", "max-age=10")], at: 20) == .revalidate)
        #expect(Self.action(entry, request: [("Cache-Control", "max-age=30")], at: 20) == .useStored)
        #expect(Self.action(entry, request: [("Cache-Control", "min-fresh=90")], at: 20) == .revalidate)
        #expect(Self.action(entry, request: [("Cache-Control", "min-fresh=50")], at: 20) == .useStored)
    }

    @Test("§5.2.1.2, §5.2.2.2: max-stale serves stale unless must-revalidate")
    func maxStale() {
        let entry = Self.entry([("Cache-Control", "max-age=10")])
        #expect(Self.action(entry, request: [("Cache-Control", "max-stale")], at: 1000) == .useStored)
        #expect(Self.action(entry, request: [("Cache-Control", "max-stale=30")], at: 40) == .useStored)
        #expect(Self.action(entry, request: [("Cache-Control", "max-stale=30")], at: 41) == .revalidate)
        let strict = Self.entry([("Cache-Control", "max-age=10, must-revalidate")])
        #expect(Self.action(strict, request: [("Cache-Control", "max-stale")], at: 1000) == .revalidate)
    }

    @Test("RFC 5861 §3: stale-while-revalidate serves stale within its window")
    func staleWhileRevalidate() {
        let entry = Self.entry([("Cache-Control", "max-age=10, stale-while-revalidate=30")])
        #expect(Self.action(entry, at: 20) == .useStoredAndRevalidate)
        #expect(Self.action(entry, at: 41) == .revalidate)
    }

    @Test("RFC 5861 §4: stale-if-error within its window, never with must-revalidate")
    func staleIfError() {
        let entry = Self.entry([("Cache-Control", "max-age=10, stale-if-error=60")])
        #expect(CachePolicy.staleIfError(entry, requestHeaders: [], now: Self.t0 + 50).allowed)
        #expect(!CachePolicy.staleIfError(entry, requestHeaders: [], now: Self.t0 + 71).allowed)
        let strict = Self.entry([("Cache-Control", "max-age=10, stale-if-error=60, must-revalidate")])
        #expect(!CachePolicy.staleIfError(strict, requestHeaders: [], now: Self.t0 + 50).allowed)
        let plain = Self.entry([("Cache-Control", "max-age=10")])
        #expect(CachePolicy.staleIfError(plain, requestHeaders: [("Cache-Control", "stale-if-error=100")], now: Self.t0 + 50).allowed)
    }

    // MARK: §4.1 Vary

    @Test("§4.1: Vary selects on the request's values, normalized")
    func vary() {
        let entry = Self.entry(
            [("Cache-Control", "max-age=60"), ("Vary", "Accept-Language, Foo")],
            request: [("Accept-Language", "en, fr"), ("Foo", "1")])
        #expect(Self.action(entry, request: [("accept-language", "en,fr"), ("foo", "1")], at: 1) == .useStored)
        #expect(Self.action(entry, request: [("Accept-Language", "en"), ("Accept-Language", "fr"), ("Foo", "1")], at: 1) == .useStored)
        #expect(Self.action(entry, request: [("Accept-Language", "de"), ("Foo", "1")], at: 1) == .fetch)
        #expect(Self.action(entry, request: [("Accept-Language", "en, fr")], at: 1) == .fetch)
        let absent = Self.entry([("Cache-Control", "max-age=60"), ("Vary", "Foo")])
        #expect(Self.action(absent, at: 1) == .useStored)
        #expect(Self.action(absent, request: [("Foo", "")], at: 1) == .fetch)
    }

    // MARK: §4.3 Validation

    @Test("§4.3.1: the conditional request carries the ETag and Last-Modified")
    func conditional() {
        let entry = Self.entry([("ETag", "\"v1\""), ("Last-Modified", Self.date(-100))])
        let headers = CachePolicy.conditionalHeaders(entry)
        #expect(headers["If-None-Match"] == "\"v1\"")
        #expect(headers["If-Modified-Since"] == Self.date(-100))
        #expect(CachePolicy.conditionalHeaders(Self.entry([])).isEmpty)
    }

    @Test("§4.3.4: a 304 selects the entry whose validator it carries")
    func notModifiedSelection() {
        let entry = Self.entry([("ETag", "\"v1\""), ("Last-Modified", Self.date(-100))])
        #expect(CachePolicy.notModifiedSelects(entry, notModifiedHeaders: [("ETag", "W/\"v1\"")]).allowed)
        #expect(!CachePolicy.notModifiedSelects(entry, notModifiedHeaders: [("ETag", "\"v2\"")]).allowed)
        #expect(CachePolicy.notModifiedSelects(entry, notModifiedHeaders: [("Last-Modified", Self.date(-100))]).allowed)
        #expect(!CachePolicy.notModifiedSelects(entry, notModifiedHeaders: [("Last-Modified", Self.date(-50))]).allowed)
        #expect(!CachePolicy.notModifiedSelects(entry, notModifiedHeaders: []).allowed)
        #expect(CachePolicy.notModifiedSelects(Self.entry([("Cache-Control", "max-age=1")]), notModifiedHeaders: []).allowed)
    }

    @Test("§3.2: a 304's fields replace the stored ones, except Content-Length and connection fields")
    func merge304() {
        let stored: HeaderFields = [("Content-Length", "10"), ("Foo", "old"), ("X-Keep", "yes"), ("Set-Cookie", "a=1"), ("Set-Cookie", "b=2")]
        let notModified: HeaderFields = [("Content-Length", "0"), ("Foo", "new"), ("Set-Cookie", "c=3"), ("Connection", "X-Hop"), ("X-Hop", "1"), ("Keep-Alive", "5")]
        let merged = CachePolicy.updatedHeaders(stored, with: notModified)
        #expect(merged["Content-Length"] == "10")
        #expect(merged["Foo"] == "new")
        #expect(merged["X-Keep"] == "yes")
        #expect(merged.values("Set-Cookie") == ["c=3"])
        #expect(!merged.contains("X-Hop"))
        #expect(!merged.contains("Keep-Alive"))
    }

    @Test("§5.1: a served response carries its current Age")
    func servedAge() {
        let entry = Self.entry([("Cache-Control", "max-age=60"), ("Age", "5")])
        #expect(CachePolicy.servedHeaders(entry, now: Self.t0 + 10)["Age"] == "15")
    }

    // MARK: §4.4 Invalidation and §2 keys

    @Test("§4.4: a successful unsafe method invalidates the URL and same-origin Location / Content-Location")
    func invalidation() throws {
        let url = try #require(URL(string: "https://example.com/a/b"))
        let headers: HeaderFields = [("Location", "/c"), ("Content-Location", "https://other.example/d")]
        let urls = CachePolicy.invalidatedURLs(method: "POST", status: 201, url: url, responseHeaders: headers)
        #expect(urls.map(\.absoluteString) == ["https://example.com/a/b", "https://example.com/c"])
        #expect(CachePolicy.invalidatedURLs(method: "POST", status: 500, url: url, responseHeaders: headers).isEmpty)
        #expect(CachePolicy.invalidatedURLs(method: "GET", status: 200, url: url, responseHeaders: headers).isEmpty)
        #expect(CachePolicy.invalidatedURLs(method: "DELETE", status: 302, url: url, responseHeaders: []).count == 1)
    }

    @Test("§2: the primary key normalizes scheme, host, default port and fragment; keeps the query")
    func primaryKey() throws {
        func key(_ text: String) throws -> String? { CachePolicy.primaryKey(try #require(URL(string: text))) }
        #expect(try key("HTTP://Example.COM:80/a?b=1#frag") == "http://example.com/a?b=1")
        #expect(try key("https://example.com") == "https://example.com/")
        #expect(try key("https://example.com:8443/x") == "https://example.com:8443/x")
        #expect(try key("https://user:pw@example.com/x") == "https://example.com/x")
        #expect(try key("ftp://example.com/x") == nil)
        #expect(try key("http://example.com/a?b=2") != key("http://example.com/a?b=1"))
    }
}

/// The fast path of the primary key agrees with URLComponents.
@Suite struct PrimaryKeyFastPathTests {
    @Test(
        "§2: normalized URLs are recognised; every other form goes through URLComponents",
        arguments: [
            ("https://example.com/a?b=1", true), ("http://example.com/", true), ("http://a.b-c.d:8080/x", true),
            ("https://Example.com/a", false), ("HTTPS://example.com/a", false), ("https://example.com", false),
            ("https://example.com:443/a", false), ("http://example.com:80/a", false), ("https://u:p@example.com/a", false),
            ("https://example.com/a#f", false), ("https://[::1]/a", false), ("https://example.com?q", false),
            ("https://:80/a", false), ("ftp://example.com/a", false),
        ])
    func fastPath(url: String, normalized: Bool) throws {
        #expect(CachePolicy.isNormalizedKey(url) == normalized)
        if normalized {
            var components = try #require(URLComponents(string: url))
            components.host = components.host?.lowercased()
            #expect(CachePolicy.primaryKey(try #require(URL(string: url))) == components.string)
        }
    }

    @Test func hostOfKey() {
        #expect(CachePolicy.host(ofKey: "https://example.com:8443/a") == "example.com")
        #expect(CachePolicy.host(ofKey: "http://[::1]:80/a") == "::1")
        #expect(CachePolicy.host(ofKey: "http://example.com?x") == "example.com")
    }
}

/// Normalisations beyond the RFC's minimum that browsers also make.
@Suite struct CachePolicyNormalisationTests {
    static let t0 = 1_800_000_000.0

    @Test("RFC 9110 §12.5.4: Accept-Language variants match regardless of order and case")
    func acceptLanguage() {
        let entry = CachePolicy.Entry(
            status: 200, responseHeaders: [("Cache-Control", "max-age=60"), ("Vary", "Accept-Language")],
            requestHeaders: [("Accept-Language", "en, de")], requestTime: Self.t0, responseTime: Self.t0)
        #expect(CachePolicy.varyMatches(entry, requestHeaders: [("Accept-Language", "de, en")]).allowed)
        #expect(CachePolicy.varyMatches(entry, requestHeaders: [("Accept-Language", "eN, De")]).allowed)
        #expect(!CachePolicy.varyMatches(entry, requestHeaders: [("Accept-Language", "fr")]).allowed)
    }

    @Test("Vary's list splits at every comma byte, even one a combining mark follows (a single character to Swift)")
    func varyCommaBeforeCombiningMark() {
        let names = CachePolicy.varyFields([("Vary", "Accept,\u{0CF3}X-Mark , Origin")])
        #expect(names == ["accept", "\u{0CF3}x-mark", "origin"])
        #expect(names?.allSatisfy { !$0.unicodeScalars.contains(",") } == true)
        let entry = CachePolicy.Entry(
            status: 200, responseHeaders: [("Cache-Control", "max-age=60"), ("Vary", "X-Tags")],
            requestHeaders: [("X-Tags", "a,\u{0301}b")], requestTime: Self.t0, responseTime: Self.t0)
        #expect(CachePolicy.varyMatches(entry, requestHeaders: [("X-Tags", "a , \u{0301}b")]).allowed)
    }

    @Test("RFC 9110 §5.6.1: Connection, If-None-Match and Age split at comma bytes outside quoted strings")
    func listsSplitAtCommaBytes() {
        // An entity tag may hold a comma (RFC 9110 §8.8.3, etagc): the
        // request's tags and the stored one go out whole.
        let tagged = CachePolicyTests.entry([("ETag", "\"a,b\"")])
        let headers = CachePolicy.revalidationHeaders(tagged, requestHeaders: [("If-None-Match", "\"x,y\" , W/\"z\"")])
        #expect(headers["If-None-Match"] == "\"x,y\", W/\"z\", \"a,b\"")
        // A Prepend character before a comma, or a combining mark after it,
        // makes one Character of the comma: the list still has two members.
        let cleaned = CachePolicy.removingConnectionFields([("Connection", "x-a\u{0600},x-b"), ("X-B", "1"), ("X-C", "2")])
        #expect(cleaned.map(\.name) == ["X-C"])
        #expect(CachePolicy.ageValue([("Age", "5,\u{0301}6")]) == 5)
        // Empty members list nothing: the same variant as without them.
        #expect(CachePolicy.normalizedValue("X-Tags", in: [("X-Tags", "a,, b ,")]) == "a,b")
        // Vary lists field names, never quoted strings: a quote does not
        // hide the commas after it (the fuzzer's input, in its corpus).
        let names = CachePolicy.varyFields([("Vary", "\u{FF}*\"  x, y")])
        #expect(names == ["\u{FF}*\"  x", "y"])
    }

    @Test("RFC 8246: an immutable fresh response is not revalidated on a reload (max-age=0), only stale")
    func immutable() {
        let entry = CachePolicy.Entry(
            status: 200, responseHeaders: [("Cache-Control", "max-age=100, immutable")],
            requestHeaders: [], requestTime: Self.t0, responseTime: Self.t0)
        #expect(CachePolicy.evaluate(entry, requestHeaders: [("Cache-Control", "max-age=0")], now: Self.t0 + 10).action == .useStored)
        #expect(CachePolicy.evaluate(entry, requestHeaders: [("Cache-Control", "no-cache")], now: Self.t0 + 10).action == .revalidate)
        #expect(CachePolicy.evaluate(entry, requestHeaders: [("Cache-Control", "max-age=0")], now: Self.t0 + 200).action == .revalidate)
    }
}
