public import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

/// Where a cached response may be kept (Apple's `URLCache.StoragePolicy`).
public enum CacheStoragePolicy: Int, Sendable, Hashable, Codable, CustomStringConvertible {
    /// In memory and on disk.
    case allowed = 0
    /// In memory only.
    case allowedInMemoryOnly = 1
    /// Not at all.
    case notAllowed = 2

    /// The policy's name.
    public var description: String {
        switch self {
        case .allowed: "allowed"
        case .allowedInMemoryOnly: "allowedInMemoryOnly"
        case .notAllowed: "notAllowed"
        }
    }
}

extension ResponseCache {
    /// Apple's `URLCache.StoragePolicy`.
    public typealias StoragePolicy = CacheStoragePolicy
}

/// A response with its body as `ResponseCache` stores it (Apple's
/// `CachedURLResponse`): the response, the data, a userInfo dictionary and a
/// storage policy.
public struct CachedResponse: Sendable {
    /// The response as received (status and header fields).
    public var response: HTTPURLResponse
    /// The body.
    public var data: Data
    /// Application data kept with the entry, on disk too.
    public var userInfo: [String: String]
    /// Where the entry may be kept.
    public var storagePolicy: CacheStoragePolicy

    /// Creates a cached response.
    ///
    /// - Parameters:
    ///   - response: The HTTP response.
    ///   - data: Its body.
    ///   - userInfo: Application data to keep with it.
    ///   - storagePolicy: Where it may be kept; `.allowed` by default.
    public init(response: HTTPURLResponse, data: Data, userInfo: [String: String] = [:], storagePolicy: CacheStoragePolicy = .allowed) {
        self.response = response
        self.data = data
        self.userInfo = userInfo
        self.storagePolicy = storagePolicy
    }
}
