public import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

extension Cookie {
    /// A cookie from Foundation's `HTTPCookie`, for code moving from
    /// `HTTPCookieStorage`. A domain with a leading dot is a domain cookie,
    /// one without is host-only, as Foundation reads them.
    /// FoundationNetworking's `HTTPCookie` has no SameSite attribute, so the
    /// result's is `.unspecified`.
    public init(_ cookie: HTTPCookie) {
        self.init(
            name: cookie.name, value: cookie.value, domain: cookie.domain, path: cookie.path.isEmpty ? "/" : cookie.path,
            expiresDate: cookie.isSessionOnly ? nil : cookie.expiresDate, isSecure: cookie.isSecure,
            isHTTPOnly: cookie.isHTTPOnly)
        version = cookie.version
        comment = cookie.comment
        commentURL = cookie.commentURL
        portList = cookie.portList
    }

    /// The cookie as Foundation's `HTTPCookie`, for APIs that take one; nil
    /// when Foundation refuses its properties (for example a nameless cookie).
    /// The SameSite attribute is lost: FoundationNetworking has none.
    public var httpCookie: HTTPCookie? {
        var properties: [HTTPCookiePropertyKey: Any] = [
            .name: name, .value: value, .domain: domain, .path: path,
        ]
        if let expiresDate { properties[.expires] = expiresDate }
        if isSecure { properties[.secure] = "TRUE" }
        if isHTTPOnly { properties[HTTPCookiePropertyKey("HttpOnly")] = "TRUE" }
        properties.merge(rfc2965Properties) { _, ours in ours }
        return HTTPCookie(properties: properties)
    }

    /// The version, comment, comment URL and port list as Apple's property
    /// keys spell them (the version and the ports as strings).
    var rfc2965Properties: [HTTPCookiePropertyKey: Any] {
        var properties: [HTTPCookiePropertyKey: Any] = [.version: String(version)]
        if let comment { properties[.comment] = comment }
        if let commentURL { properties[.commentURL] = commentURL }
        if let portListText { properties[.port] = portListText }
        return properties
    }

    /// Reads the RFC 2965 properties Apple's `HTTPCookie` keeps: `.version`
    /// ("0" or "1", or a number), `.comment`, `.commentURL` (a URL or its
    /// string) and `.port` (comma-separated ports, or an array of numbers).
    mutating func readRFC2965(_ properties: [HTTPCookiePropertyKey: Any]) {
        switch properties[.version] {
        case let text as String: version = Int(text.trimmingCharacters(in: .whitespaces)).map { $0 == 1 ? 1 : 0 } ?? 0
        case let number as Int: version = number == 1 ? 1 : 0
        case let number as NSNumber: version = number.intValue == 1 ? 1 : 0
        default: break
        }
        if let text = properties[.comment] as? String { comment = text }
        switch properties[.commentURL] {
        case let url as URL: commentURL = url
        case let text as String: commentURL = URL(string: text)
        default: break
        }
        switch properties[.port] {
        case let text as String where !text.trimmingCharacters(in: .whitespaces).isEmpty: ports = Self.ports(fromList: text)
        case let numbers as [NSNumber]: portList = numbers
        case let numbers as [Int]: ports = numbers.filter(Self.isPort)
        default: break
        }
    }
}

/// Apple's `HTTPCookie` class members, for ported code.
extension Cookie {
    /// A cookie from Apple's property dictionary (`.name`, `.value`,
    /// `.domain`, `.path`, `.expires`, `.secure`, ...), read as Foundation
    /// reads it; nil where Foundation refuses the properties.
    public init?(properties: [HTTPCookiePropertyKey: Any]) {
        guard let cookie = HTTPCookie(properties: properties) else { return nil }
        self.init(cookie)
        readRFC2965(properties)
    }

    /// The cookie's properties as Apple's dictionary.
    public var properties: [HTTPCookiePropertyKey: Any]? {
        httpCookie.map { $0.properties ?? [:] }.map { $0.merging(rfc2965Properties) { _, ours in ours } }
    }

    /// The cookies that `Set-Cookie` fields of a response for `url` set, under
    /// the rules a store applies (RFC 6265bis, the Public Suffix List); values
    /// the rules refuse are left out. A field joined from several with commas
    /// is split where a new cookie starts.
    public static func cookies(withResponseHeaderFields headerFields: [String: String], for url: URL) -> [Cookie] {
        var jar = CookieJar(publicSuffixes: .system)
        var changes = CookieJar.Changes()
        let now = Date()
        return headerFields.filter { $0.key.caseInsensitiveCompare("Set-Cookie") == .orderedSame }
            .flatMap { SetCookieSplitter.split($0.value) }
            .compactMap { field in try? jar.receive(field, from: url, site: .sameSite, now: now, changes: &changes).get() }
    }

    /// The `Cookie` request field for `cookies`, as Apple's dictionary; empty
    /// for no cookie.
    public static func requestHeaderFields(with cookies: [Cookie]) -> [String: String] {
        CookieJar.headerValue(cookies).map { ["Cookie": $0] } ?? [:]
    }
}
