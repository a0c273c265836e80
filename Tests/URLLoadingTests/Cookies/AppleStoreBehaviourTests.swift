import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
import TestSupport
@testable import URLLoading

/// Code written for Apple's HTTPCookieStorage and URLCredentialStorage,
/// after the porting table's renames, behaves as it did there (where the
/// RFCs do not say otherwise).
@Suite struct AppleStoreBehaviourTests {
    static let swiftOrg = URL(string: "https://swift.org/docs")!
    static let wwwExample = URL(string: "https://www.example.com/")!

    @Test("setCookies(_:for:mainDocumentURL:) keeps only cookies whose domain matches the URL (RFC 6265bis §5.7)")
    func setCookiesRefusesForeignDomains() {
        let store = CookieStore()
        store.setCookies(
            [
                Cookie(name: "foreign", value: "1", domain: "example.com"),
                Cookie(name: "foreignDomain", value: "1", domain: ".example.com"),
                Cookie(name: "suffix", value: "1", domain: ".org"),
                Cookie(name: "own", value: "1", domain: "swift.org"),
                Cookie(name: "ownDomain", value: "1", domain: ".swift.org"),
                Cookie(name: "sub", value: "1", domain: "www.swift.org"),
            ], for: Self.swiftOrg, mainDocumentURL: nil)
        #expect(store.allCookies.map(\.name).sorted() == ["own", "ownDomain"])
        // A domain cookie from a subdomain's URL is its parent's to keep.
        store.setCookies([Cookie(name: "parent", value: "1", domain: ".example.com")], for: Self.wwwExample, mainDocumentURL: nil)
        #expect(store.cookies(for: Self.wwwExample)?.map(\.name) == ["parent"])
        // Without a URL nothing can be checked, and nothing is stored.
        store.setCookies([Cookie(name: "unchecked", value: "1", domain: "swift.org")], for: nil, mainDocumentURL: nil)
        #expect(!store.allCookies.contains { $0.name == "unchecked" })
    }

    @Test("Set-Cookie values joined with a comma and a line break, as proxies and HTTPURLResponse fold them, are all kept")
    func foldedSetCookieValuesAreSplit() throws {
        let folded = "a=1; Path=/, \r\nb=2; Path=/,\n c=3; Expires=Wed, 09 Jun 2038 10:18:14 GMT"
        let cookies = Cookie.cookies(withResponseHeaderFields: ["Set-Cookie": folded], for: Self.swiftOrg)
        #expect(cookies.map(\.name) == ["a", "b", "c"])
        let response = try #require(HTTPURLResponse(url: Self.swiftOrg, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: ["Set-Cookie": folded]))
        let store = CookieStore()
        #expect(store.setCookies(from: response).map(\.name) == ["a", "b", "c"])
        #expect(store.allCookies.first { $0.name == "c" }?.expiresDate != nil)
    }

    @Test("A cookie read back from the store equals the one stored: equality is the cookie's attributes, not the store's bookkeeping")
    func cookieEqualityIgnoresBookkeeping() throws {
        let store = CookieStore()
        let made = Cookie(
            name: "sid", value: "v", domain: "swift.org", path: "/", expiresDate: Date(timeIntervalSince1970: 2_000_000_000),
            creationDate: Date(timeIntervalSince1970: 1_700_000_000), isSecure: true)
        store.setCookie(made)
        _ = store.cookies(for: Self.swiftOrg, mainDocumentURL: nil)  // marks it used: a new last-access date
        let read = try #require(store.allCookies.first)
        #expect(read == made)
        #expect(read.hashValue == made.hashValue)
        var later = made
        later.creationDate = Date()
        later.lastAccessDate = Date()
        #expect(later == made)
        var other = made
        other.value = "w"
        #expect(other != made)
        other = made
        other.isSecure = false
        #expect(other != made)
    }

    @Test("After the default credential of a space is removed, the space has no default until one is set again")
    func removedDefaultLeavesNoDefault() {
        let store = CredentialStore()
        let space = ProtectionSpace(host: "swift.org", port: 443, protocol: "https", realm: "r", authenticationMethod: .httpBasic)
        let ann = Credential(user: "ann", password: "a", persistence: .forSession)
        let bob = Credential(user: "bob", password: "b", persistence: .forSession)
        store.setDefaultCredential(ann, for: space)
        store.set(bob, for: space)
        #expect(store.defaultCredential(for: space)?.user == "ann")
        store.remove(ann, for: space)
        #expect(store.defaultCredential(for: space) == nil)
        #expect(store.credentials(for: space)?.keys.sorted() == ["bob"])
        store.setDefaultCredential(bob, for: space)
        #expect(store.defaultCredential(for: space)?.user == "bob")
    }

    @Test("Descriptions in Apple's shapes, no value or password in them")
    func descriptionsInApplesShapes() {
        let store = CookieStore()
        store.setCookie(Cookie(name: "sid", value: "cookie-secret", domain: "swift.org"))
        store.setCookie(Cookie(name: "theme", value: "dark", domain: "swift.org"))
        #expect(store.description == "<NSHTTPCookieStorage cookies count:2>")
        #expect(!store.debugDescription.contains("cookie-secret"))
        let space = ProtectionSpace(host: "swift.org", port: 443, protocol: "https", realm: "Staff", authenticationMethod: .httpDigest)
        #expect(
            space.description
                == "<NSURLProtectionSpace>: Host:swift.org, Server:https, Auth-Scheme:NSURLAuthenticationMethodHTTPDigest, Realm:Staff, Port:443, Proxy:NO, Proxy-Type:(null)")
        let proxy = ProtectionSpace(host: "proxy.local", port: 3128, protocol: "http", authenticationMethod: .httpBasic, isProxy: true)
        #expect(
            proxy.description
                == "<NSURLProtectionSpace>: Host:proxy.local, Server:(null), Auth-Scheme:NSURLAuthenticationMethodHTTPBasic, Realm:(null), Port:3128, Proxy:YES, Proxy-Type:http")
    }

    @Test("Credential's copy, isEqual and hash, and CredentialStore.remove with options, as Apple's NSObject forms")
    func credentialObjectForms() throws {
        let credential = Credential(user: "ann", password: "pw", persistence: .permanent)
        let copy = try #require(credential.copy() as? Credential)
        #expect(copy.isEqual(credential))
        #expect(copy.hash == credential.hash)
        #expect(!credential.isEqual(Credential(user: "ann", password: "other", persistence: .permanent)))
        #expect(!credential.isEqual("ann"))
        let store = CredentialStore()
        let space = ProtectionSpace(host: "swift.org", port: 443, protocol: "https", realm: "r", authenticationMethod: .httpBasic)
        store.set(credential, for: space)
        store.remove(credential, for: space, options: [NSURLCredentialStorageRemoveSynchronizableCredentials: true])
        #expect(store.credentials(for: space) == nil)
        let session = Session(configuration: .ephemeral)
        defer { session.invalidateAndCancel() }
        let task = session.dataTask(with: Self.swiftOrg)
        store.set(credential, for: space)
        store.remove(credential, for: space, options: nil, task: task)
        #expect(store.credentials(for: space) == nil)
    }

    @Test("A task isEqual to itself (its copy) and to no other task, as Apple's NSObject task")
    func taskIsEqual() throws {
        let session = Session(configuration: .ephemeral)
        defer { session.invalidateAndCancel() }
        let task = session.dataTask(with: Self.swiftOrg)
        let other = session.dataTask(with: Self.swiftOrg)
        #expect(task.isEqual(task.copy()))
        #expect(!task.isEqual(other))
        #expect(!task.isEqual(nil))
        #expect(task.hash == task.hashValue)
    }

    @Test("An ephemeral configuration's stores are its sessions': the configuration shows what they stored, another configuration has others, invalidation empties them")
    func ephemeralConfigurationStoresAreTheSessions() async throws {
        let origin = try await TestOrigin.start()
        origin.route(
            "/set",
            response: ScriptedResponse(headers: [HeaderField("Set-Cookie", "who=ann"), HeaderField("Cache-Control", "max-age=600")], body: "set"))
        let configuration = SessionConfiguration.ephemeral
        let (invalidated, signal) = AsyncStream<Void>.makeStream()
        let session = Session(configuration: configuration, delegate: InvalidationDelegate { signal.yield() })
        _ = try await session.data(from: origin.url("/set"))
        #expect(session.cookieStore === configuration.httpCookieStorage)
        #expect(session.urlCache === configuration.urlCache)
        #expect(session.credentialStore === configuration.urlCredentialStorage)
        #expect(configuration.httpCookieStorage?.cookies?.map(\.name) == ["who"])
        #expect(configuration.urlCache?.cachedResponse(for: URLRequest(url: origin.url("/set"))) != nil)
        let other = SessionConfiguration.ephemeral
        #expect(other.httpCookieStorage !== configuration.httpCookieStorage)
        #expect(other.httpCookieStorage?.cookies?.isEmpty == true)
        session.invalidateAndCancel()
        for await _ in invalidated { break }
        #expect(configuration.httpCookieStorage?.cookies?.isEmpty == true)
        #expect(configuration.urlCache?.cachedResponse(for: URLRequest(url: origin.url("/set"))) == nil)
        try await origin.shutdown()
    }

    @Test("sortedCookies(using:) orders by the descriptors in turn; a group's cookie store is one named store")
    func sortedCookiesAndGroupStores() throws {
        let store = CookieStore()
        store.setCookie(Cookie(name: "b", value: "1", domain: "swift.org", path: "/"))
        store.setCookie(Cookie(name: "a", value: "2", domain: "swift.org", path: "/docs"))
        store.setCookie(Cookie(name: "a", value: "3", domain: "swift.org", path: "/"))
        let sorted = store.sortedCookies(using: [NSSortDescriptor(keyPath: \Cookie.name, ascending: true), NSSortDescriptor(keyPath: \Cookie.path, ascending: false)])
        #expect(sorted.map { "\($0.name)\($0.path)" } == ["a/docs", "a/", "b/"])
        let identifier = "group.urlloading.test-\(UUID().uuidString)"
        let group = CookieStore.sharedCookieStorage(forGroupContainerIdentifier: identifier)
        #expect(group === CookieStore.sharedCookieStorage(forGroupContainerIdentifier: identifier))
        #expect(group !== CookieStore.shared)
        #expect(group.path == StoreLocations(applicationIdentifier: identifier).dataDirectory.appendingPathComponent("Cookies.sqlite").path)
        try? FileManager.default.removeItem(at: StoreLocations(applicationIdentifier: identifier).dataDirectory)
    }

    @Test("URLCache's diskPath initializer: an absolute folder is the disk tier's; a path leaving the cache folder keeps memory only, with the reason")
    func cacheDiskPath() throws {
        let folder = TemporaryDirectory()
        let cache = ResponseCache(memoryCapacity: 1024, diskCapacity: 1 << 20, diskPath: folder.path("cache"))
        #expect(cache.hasDiskTier && cache.startupError == nil)
        #expect(FileManager.default.fileExists(atPath: folder.path("cache/Cache.sqlite")))
        // A relative path is a folder under the application's cache folder (the test run's own, under tools/test).
        let name = "diskpath-\(UUID().uuidString)"
        let relative = ResponseCache(memoryCapacity: 1024, diskCapacity: 1 << 20, diskPath: "\(name)/inner")
        let expected = StoreLocations().cacheDirectory.appendingPathComponent(name)
        #expect(relative.hasDiskTier)
        #expect(FileManager.default.fileExists(atPath: expected.appendingPathComponent("inner/Cache.sqlite").path))
        try? FileManager.default.removeItem(at: expected)
        let escaping = ResponseCache(memoryCapacity: 1024, diskCapacity: 1 << 20, diskPath: "../elsewhere")
        #expect(!escaping.hasDiskTier)
        #expect(escaping.startupError?.kind == .configuration)
        #expect(!ResponseCache(memoryCapacity: 1024, diskCapacity: 0, diskPath: nil).hasDiskTier)
        let policy: ResponseCache.StoragePolicy = .allowedInMemoryOnly
        #expect(policy == CacheStoragePolicy.allowedInMemoryOnly)
    }

    @Test("Kept on purpose, by RFC 6265bis: a nameless cookie is kept, Secure with any value is secure, Domain=<an address> is refused, no Expires is a session cookie")
    func deliberateDifferences() throws {
        let store = CookieStore()
        let https = try #require(URL(string: "https://swift.org/"))
        #expect(store.setCookies(["justavalue"], for: https).map(\.headerPair) == ["justavalue"])
        let secure = store.setCookies(["flag=1; Secure=false"], for: https)
        #expect(secure.first?.isSecure == true)
        let address = try #require(URL(string: "http://1.2.3.4/"))
        #expect(store.setCookies(["ip=1; Domain=1.2.3.4"], for: address).first?.isHostOnly == true, "an address is its own host-only domain")
        #expect(store.setCookies(["dotted=1; Domain=.1.2.3.4"], for: address).isEmpty)
        #expect(store.setCookies(["other=1; Domain=5.6.7.8"], for: address).isEmpty)
        let session = store.setCookies(["visit=1"], for: https)
        #expect(session.first?.isSessionOnly == true && session.first?.expiresDate == nil)
    }

    @Test("A domain cookie's domain has Apple's leading dot, a host-only one none; matching, persistence and cookies.txt keep the flag")
    func domainHasApplesLeadingDot() throws {
        let directory = TemporaryDirectory()
        let www = try #require(URL(string: "https://www.swift.org/"))
        let store = try CookieStore(directory: directory.url)
        let stored = store.setCookies(["d=1; Domain=swift.org; Max-Age=600", "h=1; Max-Age=600"], for: www)
        #expect(stored.map(\.domain) == [".swift.org", "www.swift.org"])
        #expect(stored.map(\.isHostOnly) == [false, true])
        #expect(store.cookies(for: try #require(URL(string: "https://docs.swift.org/")))?.map(\.name) == ["d"])
        let made = Cookie(name: "m", value: "1", domain: ".swift.org")
        #expect(made.domain == ".swift.org" && !made.isHostOnly)
        #expect(made.properties?[.domain] as? String == ".swift.org")
        #expect(Cookie(name: "m", value: "1", domain: "swift.org").domain == "swift.org")
        let reopened = try CookieStore(directory: directory.url)
        #expect(reopened.allCookies.map(\.domain).sorted() == [".swift.org", "www.swift.org"])
        let lines = reopened.exportNetscapeFormat().split(separator: "\n").filter { !$0.hasPrefix("#") }
        #expect(lines.contains { $0.hasPrefix(".swift.org\tTRUE\t") } && lines.contains { $0.hasPrefix("www.swift.org\tFALSE\t") }, "\(lines)")
    }
}
