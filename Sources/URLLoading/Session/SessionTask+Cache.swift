import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension SessionTask {
    /// What the cache does for a request before the network (SPEC C6).
    enum CacheStep {
        /// Go to the network; conditionally, revalidating this entry, when given.
        case network(revalidating: StoredResponse?, cacheStatus: String)
        /// Answer with this stored response; when `revalidate`, also refresh
        /// it in the background (stale-while-revalidate, RFC 5861 §3).
        case serve(StoredResponse, cacheStatus: String, revalidate: Bool = false)
        /// Fail: `returnCacheDataDontLoad` with nothing stored.
        case fail(SessionError)
        /// Answer 504: `only-if-cached` with nothing usable (RFC 9111 §5.2.1.7).
        case gatewayTimeout
    }

    /// The name this cache gives itself in `Cache-Status` (RFC 9211).
    static let cacheName = "URLLoading"

    /// The request cache policy's decision, with Apple's meanings, and
    /// RFC 9111 for `useProtocolCachePolicy`.
    static func cacheStep(policy: URLRequest.CachePolicy, requestHeaders: HeaderFields, stored: StoredResponse?, now: Double) -> CacheStep {
        let hasValidators = stored.map { !CachePolicy.conditionalHeaders($0.entry).isEmpty } ?? false
        switch policy {
        case .reloadIgnoringLocalCacheData, .reloadIgnoringLocalAndRemoteCacheData:
            return .network(revalidating: nil, cacheStatus: "\(cacheName); fwd=request")
        case .returnCacheDataElseLoad:
            if let stored { return .serve(stored, cacheStatus: "\(cacheName); hit") }
            return .network(revalidating: nil, cacheStatus: "\(cacheName); fwd=uri-miss")
        case .returnCacheDataDontLoad:
            if let stored { return .serve(stored, cacheStatus: "\(cacheName); hit") }
            return .fail(SessionError(.resourceUnavailable, failingURL: nil, message: "nothing is stored for this request and the policy forbids loading it"))
        case .reloadRevalidatingCacheData:
            guard let stored else { return .network(revalidating: nil, cacheStatus: "\(cacheName); fwd=uri-miss") }
            return .network(revalidating: hasValidators ? stored : nil, cacheStatus: "\(cacheName); fwd=request")
        default:
            let onlyIfCached = CachePolicy.requestControl(requestHeaders).onlyIfCached
            guard let stored else {
                return onlyIfCached ? .gatewayTimeout : .network(revalidating: nil, cacheStatus: "\(cacheName); fwd=uri-miss")
            }
            let evaluation = CachePolicy.evaluate(stored.entry, requestHeaders: requestHeaders, now: now)
            switch evaluation.action {
            case .useStored:
                return .serve(stored, cacheStatus: "\(cacheName); hit")
            case .useStoredAndRevalidate:
                return .serve(stored, cacheStatus: "\(cacheName); hit; detail=stale-while-revalidate", revalidate: true)
            case .revalidate:
                if onlyIfCached { return .gatewayTimeout }
                return .network(revalidating: hasValidators ? stored : nil, cacheStatus: "\(cacheName); fwd=stale")
            case .fetch:
                if onlyIfCached { return .gatewayTimeout }
                return .network(revalidating: nil, cacheStatus: "\(cacheName); fwd=vary-miss")
            }
        }
    }

    /// A single byte range of a `Range` field (RFC 9110 §14.1.2) resolved
    /// against a body of `length` bytes, or nil when the field asks for
    /// something else (several ranges, other units) or nothing satisfiable.
    static func byteRange(_ field: String, length: Int) -> Range<Int>? {
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

    /// The response served from a stored entry: its Age now, and Cache-Status.
    static func servedResponse(_ stored: StoredResponse, cacheStatus: String?, now: Double) -> HTTPURLResponse? {
        var headers = CachePolicy.servedHeaders(stored.entry, now: now)
        if let cacheStatus { headers.set("Cache-Status", cacheStatus) }
        return stored.httpResponse(headers: headers)
    }
}
