public import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif
import Logging
import Locking

/// A cookie store (Apple's `HTTPCookieStorage`, SPEC K1–K4): the cookies a
/// session sends and receives, under the rules of RFC 6265bis.
///
/// Two implementations: `MemoryCookieStore` (ephemeral sessions) and
/// `PersistentCookieStore` (SQLite, default sessions). Both are safe to use
/// from any thread.
public protocol CookieStore: AnyObject, Sendable {
    /// The policy `setCookies(_:for:mainDocumentURL:)` applies when none is given.
    var acceptPolicy: CookieAcceptPolicy { get set }

    /// The cookies to send with a request for `url`, in Cookie header order
    /// (longer paths first, then earlier creation), marking them used.
    ///
    /// - Parameters:
    ///   - url: The request's URL; only http(s) and ws(s) URLs get cookies.
    ///   - mainDocumentURL: The document the request is made for; when it is
    ///     of another site, SameSite=Lax and Strict cookies are not sent.
    func cookies(for url: URL, mainDocumentURL: URL?) -> [Cookie]

    /// Stores the cookies of `Set-Cookie` field values received in a
    /// response for `url`, under the given accept policy.
    ///
    /// - Returns: The cookies stored; values the rules refuse are left out.
    @discardableResult
    func setCookies(_ setCookieFields: [String], for url: URL, mainDocumentURL: URL?, policy: CookieAcceptPolicy) -> [Cookie]

    /// Stores a cookie made by the caller, replacing one with the same name,
    /// domain, host-only flag and path (an expired cookie only removes it).
    func setCookie(_ cookie: Cookie)

    /// Removes the cookie with the same name, domain, host-only flag and path.
    func deleteCookie(_ cookie: Cookie)

    /// Removes the cookies created at or after `date`.
    func removeCookies(since date: Date)

    /// Removes every cookie.
    func removeAll()

    /// Every cookie that has not expired, in no particular order.
    var allCookies: [Cookie] { get }

    /// Writes what the store still holds only in memory; a store in memory
    /// has nothing to write.
    func flush() throws
}

extension CookieStore {
    /// Nothing to write (stores without a file).
    public func flush() throws {}

    /// The cookies to send with a request for `url` made for no particular document.
    public func cookies(for url: URL) -> [Cookie] {
        cookies(for: url, mainDocumentURL: nil)
    }

    /// The `Cookie` header value for a request, nil when no cookie applies.
    public func cookieHeader(for url: URL, mainDocumentURL: URL? = nil) -> String? {
        CookieJar.headerValue(cookies(for: url, mainDocumentURL: mainDocumentURL))
    }

    /// Stores cookies of `Set-Cookie` values under the store's accept policy.
    @discardableResult
    public func setCookies(_ setCookieFields: [String], for url: URL, mainDocumentURL: URL? = nil) -> [Cookie] {
        setCookies(setCookieFields, for: url, mainDocumentURL: mainDocumentURL, policy: acceptPolicy)
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
        for cookie in cookies { setCookie(cookie) }
        return (cookies.count, skipped)
    }
}

/// Splits a `Set-Cookie` value that a library joined with commas back into
/// field values: a comma starts a new cookie only when `token=` follows it.
enum SetCookieSplitter {
    static func split(_ joined: String) -> [String] {
        var parts: [String] = []
        var current = Substring(joined)
        var searchStart = current.startIndex
        while let comma = current[searchStart...].firstIndex(of: ",") {
            let after = current[current.index(after: comma)...].drop { $0 == " " || $0 == "\t" }
            let token = after.prefix { $0 != "=" && $0 != ";" && $0 != "," && $0 != " " }
            if !token.isEmpty, after.dropFirst(token.count).first == "=", !isExpiresDay(current[..<comma]) {
                parts.append(String(current[..<comma]))
                current = after
                searchStart = current.startIndex
            } else {
                searchStart = current.index(after: comma)
            }
        }
        parts.append(String(current))
        return parts
    }

    /// `expires=Wed, 09 Jun ...`: the comma right after the weekday is not a separator.
    private static func isExpiresDay(_ before: Substring) -> Bool {
        guard let equals = before.lastIndex(of: "=") else { return false }
        let word = before[before.index(after: equals)...].trimmingCharacters(in: .whitespaces)
        return before[..<equals].lowercased().hasSuffix("expires") && !word.isEmpty && word.allSatisfy(\.isLetter)
    }
}

/// The lock-protected state and the work common to both stores.
final class CookieStoreEngine: Sendable {
    private struct State {
        var jar: CookieJar
        var acceptPolicy: CookieAcceptPolicy = .always
        /// Changes not yet written to disk (all of them, for a memory store: never read).
        var pending = CookieJar.Changes()
        /// Cookies sent since the last write, with when.
        var touched: [Cookie.Key: Date] = [:]
        /// When touches alone last caused a write.
        var lastTouchWrite = Date.distantPast
    }

    private let state: Lock<State>
    private let database: CookieDatabase?
    let clock: @Sendable () -> Date
    private let logger: Logger
    /// Last-access times are written with the next change, or on their own
    /// once this many cookies were sent and a minute passed since the last
    /// such write: eviction needs them roughly, not to the second, and
    /// lookups must not cost a disk write.
    private static let touchBatch = 256
    private static let touchInterval: TimeInterval = 60

    init(jar: CookieJar, database: CookieDatabase?, clock: @escaping @Sendable () -> Date, logger: Logger) {
        self.state = Lock(State(jar: jar))
        self.database = database
        self.clock = clock
        self.logger = logger
    }

    var acceptPolicy: CookieAcceptPolicy {
        get { state.withLock { $0.acceptPolicy } }
        set { state.withLock { $0.acceptPolicy = newValue } }
    }

    var count: Int { state.withLock { $0.jar.count } }

    func site(of url: URL, mainDocumentURL: URL?, jar: CookieJar) -> CookieJar.SiteContext {
        guard let mainDocumentURL, let documentHost = CookieJar.host(of: mainDocumentURL),
              let host = CookieJar.host(of: url)
        else { return .sameSite }
        return jar.isSameSite(host, documentHost) ? .sameSite : .crossSite
    }

    func cookies(for url: URL, mainDocumentURL: URL?) -> [Cookie] {
        let now = clock()
        // A lookup never waits for the disk: what it changed (expired
        // cookies dropped, last-access times) goes with the next write.
        return mutate(writes: false) { state, changes in
            let site = site(of: url, mainDocumentURL: mainDocumentURL, jar: state.jar)
            let cookies = state.jar.cookies(for: url, site: site, now: now, changes: &changes)
            if database != nil {
                for cookie in cookies { state.touched[cookie.key] = now }
            }
            return cookies
        }
    }

    func setCookies(_ fields: [String], for url: URL, mainDocumentURL: URL?, policy: CookieAcceptPolicy) -> [Cookie] {
        guard policy != .never, !fields.isEmpty else { return [] }
        let now = clock()
        return mutate { state, changes in
            let site = site(of: url, mainDocumentURL: mainDocumentURL, jar: state.jar)
            // "Only from the main document's domain" is the same-site test SameSite already makes.
            if policy == .onlyFromMainDocumentDomain, site == .crossSite { return [] }
            var stored: [Cookie] = []
            for field in fields {
                if case .success(let cookie) = state.jar.receive(field, from: url, site: site, now: now, changes: &changes) {
                    stored.append(cookie)
                }
            }
            return stored
        }
    }

    func setCookie(_ cookie: Cookie) {
        let now = clock()
        mutate { state, changes in
            var cookie = cookie
            cookie.domain = cookie.domain.lowercased()
            state.jar.insert(cookie, now: now, changes: &changes)
        }
    }

    func remove(where predicate: @escaping (Cookie) -> Bool) {
        mutate { state, changes in state.jar.removeAll(where: predicate, changes: &changes) }
    }

    func delete(_ cookie: Cookie) {
        mutate { state, changes in state.jar.remove(cookie.key, changes: &changes) }
    }

    var allCookies: [Cookie] {
        let now = clock()
        return state.withLock { $0.jar.allCookies(now: now) }
    }

    /// Writes pending changes and touches now; rethrows the store's error.
    func flush() throws {
        try writePending(force: true)
    }

    /// Runs a change on the cookies in memory under the lock, then (with
    /// `writes`) writes what is pending to the file. The file is written
    /// outside that lock: a lookup never waits for the disk, nor for
    /// another process holding the file's lock.
    @discardableResult
    private func mutate<T>(writes: Bool = true, _ body: (inout State, inout CookieJar.Changes) -> T) -> T {
        let (result, due) = state.withLock { state -> (T, Bool) in
            var changes = CookieJar.Changes()
            let result = body(&state, &changes)
            guard database != nil else { return (result, false) }
            state.pending.merge(changes)
            return (result, writes || touchesDue(state))
        }
        guard due else { return result }
        do {
            try writePending(force: false)
        } catch {
            // Kept in memory and in `pending`; the next change retries.
            logger.error("cookie store write failed; changes kept in memory", metadata: ["error": "\(error)"])
        }
        return result
    }

    private func touchesDue(_ state: State) -> Bool {
        state.touched.count >= Self.touchBatch && clock().timeIntervalSince(state.lastTouchWrite) >= Self.touchInterval
    }

    /// One writer at a time, in the order their changes were taken: the
    /// batch is taken from `pending` under the writer's lock, so a later
    /// batch never reaches the file before an earlier one.
    private let writer = Lock(())

    private func writePending(force: Bool) throws {
        guard let database else { return }
        try writer.withLock { _ in
            let batch = state.withLock { state -> (CookieJar.Changes, [Cookie.Key: Date])? in
                guard !state.pending.isEmpty || touchesDue(state) || (force && !state.touched.isEmpty) else { return nil }
                defer {
                    state.pending = CookieJar.Changes()
                    state.touched = [:]
                }
                return (state.pending, state.touched)
            }
            guard let (changes, touches) = batch else { return }
            do {
                try database.apply(changes, touches: touches)
                if changes.isEmpty { state.withLock { $0.lastTouchWrite = clock() } }
            } catch {
                // Back into `pending`, under any change made since (which is newer).
                state.withLock { state in
                    var restored = changes
                    restored.merge(state.pending)
                    state.pending = restored
                    state.touched.merge(touches) { newer, _ in newer }
                }
                throw error
            }
        }
    }
}

/// A cookie store in memory only: what ephemeral sessions use, private to
/// the session that made it and gone with it.
public final class MemoryCookieStore: CookieStore, CustomStringConvertible {
    let engine: CookieStoreEngine

    /// An empty store.
    ///
    /// - Parameter publicSuffixes: The list that decides which Domain
    ///   attributes are refused; the system's by default.
    public convenience init(publicSuffixes: PublicSuffixList = .system) {
        self.init(publicSuffixes: publicSuffixes, clock: { Date() })
    }

    /// An empty store reading the time from `clock` (tests).
    package init(publicSuffixes: PublicSuffixList = .system, limits: (perDomain: Int, total: Int)? = nil, clock: @escaping @Sendable () -> Date) {
        var jar = CookieJar(publicSuffixes: publicSuffixes)
        if let limits { (jar.perDomainLimit, jar.totalLimit) = limits }
        engine = CookieStoreEngine(jar: jar, database: nil, clock: clock, logger: Logger(label: "urlloading.cookies"))
    }

    public var acceptPolicy: CookieAcceptPolicy {
        get { engine.acceptPolicy }
        set { engine.acceptPolicy = newValue }
    }

    public func cookies(for url: URL, mainDocumentURL: URL?) -> [Cookie] {
        engine.cookies(for: url, mainDocumentURL: mainDocumentURL)
    }

    @discardableResult
    public func setCookies(_ setCookieFields: [String], for url: URL, mainDocumentURL: URL?, policy: CookieAcceptPolicy) -> [Cookie] {
        engine.setCookies(setCookieFields, for: url, mainDocumentURL: mainDocumentURL, policy: policy)
    }

    public func setCookie(_ cookie: Cookie) { engine.setCookie(cookie) }
    public func deleteCookie(_ cookie: Cookie) { engine.delete(cookie) }
    public func removeCookies(since date: Date) { engine.remove { $0.creationDate >= date } }
    public func removeAll() { engine.remove { _ in true } }
    public var allCookies: [Cookie] { engine.allCookies }

    /// The number of cookies held, without their values.
    public var description: String { "MemoryCookieStore(\(engine.count) cookies)" }
}
