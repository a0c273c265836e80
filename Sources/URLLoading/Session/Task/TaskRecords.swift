import Foundation
import Transport

extension SessionTask.StateMachine {
    /// What the current hop sent and what came back of it. The machine
    /// begins a new record with each hop (the first, a redirect followed, a
    /// challenge answered), so nothing of one hop reaches the next one's
    /// metrics or cache keys; a hop that goes again (after a wait) keeps it.
    struct HopRecord: Equatable {
        /// When the hop's transfer was handed to the transport: a hop cut
        /// short (a redirect followed or a challenge answered before its body
        /// ended) has no libcurl figures, and its metrics say what the task saw.
        var startedAt: Date?
        /// The transfer went through a proxy.
        var viaProxy = false
        /// The hop's final head, once it came, and when.
        var head: ResponseHead?
        var headDate: Date?
        /// The Cookie field the store gave the hop, if any.
        var cookie: String?
        /// Who the hop's credentials say the user is (part of a cache key).
        var credentialIdentity: String?
    }

    /// The cache's part of the task: decided when the first
    /// hop consults the cache and kept through the hops after it, since the
    /// final response is stored under the first request's key.
    struct CacheRecord {
        /// The first request's primary key, when the response may be stored.
        var key: String?
        /// The Cache-Status value the response shows (RFC 9211), if any.
        var status: String?
        /// The stored response a conditional request revalidates.
        var revalidating: StoredResponse?
        /// The stored response a failure may fall back to (stale-if-error).
        var fallback: StoredResponse?
        /// When the first request went out (seconds since 1970), for the age.
        var requestTime: Double = 0
        /// The final response's fields as received, for storing; nil when
        /// no response came from the network.
        var networkHeaders: HeaderFields?
        /// Request coalescing: the key this task's request leads for.
        var leadsKey: String?
        /// The key claimed across a fleet of processes sharing the cache,
        /// held until the response is stored.
        var fleetClaim: (any FleetClaim)?
        /// This task waited once for another request (or must never wait).
        var coalesced = false
        /// The most a `URLProtocol` class allowed for its response (memory
        /// only); nil for no limit.
        var storagePolicyLimit: CacheStoragePolicy?
    }
}
