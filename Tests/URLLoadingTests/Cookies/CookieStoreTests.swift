import Foundation
import Locking
import Testing
import TestSupport
@testable import URLLoading

/// The cookie stores on their own: rules the conformance
/// suites do not reach (SameSite, accept policies, prefixes, limits and
/// eviction, persistence, the Netscape format, secrets in descriptions).
@Suite struct CookieStoreTests {
    static let t0 = Date(timeIntervalSince1970: 1_800_000_000)
    static let page = URL(string: "https://www.example.com/docs/page")!

    final class Clock: Sendable {
        private let current = Lock(CookieStoreTests.t0)
        func advance(_ seconds: TimeInterval) { current.withLock { $0 += seconds } }
        var now: @Sendable () -> Date { { [self] in current.withLock { $0 } } }
    }

    @Test("Header order is longer paths first, then earlier creation; path and domain matching")
    func orderAndMatching() {
        let clock = Clock()
        let store = CookieStore(clock: clock.now)
        store.setCookies(["a=1; Path=/", "b=2; Path=/docs", "c=3"], for: Self.page)
        clock.advance(1)
        store.setCookies(["d=4; Path=/docs; Domain=example.com"], for: Self.page)
        #expect(store.cookieHeader(for: Self.page) == "b=2; c=3; d=4; a=1")
        #expect(store.cookieHeader(for: URL(string: "https://www.example.com/docsmore")!) == "a=1")
        #expect(store.cookieHeader(for: URL(string: "https://api.example.com/docs/x")!) == "d=4")
        #expect(store.cookieHeader(for: URL(string: "https://example.org/docs/x")!) == nil)
        #expect(store.cookieHeader(for: URL(string: "ftp://www.example.com/docs/x")!) == nil)
    }

    @Test("Expires and Max-Age (Max-Age wins), expiry on read, deletion by an expired cookie, the 400-day cap")
    func expiry() {
        let clock = Clock()
        let store = CookieStore(clock: clock.now)
        store.setCookies(
            [
                "short=1; Max-Age=10", "dated=2; Expires=\(HTTPDate.format(Self.t0.timeIntervalSince1970 + 20))",
                "both=3; Max-Age=30; Expires=\(HTTPDate.format(Self.t0.timeIntervalSince1970 + 5))",
                "far=4; Max-Age=999999999", "session=5",
            ], for: Self.page)
        let far = store.allCookies.first { $0.name == "far" }
        #expect(far?.expiresDate == Self.t0.addingTimeInterval(400 * 86_400))
        #expect(store.allCookies.first { $0.name == "session" }?.isSessionOnly == true)
        clock.advance(15)
        #expect(store.cookieHeader(for: Self.page) == "dated=2; both=3; far=4; session=5")
        clock.advance(10)
        #expect(store.cookieHeader(for: Self.page) == "both=3; far=4; session=5")
        store.setCookies(["far=gone; Max-Age=0"], for: Self.page)
        #expect(store.cookieHeader(for: Self.page) == "both=3; session=5")
    }

    @Test("Secure only over https and never set from http; an http cookie may not shadow a Secure one")
    func secure() {
        let store = CookieStore(clock: Clock().now)
        let http = URL(string: "http://www.example.com/")!
        #expect(store.setCookies(["s=1; Secure"], for: http).isEmpty)
        store.setCookies(["s=1; Secure; Path=/"], for: Self.page)
        #expect(store.cookieHeader(for: http) == nil)
        #expect(store.cookieHeader(for: Self.page) == "s=1")
        #expect(store.setCookies(["s=evil"], for: http).isEmpty)
        #expect(store.cookieHeader(for: Self.page) == "s=1")
    }

    @Test("__Secure- and __Host- prefixes; Domain attributes that are public suffixes or other sites are refused")
    func prefixesAndDomains() {
        let store = CookieStore(clock: Clock().now)
        #expect(store.setCookies(["__Secure-a=1"], for: Self.page).isEmpty)
        #expect(store.setCookies(["__Secure-a=1; Secure"], for: Self.page).count == 1)
        #expect(store.setCookies(["__Host-b=1; Secure; Domain=example.com"], for: Self.page).isEmpty)
        #expect(store.setCookies(["__Host-b=1; Secure; Path=/docs"], for: Self.page).isEmpty)
        #expect(store.setCookies(["__host-b=1; Secure; Path=/"], for: Self.page).count == 1)
        #expect(store.setCookies(["c=1; Domain=com"], for: Self.page).isEmpty)
        #expect(store.setCookies(["c=1; Domain=co.uk"], for: URL(string: "https://www.example.co.uk/")!).isEmpty)
        #expect(store.setCookies(["c=1; Domain=github.io"], for: URL(string: "https://me.github.io/")!).isEmpty)
        #expect(store.setCookies(["c=1; Domain=other.com"], for: Self.page).isEmpty)
        #expect(store.setCookies(["c=1\u{1}x"], for: Self.page).isEmpty)
        #expect(store.setCookies([String(repeating: "v", count: 4095) + "=ab"], for: Self.page).isEmpty)
        #expect(store.setCookies(["d=1; Domain=EXAMPLE.com"], for: Self.page).first?.domain == ".example.com")
    }

    @Test("Accept policies always, never and only from the main document's domain")
    func acceptPolicies() {
        let store = CookieStore(clock: Clock().now)
        let tracker = URL(string: "https://tracker.test/pixel")!
        #expect(store.setCookies(["a=1"], for: tracker, mainDocumentURL: Self.page, policy: .never).isEmpty)
        #expect(store.setCookies(["a=1"], for: tracker, mainDocumentURL: Self.page, policy: .onlyFromMainDocumentDomain).isEmpty)
        #expect(store.setCookies(["a=1"], for: URL(string: "https://cdn.example.com/")!, mainDocumentURL: Self.page, policy: .onlyFromMainDocumentDomain).count == 1)
        #expect(store.setCookies(["b=1"], for: tracker, mainDocumentURL: nil, policy: .onlyFromMainDocumentDomain).count == 1)
        #expect(store.setCookies(["c=1"], for: tracker, mainDocumentURL: Self.page, policy: .always).count == 1)
        store.cookieAcceptPolicy = .never
        #expect(store.setCookies(["d=1"], for: tracker).isEmpty)
    }

    @Test("SameSite Lax and Strict neither sent to nor set by another site's requests")
    func sameSite() {
        let store = CookieStore(clock: Clock().now)
        store.setCookies(["n=1; SameSite=None; Secure", "l=2; SameSite=Lax", "s=3; SameSite=Strict", "u=4"], for: Self.page)
        let otherSite = URL(string: "https://news.test/")!
        #expect(store.cookieHeader(for: Self.page, mainDocumentURL: otherSite) == "n=1; u=4")
        #expect(store.cookieHeader(for: Self.page, mainDocumentURL: URL(string: "https://example.com/")!) == "n=1; l=2; s=3; u=4")
        #expect(store.setCookies(["x=1; SameSite=Strict"], for: Self.page, mainDocumentURL: otherSite, policy: .always).isEmpty)
        #expect(store.allCookies.first { $0.name == "s" }?.sameSite == .strict)
    }

    @Test("At most 50 per domain and the total limit; expired first, then least recently used")
    func eviction() {
        let clock = Clock()
        let store = CookieStore(limits: (perDomain: 50, total: 120), clock: clock.now)
        let www = URL(string: "https://www.example.com/")!
        let other = URL(string: "https://a.example.com/")!
        store.setCookies(["expiring=1; Max-Age=5"], for: www)
        clock.advance(1)
        store.setCookies(["c0=0"], for: other)
        for n in 1...48 {
            clock.advance(1)
            store.setCookies(["c\(n)=\(n)"], for: www)
        }
        // c0 is sent again, so c1 becomes the least recently used.
        #expect(store.cookieHeader(for: other) == "c0=0")
        clock.advance(1)
        store.setCookies(["late=1"], for: www)
        var names = Set(store.allCookies.map(\.name))
        #expect(names.count == 50)
        #expect(!names.contains("expiring") && names.contains("c0") && names.contains("c1") && names.contains("late"))
        clock.advance(1)
        store.setCookies(["later=1"], for: www)
        names = Set(store.allCookies.map(\.name))
        #expect(names.count == 50)
        #expect(names.contains("later") && names.contains("c0") && !names.contains("c1"))
        // Over the total: down to nine tenths, least recently used first, across domains.
        for site in 0..<3 {
            for n in 0..<30 {
                clock.advance(1)
                store.setCookies(["s\(n)=1"], for: URL(string: "https://site\(site).test/")!)
            }
        }
        let all = store.allCookies
        // 140 cookies in all: cut to 108 at the 121st, and again after 13 more, then 6 more.
        #expect(all.count == 114)
        #expect(all.contains { $0.domain == "site2.test" && $0.name == "s29" })
        #expect(!all.contains { $0.name == "c2" })
    }

    @Test("Delete one, remove since a date, remove all; programmatic cookies replace by name, domain and path")
    func deletion() {
        let clock = Clock()
        let store = CookieStore(clock: clock.now)
        store.setCookies(["a=1", "b=2"], for: Self.page)
        clock.advance(60)
        store.setCookie(Cookie(name: "c", value: "3", domain: ".example.com", creationDate: clock.now()))
        store.setCookie(Cookie(name: "c", value: "4", domain: ".example.com", creationDate: clock.now()))
        #expect(store.allCookies.count == 3)
        #expect(store.cookies(for: Self.page)?.first { $0.name == "c" }?.value == "4")
        store.removeCookies(since: Self.t0.addingTimeInterval(30))
        #expect(Set(store.allCookies.map(\.name)) == ["a", "b"])
        if let a = store.allCookies.first(where: { $0.name == "a" }) { store.deleteCookie(a) }
        #expect(store.allCookies.map(\.name) == ["b"])
        store.removeAll()
        #expect(store.allCookies.isEmpty)
    }

    @Test("Secrets: a cookie's and a store's descriptions never show values")
    func descriptionsHideValues() {
        let store = CookieStore(clock: Clock().now)
        let cookies = store.setCookies(["session=s3cr3t-token; Secure; HttpOnly; SameSite=Lax"], for: Self.page)
        let text = "\(cookies) \(store) \(String(reflecting: cookies))"
        #expect(!text.contains("s3cr3t"))
        #expect(text.contains("session"))
    }

    @Test("A joined Set-Cookie field is split back at cookie boundaries, not at the comma of a date")
    func splitting() {
        #expect(
            SetCookieSplitter.split("a=1; Expires=Wed, 09 Jun 2021 10:18:14 GMT, b=2; Path=/") == [
                "a=1; Expires=Wed, 09 Jun 2021 10:18:14 GMT", "b=2; Path=/",
            ])
        #expect(SetCookieSplitter.split("a=x,y") == ["a=x,y"])
    }

    // MARK: Persistence

    @Test("The SQLite store keeps persistent cookies across reopening, drops session cookies unless told, at mode 0600")
    func persistence() throws {
        let directory = TemporaryDirectory()
        let clock = Clock()
        do {
            let store = try CookieStore(directory: directory.url, clock: clock.now)
            store.setCookies(["keep=1; Max-Age=3600; HttpOnly; SameSite=Strict", "session=2", "gone=3; Max-Age=10"], for: Self.page)
            #expect(store.allCookies.count == 3)
        }
        let mode = try FileManager.default.attributesOfItem(atPath: directory.path("Cookies.sqlite"))[.posixPermissions] as? Int
        #expect(mode == 0o600)
        do {
            let store = try CookieStore(directory: directory.url, keepSessionCookies: true, clock: clock.now)
            #expect(Set(store.allCookies.map(\.name)) == ["keep", "session", "gone"])
        }
        clock.advance(60)
        let store = try CookieStore(directory: directory.url, clock: clock.now)
        #expect(store.allCookies.map(\.name) == ["keep"])
        let keep = store.allCookies.first
        #expect(keep?.isHTTPOnly == true && keep?.sameSite == .strict && keep?.domain == "www.example.com" && keep?.isHostOnly == true)
        #expect(keep?.creationDate == Self.t0)
        #expect(store.cookieHeader(for: Self.page) == "keep=1")
    }

    @Test("Changes reach the store's file or database before the call returns; deletions too", arguments: CacheBackend.allCases)
    func writeThrough(_ backend: CacheBackend) throws {
        let place = try CookiePlace(backend)
        let first = try place.open(clock: Clock().now)
        first.setCookies(["a=1", "b=2; Max-Age=3600; Secure; HttpOnly; SameSite=Lax"], for: Self.page)
        let second = try place.open(clock: Clock().now)
        let b = second.allCookies.first { $0.name == "b" }
        #expect(b?.isSecure == true && b?.isHTTPOnly == true && b?.sameSite == .lax && b?.expiresDate == Self.t0.addingTimeInterval(3600))
        if let b = first.allCookies.first(where: { $0.name == "b" }) { first.deleteCookie(b) }
        let third = try place.open(clock: Clock().now)
        #expect(third.allCookies.map(\.name) == ["a"])
        _ = first
    }

    @Test("Last-access times reach the store on flush (lookups themselves never write)", arguments: CacheBackend.allCases)
    func lastAccessPersisted(_ backend: CacheBackend) throws {
        let place = try CookiePlace(backend)
        let clock = Clock()
        let store = try place.open(clock: clock.now)
        store.setCookies(["a=1"], for: Self.page)
        clock.advance(500)
        #expect(store.cookieHeader(for: Self.page) == "a=1")
        let before = try place.open(clock: clock.now)
        #expect(before.allCookies.first?.lastAccessDate == Self.t0)
        try store.flush()
        let after = try place.open(clock: clock.now)
        #expect(after.allCookies.first?.lastAccessDate == Self.t0.addingTimeInterval(500))
    }

    @Test("Bad input: a damaged cookie file is moved aside and the store starts empty")
    func damagedFile() throws {
        let directory = TemporaryDirectory()
        try Data(repeating: 0x41, count: 8192).write(to: directory.url.appendingPathComponent("Cookies.sqlite"))
        // Damaged, but private as the library made it (one others can read is refused).
        chmod(directory.path("Cookies.sqlite"), 0o600)
        let store = try CookieStore(directory: directory.url, clock: Clock().now)
        #expect(store.allCookies.isEmpty)
        store.setCookies(["a=1"], for: Self.page)
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.url.path)
        #expect(names.contains { $0.hasPrefix("Cookies.sqlite.corrupt-") })
    }

    // MARK: Netscape format

    @Test("K: Netscape cookies.txt export and import round-trip, HttpOnly and session cookies included")
    func netscapeRoundTrip() {
        let store = CookieStore(clock: Clock().now)
        store.setCookies(["a=1; Max-Age=3600; Domain=example.com; Path=/docs", "h=2; HttpOnly; Secure", "s=3"], for: Self.page)
        let text = store.exportNetscapeFormat()
        #expect(text.contains(".example.com\tTRUE\t/docs\tFALSE\t\(Int(Self.t0.timeIntervalSince1970) + 3600)\ta\t1"))
        #expect(text.contains("#HttpOnly_www.example.com\tFALSE\t/docs\tTRUE\t0\th\t2"))
        let copy = CookieStore(clock: Clock().now)
        let result = copy.importNetscapeFormat(text + "garbage line\n")
        #expect(result.imported == 3 && result.skippedLines == 1)
        #expect(copy.cookieHeader(for: Self.page) == store.cookieHeader(for: Self.page))
        #expect(copy.allCookies.first { $0.name == "h" }?.isHTTPOnly == true)
    }
}

extension CookieStoreTests {
    @Test("cookies.txt lines with control characters in a field, or a domain that is no host name, are skipped: such a cookie would make every request to its site fail, or not survive a round trip")
    func netscapeControlCharacters() throws {
        // Found by tools/fuzz cookies-txt: a value ending in a vertical tab was
        // imported, then could not be written back, and sending it is refused.
        let store = CookieStore(clock: Clock().now)
        let text =
            "www.example.com\tFALSE\t/\tFALSE\t0\tv\txy\u{0B}\n"
            + "www.example.com\tFALSE\t/\tFALSE\t0\t\u{01}\u{00}sid\tz\n"
            + "www.example.com\tFALSE\t/p\u{7F}\tFALSE\t0\tp\t1\n"
            + "www.exa\u{00}mple.com\tFALSE\t/\tFALSE\t0\td\t1\n"
            + "www.example.com\tFALSE\t/\tFALSE\t0\tok\t1\n"
            // Not host names (also found by the fuzzer: "#..." would be written back as a comment).
            + ".#HttpOnly_example.com\tFALSE\t/\tFALSE\t0\th\t1\n"
            + "exa mple.com\tFALSE\t/\tFALSE\t0\ts\t1\n"
            + "ex%41mple.com\tFALSE\t/\tFALSE\t0\tq\t1\n"
            + "..\tTRUE\t/\tFALSE\t0\tdots\t1\n"
            + "..example.com\tTRUE\t/\tFALSE\t0\tdots2\t1\n"
            // A tab followed by a combining mark still separates fields.
            + "www.example.com\tFALSE\t/\tFALSE\t0\tcombining\t\u{301}x\n"
        let result = store.importNetscapeFormat(text)
        #expect(result.imported == 2 && result.skippedLines == 9)
        #expect(store.allCookies.map(\.name).sorted() == ["combining", "ok"])
        #expect(store.allCookies.first { $0.name == "combining" }?.value == "\u{301}x")
    }

    @Test("Foundation's HTTPCookie converts both ways, scope and Secure kept")
    func httpCookieBridge() throws {
        let store = CookieStore(clock: Clock().now)
        let stored = try #require(store.setCookies(["a=1; Domain=example.com; Path=/docs; Secure; SameSite=Strict; Max-Age=60"], for: Self.page).first)
        let foundation = try #require(stored.httpCookie)
        #expect(foundation.name == "a" && foundation.value == "1" && foundation.path == "/docs" && foundation.isSecure)
        let back = Cookie(foundation)
        #expect(back.key == stored.key)
        #expect(back.isSecure)
        #expect(back.expiresDate.map { abs($0.timeIntervalSince(stored.expiresDate ?? .distantPast)) < 1 } == true)
    }

    @Test("Apple's HTTPCookie class members: cookies from response fields under the store's rules, request fields, properties")
    func applesCookieMembers() throws {
        let url = Self.page
        let fields = ["set-cookie": "a=1; Path=/; Secure, b=2; Expires=Wed, 09 Jun 2100 10:18:14 GMT; Domain=example.com, bad=3; Domain=other.test"]
        let cookies = Cookie.cookies(withResponseHeaderFields: fields, for: url)
        #expect(cookies.map(\.name) == ["a", "b"], "the cookie for another domain is refused")
        #expect(cookies.first?.isSecure == true && cookies.last?.domain == ".example.com" && cookies.last?.isHostOnly == false)
        #expect(Cookie.requestHeaderFields(with: cookies) == ["Cookie": "a=1; b=2"])
        #expect(Cookie.requestHeaderFields(with: []).isEmpty)
        let made = try #require(Cookie(properties: [.name: "n", .value: "v", .domain: ".example.com", .path: "/docs", .secure: "TRUE"]))
        #expect(made.name == "n" && made.domain == ".example.com" && !made.isHostOnly && made.path == "/docs" && made.isSecure)
        #expect(made.properties?[.name] as? String == "n")
        #expect(Cookie(properties: [.value: "no name"]) == nil)
    }

    @Test("Apple's HTTPCookieStorage shapes: optional cookie lists, setCookies of cookies under the accept policy, a task's cookies")
    func applesShapes() async throws {
        let store = CookieStore()
        #expect(store.cookies?.isEmpty == true)
        let page = Self.page
        let made = Cookie(name: "m", value: "1", domain: "www.example.com")
        store.setCookies([made], for: page, mainDocumentURL: URL(string: "https://www.example.com/"))
        #expect(store.cookies(for: page)?.map(\.name) == ["m"])
        // Cross-site under onlyFromMainDocumentDomain, and anything under never, is refused.
        store.cookieAcceptPolicy = .onlyFromMainDocumentDomain
        store.setCookies([Cookie(name: "x", value: "1", domain: "www.example.com")], for: page, mainDocumentURL: URL(string: "https://other.test/"))
        store.cookieAcceptPolicy = .never
        store.setCookies([Cookie(name: "n", value: "1", domain: "www.example.com")], for: page, mainDocumentURL: nil)
        #expect(store.cookies?.map(\.name) == ["m"])
        store.cookieAcceptPolicy = .always
        // A task's current request decides which cookies are stored and read.
        let session = Session(configuration: .ephemeral)
        let task = session.dataTask(with: page)
        store.storeCookies([Cookie(name: "t", value: "2", domain: "www.example.com", path: "/docs")], for: task)
        let read = Lock<[String]?>(nil)
        let latch = CompletionLatch()
        store.getCookiesFor(task) { cookies in
            read.withLock { $0 = cookies?.map(\.name) }
            latch.open()
        }
        await latch.wait()
        #expect(read.withLock { $0 } == ["t", "m"])
        task.cancel()
        session.invalidateAndCancel()
    }
}

/// Without the Public Suffix List.
@Suite struct MissingPublicSuffixListTests {
    @Test("Without the list, a Domain cookie is stored host-only: evil.co.uk cannot set one for co.uk's other sites")
    func domainCookiesHostOnly() throws {
        let store = CookieStore(publicSuffixes: .unavailable)
        let evil = try #require(URL(string: "https://evil.co.uk/"))
        let stored = store.setCookies(["a=1; Domain=co.uk", "b=2; Domain=evil.co.uk"], for: evil, mainDocumentURL: evil, policy: .always)
        #expect(stored.map(\.name).sorted() == ["a", "b"])
        #expect(stored.allSatisfy { $0.isHostOnly && $0.domain == "evil.co.uk" })
        #expect(store.cookies(for: try #require(URL(string: "https://other.co.uk/")), mainDocumentURL: nil).isEmpty)
        #expect(store.cookies(for: try #require(URL(string: "https://www.evil.co.uk/")), mainDocumentURL: nil).isEmpty)
        #expect(store.cookies(for: evil, mainDocumentURL: nil).map(\.name).sorted() == ["a", "b"])
        // With an empty but real list the old rule stands: only top-level domains are public.
        #expect(PublicSuffixList(rules: "").isAvailable && !PublicSuffixList.unavailable.isAvailable)
    }
}
