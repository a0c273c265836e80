package import Foundation
#if canImport(FoundationNetworking)
package import FoundationNetworking
#endif

/// The cache's side of one exchange (RFC 9111, RFC 5861,
/// RFC 9211), as pure decisions over the request, the stored entry, the
/// response and the time, which the session applies: no store is touched
/// here, and `now` is always given.
///
/// ```
/// before ─ stored, policy, request ─→ serve (a range of it) | revalidate (conditional fields) | network | fail | 504
/// after  ─ 304 ─────────→ the stored entry, refreshed when the 304 selects it
///        ─ HEAD 200 ────→ refresh the GET entry it selects, or drop it (another length)
///        ─ 5xx / error ─→ the stored entry, when stale-if-error allows
///        ─ response ────→ invalidated URLs; a store candidate when storable
/// ```
package enum CacheExchange {
    /// The name this cache gives itself in `Cache-Status` (RFC 9211).
    package static let cacheName = "URLLoading"

    /// What to do before the network.
    package enum Before: Equatable {
        /// Go to the network; conditionally, revalidating this entry, when given.
        case network(revalidating: StoredResponse?, cacheStatus: String)
        /// Answer with this stored response; when `revalidate`, also refresh
        /// it in the background (stale-while-revalidate, RFC 5861 §3).
        case serve(StoredResponse, cacheStatus: String, revalidate: Bool)
        /// Fail: `returnCacheDataDontLoad` with nothing stored.
        case fail(String)
        /// Answer 504: `only-if-cached` with nothing usable (RFC 9111 §5.2.1.7).
        case gatewayTimeout(cacheStatus: String)
    }

    /// The request cache policy's decision, with Apple's meanings, and
    /// RFC 9111 for `useProtocolCachePolicy`. A `Range` request served
    /// from a complete stored response gets that range (RFC 9110 §14).
    package static func before(policy: URLRequest.CachePolicy, requestHeaders: HeaderFields, stored: StoredResponse?, now: Double) -> Before {
        let hasValidators = stored.map { !CachePolicy.conditionalHeaders($0.entry).isEmpty } ?? false
        func serve(_ stored: StoredResponse, _ status: String, revalidate: Bool = false) -> Before {
            .serve(ranged(stored, requestHeaders: requestHeaders), cacheStatus: status, revalidate: revalidate)
        }
        switch policy {
        case .reloadIgnoringLocalCacheData, .reloadIgnoringLocalAndRemoteCacheData:
            return .network(revalidating: nil, cacheStatus: "\(cacheName); fwd=request")
        case .returnCacheDataElseLoad:
            if let stored { return serve(stored, "\(cacheName); hit") }
            return .network(revalidating: nil, cacheStatus: "\(cacheName); fwd=uri-miss")
        case .returnCacheDataDontLoad:
            if let stored { return serve(stored, "\(cacheName); hit") }
            return .fail("nothing is stored for this request and the policy forbids loading it")
        case .reloadRevalidatingCacheData:
            guard let stored else { return .network(revalidating: nil, cacheStatus: "\(cacheName); fwd=uri-miss") }
            return .network(revalidating: hasValidators ? stored : nil, cacheStatus: "\(cacheName); fwd=request")
        default:
            let onlyIfCached = CachePolicy.requestControl(requestHeaders).onlyIfCached
            let gatewayTimeout = Before.gatewayTimeout(cacheStatus: "\(cacheName); fwd=miss; detail=only-if-cached")
            guard let stored else {
                return onlyIfCached ? gatewayTimeout : .network(revalidating: nil, cacheStatus: "\(cacheName); fwd=uri-miss")
            }
            switch CachePolicy.evaluate(stored.entry, requestHeaders: requestHeaders, now: now).action {
            case .useStored:
                return serve(stored, "\(cacheName); hit")
            case .useStoredAndRevalidate:
                return serve(stored, "\(cacheName); hit; detail=stale-while-revalidate", revalidate: true)
            case .revalidate:
                if onlyIfCached { return gatewayTimeout }
                return .network(revalidating: hasValidators ? stored : nil, cacheStatus: "\(cacheName); fwd=stale")
            case .fetch:
                if onlyIfCached { return gatewayTimeout }
                return .network(revalidating: nil, cacheStatus: "\(cacheName); fwd=vary-miss")
            }
        }
    }

    /// The stored response as a `Range` request gets it: a single
    /// satisfiable byte range of a complete (200) response becomes a 206 of
    /// that range; anything else is served whole.
    package static func ranged(_ stored: StoredResponse, requestHeaders: HeaderFields) -> StoredResponse {
        guard stored.entry.status == 200, let field = requestHeaders["Range"],
            let range = byteRange(field, length: stored.bodyCount)
        else { return stored }
        var served = stored
        served.entry.status = 206
        served.entry.responseHeaders.set("Content-Range", "bytes \(range.lowerBound)-\(range.upperBound - 1)/\(stored.bodyCount)")
        served.entry.responseHeaders.set("Content-Length", String(range.count))
        if let file = stored.bodyFile {
            served.bodyFile = file.slice(range)
        } else {
            served.body = stored.body.subdata(in: range)
        }
        return served
    }

    /// A single byte range of a `Range` field (RFC 9110 §14.1.2) resolved
    /// against a body of `length` bytes, or nil when the field asks for
    /// something else (several ranges, other units) or nothing satisfiable.
    package static func byteRange(_ field: String, length: Int) -> Range<Int>? {
        let text = field.trimmingCharacters(in: .whitespaces)
        guard text.lowercased().hasPrefix("bytes="), length > 0 else { return nil }
        let spec = text.dropFirst(6).trimmingCharacters(in: .whitespaces)
        guard !spec.contains(","), let dash = spec.firstIndex(of: "-") else { return nil }
        let first = spec[..<dash].trimmingCharacters(in: .whitespaces)
        let last = spec[spec.index(after: dash)...].trimmingCharacters(in: .whitespaces)
        if first.isEmpty {
            guard let suffix = Int(last), suffix > 0 else { return nil }
            return max(0, length - suffix)..<length
        }
        guard let start = Int(first), start >= 0, start < length else { return nil }
        if last.isEmpty { return start..<length }
        guard let end = Int(last), end >= start else { return nil }
        return start..<(min(end, length - 1) + 1)
    }

    /// The header fields a served entry shows now: its Age, and Cache-Status.
    package static func servedHeaders(_ stored: StoredResponse, cacheStatus: String?, now: Double) -> HeaderFields {
        var headers = CachePolicy.servedHeaders(stored.entry, now: now)
        if let cacheStatus { headers.set("Cache-Status", cacheStatus) }
        return headers
    }

    // MARK: After the network

    /// A 304 answering the conditional request made for `stored`: the entry
    /// to serve (as its own status, like Apple), and whether it was refreshed
    /// and must be stored again — only when the 304 selects it (§4.3.4).
    package static func notModified(
        _ stored: StoredResponse, notModifiedHeaders: HeaderFields, requestTime: Double, now: Double
    ) -> (served: StoredResponse, refreshed: Bool) {
        guard CachePolicy.notModifiedSelects(stored.entry, notModifiedHeaders: notModifiedHeaders).allowed else { return (stored, false) }
        var served = stored
        served.entry.responseHeaders = CachePolicy.updatedHeaders(stored.entry.responseHeaders, with: notModifiedHeaders)
        served.entry.requestTime = requestTime > 0 ? requestTime : now
        served.entry.responseTime = now
        return (served, true)
    }

    /// The Cache-Status of an entry served after a 304.
    package static let notModifiedStatus = "\(cacheName); fwd=stale; fwd-status=304"

    /// What a 200 to HEAD does to the stored GET response it selects
    /// (RFC 9111 §4.3.5).
    package enum HeadUpdate: Equatable {
        /// Nothing: it selects none, or says nothing new.
        case none
        /// Another Content-Length: the stored one is outdated.
        case remove
        /// Refreshed like a 304.
        case refresh(StoredResponse)
    }

    /// The effect of a HEAD response on `stored`, the GET entry it selects.
    package static func headUpdate(_ stored: StoredResponse?, headHeaders: HeaderFields, requestTime: Double, now: Double) -> HeadUpdate {
        guard let stored else { return .none }
        if let length = headHeaders["Content-Length"], let storedLength = stored.entry.responseHeaders["Content-Length"], length != storedLength {
            return .remove
        }
        let (refreshed, changed) = notModified(stored, notModifiedHeaders: headHeaders, requestTime: requestTime, now: now)
        return changed ? .refresh(refreshed) : .none
    }

    /// RFC 5861 §4: the stored response to serve when the origin failed
    /// (a network error or a 5xx), when its stale-if-error window allows.
    package static func staleIfError(_ fallback: StoredResponse?, requestHeaders: HeaderFields, now: Double) -> StoredResponse? {
        guard let fallback, CachePolicy.staleIfError(fallback.entry, requestHeaders: requestHeaders, now: now).allowed else { return nil }
        return fallback
    }

    /// The Cache-Status of a stale-if-error answer.
    package static func staleIfErrorStatus(_ reason: String) -> String {
        "\(cacheName); hit; \(reason); detail=stale-if-error"
    }

    /// The primary keys a response to `method` invalidates (RFC 9111 §4.4).
    package static func invalidatedKeys(method: String, status: Int, url: URL, responseHeaders: HeaderFields) -> [String] {
        CachePolicy.invalidatedURLs(method: method, status: status, url: url, responseHeaders: responseHeaders).compactMap(CachePolicy.primaryKey)
    }

    /// The response as the cache would store it, or nil when it may not be
    /// stored (the 5% rule is the tiers').
    package static func storeCandidate(
        url: URL, key: String, method: String, status: Int, responseHeaders: HeaderFields, requestHeaders: HeaderFields,
        body: Data, requestTime: Double, now: Double
    ) -> StoredResponse? {
        guard CachePolicy.storability(method: method, requestHeaders: requestHeaders, status: status, responseHeaders: responseHeaders).allowed
        else { return nil }
        return StoredResponse(
            url: CachedURL.stored(url), key: key, status: status, responseHeaders: responseHeaders, requestHeaders: requestHeaders,
            body: body, requestTime: requestTime, responseTime: now, storedAt: now)
    }
}
