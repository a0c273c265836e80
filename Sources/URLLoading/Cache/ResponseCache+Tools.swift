public import Foundation

/// A stored response as tools see it: the compact header lists, the body,
/// and the figures RFC 9111 works from. Built without Foundation's
/// `HTTPURLResponse`, so inspecting (and benchmarking) the cache measures
/// the cache.
@_spi(Tools)
public struct CacheEntrySnapshot: Sendable, Equatable {
    /// The request URL.
    public var url: String
    /// The status code.
    public var status: Int
    /// Response header fields, in order.
    public var responseHeaders: [(name: String, value: String)]
    /// The request fields Vary selects on (secrets as `sha256:` fingerprints).
    public var varyRequestHeaders: [(name: String, value: String)]
    /// The body.
    public var body: Data
    /// When the request was sent and the response received and stored.
    public var requestTime: Date
    public var responseTime: Date
    public var storedAt: Date
    /// Where the entry may be kept.
    public var storagePolicy: CacheStoragePolicy
    /// The keys of the application's data, sorted.
    public var userInfoKeys: [String]

    public static func == (a: CacheEntrySnapshot, b: CacheEntrySnapshot) -> Bool {
        a.url == b.url && a.status == b.status && a.body == b.body
            && a.responseHeaders.map { [$0.name, $0.value] } == b.responseHeaders.map { [$0.name, $0.value] }
            && a.varyRequestHeaders.map { [$0.name, $0.value] } == b.varyRequestHeaders.map { [$0.name, $0.value] }
            && a.requestTime == b.requestTime && a.responseTime == b.responseTime && a.storedAt == b.storedAt
            && a.storagePolicy == b.storagePolicy && a.userInfoKeys == b.userInfoKeys
    }

    init(_ stored: StoredResponse) {
        url = CachedURL.displayed(stored.url)
        status = stored.entry.status
        responseHeaders = stored.entry.responseHeaders.map { ($0.name, $0.value) }
        varyRequestHeaders = stored.entry.requestHeaders.map { ($0.name, $0.value) }
        // A body file that cannot be read shows as empty (`cachetool verify` reports the file).
        body = (try? stored.wholeBody()) ?? Data()
        requestTime = Date(timeIntervalSince1970: stored.entry.requestTime)
        responseTime = Date(timeIntervalSince1970: stored.entry.responseTime)
        storedAt = Date(timeIntervalSince1970: stored.storedAt)
        storagePolicy = stored.storagePolicy
        userInfoKeys = stored.userInfo.keys
    }
}

@_spi(Tools)
extension ResponseCache {
    /// The stored response for `url` that the request fields select, or nil.
    public func snapshot(for url: URL, requestHeaders: [(name: String, value: String)] = []) -> CacheEntrySnapshot? {
        guard let key = CachePolicy.primaryKey(url) else { return nil }
        return lookup(key: key, requestHeaders: HeaderFields(requestHeaders.map { HeaderFields.Field($0.name, $0.value) }))
            .map(CacheEntrySnapshot.init)
    }

    /// Stores a response as received for a GET of `url`, in the tiers
    /// `storagePolicy` allows (the 5% rule per tier). Applies no RFC 9111
    /// storability rule: the caller decided.
    public func store(
        url: URL, status: Int, responseHeaders: [(name: String, value: String)], body: Data,
        requestHeaders: [(name: String, value: String)] = [], storagePolicy: CacheStoragePolicy = .allowed,
        userInfo: [String: String] = [:], at date: Date = Date()
    ) {
        guard let key = CachePolicy.primaryKey(url) else { return }
        let now = date.timeIntervalSince1970
        store(
            StoredResponse(
                url: CachedURL.stored(url), key: key, status: status,
                responseHeaders: HeaderFields(responseHeaders.map { HeaderFields.Field($0.name, $0.value) }),
                requestHeaders: HeaderFields(requestHeaders.map { HeaderFields.Field($0.name, $0.value) }),
                body: body, requestTime: now, responseTime: now, storedAt: now,
                storagePolicy: storagePolicy, userInfo: CacheUserInfo(strings: userInfo)))
    }
}
