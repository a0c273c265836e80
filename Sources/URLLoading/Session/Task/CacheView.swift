import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A task's requests and responses as the cache sees them: the fields that
/// select a stored variant, whose credentials a response was stored for,
/// and the response a stored entry is served as.
enum CacheView {
    /// The request's fields as the cache sees them (Vary: Cookie selects on
    /// the cookies actually sent, not only on a Cookie field the caller set).
    static func requestHeaders(_ request: URLRequest, cookie: String?, credentials: String?) -> HeaderFields {
        var headers = HeaderFields(request.allHTTPHeaderFields ?? [:])
        if let cookie { headers.set("Cookie", cookie) }
        if let credentials { headers.set(StoredResponse.credentialsField, credentials) }
        return headers
    }

    /// Who a hop's credentials say the user is, for the cache only (see
    /// `StoredResponse.credentialsField`; stored as a fingerprint): the URL's
    /// user info, else the caller's Authorization field, else the
    /// credential the session adds. Nil when the hop carries none.
    static func credentialIdentity(_ request: URLRequest, sent: SessionTask.SentAuthorization?) -> String? {
        if let url = request.url, let user = url.user(percentEncoded: false) {
            return "user-info \(user):\(url.password(percentEncoded: false) ?? "")"
        }
        if let field = request.value(forHTTPHeaderField: "Authorization") { return "field \(field)" }
        guard let sent, !sent.space.isProxy else { return nil }
        return "credential \(sent.credential.user ?? ""):\(sent.credential.password ?? "")"
    }

    /// The response served from a stored entry: its Age now, and Cache-Status.
    static func servedResponse(_ stored: StoredResponse, cacheStatus: String?, now: Double) -> HTTPURLResponse? {
        stored.httpResponse(headers: CacheExchange.servedHeaders(stored, cacheStatus: cacheStatus, now: now))
    }
}
