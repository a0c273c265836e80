// Written with Apple's URL Loading System names: a configuration with its
// own URLCache, cookies read back from the configuration's storage,
// credentials in a URLCredentialStorage.
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing

@Test("Ported: a configuration's own URLCache answers the second request; cookies and credentials are read back")
func portedStores() async throws {
    let origin = try await TestOrigin.start()
    origin.route("/cached", response: ScriptedResponse(headers: [HeaderField("Cache-Control", "max-age=600")], body: "cached body"))
    origin.route("/login", response: ScriptedResponse(headers: [HeaderField("Set-Cookie", "session=abc; Path=/; HttpOnly")], body: "welcome"))
    let scratch = try Scratch()
    defer { scratch.remove() }

    let configuration = URLSessionConfiguration.ephemeral
    let cache = URLCache(memoryCapacity: 1 << 20, diskCapacity: 10 << 20, directory: scratch.url.appendingPathComponent("cache"))
    configuration.urlCache = cache
    configuration.requestCachePolicy = .useProtocolCachePolicy
    let session = URLSession(configuration: configuration)

    let request = URLRequest(url: origin.url("/cached"))
    let (first, _) = try await session.data(for: request)
    let (second, _) = try await session.data(for: request)
    #expect(first == second && String(decoding: second, as: UTF8.self) == "cached body")
    #expect(origin.requests(to: "/cached").count == 1, "the second came from the cache")
    let cached: CachedURLResponse? = cache.cachedResponse(for: request)
    #expect(cached.map { String(decoding: $0.data, as: UTF8.self) } == "cached body")
    // A response stored by hand, with userInfo of any property-list type,
    // read back from a new cache on the same folder (from disk).
    let handMade = try #require(URL(string: "https://example.com/made"))
    let response = URLResponse(url: handMade, mimeType: "text/plain", expectedContentLength: 4, textEncodingName: "utf-8")
    let userInfo: [AnyHashable: Any] = ["count": 3, "tags": ["a", "b"], "when": Date(timeIntervalSince1970: 1)]
    let stored = CachedURLResponse(response: response, data: Data("made".utf8), userInfo: userInfo, storagePolicy: .allowed)
    #expect(stored.userInfo?["count"] as? Int == 3)
    #expect(stored.isEqual(CachedURLResponse(response: response, data: Data("made".utf8), userInfo: userInfo, storagePolicy: .allowed)))
    #expect(!stored.isEqual(CachedURLResponse(response: response, data: Data("made".utf8))))
    cache.storeCachedResponse(stored, for: URLRequest(url: handMade))
    let reopened = URLCache(memoryCapacity: 0, diskCapacity: 10 << 20, directory: scratch.url.appendingPathComponent("cache"))
    let back = try #require(reopened.cachedResponse(for: URLRequest(url: handMade)))
    #expect(back.data == Data("made".utf8) && back.response.mimeType == "text/plain" && back.storagePolicy == .allowed)
    #expect(back.userInfo?["count"] as? Int == 3)
    #expect(back.userInfo?["tags"] as? [String] == ["a", "b"])
    #expect(back.userInfo?["when"] as? Date == Date(timeIntervalSince1970: 1))

    _ = try await session.data(from: origin.url("/login"))
    let cookies: [HTTPCookie] = session.configuration.httpCookieStorage?.cookies(for: origin.url("/")) ?? []
    #expect(cookies.map(\.name) == ["session"] && cookies.first?.value == "abc" && cookies.first?.isHTTPOnly == true)
    let parsed = HTTPCookie.cookies(withResponseHeaderFields: ["Set-Cookie": "k=v; Path=/"], for: origin.url("/"))
    #expect(HTTPCookie.requestHeaderFields(with: parsed) == ["Cookie": "k=v"])
    let made = HTTPCookie(properties: [.name: "m", .value: "1", .domain: "127.0.0.1", .path: "/"])
    #expect(made?.name == "m")
    let storage: HTTPCookieStorage? = session.configuration.httpCookieStorage
    let policy: HTTPCookie.AcceptPolicy = .never
    storage?.cookieAcceptPolicy = policy
    #expect(storage?.cookieAcceptPolicy == .never)
    // Apple's ephemeral configurations have their own in-memory stores.
    let fresh = URLSessionConfiguration.ephemeral
    #expect(fresh.httpCookieStorage != nil && fresh.urlCredentialStorage != nil && fresh.urlCache != nil)

    let space = URLProtectionSpace(
        host: "127.0.0.1", port: origin.port, protocol: "http", realm: "r",
        authenticationMethod: NSURLAuthenticationMethodHTTPBasic)
    let credentials = try #require(session.configuration.urlCredentialStorage)
    credentials.setDefaultCredential(URLCredential(user: "ann", password: "pw", persistence: .forSession), for: space)
    #expect(credentials.defaultCredential(for: space)?.user == "ann")
    #expect(credentials.credentials(for: space)?.count == 1)
    session.finishTasksAndInvalidate()
    try await origin.shutdown()
}
