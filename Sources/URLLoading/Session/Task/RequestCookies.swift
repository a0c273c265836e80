import Foundation
import Transport
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The cookie store's part in a request: every hop of a task, redirects
/// included, sends the store's cookies for its URL and stores the cookies
/// its response sets; a WebSocket's handshake and a background task's
/// requests follow the same rules.
enum RequestCookies {
    /// Whether this request takes part in cookie handling at all.
    static func handled(_ request: URLRequest, session: Session) -> Bool {
        session.cookieStore != nil && session.settings.httpShouldSetCookies && request.httpShouldHandleCookies
    }

    /// The Cookie header for a request, or nil: none stored, cookies off, or
    /// the request carries its own Cookie header, which is left alone.
    /// `url` is the request's unless given (a WebSocket's, in its `http`
    /// form).
    static func header(for request: URLRequest, url: URL? = nil, headers: [(name: String, value: String)], session: Session) -> String? {
        guard handled(request, session: session), let store = session.cookieStore, let url = url ?? request.url,
            !headers.contains(where: { HeaderFields.namesEqual($0.name, "Cookie") })
        else { return nil }
        return store.cookieHeader(for: url, mainDocumentURL: request.mainDocumentURL)
    }

    /// Stores the `Set-Cookie` fields of a response under the
    /// configuration's accept policy.
    static func store(from head: ResponseHead, url: URL, request: URLRequest, session: Session) {
        store(head.headers, url: url, request: request, session: session)
    }

    /// Stores the `Set-Cookie` fields among `fields`.
    static func store(_ fields: [(name: String, value: String)], url: URL, request: URLRequest, session: Session) {
        guard handled(request, session: session), let store = session.cookieStore else { return }
        let values = fields.compactMap { HeaderFields.namesEqual($0.name, "Set-Cookie") ? $0.value : nil }
        guard !values.isEmpty else { return }
        store.setCookies(values, for: url, mainDocumentURL: request.mainDocumentURL, policy: session.settings.httpCookieAcceptPolicy)
    }
}
