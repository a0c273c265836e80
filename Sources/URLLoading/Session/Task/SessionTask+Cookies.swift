import Foundation
import Transport
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The cookie store's part in a task:
/// every hop, redirects included, sends the store's cookies for its URL and
/// stores the cookies its response sets.
extension SessionTask {
    /// Whether this request takes part in cookie handling at all.
    static func handlesCookies(_ request: URLRequest, session: Session) -> Bool {
        session.cookieStore != nil && session.settings.httpShouldSetCookies && request.httpShouldHandleCookies
    }

    /// The Cookie header for a hop, or nil: none stored, cookies off, or the
    /// request carries its own Cookie header, which is left alone.
    static func cookieHeader(for request: URLRequest, headers: [(name: String, value: String)], session: Session) -> String? {
        guard handlesCookies(request, session: session), let store = session.cookieStore, let url = request.url,
            !headers.contains(where: { HeaderFields.namesEqual($0.name, "Cookie") })
        else { return nil }
        return store.cookieHeader(for: url, mainDocumentURL: request.mainDocumentURL)
    }

    /// Stores the `Set-Cookie` fields of a hop's response under the
    /// configuration's accept policy.
    static func storeCookies(of head: ResponseHead, url: URL, request: URLRequest, session: Session) {
        guard handlesCookies(request, session: session), let store = session.cookieStore else { return }
        let fields = head.headers.compactMap { HeaderFields.namesEqual($0.name, "Set-Cookie") ? $0.value : nil }
        guard !fields.isEmpty else { return }
        store.setCookies(fields, for: url, mainDocumentURL: request.mainDocumentURL, policy: session.settings.httpCookieAcceptPolicy)
    }

    /// The request's fields as the cache sees them (Vary: Cookie selects on
    /// the cookies actually sent, not only on a Cookie field the caller set).
    static func cacheRequestHeaders(_ request: URLRequest, cookie: String?, credentials: String?) -> HeaderFields {
        var headers = HeaderFields(request.allHTTPHeaderFields ?? [:])
        if let cookie { headers.set("Cookie", cookie) }
        if let credentials { headers.set(StoredResponse.credentialsField, credentials) }
        return headers
    }

    /// Who a hop's credentials say the user is, for the cache only (see
    /// `StoredResponse.credentialsField`; stored as a fingerprint): the URL's
    /// user info, else the caller's Authorization field, else the
    /// credential the session adds. Nil when the hop carries none.
    static func credentialIdentity(_ request: URLRequest, sent: SentAuthorization?) -> String? {
        if let url = request.url, let user = url.user(percentEncoded: false) {
            return "user-info \(user):\(url.password(percentEncoded: false) ?? "")"
        }
        if let field = request.value(forHTTPHeaderField: "Authorization") { return "field \(field)" }
        guard let sent, !sent.space.isProxy else { return nil }
        return "credential \(sent.credential.user ?? ""):\(sent.credential.password ?? "")"
    }
}
