import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Decides what a hop's final head asks of its task, in the order of Apple's
/// delegate calls, from values alone: no store, lock or socket. The task then
/// carries it out (asks the delegate, answers the challenge, serves the
/// cache), and takes the head as its response when that comes to nothing.
///
/// ```
/// 401/407 → challenge   304 to its own revalidation → notModified
/// 5xx on the first request → serverError (stale-if-error may answer)
/// 301/302/303/307/308 with a usable Location → redirect(next request)
/// anything else → response
/// ```
enum HeadDecision: Equatable {
    /// A challenge to answer (a 407 only from the session's own proxy);
    /// unanswered, the head is the response.
    case challenge
    /// The answer to the task's conditional request: the stored body is the response.
    case notModified
    /// The first request failed at the server: a stored response's
    /// stale-if-error may answer instead.
    case serverError
    /// A redirect the task may follow, to this request (the delegate decides).
    case redirect(URLRequest)
    /// The task's response.
    case response

    static func of(status: Int, headers: [(name: String, value: String)], request: URLRequest, firstRequest: Bool, revalidating: Bool) -> HeadDecision {
        if status == 401 || status == 407 { return .challenge }
        if status == 304, revalidating { return .notModified }
        if status >= 500, firstRequest { return .serverError }
        if let next = SessionTask.redirectRequest(from: request, status: status, headers: headers) { return .redirect(next) }
        return .response
    }
}
