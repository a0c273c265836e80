import Foundation

/// The rules of a cookie store, without locking or persistence: the storage
/// model of RFC 6265bis §5.7, retrieval (§5.8.3), expiry, and eviction.
/// `CookieStore` keeps one behind a lock.
///
/// Cookies sit in buckets by registrable domain (or by host, for IP
/// addresses and hosts that are public suffixes), so a lookup reads one
/// bucket of at most `perDomainLimit` cookies whatever the store's size.
struct CookieJar: Sendable {
    /// Where a request or response stands relative to the document that
    /// caused it (RFC 6265bis "same-site" and "site for cookies").
    enum SiteContext: Sendable, Equatable {
        /// No main document, or one of the same registrable domain.
        case sameSite
        /// A request for a document of another site.
        case crossSite
    }

    /// What a mutation changed, for a persistent store to write.
    /// Only each key's final state counts: the cookie stored under it, or
    /// nil when it was removed.
    struct Changes: Sendable {
        var final: [Cookie.Key: Cookie?] = [:]
        var isEmpty: Bool { final.isEmpty }

        mutating func upsert(_ cookie: Cookie) { final[cookie.key] = .some(cookie) }
        mutating func remove(_ key: Cookie.Key) { final[key] = .some(nil) }

        mutating func merge(_ other: Changes) {
            final.merge(other.final) { _, new in new }
        }
    }

    /// Most cookies per registrable domain; beyond it the expired and then
    /// the least recently used of that domain go.
    var perDomainLimit = 50
    /// Most cookies in all; beyond it the expired and then the least recently
    /// used go, down to nine tenths of the limit so eviction scans are rare.
    var totalLimit = 3000
    /// Longest lifetime a cookie may ask for (RFC 6265bis: 400 days).
    static let maximumLifetime: TimeInterval = 400 * 86_400

    let publicSuffixes: PublicSuffixList
    private(set) var buckets: [String: [Cookie]] = [:]
    private(set) var count = 0
    /// The latest creation time given out: cookies created in one batch get
    /// strictly increasing times, so their header order is their order.
    private var lastCreation = Date.distantPast

    init(publicSuffixes: PublicSuffixList) {
        self.publicSuffixes = publicSuffixes
    }

    // MARK: Hosts and URLs

    /// The canonical host of a URL (lower case, ASCII), nil for none.
    static func host(of url: URL) -> String? {
        guard let host = url.host, !host.isEmpty else { return nil }
        return host.lowercased()
    }

    static func isSecureScheme(_ scheme: String) -> Bool { scheme == "https" || scheme == "wss" || scheme == "https+unix" }

    static func isCookieScheme(_ scheme: String) -> Bool {
        scheme == "http" || scheme == "https" || scheme == "ws" || scheme == "wss" || UnixSocketURL.isUnixScheme(scheme)
    }

    /// An IPv4 or IPv6 address rather than a name: never matched by domain.
    static func isIPAddress(_ host: String) -> Bool {
        var dots = 0
        var digitsInLabel = 0
        for byte in host.utf8 {
            switch byte {
            case UInt8(ascii: ":"): return true
            case UInt8(ascii: "."):
                guard digitsInLabel > 0 else { return false }
                dots += 1
                digitsInLabel = 0
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digitsInLabel += 1
            default: return false
            }
        }
        return dots == 3 && digitsInLabel > 0
    }

    /// RFC 6265 §5.1.3 domain-match.
    static func domainMatches(_ host: String, _ domain: String, hostIsIPAddress: Bool? = nil) -> Bool {
        let (hostBytes, domainBytes) = (host.utf8, domain.utf8)
        if hostBytes.count == domainBytes.count { return hostBytes.elementsEqual(domainBytes) }
        // Compared as bytes: both are lower-case ASCII, and String's
        // Unicode-aware hasSuffix costs more than the whole lookup should.
        guard hostBytes.count > domainBytes.count, hostBytes.suffix(domainBytes.count).elementsEqual(domainBytes),
            hostBytes.dropLast(domainBytes.count).last == UInt8(ascii: ".")
        else { return false }
        return !(hostIsIPAddress ?? isIPAddress(host))
    }

    /// RFC 6265 §5.1.4 path-match.
    static func pathMatches(_ requestPath: String, _ cookiePath: String) -> Bool {
        let (request, cookie) = (requestPath.utf8, cookiePath.utf8)
        guard request.count >= cookie.count, request.prefix(cookie.count).elementsEqual(cookie) else { return false }
        if request.count == cookie.count || cookie.last == UInt8(ascii: "/") { return true }
        return request.dropFirst(cookie.count).first == UInt8(ascii: "/")
    }

    /// The path of a URL as RFC 6265 reads it: encoded, `/` when empty.
    static func requestPath(of url: URL) -> String {
        let path = url.path(percentEncoded: true)
        return path.isEmpty ? "/" : path
    }

    /// RFC 6265 §5.1.4 default-path: the directory of the request's path.
    static func defaultPath(of url: URL) -> String {
        let path = url.path(percentEncoded: true)
        guard path.hasPrefix("/"), let lastSlash = path.lastIndex(of: "/"), lastSlash != path.startIndex else { return "/" }
        return String(path[..<lastSlash])
    }

    /// The bucket a host's cookies live in.
    func bucket(forHost host: String) -> String {
        if Self.isIPAddress(host) { return host }
        return publicSuffixes.registrableDomain(of: host) ?? host
    }

    /// Recent hosts' buckets: the public suffix rules cost more than the
    /// rest of a lookup.
    private var bucketMemo: [String: String] = [:]

    mutating func memoizedBucket(forHost host: String) -> String {
        if let key = bucketMemo[host] { return key }
        let key = bucket(forHost: host)
        if bucketMemo.count >= 4096 { bucketMemo.removeAll(keepingCapacity: true) }
        bucketMemo[host] = key
        return key
    }

    /// Whether two hosts are of the same site (registrable domain).
    func isSameSite(_ a: String, _ b: String) -> Bool {
        bucket(forHost: a) == bucket(forHost: b)
    }

    // MARK: Storing

    /// Why a Set-Cookie was not stored; for logs and tests.
    enum Rejection: Error, Equatable {
        case malformed, notHTTP, publicSuffix, domainMismatch, insecureScheme, secureCookieShadowed
        case crossSiteSameSite, invalidPrefix, policy
    }

    /// Whether a response to `url` could have set `cookie`'s domain (RFC
    /// 6265bis §5.7): a host-only cookie (and any for an IP address) only
    /// for exactly its host; a domain cookie for its domain and the hosts
    /// below it, unless the domain is a public suffix (then only as the
    /// host itself, as when no list is installed).
    func accepts(_ cookie: Cookie, from url: URL) -> Bool {
        guard let scheme = url.scheme?.lowercased(), Self.isCookieScheme(scheme), let host = Self.host(of: url) else { return false }
        let domain = cookie.canonicalDomain
        if cookie.isHostOnly || Self.isIPAddress(host) || !publicSuffixes.isAvailable || publicSuffixes.isPublicSuffix(domain) {
            return domain == host
        }
        return Self.domainMatches(host, domain)
    }

    /// The storage model of RFC 6265bis §5.7 for one Set-Cookie value
    /// received in a response to `url`.
    mutating func receive(
        _ field: String, from url: URL, site: SiteContext, now: Date, changes: inout Changes
    ) -> Result<Cookie, Rejection> {
        guard let scheme = url.scheme?.lowercased(), Self.isCookieScheme(scheme), let host = Self.host(of: url) else {
            return .failure(.notHTTP)
        }
        guard let parsed = SetCookie(field) else { return .failure(.malformed) }
        let created = now > lastCreation ? now : lastCreation.addingTimeInterval(1e-6)
        lastCreation = created
        var cookie = Cookie(name: parsed.name, value: parsed.value, domain: host, isHostOnly: true, creationDate: created)
        // Max-Age wins over Expires; both are capped at 400 days.
        if let maxAge = parsed.maxAge {
            cookie.expiresDate = maxAge <= 0 ? Date.distantPast : now.addingTimeInterval(min(Double(maxAge), Self.maximumLifetime))
        } else if let expires = parsed.expires {
            cookie.expiresDate = Date(timeIntervalSince1970: min(expires, now.timeIntervalSince1970 + Self.maximumLifetime))
        }
        if var domain = parsed.domain {
            domain = PublicSuffixList.ascii(domain)
            if Self.isIPAddress(host) {
                // An address has no subdomains: only itself, written without a dot, as host-only.
                guard domain == host, !parsed.domainHadLeadingDot else { return .failure(.domainMismatch) }
            } else if publicSuffixes.isPublicSuffix(domain) {
                // A public suffix is allowed only as the host itself, and then host-only.
                guard domain == host else { return .failure(.publicSuffix) }
            } else if !publicSuffixes.isAvailable {
                // Without the list any domain may be a public suffix: keep it to the host.
                guard Self.domainMatches(host, domain) else { return .failure(.domainMismatch) }
            } else {
                guard Self.domainMatches(host, domain) else {
                    return .failure(.domainMismatch)
                }
                cookie.canonicalDomain = domain
                cookie.isHostOnly = false
            }
        }
        cookie.path = parsed.path ?? Self.defaultPath(of: url)
        cookie.isSecure = parsed.isSecure
        cookie.isHTTPOnly = parsed.isHTTPOnly
        cookie.sameSite = parsed.sameSite ?? .unspecified
        let secureOrigin = Self.isSecureScheme(scheme)
        if cookie.isSecure && !secureOrigin { return .failure(.insecureScheme) }
        if !cookie.isSecure && !secureOrigin && shadowsSecureCookie(cookie) { return .failure(.secureCookieShadowed) }
        if site == .crossSite, cookie.sameSite == .lax || cookie.sameSite == .strict {
            return .failure(.crossSiteSameSite)
        }
        guard Self.prefixRulesAllow(cookie) else { return .failure(.invalidPrefix) }
        insert(cookie, now: now, changes: &changes)
        return .success(cookie)
    }

    /// RFC 6265bis §5.7 steps for `__Secure-` and `__Host-` (case-insensitive,
    /// and also when they start the value of a nameless cookie).
    static func prefixRulesAllow(_ cookie: Cookie) -> Bool {
        let lowerName = cookie.name.lowercased()
        if cookie.name.isEmpty {
            let lowerValue = cookie.value.lowercased()
            if lowerValue.hasPrefix("__secure-") || lowerValue.hasPrefix("__host-") { return false }
        }
        if lowerName.hasPrefix("__secure-") && !cookie.isSecure { return false }
        if lowerName.hasPrefix("__host-") && !(cookie.isSecure && cookie.isHostOnly && cookie.path == "/") { return false }
        return true
    }

    /// A non-secure origin may not set a cookie that would shadow a Secure
    /// one of the same name (RFC 6265bis §5.7 step 15).
    private func shadowsSecureCookie(_ cookie: Cookie) -> Bool {
        guard let bucket = buckets[bucket(forHost: cookie.canonicalDomain)] else { return false }
        return bucket.contains { existing in
            existing.isSecure && existing.name == cookie.name
                && (Self.domainMatches(existing.canonicalDomain, cookie.canonicalDomain) || Self.domainMatches(cookie.canonicalDomain, existing.canonicalDomain))
                && Self.pathMatches(cookie.path, existing.path)
        }
    }

    /// Stores a cookie, replacing one with the same key (keeping its
    /// creation time); an already expired cookie only removes that one.
    mutating func insert(_ cookie: Cookie, now: Date, changes: inout Changes) {
        var cookie = cookie
        cookie.lastAccessDate = now
        let key = bucket(forHost: cookie.canonicalDomain)
        var bucket = buckets[key] ?? []
        if let index = bucket.firstIndex(where: { $0.key == cookie.key }) {
            cookie.creationDate = bucket[index].creationDate
            bucket.remove(at: index)
            count -= 1
            changes.remove(cookie.key)
        }
        if cookie.isExpired(at: now) {
            buckets[key] = bucket.isEmpty ? nil : bucket
            return
        }
        bucket.append(cookie)
        count += 1
        changes.upsert(cookie)
        if bucket.count > perDomainLimit {
            evict(from: &bucket, keeping: cookie.key, downTo: perDomainLimit, now: now, changes: &changes)
        }
        buckets[key] = bucket
        if count > totalLimit { evictGlobally(now: now, keeping: cookie.key, changes: &changes) }
    }

    /// Removes expired cookies of a bucket, then its least recently used,
    /// until it holds `limit`.
    mutating func evict(
        from bucket: inout [Cookie], keeping kept: Cookie.Key, downTo limit: Int, now: Date, changes: inout Changes
    ) {
        let before = bucket.count
        bucket.removeAll { cookie in
            guard cookie.isExpired(at: now) else { return false }
            changes.remove(cookie.key)
            return true
        }
        while bucket.count > limit {
            guard
                let oldest = bucket.indices.filter({ bucket[$0].key != kept })
                    .min(by: { bucket[$0].lastAccessDate < bucket[$1].lastAccessDate })
            else { break }
            changes.remove(bucket[oldest].key)
            bucket.remove(at: oldest)
        }
        count -= before - bucket.count
    }

    mutating func evictGlobally(now: Date, keeping kept: Cookie.Key, changes: inout Changes) {
        removeExpired(now: now, changes: &changes)
        guard count > totalLimit else { return }
        let target = totalLimit - totalLimit / 10
        var all = buckets.values.flatMap { $0 }.filter { $0.key != kept }
        all.sort { $0.lastAccessDate < $1.lastAccessDate }
        for cookie in all.prefix(count - target) {
            remove(cookie.key, changes: &changes)
        }
    }

    /// Removes every expired cookie.
    mutating func removeExpired(now: Date, changes: inout Changes) {
        for (key, bucket) in buckets where bucket.contains(where: { $0.isExpired(at: now) }) {
            let kept = bucket.filter { !$0.isExpired(at: now) }
            for cookie in bucket where cookie.isExpired(at: now) { changes.remove(cookie.key) }
            count -= bucket.count - kept.count
            buckets[key] = kept.isEmpty ? nil : kept
        }
    }

    /// Removes the cookie with this key, if stored.
    mutating func remove(_ cookieKey: Cookie.Key, changes: inout Changes) {
        let key = bucket(forHost: cookieKey.domain)
        guard var bucket = buckets[key], let index = bucket.firstIndex(where: { $0.key == cookieKey }) else { return }
        bucket.remove(at: index)
        count -= 1
        changes.remove(cookieKey)
        buckets[key] = bucket.isEmpty ? nil : bucket
    }

    /// Removes the cookies matching a predicate.
    mutating func removeAll(where predicate: (Cookie) -> Bool, changes: inout Changes) {
        for (key, bucket) in buckets where bucket.contains(where: predicate) {
            let kept = bucket.filter { !predicate($0) }
            for cookie in bucket where predicate(cookie) { changes.remove(cookie.key) }
            count -= bucket.count - kept.count
            buckets[key] = kept.isEmpty ? nil : kept
        }
    }

    // MARK: Retrieving

    /// The cookies to send with a request for `url` (RFC 6265bis §5.8.3), in
    /// header order, marking them used and dropping expired ones met on the way.
    mutating func cookies(for url: URL, site: SiteContext, now: Date, changes: inout Changes) -> [Cookie] {
        // An empty jar (most sessions of an API client) answers before any URL parsing.
        guard count > 0, let scheme = url.scheme?.lowercased(), Self.isCookieScheme(scheme), let host = Self.host(of: url) else {
            return []
        }
        let key = memoizedBucket(forHost: host)
        guard var bucket = buckets[key] else { return [] }
        let secure = Self.isSecureScheme(scheme)
        let path = Self.requestPath(of: url)
        let hostIsIPAddress = Self.isIPAddress(host)
        var matched: [Int] = []
        var expired = false
        for index in bucket.indices {
            let cookie = bucket[index]
            if cookie.isExpired(at: now) {
                expired = true
                continue
            }
            guard cookie.isHostOnly ? host == cookie.canonicalDomain : Self.domainMatches(host, cookie.canonicalDomain, hostIsIPAddress: hostIsIPAddress),
                Self.pathMatches(path, cookie.path),
                !cookie.isSecure || secure,
                site == .sameSite || cookie.sameSite == .none || cookie.sameSite == .unspecified,
                cookie.ports == nil || cookie.allowsPort(url.port ?? (secure ? 443 : 80))
            else { continue }
            matched.append(index)
        }
        for index in matched { bucket[index].lastAccessDate = now }
        var result = matched.map { bucket[$0] }
        if expired {
            let before = bucket.count
            bucket.removeAll { cookie in
                guard cookie.isExpired(at: now) else { return false }
                changes.remove(cookie.key)
                return true
            }
            count -= before - bucket.count
        }
        buckets[key] = bucket.isEmpty ? nil : bucket
        result.sort { a, b in
            let (la, lb) = (a.path.utf8.count, b.path.utf8.count)
            return la != lb ? la > lb : a.creationDate < b.creationDate
        }
        return result
    }

    /// Every stored cookie that has not expired.
    func allCookies(now: Date) -> [Cookie] {
        buckets.values.flatMap { $0 }.filter { !$0.isExpired(at: now) }
    }

    /// The Cookie header value for a list of cookies, nil for none.
    static func headerValue(_ cookies: [Cookie]) -> String? {
        cookies.isEmpty ? nil : cookies.map(\.headerPair).joined(separator: "; ")
    }
}

extension CookieJar {
    /// Puts back a cookie read from disk as it was (creation and last-access
    /// times kept), applying the limits.
    mutating func restore(_ cookie: Cookie, changes: inout Changes) {
        let key = bucket(forHost: cookie.canonicalDomain)
        var bucket = buckets[key] ?? []
        if let index = bucket.firstIndex(where: { $0.key == cookie.key }) {
            bucket[index] = cookie
        } else {
            bucket.append(cookie)
            count += 1
        }
        if bucket.count > perDomainLimit {
            evict(from: &bucket, keeping: cookie.key, downTo: perDomainLimit, now: cookie.lastAccessDate, changes: &changes)
        }
        buckets[key] = bucket
        if count > totalLimit { evictGlobally(now: cookie.lastAccessDate, keeping: cookie.key, changes: &changes) }
    }
}
