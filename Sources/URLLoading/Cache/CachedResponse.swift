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
/// storage policy, fixed when it is made.
///
/// The userInfo is kept as a property list — string keys; strings, data,
/// dates, numbers, Booleans, and arrays and dictionaries of them — which is
/// what the disk tier can write, as Apple's cache archives it. A
/// dictionary that is not one is not kept: `userInfo` is then nil.
public final class CachedResponse: NSObject, @unchecked Sendable {
    // @unchecked: every stored property is a constant, and the userInfo is
    // the property list's own copy of what was given, immutable values only.

    /// The response as received (status and header fields).
    public let response: URLResponse
    /// The body.
    public let data: Data
    /// Application data kept with the entry, on disk too.
    public let userInfo: [AnyHashable: Any]?
    /// Where the entry may be kept.
    public let storagePolicy: CacheStoragePolicy
    /// The userInfo as the tiers keep it.
    package let storedUserInfo: CacheUserInfo

    /// A cached response with no userInfo, allowed in memory and on disk.
    public convenience init(response: URLResponse, data: Data) {
        self.init(response: response, data: data, storedUserInfo: .none, storagePolicy: .allowed)
    }

    /// Creates a cached response.
    ///
    /// - Parameters:
    ///   - response: The response (an `HTTPURLResponse` for what a session stores).
    ///   - data: Its body.
    ///   - userInfo: Application data to keep with it: a property list, or
    ///     it is not kept.
    ///   - storagePolicy: Where it may be kept; `.allowed` by default.
    public convenience init(response: URLResponse, data: Data, userInfo: [AnyHashable: Any]? = nil, storagePolicy: CacheStoragePolicy = .allowed) {
        self.init(response: response, data: data, storedUserInfo: CacheUserInfo(userInfo) ?? .none, storagePolicy: storagePolicy)
    }

    /// A cached response whose userInfo is already in the tiers' form.
    package init(response: URLResponse, data: Data, storedUserInfo: CacheUserInfo, storagePolicy: CacheStoragePolicy) {
        self.response = response
        self.data = data
        self.storedUserInfo = storedUserInfo
        self.userInfo = storedUserInfo.dictionary
        self.storagePolicy = storagePolicy
    }

    /// The status and header fields the cache stores: an HTTP response's
    /// own; for another response (a `file:` or `data:` load), 200 with its
    /// media type and length, as an HTTP response of the same body says them.
    var statusAndFields: (status: Int, fields: HeaderFields) {
        var fields = HeaderFields()
        if let http = response as? HTTPURLResponse {
            for (name, value) in http.allHeaderFields { fields.append(String(describing: name), String(describing: value)) }
            return (http.statusCode, fields)
        }
        if let type = response.mimeType {
            fields.append("Content-Type", response.textEncodingName.map { "\(type); charset=\($0)" } ?? type)
        }
        fields.append("Content-Length", String(data.count))
        return (200, fields)
    }

    /// As Apple's: the same response object, data, userInfo and storage policy.
    public override func isEqual(_ object: Any?) -> Bool {
        guard let other = object as? CachedResponse else { return false }
        return other === self
            || (response.isEqual(other.response) && data == other.data && storedUserInfo == other.storedUserInfo
                && storagePolicy == other.storagePolicy)
    }

    /// Hashes the data and the storage policy, which `isEqual` compares.
    public override var hash: Int {
        var hasher = Hasher()
        hasher.combine(data)
        hasher.combine(storagePolicy)
        return hasher.finalize()
    }
}
