public import Foundation
import Transport

/// One HTTP cookie as a cookie store holds it (RFC 6265bis §5.7).
///
/// Its `description` names the cookie and its scope but never its value:
/// cookie values are secrets.
public struct Cookie: Sendable, Hashable, CustomStringConvertible {
    /// The SameSite attribute (RFC 6265bis §5.6.7).
    public enum SameSite: String, Sendable, Hashable, CaseIterable {
        /// The attribute was absent or had an unknown value; sent like `.none`.
        case unspecified
        /// Sent with cross-site requests too.
        case none
        /// Not sent with cross-site subresource requests.
        case lax
        /// Only sent with same-site requests.
        case strict
    }

    /// The name; may be empty (RFC 6265bis: then the Cookie header carries the value alone).
    public var name: String
    /// The value. Never printed by `description`.
    public var value: String
    /// The domain, lower case and in ASCII form, without a leading dot: what
    /// matching, the stores and their files use (with `isHostOnly`).
    package var canonicalDomain: String
    /// The domain as Apple's `HTTPCookie` gives it: with a leading dot for a
    /// domain cookie (`.example.com`, sent to the hosts below it too),
    /// without for a host-only one. Setting a value with a leading dot makes
    /// the cookie a domain cookie; one without keeps `isHostOnly` as it is.
    public var domain: String {
        get { isHostOnly ? canonicalDomain : "." + canonicalDomain }
        set {
            let dotted = newValue.hasPrefix(".")
            canonicalDomain = PublicSuffixList.ascii(dotted ? String(newValue.dropFirst()) : newValue)
            if dotted { isHostOnly = false }
        }
    }
    /// Sent only to exactly its domain, not to its subdomains (no Domain attribute was given).
    public var isHostOnly: Bool
    /// The path the cookie is scoped to; starts with `/`.
    public var path: String
    /// When the cookie expires; nil for a session cookie, which lives until
    /// its store is closed.
    public var expiresDate: Date?
    /// When the cookie was first stored; kept when a response replaces it.
    public var creationDate: Date
    /// When the cookie was last sent or stored.
    public var lastAccessDate: Date
    /// Only sent over secure connections (`https`, `wss`).
    public var isSecure: Bool
    /// Not exposed to non-HTTP APIs.
    public var isHTTPOnly: Bool
    /// The SameSite attribute.
    public var sameSite: SameSite
    /// The cookie's version, as Apple's `HTTPCookie` keeps it: 0 for a
    /// Netscape or RFC 6265 cookie, 1 for one made from RFC 2965 properties.
    public var version: Int = 0
    /// The RFC 2965 comment for the user, when the cookie's properties gave one.
    public var comment: String?
    /// The RFC 2965 comment URL, when the cookie's properties gave one.
    public var commentURL: URL?
    /// The ports the cookie may be sent to; nil for any port. Set from the
    /// RFC 2965 `Port` property (`HTTPCookiePropertyKey.port`, "80,8080").
    package var ports: [Int]?

    /// The ports the cookie is sent to, as Apple's `portList`; nil for any
    /// port. A request to another port (its URL's, or the scheme's default)
    /// does not get the cookie.
    public var portList: [NSNumber]? {
        get { ports.map { $0.map { NSNumber(value: $0) } } }
        set { ports = newValue.map { $0.map(\.intValue).filter(Self.isPort) } }
    }

    /// Whether `number` can be a TCP port of a URL.
    static func isPort(_ number: Int) -> Bool { (1...65535).contains(number) }

    /// The ports of a comma-separated list ("80, 8080"); numbers outside
    /// 1...65535 and other text are left out, so a list of nothing valid
    /// lets the cookie go to no port rather than to every one.
    package static func ports(fromList text: String) -> [Int] {
        FieldList.members(text).compactMap { Int($0) }.filter(isPort)
    }

    /// The port list as the `Port` property spells it.
    package var portListText: String? { ports.map { $0.map(String.init).joined(separator: ",") } }

    /// Sets the RFC 2965 attributes from a store's row, each checked: a
    /// version other than 1 is 0, a comment URL that does not parse is
    /// none, and the ports are read as `ports(fromList:)` reads them.
    package mutating func readRFC2965(version: Int64?, comment: String?, commentURL: String?, ports: String?) {
        self.version = version == 1 ? 1 : 0
        self.comment = comment
        self.commentURL = commentURL.flatMap(URL.init(string:))
        self.ports = ports.map(Self.ports(fromList:))
    }

    /// Whether the cookie may be sent to `port`.
    func allowsPort(_ port: Int) -> Bool { ports.map { $0.contains(port) } ?? true }

    /// A cookie with the given attributes. A `domain` given with a leading
    /// dot is stored without it and is not host-only unless you say so.
    ///
    /// - Parameters:
    ///   - name: The name.
    ///   - value: The value.
    ///   - domain: The domain (`example.com` or `.example.com`).
    ///   - isHostOnly: Whether only `domain` itself gets the cookie; by
    ///     default true unless `domain` starts with a dot.
    ///   - path: The path; `/` by default.
    ///   - expiresDate: nil for a session cookie.
    ///   - creationDate: Now by default.
    ///   - isSecure: Secure attribute.
    ///   - isHTTPOnly: HttpOnly attribute.
    ///   - sameSite: SameSite attribute.
    public init(
        name: String, value: String, domain: String, isHostOnly: Bool? = nil, path: String = "/",
        expiresDate: Date? = nil, creationDate: Date = Date(), isSecure: Bool = false, isHTTPOnly: Bool = false,
        sameSite: SameSite = .unspecified
    ) {
        self.name = name
        self.value = value
        let dotted = domain.hasPrefix(".")
        self.canonicalDomain = PublicSuffixList.ascii(dotted ? String(domain.dropFirst()) : domain)
        self.isHostOnly = isHostOnly ?? !dotted
        self.path = path.hasPrefix("/") ? path : "/"
        self.expiresDate = expiresDate
        self.creationDate = creationDate
        self.lastAccessDate = creationDate
        self.isSecure = isSecure
        self.isHTTPOnly = isHTTPOnly
        self.sameSite = sameSite
    }

    /// Whether the cookie lives only as long as its store (no Expires or Max-Age).
    public var isSessionOnly: Bool { expiresDate == nil }

    /// `name=value`, or the value alone for a nameless cookie, as the
    /// Cookie header carries it.
    public var headerPair: String { name.isEmpty ? value : "\(name)=\(value)" }

    /// The identity under which a store keeps the cookie: a new cookie with
    /// the same name, domain, host-only flag and path replaces it.
    package struct Key: Hashable, Sendable {
        package var name: String
        package var domain: String
        package var isHostOnly: Bool
        package var path: String

        package init(name: String, domain: String, isHostOnly: Bool, path: String) {
            self.name = name
            self.domain = domain
            self.isHostOnly = isHostOnly
            self.path = path
        }
    }

    package var key: Key { Key(name: name, domain: canonicalDomain, isHostOnly: isHostOnly, path: path) }

    /// Names the cookie and its scope, never its value.
    public var description: String {
        var text = "Cookie(\(name.isEmpty ? "<no name>" : name); domain=\(domain); path=\(path)"
        if let expiresDate { text += "; expires=\(HTTPDate.format(expiresDate.timeIntervalSince1970))" }
        if isSecure { text += "; Secure" }
        if isHTTPOnly { text += "; HttpOnly" }
        if sameSite != .unspecified { text += "; SameSite=\(sameSite.rawValue)" }
        if let portListText { text += "; Port=\(portListText)" }
        return text + ")"
    }

    /// Whether both are the same cookie: every attribute, as Apple's
    /// `HTTPCookie` compares, but not the store's bookkeeping (when it was
    /// created and last used), so a cookie read back equals the one stored.
    public static func == (a: Cookie, b: Cookie) -> Bool {
        a.name == b.name && a.value == b.value && a.canonicalDomain == b.canonicalDomain && a.isHostOnly == b.isHostOnly && a.path == b.path
            && a.expiresDate == b.expiresDate && a.isSecure == b.isSecure && a.isHTTPOnly == b.isHTTPOnly && a.sameSite == b.sameSite
            && a.version == b.version && a.comment == b.comment && a.commentURL == b.commentURL && a.ports == b.ports
    }

    /// Hashes what `==` compares.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(name)
        hasher.combine(value)
        hasher.combine(canonicalDomain)
        hasher.combine(isHostOnly)
        hasher.combine(path)
        hasher.combine(expiresDate)
        hasher.combine(isSecure)
        hasher.combine(isHTTPOnly)
        hasher.combine(sameSite)
        hasher.combine(version)
        hasher.combine(comment)
        hasher.combine(commentURL)
        hasher.combine(ports)
    }

    func isExpired(at now: Date) -> Bool {
        expiresDate.map { $0 <= now } ?? false
    }
}

/// Which cookies a store accepts from responses (Apple's `HTTPCookie.AcceptPolicy`).
public enum CookieAcceptPolicy: String, Sendable, Hashable, CaseIterable {
    /// Accept every cookie the rules allow.
    case always
    /// Accept none.
    case never
    /// Accept cookies only from the main document's registrable domain (or
    /// from any domain when the request has no main document URL).
    case onlyFromMainDocumentDomain
}
