import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking

/// The manager's session delegate: it routes each task's events
/// to its `TaskHandler`, by task identifier. The session holds it, so the
/// manager and its session do not hold each other.
final class ManagerDelegate: SessionDataDelegate, SessionDownloadDelegate, Sendable {
    let handlers = Lock<[Int: TaskHandler]>([:])
    let overrides = Lock(ManagerOverrides())
    let policy = Lock<SecurityPolicy?>(nil)
    let events: ManagerEvents

    init(monitors: [any ManagerEventMonitor]) {
        events = ManagerEvents(monitors: monitors)
    }

    func handler(_ task: SessionTask) -> TaskHandler? {
        handlers.withLock { $0[task.taskIdentifier] }
    }

    func urlSession(_ session: Session, task: SessionTask, didSendBodyData bytesSent: Int64, totalBytesSent: Int64, totalBytesExpectedToSend: Int64) {
        handler(task)?.sent(total: totalBytesSent, expected: totalBytesExpectedToSend)
    }

    func urlSession(_ session: Session, dataTask: SessionTask, didReceive data: Data) {
        handler(dataTask)?.received(data, expected: dataTask.countOfBytesExpectedToReceive)
    }

    func urlSession(
        _ session: Session, downloadTask: SessionTask, didWriteData bytesWritten: Int64, totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64
    ) {
        handler(downloadTask)?.wrote(total: totalBytesWritten, expected: totalBytesExpectedToWrite)
    }

    func urlSession(_ session: Session, downloadTask: SessionTask, didFinishDownloadingTo location: URL) {
        handler(downloadTask)?.finishedDownload(at: location, response: downloadTask.response as? HTTPURLResponse)
    }

    func urlSession(_ session: Session, task: SessionTask, didCompleteWithError error: (any Error)?) {
        let handler = handlers.withLock { $0.removeValue(forKey: task.taskIdentifier) }
        handler?.completed(task, error: error)
        overrides.withLock { $0.completed }?(session, task, error)
        events.completed(task, session: session, error: error)
    }

    /// The end of a task made with a completion handler (the session
    /// calls no delegate method with its body or end): the same steps.
    func completed(_ task: SessionTask, session: Session, data: Data?, error: (any Error)?) {
        let handler = handlers.withLock { $0.removeValue(forKey: task.taskIdentifier) }
        handler?.completed(task, data: data, error: error)
        overrides.withLock { $0.completed }?(session, task, error)
        events.completed(task, session: session, error: error)
    }

    // MARK: Overridable methods (without a closure: as if not implemented)

    func urlSession(_ session: Session, didBecomeInvalidWithError error: (any Error)?) {
        overrides.withLock { $0.invalid }?(session, error)
        events.invalidated(session, error: error)
    }

    func urlSession(
        _ session: Session, task: SessionTask, willPerformHTTPRedirection response: HTTPURLResponse, newRequest request: URLRequest
    ) async -> URLRequest? {
        guard let block = overrides.withLock({ $0.redirect }) else {
            DelegateFallback.unhandled()
            return request
        }
        return await block(session, task, response, request)
    }

    func urlSession(_ session: Session, task: SessionTask, didReceive challenge: AuthenticationChallenge) async
        -> (Session.AuthChallengeDisposition, Credential?)
    {
        guard let block = overrides.withLock({ $0.taskChallenge }) else {
            DelegateFallback.unhandled()
            return (.performDefaultHandling, nil)
        }
        return await block(session, task, challenge)
    }

    /// The session probes the server's trust when a policy or a closure will look.
    var evaluatesServerTrust: Bool {
        policy.withLock { $0 != nil } || overrides.withLock { $0.sessionChallenge != nil }
    }

    func urlSession(_ session: Session, didReceive challenge: AuthenticationChallenge) async -> (Session.AuthChallengeDisposition, Credential?) {
        if let block = overrides.withLock({ $0.sessionChallenge }) { return await block(session, challenge) }
        if challenge.protectionSpace.authenticationMethod == .serverTrust, let policy = policy.withLock({ $0 }) { return policy.answer(challenge) }
        DelegateFallback.unhandled()
        return (.performDefaultHandling, nil)
    }

    func urlSession(_ session: Session, dataTask: SessionTask, didReceive response: URLResponse) async -> Session.ResponseDisposition {
        guard let block = overrides.withLock({ $0.response }) else {
            DelegateFallback.unhandled()
            return .allow
        }
        return await block(session, dataTask, response)
    }

    func urlSession(_ session: Session, dataTask: SessionTask, willCacheResponse proposedResponse: CachedResponse) async -> CachedResponse? {
        guard let block = overrides.withLock({ $0.willCache }) else {
            DelegateFallback.unhandled()
            return proposedResponse
        }
        return await block(session, dataTask, proposedResponse)
    }

    func urlSessionDidFinishEvents(forBackgroundURLSession session: Session) {
        guard let block = overrides.withLock({ $0.backgroundEvents }) else {
            DelegateFallback.unhandled()
            return
        }
        block(session)
    }
}
