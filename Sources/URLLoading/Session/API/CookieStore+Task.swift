import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Apple's task-taking members of `HTTPCookieStorage`: here, in Session/,
/// so that the cookie store itself knows nothing of tasks (DESIGN.md).
extension CookieStore {
    /// Stores cookies for a task's current request (Apple's `storeCookies(_:for:)`).
    public func storeCookies(_ cookies: [Cookie], for task: SessionTask) {
        let request = task.currentRequest ?? task.originalRequest
        setCookies(cookies, for: request?.url, mainDocumentURL: request?.mainDocumentURL)
    }

    /// The cookies a task's current request would send, delivered to `completionHandler`.
    public func getCookiesFor(_ task: SessionTask, completionHandler: @escaping @Sendable ([Cookie]?) -> Void) {
        let request = task.currentRequest ?? task.originalRequest
        guard let url = request?.url else { return completionHandler(nil) }
        completionHandler(cookies(for: url, mainDocumentURL: request?.mainDocumentURL))
    }
}
