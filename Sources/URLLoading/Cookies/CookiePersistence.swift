package import Foundation
import Storage

/// Where a persistent `CookieStore` keeps its cookies: the SQLite
/// file in a folder (`CookieDatabase`, the default) or a database a fleet
/// shares (URLLoadingPostgres). The store keeps every cookie in memory (the
/// jar decides by RFC 6265bis); the persistence is loaded once and then
/// written change by change, outside the store's lock.
package protocol CookiePersistence: Sendable {
    /// Every cookie still valid, after deleting expired ones and, unless
    /// kept, session cookies.
    func load(now: Date, keepSessionCookies: Bool) throws(StoreError) -> [Cookie]
    /// Writes final states (nil: removed) and last-access times, in one transaction.
    func apply(_ changes: [Cookie.Key: Cookie?], touches: [Cookie.Key: Date]) throws(StoreError)
    /// Tells `handler` of cookies other processes changed (nil: removed),
    /// read after their change committed; a folder's file never calls it.
    func observeOthers(_ handler: @escaping @Sendable ([Cookie.Key: Cookie?]) -> Void)
}

extension CookiePersistence {
    /// Nothing to observe: processes sharing a file each load it when they open.
    package func observeOthers(_ handler: @escaping @Sendable ([Cookie.Key: Cookie?]) -> Void) {}
}

extension CookieDatabase: CookiePersistence {
    func load(now: Date, keepSessionCookies: Bool) throws(StoreError) -> [Cookie] {
        do throws(StorageError) {
            return try loadRows(now: now, keepSessionCookies: keepSessionCookies)
        } catch {
            throw StoreError(error, path: database.path)
        }
    }

    func apply(_ changes: [Cookie.Key: Cookie?], touches: [Cookie.Key: Date]) throws(StoreError) {
        do throws(StorageError) {
            try write(changes, touches: touches)
        } catch {
            throw StoreError(error, path: database.path)
        }
    }
}
