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
        return HTTPCookie(properties: properties)
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
    }

    /// The cookie's properties as Apple's dictionary.
    public var properties: [HTTPCookiePropertyKey: Any]? { httpCookie?.properties }

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
