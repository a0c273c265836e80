public import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif
import Logging
import Storage

/// A cookie store (Apple's `HTTPCookieStorage`): the cookies a
/// session sends and receives, under the rules of RFC 6265bis.
///
/// A store lives in memory (`CookieStore()`, what ephemeral sessions get)
/// or in an SQLite file (`CookieStore(directory:)`, what default sessions
/// share through `CookieStore.shared`). Both are safe to use from any thread.
///
/// A persistent store loads its cookies when it opens and answers lookups
/// from memory, never waiting for the file; every change is written to the
/// file in its own transaction before the call returns (last-access times
/// and the expired cookies a lookup drops go with the next write), outside
/// the lock lookups take, so another process holding the file's lock delays
/// only the callers that change cookies. When a write fails (disk full, file
/// locked), the change stays in memory, is logged without cookie values, and
/// is written with the next change or `flush()`. The file has mode 0600 in a
/// directory of mode 0700; a damaged file is moved aside
/// (`<name>.corrupt-<time>`) and the store starts empty.
public final class CookieStore: Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    let engine: CookieStoreEngine
    /// The database file; nil for a store in memory.
    public let path: String?
    /// Why the file asked for could not be opened, for `shared`, which then
    /// keeps cookies in memory only; nil otherwise.
    public let startupError: StoreError?

    /// The file name used inside a data directory.
    public static let fileName = "Cookies.sqlite"

    /// An empty store in memory.
    ///
    /// - Parameter publicSuffixes: The list that decides which Domain
    ///   attributes are refused; the system's by default.
    public convenience init(publicSuffixes: PublicSuffixList = .system) {
        self.init(publicSuffixes: publicSuffixes, clock: { Date() })
    }

    /// An empty store in memory reading the time from `clock` (tests).
    package init(publicSuffixes: PublicSuffixList = .system, limits: (perDomain: Int, total: Int)? = nil, clock: @escaping @Sendable () -> Date) {
        var jar = CookieJar(publicSuffixes: publicSuffixes)
        if let limits { (jar.perDomainLimit, jar.totalLimit) = limits }
        engine = CookieStoreEngine(jar: jar, database: nil, clock: clock, logger: Logger(label: "urlloading.cookies"))
        path = nil
        startupError = nil
    }

    /// Opens (creating as needed) the store kept in `directory`.
    ///
    /// - Parameters:
    ///   - directory: The directory of the file `Cookies.sqlite`.
    ///   - keepSessionCookies: Keep cookies without expiry that an earlier
    ///     process stored; by default they are dropped, as a browser drops
    ///     them when it restarts.
    ///   - publicSuffixes: The public suffix list; the system's by default.
    /// - Throws: `StoreError` when the file cannot be opened or is of a newer version.
    public convenience init(directory: URL, keepSessionCookies: Bool = false, publicSuffixes: PublicSuffixList = .system) throws(StoreError) {
        try self.init(directory: directory, keepSessionCookies: keepSessionCookies, publicSuffixes: publicSuffixes, clock: { Date() })
    }

    /// Opens the store in `directory` reading the time from `clock` (tests).
    package init(
        directory: URL, keepSessionCookies: Bool = false, publicSuffixes: PublicSuffixList = .system,
        limits: (perDomain: Int, total: Int)? = nil, busyTimeout: Duration? = nil, clock: @escaping @Sendable () -> Date
    ) throws(StoreError) {
        let logger = Logger(label: "urlloading.cookies")
        let path = directory.appendingPathComponent(Self.fileName).path
        let database: CookieDatabase
        var jar = CookieJar(publicSuffixes: publicSuffixes)
        if let limits { (jar.perDomainLimit, jar.totalLimit) = limits }
        do throws(StorageError) {
            database = try CookieDatabase(path: path, logger: logger, busyTimeout: busyTimeout)
        } catch {
            throw StoreError(error, path: path)
        }
        try Self.restore(&jar, from: database, now: clock(), keepSessionCookies: keepSessionCookies)
        self.path = path
        engine = CookieStoreEngine(jar: jar, database: database, clock: clock, logger: logger)
        startupError = nil
    }

    /// A store over `persistence` (a fleet's database: URLLoadingPostgres
    /// makes one), loaded from it; other processes' changes reach its jar.
    package init(
        persistence: any CookiePersistence, location: String, keepSessionCookies: Bool = false, publicSuffixes: PublicSuffixList = .system,
        clock: @escaping @Sendable () -> Date = { Date() }
    ) throws(StoreError) {
        var jar = CookieJar(publicSuffixes: publicSuffixes)
        try Self.restore(&jar, from: persistence, now: clock(), keepSessionCookies: keepSessionCookies)
        let engine = CookieStoreEngine(jar: jar, database: persistence, clock: clock, logger: Logger(label: "urlloading.cookies"))
        persistence.observeOthers { [weak engine] changes in engine?.applyOthers(changes) }
        self.engine = engine
        path = location
        startupError = nil
    }

    /// Fills a jar from what `persistence` holds; eviction on load (limits
    /// lowered since) is written back.
    private static func restore(_ jar: inout CookieJar, from persistence: any CookiePersistence, now: Date, keepSessionCookies: Bool) throws(StoreError) {
        var changes = CookieJar.Changes()
        for cookie in try persistence.load(now: now, keepSessionCookies: keepSessionCookies) {
            jar.restore(cookie, changes: &changes)
        }
        if !changes.isEmpty { try persistence.apply(changes.final, touches: [:]) }
    }

    /// A store in memory standing in for a file that could not be opened.
    init(fallbackFor failure: StoreError) {
        engine = CookieStoreEngine(jar: CookieJar(publicSuffixes: .system), database: nil, clock: { Date() }, logger: Logger(label: "urlloading.cookies"))
        path = nil
        startupError = failure
    }

    deinit {
        do {
            try engine.flush()
        } catch {
            Logger(label: "urlloading.cookies").error("cookie store could not write its last changes", metadata: ["error": "\(error)"])
        }
    }

    /// The application's shared store (Apple's `HTTPCookieStorage.shared`):
    /// the one default sessions use, `Cookies.sqlite` under
    /// `$XDG_DATA_HOME/<app>/`; in memory only when that file cannot be
    /// opened (see `startupError`).
    public static var shared: CookieStore {
        SharedStores.cookieStore(for: StoreLocations.defaultApplicationIdentifier)
    }

    /// The shared store of a group of applications (Apple's
    /// `sharedCookieStorage(forGroupContainerIdentifier:)`): the store
    /// `identifier` names, `Cookies.sqlite` under `$XDG_DATA_HOME/<identifier>/`,
    /// the same object for every call with the identifier. Characters that
    /// cannot stand in one path component (`/`, NUL, a leading `.`) become `_`.
    public static func sharedCookieStorage(forGroupContainerIdentifier identifier: String) -> CookieStore {
        SharedStores.cookieStore(for: identifier)
    }

    // MARK: Apple's HTTPCookieStorage

    /// The store's cookies ordered by `sortOrder` (Apple's
    /// `sortedCookies(using:)`): the first descriptor that tells two cookies
    /// apart decides. On Linux descriptors name a key path of `Cookie`
    /// (`NSSortDescriptor(keyPath: \Cookie.name, ascending: true)`).
    public func sortedCookies(using sortOrder: [NSSortDescriptor]) -> [Cookie] {
        engine.allCookies.sorted { a, b in
            for descriptor in sortOrder {
                switch descriptor.compare(a, to: b) {
                case .orderedAscending: return true
                case .orderedDescending: return false
                case .orderedSame: continue
                }
            }
            return false
        }
    }

    /// The policy `setCookies` applies when none is given.
    public var cookieAcceptPolicy: CookieAcceptPolicy {
        get { engine.acceptPolicy }
        set { engine.acceptPolicy = newValue }
    }

    /// Every cookie that has not expired, in no particular order (Apple's
    /// optional shape; never nil here).
    public var cookies: [Cookie]? { engine.allCookies }

    /// The cookies to send with a request for `url` made for no particular
    /// document, in Cookie header order (Apple's optional shape; never nil here).
    public func cookies(for url: URL) -> [Cookie]? {
        engine.cookies(for: url, mainDocumentURL: nil)
    }

    /// Stores a cookie made by the caller, replacing one with the same name,
    /// domain, host-only flag and path (an expired cookie only removes it).
    public func setCookie(_ cookie: Cookie) { engine.insert([cookie]) }

    /// Stores cookies made by the caller for `url`, under the accept policy:
    /// `.never` stores none, `.onlyFromMainDocumentDomain` none when `url`
    /// is of another site than `mainDocumentURL`. As in a response to `url`
    /// (RFC 6265bis §5.7), a cookie is kept only when `url`'s host may set
    /// its domain: its own host, or a parent domain that is not a public
    /// suffix. Without a `url` none is stored, as with Apple's store.
    public func setCookies(_ cookies: [Cookie], for url: URL?, mainDocumentURL: URL?) {
        guard let url else { return }
        switch cookieAcceptPolicy {
        case .never: return
        case .onlyFromMainDocumentDomain:
            if engine.isCrossSite(url, mainDocumentURL: mainDocumentURL) { return }
        case .always: break
        }
        engine.insert(cookies, from: url)
    }

    /// Removes the cookie with the same name, domain, host-only flag and path.
    public func deleteCookie(_ cookie: Cookie) { engine.delete(cookie) }

    /// Removes the cookies created at or after `date`.
    public func removeCookies(since date: Date) { engine.remove { $0.creationDate >= date } }

    // MARK: Ours

    /// Every cookie that has not expired, in no particular order.
    public var allCookies: [Cookie] { engine.allCookies }

    /// The cookies to send with a request for `url`, in Cookie header order
    /// (longer paths first, then earlier creation), marking them used.
    ///
    /// - Parameters:
    ///   - url: The request's URL; only http(s) and ws(s) URLs get cookies.
    ///   - mainDocumentURL: The document the request is made for; when it is
    ///     of another site, SameSite=Lax and Strict cookies are not sent.
    public func cookies(for url: URL, mainDocumentURL: URL?) -> [Cookie] {
        engine.cookies(for: url, mainDocumentURL: mainDocumentURL)
    }

    /// The `Cookie` header value for a request, nil when no cookie applies.
    public func cookieHeader(for url: URL, mainDocumentURL: URL? = nil) -> String? {
        CookieJar.headerValue(cookies(for: url, mainDocumentURL: mainDocumentURL))
    }

    /// Stores the cookies of `Set-Cookie` field values received in a
    /// response for `url`, under `policy` (by default the store's).
    ///
    /// - Returns: The cookies stored; values the rules refuse are left out.
    @discardableResult
    public func setCookies(_ setCookieFields: [String], for url: URL, mainDocumentURL: URL? = nil, policy: CookieAcceptPolicy? = nil) -> [Cookie] {
        engine.setCookies(setCookieFields, for: url, mainDocumentURL: mainDocumentURL, policy: policy ?? cookieAcceptPolicy)
    }

    /// Stores the cookies a response sets (its `Set-Cookie` fields).
    @discardableResult
    public func setCookies(from response: HTTPURLResponse, mainDocumentURL: URL? = nil) -> [Cookie] {
        guard let url = response.url else { return [] }
        // HTTPURLResponse joins repeated fields with ", ", which Set-Cookie
        // cannot survive (Expires dates hold commas): split where a new
        // name=value pair starts.
        let fields = response.allHeaderFields.compactMap { name, value -> String? in
            guard let name = name as? String, name.caseInsensitiveCompare("Set-Cookie") == .orderedSame else { return nil }
            return value as? String
        }
        return setCookies(fields.flatMap(SetCookieSplitter.split), for: url, mainDocumentURL: mainDocumentURL)
    }

    /// Removes every cookie.
    public func removeAll() { engine.remove { _ in true } }

    /// Writes changes that are still in memory (after a failed write) and
    /// the latest last-access times; nothing to do for a store in memory.
    ///
    /// - Throws: `StoreError` when the file cannot be written.
    public func flush() throws(StoreError) {
        try engine.flush()
    }

    /// The cookies in the Netscape `cookies.txt` format that curl and wget
    /// read; session cookies get expiry 0.
    public func exportNetscapeFormat() -> String {
        NetscapeCookieFile.serialize(allCookies)
    }

    /// Adds the cookies of a Netscape `cookies.txt` file.
    ///
    /// - Returns: How many cookies were read and how many lines were skipped
    ///   as malformed.
    @discardableResult
    public func importNetscapeFormat(_ text: String) -> (imported: Int, skippedLines: Int) {
        let (cookies, skipped) = NetscapeCookieFile.parse(text)
        engine.insert(cookies)
        return (cookies.count, skipped)
    }

    /// The number of cookies, in the shape of Apple's `NSHTTPCookieStorage`
    /// description; never a value.
    public var description: String {
        "<NSHTTPCookieStorage cookies count:\(engine.count)>"
    }

    /// Where the store lives and the number of cookies, without their values.
    public var debugDescription: String {
        "CookieStore(\(path ?? "memory"), \(engine.count) cookies)"
    }
}

extension CookieStore: Equatable {
    /// Whether both are the same store object (as Apple's store objects
    /// compare): a test compares a configuration's store with the one it set.
    public static func == (a: CookieStore, b: CookieStore) -> Bool { a === b }
}
