import Foundation
import Logging
import Storage
import Locking

/// Splits a `Set-Cookie` value that a library joined with commas back into
/// field values: a comma starts a new cookie only when `token=` follows it.
enum SetCookieSplitter {
    static func split(_ joined: String) -> [String] {
        var parts: [String] = []
        var current = Substring(joined)
        var searchStart = current.startIndex
        while let comma = current[searchStart...].firstIndex(of: ",") {
            // A folded line (a comma, then CR LF and spaces) separates as a space does.
            let after = current[current.index(after: comma)...].drop { $0 == " " || $0 == "\t" || $0 == "\r\n" || $0 == "\n" || $0 == "\r" }
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
    private let database: (any CookiePersistence)?
    let clock: @Sendable () -> Date
    private let logger: Logger
    /// Last-access times are written with the next change, or on their own
    /// once this many cookies were sent and a minute passed since the last
    /// such write: eviction needs them roughly, not to the second, and
    /// lookups must not cost a disk write.
    private static let touchBatch = 256
    private static let touchInterval: TimeInterval = 60

    init(jar: CookieJar, database: (any CookiePersistence)?, clock: @escaping @Sendable () -> Date, logger: Logger) {
        self.state = Lock(State(jar: jar))
        self.database = database
        self.clock = clock
        self.logger = logger
    }

    /// Cookies another process changed: into the jar, never written back.
    func applyOthers(_ changes: [Cookie.Key: Cookie?]) {
        let now = clock()
        state.withLock { state in
            var ignored = CookieJar.Changes()
            for (key, cookie) in changes {
                if let cookie {
                    state.jar.insert(cookie, now: now, changes: &ignored)
                } else {
                    state.jar.remove(key, changes: &ignored)
                }
                state.pending.final[key] = nil
            }
        }
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

    func isCrossSite(_ url: URL, mainDocumentURL: URL?) -> Bool {
        state.withLock { site(of: url, mainDocumentURL: mainDocumentURL, jar: $0.jar) == .crossSite }
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

    /// Stores cookies made by the caller, one change and one write to the
    /// file; with `url`, only those whose domain it may set (`CookieJar.accepts`).
    func insert(_ cookies: [Cookie], from url: URL? = nil) {
        guard !cookies.isEmpty else { return }
        let now = clock()
        mutate { state, changes in
            for var cookie in cookies {
                cookie.canonicalDomain = cookie.canonicalDomain.lowercased()
                if let url, !state.jar.accepts(cookie, from: url) { continue }
                state.jar.insert(cookie, now: now, changes: &changes)
            }
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
    func flush() throws(StoreError) {
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

    private func writePending(force: Bool) throws(StoreError) {
        guard let database else { return }
        try writer.withLock { (_) throws(StoreError) in
            let batch = state.withLock { state -> (CookieJar.Changes, [Cookie.Key: Date])? in
                guard !state.pending.isEmpty || touchesDue(state) || (force && !state.touched.isEmpty) else { return nil }
                defer {
                    state.pending = CookieJar.Changes()
                    state.touched = [:]
                }
                return (state.pending, state.touched)
            }
            guard let (changes, touches) = batch else { return }
            do throws(StoreError) {
                try database.apply(changes.final, touches: touches)
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
