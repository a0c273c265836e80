import Foundation
import Locking
import Logging

/// The application's shared stores (Apple's `URLCache.shared`,
/// `HTTPCookieStorage.shared`, `URLCredentialStorage.shared`) and the ones
/// default configurations use: one object per application identifier,
/// opened in its XDG folders or, when that fails, kept in memory with the
/// reason. Here, beside the stores, so that they never call into Session/.
enum SharedStores {
    /// Apple's `URLCache.shared` capacities: 512 KiB in memory, 10 MiB on disk.
    static let sharedMemoryCapacity = 512 * 1024
    static let sharedDiskCapacity = 10 * 1024 * 1024
    /// Memory for each ephemeral session's private cache.
    static let ephemeralMemoryCapacity = 4 * 1024 * 1024

    private static let sharedCaches = Lock<[String: ResponseCache]>([:])

    /// The application's cache, kept in memory only when its folder
    /// cannot be opened: one object per application identifier.
    static func cache(for applicationIdentifier: String) -> ResponseCache {
        sharedCaches.withLock { caches in
            if let cache = caches[applicationIdentifier] { return cache }
            let cache = ResponseCache(
                memoryCapacity: sharedMemoryCapacity, diskCapacity: sharedDiskCapacity,
                directory: StoreLocations(applicationIdentifier: applicationIdentifier).cacheDirectory)
            caches[applicationIdentifier] = cache
            return cache
        }
    }

    private static let sharedCookieStores = Lock<[String: CookieStore]>([:])

    /// The application's cookie store, kept in memory only when its file
    /// cannot be opened: one object per application identifier.
    static func cookieStore(for applicationIdentifier: String) -> CookieStore {
        sharedStore(
            in: sharedCookieStores, for: applicationIdentifier, file: CookieStore.fileName, what: "cookie",
            open: { (directory) throws(StoreError) in try CookieStore(directory: directory) }, fallback: CookieStore.init(fallbackFor:))
    }

    /// One store per application identifier in `table`: opened in the
    /// application's data directory or, when that fails, kept in memory
    /// with the reason (logged once, here).
    private static func sharedStore<Store: Sendable>(
        in table: borrowing Lock<[String: Store]>, for applicationIdentifier: String, file: String, what: String,
        open: (URL) throws(StoreError) -> Store, fallback: (StoreError) -> Store
    ) -> Store {
        table.withLock { stores in
            if let store = stores[applicationIdentifier] { return store }
            let directory = StoreLocations(applicationIdentifier: applicationIdentifier).dataDirectory
            let store: Store
            do throws(StoreError) {
                store = try open(directory)
            } catch {
                let failure = error
                Logger(label: "urlloading.\(what)s").error(
                    "the shared \(what) store could not be opened; it keeps memory only", metadata: ["error": "\(failure)"])
                store = fallback(failure)
            }
            stores[applicationIdentifier] = store
            return store
        }
    }

    private static let sharedCredentialStores = Lock<[String: CredentialStore]>([:])

    /// The application's credential store, kept in memory only when its
    /// file cannot be opened: one object per application identifier.
    static func credentialStore(for applicationIdentifier: String) -> CredentialStore {
        sharedStore(
            in: sharedCredentialStores, for: applicationIdentifier, file: CredentialStore.fileName, what: "credential",
            open: { (directory) throws(StoreError) in try CredentialStore(directory: directory) }, fallback: CredentialStore.init(fallbackFor:))
    }
}
