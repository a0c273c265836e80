import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Migrations
import Storage
import Testing
import TestSupport
@testable import URLLoading

/// What Apple's `HTTPCookie` keeps from RFC 2965 properties — the version,
/// the comment and its URL, the port list — read from Apple's property
/// keys, given back in them, kept by the stores, and the port list
/// restricting where the cookie goes.
@Suite struct CookieRFC2965Tests {
    static var properties: [HTTPCookiePropertyKey: Any] {
        [
            .name: "pref", .value: "dark", .domain: "example.com", .path: "/",
            .version: "1", .comment: "The theme you chose", .commentURL: "https://example.com/cookies", .port: "8080, 8443",
        ]
    }

    @Test("Version, comment, comment URL and port list come from Apple's property keys and go back into them")
    func propertiesRoundTrip() throws {
        let cookie = try #require(Cookie(properties: Self.properties))
        #expect(cookie.version == 1)
        #expect(cookie.comment == "The theme you chose")
        #expect(cookie.commentURL == URL(string: "https://example.com/cookies"))
        #expect(cookie.portList == [8080, 8443])
        let back = try #require(cookie.properties)
        #expect(back[.version] as? String == "1")
        #expect(back[.comment] as? String == "The theme you chose")
        #expect(back[.commentURL] as? URL == URL(string: "https://example.com/cookies"))
        #expect(back[.port] as? String == "8080,8443")
        #expect(Cookie(properties: back) == cookie)
        // A cookie without them is a version 0 cookie for any port.
        let plain = try #require(Cookie(properties: [.name: "a", .value: "1", .domain: "example.com", .path: "/"]))
        #expect(plain.version == 0 && plain.comment == nil && plain.commentURL == nil && plain.portList == nil)
        var anyPort = cookie
        anyPort.portList = nil
        #expect(anyPort != cookie, "the RFC 2965 attributes take part in equality")
        // Ports that cannot be a URL's are left out, never trapped on.
        var odd = Self.properties
        odd[.port] = "0, 70000, -1, x, 443"
        #expect(Cookie(properties: odd)?.portList == [443])
    }

    @Test("A cookie with a port list goes only to those ports, the scheme's default port included")
    func portListRestrictsSending() {
        let store = CookieStore()
        var cookie = Cookie(name: "pref", value: "dark", domain: "example.com")
        cookie.portList = [8080, 443]
        store.setCookie(cookie)
        store.setCookie(Cookie(name: "any", value: "1", domain: "example.com"))
        #expect(store.cookieHeader(for: URL(string: "http://example.com:8080/")!) == "pref=dark; any=1")
        #expect(store.cookieHeader(for: URL(string: "https://example.com/")!) == "pref=dark; any=1", "443 is https's port")
        #expect(store.cookieHeader(for: URL(string: "http://example.com/")!) == "any=1", "80 is not in the list")
        #expect(store.cookieHeader(for: URL(string: "https://example.com:8443/")!) == "any=1")
    }

    @Test("The stores keep the RFC 2965 attributes: a cookie read back is equal to the one stored", arguments: CacheBackend.allCases)
    func persisted(_ backend: CacheBackend) throws {
        let place = try CookiePlace(backend)
        let cookie = try #require(Cookie(properties: Self.properties))
        try place.open(clock: Date.init).setCookie(cookie)
        let read = try #require(try place.open(clock: Date.init).allCookies.first)
        #expect(read == cookie)
        #expect(read.portList == [8080, 8443] && read.version == 1 && read.comment == cookie.comment)
    }

    @Test("A cookie file of the first schema is migrated: its cookies are version 0, for any port")
    func migratesVersionOneFile() throws {
        let folder = TemporaryDirectory()
        let path = folder.url.appendingPathComponent("Cookies.sqlite").path
        do {
            var options = Database.Options()
            options.fileMode = 0o600
            let old = try Database(path: path, migrations: Array(Schema.cookies.prefix(1)), options: options)
            try old.write { (connection: Connection) throws(SQLiteError) in
                try connection.run(
                    """
                    INSERT INTO cookies(name, value, domain, host_only, path, expires, created, last_access, secure, http_only, same_site)
                    VALUES ('old', '1', 'example.com', 1, '/', 4000000000, 1700000000, 1700000000, 0, 0, 'lax')
                    """)
            }
        }
        let store = try CookieStore(directory: folder.url)
        let old = try #require(store.allCookies.first)
        #expect(old.name == "old" && old.sameSite == .lax)
        #expect(old.version == 0 && old.portList == nil && old.comment == nil)
        #expect(store.cookieHeader(for: URL(string: "http://example.com:8080/")!) == "old=1")
    }

    @Test("Crafted rows: a version other than 1 is 0, ports that are not ports send the cookie nowhere, a bad comment URL is none")
    func craftedRows() throws {
        let folder = TemporaryDirectory()
        do {
            let store = try CookieStore(directory: folder.url)
            store.setCookie(Cookie(name: "c", value: "1", domain: "example.com", expiresDate: Date(timeIntervalSinceNow: 3600)))
        }
        let path = folder.url.appendingPathComponent("Cookies.sqlite").path
        let connection = try Connection(path: path, busyTimeout: .seconds(5))
        try connection.run("UPDATE cookies SET version = 7, ports = '99999,abc', comment_url = 'http://[bad'")
        let read = try #require(try CookieStore(directory: folder.url).allCookies.first)
        #expect(read.version == 0)
        #expect(read.portList == [])
        #expect(read.commentURL == nil)
        #expect(try CookieStore(directory: folder.url).cookieHeader(for: URL(string: "http://example.com/")!) == nil)
    }
}
