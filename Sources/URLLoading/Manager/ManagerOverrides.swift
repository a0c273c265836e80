import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

/// Closures that take over session and task delegate methods of a
/// manager's session (AFNetworking's `setTaskWillPerformHTTPRedirectionBlock:`
/// family). Without one, the method behaves as if the delegate had none.
extension HTTPSessionManager {
    /// Redirects: return the request to follow, or nil to take the redirect as the response.
    public func setTaskWillPerformHTTPRedirection(
        _ block: (@Sendable (_ session: Session, _ task: SessionTask, _ response: HTTPURLResponse, _ request: URLRequest) async -> URLRequest?)?
    ) {
        router.overrides.withLock { $0.redirect = block }
    }

    /// Task-level challenges (Basic, Digest, ...).
    public func setTaskDidReceiveChallenge(
        _ block: (@Sendable (_ session: Session, _ task: SessionTask, _ challenge: AuthenticationChallenge) async -> (Session.AuthChallengeDisposition, Credential?))?
    ) {
        router.overrides.withLock { $0.taskChallenge = block }
    }

    /// Session-level challenges (server trust when a policy or this asks
    /// for it, client certificates, NTLM, Negotiate).
    public func setSessionDidReceiveChallenge(
        _ block: (@Sendable (_ session: Session, _ challenge: AuthenticationChallenge) async -> (Session.AuthChallengeDisposition, Credential?))?
    ) {
        router.overrides.withLock { $0.sessionChallenge = block }
    }

    /// A data task's response, before its body: allow, cancel, become a download.
    public func setDataTaskDidReceiveResponse(
        _ block: (@Sendable (_ session: Session, _ task: SessionTask, _ response: URLResponse) async -> Session.ResponseDisposition)?
    ) {
        router.overrides.withLock { $0.response = block }
    }

    /// What the cache keeps of a response (nil keeps nothing).
    public func setDataTaskWillCacheResponse(
        _ block: (@Sendable (_ session: Session, _ task: SessionTask, _ proposed: CachedResponse) async -> CachedResponse?)?
    ) {
        router.overrides.withLock { $0.willCache = block }
    }

    /// Every task's end, after its own completion closures.
    public func setTaskDidComplete(_ block: (@Sendable (_ session: Session, _ task: SessionTask, _ error: (any Error)?) -> Void)?) {
        router.overrides.withLock { $0.completed = block }
    }

    /// A background session delivered every event that waited.
    public func setDidFinishEventsForBackgroundSession(_ block: (@Sendable (_ session: Session) -> Void)?) {
        router.overrides.withLock { $0.backgroundEvents = block }
    }

    /// The session became invalid.
    public func setSessionDidBecomeInvalid(_ block: (@Sendable (_ session: Session, _ error: (any Error)?) -> Void)?) {
        router.overrides.withLock { $0.invalid = block }
    }
}

/// The closures a manager's delegate calls in place of the defaults.
struct ManagerOverrides: Sendable {
    var redirect: (@Sendable (Session, SessionTask, HTTPURLResponse, URLRequest) async -> URLRequest?)?
    var taskChallenge: (@Sendable (Session, SessionTask, AuthenticationChallenge) async -> (Session.AuthChallengeDisposition, Credential?))?
    var sessionChallenge: (@Sendable (Session, AuthenticationChallenge) async -> (Session.AuthChallengeDisposition, Credential?))?
    var response: (@Sendable (Session, SessionTask, URLResponse) async -> Session.ResponseDisposition)?
    var willCache: (@Sendable (Session, SessionTask, CachedResponse) async -> CachedResponse?)?
    var completed: (@Sendable (Session, SessionTask, (any Error)?) -> Void)?
    var backgroundEvents: (@Sendable (Session) -> Void)?
    var invalid: (@Sendable (Session, (any Error)?) -> Void)?
}
