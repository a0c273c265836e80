import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
import Transport

/// The cache after the network: stale-if-error, storing,
/// HEAD freshening, invalidation, willCacheResponse.
extension SessionTask {
    /// RFC 5861 §4: when the origin fails (network error or 5xx) and a
    /// stored response's stale-if-error window allows, serve that instead.
    /// Returns whether it did.
    func serveStaleIfError(reason: String) -> Bool {
        guard let session else { return false }
        let (fallback, headers) = locked.withLock { inner in
            (inner.machine.cache.fallback, inner.machine.request.map { CacheView.requestHeaders($0, cookie: inner.machine.record.cookie, credentials: inner.machine.record.credentialIdentity) } ?? [])
        }
        let now = Date().timeIntervalSince1970
        guard let stored = CacheExchange.staleIfError(fallback, requestHeaders: headers, now: now) else { return false }
        let shown = session.settings.sendsCacheStatus ? CacheExchange.staleIfErrorStatus(reason) : nil
        guard let response = CacheView.servedResponse(stored, cacheStatus: shown, now: now) else { return false }
        locked.withLock { $0.machine.cacheAnswered(status: shown) }
        respondWithoutNetwork(response, body: ServedBody(stored))
        return true
    }

    /// What storing a task's response reads of it, taken at its end.
    struct CacheUpdateInputs: Sendable {
        let request: URLRequest?
        let cache: StateMachine.CacheRecord
        let hop: StateMachine.HopRecord
        let status: Int?
        let usesCache: Bool
        let asksDelegate: Bool

        /// `inout` so that the task's state is read in place, not copied whole.
        init(_ inner: inout Inner) {
            request = inner.machine.request
            cache = inner.machine.cache
            hop = inner.machine.record
            status = inner.head?.head.status
            usesCache = inner.kind == .data && inner.sink.usesCache
            asksDelegate = inner.sink.asksDelegate
        }
    }

    /// After a response from the network: store it when RFC 9111 and the
    /// storage rules allow; invalidate after an unsafe method (§4.4).
    @discardableResult
    func updateCache(session: Session, body: Data?, _ inputs: CacheUpdateInputs) -> StoredResponse? {
        guard let cache = session.urlCache, let request = inputs.request, let url = request.url else { return nil }
        let (cacheRecord, hopRecord, status) = (inputs.cache, inputs.hop, inputs.status)
        let (key, requestTime, cookie, credentials) = (cacheRecord.key, cacheRecord.requestTime, hopRecord.cookie, hopRecord.credentialIdentity)
        // No fields: the response did not come from the network.
        guard let headers = cacheRecord.networkHeaders, let status else { return nil }
        let method = request.httpMethod ?? "GET"
        for target in CacheExchange.invalidatedKeys(method: method, status: status, url: url, responseHeaders: headers) {
            cache.remove(key: target)
        }
        let requestHeaders = CacheView.requestHeaders(request, cookie: cookie, credentials: credentials)
        let now = Date().timeIntervalSince1970
        if method == "HEAD", status == 200, let headKey = CachePolicy.primaryKey(url) {
            let stored = cache.lookup(key: headKey, requestHeaders: requestHeaders, now: now)
            switch CacheExchange.headUpdate(stored, headHeaders: headers, requestTime: requestTime, now: now) {
            case .none: break
            case .remove: if let stored { cache.remove(key: headKey, variant: stored.variant) }
            case .refresh(let updated): cache.store(updated, now: now)
            }
            return nil
        }
        // No body: the sink kept none (a delegate's body past the limit).
        guard inputs.usesCache, let key, let body, request.cachePolicy != .reloadIgnoringLocalAndRemoteCacheData else { return nil }
        guard
            var candidate = CacheExchange.storeCandidate(
                url: url, key: key, method: method, status: status, responseHeaders: headers, requestHeaders: requestHeaders,
                body: body, requestTime: requestTime, now: now)
        else { return nil }
        if let limit = cacheRecord.storagePolicyLimit { candidate.storagePolicy = limit }
        // A delegate-driven task asks willCacheResponse first.
        if inputs.asksDelegate { return candidate }
        cache.store(candidate, now: now)
        return nil
    }

    /// The delegate sees the proposed response after all data and
    /// may keep it, change it (data, userInfo, storage policy) or drop it.
    func offerToCache(_ candidate: StoredResponse, session: Session) async {
        guard let cache = session.urlCache, let response = candidate.httpResponse() else { return }
        let proposed = CachedResponse(response: response, data: candidate.body)
        guard let decided = await askDelegate({ await $0.urlSession(session, dataTask: self, willCacheResponse: proposed) }) ?? proposed else { return }
        var stored = candidate
        if decided.response !== response {
            let (status, headers) = decided.statusAndFields
            stored.entry.status = status
            stored.entry.responseHeaders = CachePolicy.removingConnectionFields(headers)
        }
        stored.body = decided.data
        stored.userInfo = decided.storedUserInfo
        stored.storagePolicy = decided.storagePolicy
        cache.store(stored, now: Date().timeIntervalSince1970)
    }
}
