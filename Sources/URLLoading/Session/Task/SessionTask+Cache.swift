import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension SessionTask {
    /// The response served from a stored entry: its Age now, and Cache-Status.
    static func servedResponse(_ stored: StoredResponse, cacheStatus: String?, now: Double) -> HTTPURLResponse? {
        stored.httpResponse(headers: CacheExchange.servedHeaders(stored, cacheStatus: cacheStatus, now: now))
    }
}
