import Foundation
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
            .name: name, .value: value, .domain: isHostOnly ? domain : "." + domain, .path: path,
        ]
        if let expiresDate { properties[.expires] = expiresDate }
        if isSecure { properties[.secure] = "TRUE" }
        if isHTTPOnly { properties[HTTPCookiePropertyKey("HttpOnly")] = "TRUE" }
        return HTTPCookie(properties: properties)
    }
}
