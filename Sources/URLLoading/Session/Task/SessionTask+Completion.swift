import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
import Transport

/// The end of a task: metrics, resume data, the cache, then the delivery
/// and `didCompleteWithError` on the task's context.
extension SessionTask {
    // MARK: Completion

    func complete(_ result: Result<TransferMetrics?, SessionError>) {
        // What the end reads of the task and its delegates, in one turn of the lock.
        let (streamSession, url, taskDelegate, sessionListens, metricsListeners) = locked.withLock { inner in
            let sessionDelegate = inner.session?.delegate
            let sessionHearsMetrics = sessionDelegate != nil && inner.session?.delegateAbilities.lacks(.didFinishCollectingMetrics) == false
            return (
                inner.becameStream ? inner.session : nil, inner.currentRequest?.url, inner.delegate, sessionDelegate != nil,
                inner.delegate != nil || sessionHearsMetrics
            )
        }
        if let session = streamSession {
            // The stream task has the connection; the data task hears nothing more.
            _ = locked.withLock { inner in
                defer { inner.session = nil; inner.delegate = nil }
                return inner.sink.close()
            }
            session.taskDidComplete(self)
            return
        }
        let (session, contents, metrics, ended) = locked.withLock { inner in
            if case .failure(let error) = result {
                var failure = SessionError(error.code, failingURL: error.failingURL ?? url, message: error.message)
                failure.reportedURLErrorCode = error.reportedURLErrorCode
                inner.error = failure
            }
            let metrics = TaskMetrics(
                transactionMetrics: metricsListeners ? Self.resolvingResponses(inner.transactions) : inner.transactions,
                taskInterval: DateInterval(start: inner.started ?? Date(), end: max(Date(), inner.started ?? Date())),
                redirectCount: inner.machine.redirects)
            return (inner.session, inner.sink.close(), metrics, inner.error)
        }
        if case .success = result, !contents.tail.isEmpty, let session, taskDelegate != nil || sessionListens {
            deliverParts(contents.tail, session: session)
        }
        var failure = ended
        try? contents.file?.handle.close()
        let (resume, resumeHandler, sink, ledKey) = locked.withLock { inner in
            (resumeData(inner, file: contents.file), inner.resumeDataHandler, inner.sink, inner.machine.endLead())
        }
        if let resume, let sessionFailure = failure, resumeHandler == nil {
            var carrying = sessionFailure
            carrying.resumeData = resume.encoded()
            failure = carrying
            locked.withLock { $0.error = carrying }
        }
        // Apple's form from here on: what handlers, delegates and async calls get.
        let error: (any Error)? = failure?.urlError
        if let resumeHandler { resumeHandler(resume?.encoded()) }
        guard let session else { return }
        // A file that resume data points to stays; every other goes when the task is done.
        let ending = SinkEnding(task: self, session: session, error: error, keepsFile: resume != nil, metrics: metrics)
        let buffer = contents.body
        let finish: @Sendable () -> Void = { [self] in
            sink.end(contents, ending)
            if sink.deliversToHandler {
                // The handler had the end; only a task's own delegate hears it too.
                taskDelegate?.urlSession(session, task: self, didCompleteWithError: error)
            } else {
                self.callDelegate(.didCompleteWithError) { $0.urlSession(session, task: self, didCompleteWithError: error) }
            }
            self.engine.completionDelivered(self)
            self.locked.withLock {
                $0.session = nil; $0.delegate = nil
            }
            session.taskDidComplete(self)
        }
        // The end runs off the transport's thread and never inside resume():
        // on the Swift task awaiting this one (the async APIs), else on the
        // task's own delegate context. Cache writes go with it. A delegate
        // known to lack every method the end calls is as none.
        // (A job still queued for the delegate must not be overtaken.)
        let hearsCompletion = taskDelegate != nil || (sessionListens && !session.delegateAbilities.lacks(.didCompleteWithError))
        let endsWithDelegate =
            (taskDelegate != nil || sessionListens)
            && (sink.asksDelegate || metricsListeners || (!sink.deliversToHandler && hearsCompletion) || !events.isIdle)
        if !endsWithDelegate {
            let end: @Sendable () -> Void = { [self] in
                if error == nil { _ = self.updateCache(session: session, body: buffer) }
                self.letWaitersGo(ledKey, session: session)
                finish()
            }
            if let runner = completionRunner { runner(end) } else { events.enqueueSync(end) }
        } else if sink.asksDelegate {
            // willCacheResponse may be asked: an async job.
            events.enqueue { [self] in
                if error == nil, let candidate = self.updateCache(session: session, body: buffer) {
                    await self.offerToCache(candidate, session: session)
                }
                self.letWaitersGo(ledKey, session: session)
                finish()
            }
        } else {
            events.enqueueSync { [self] in
                if error == nil { _ = self.updateCache(session: session, body: buffer) }
                self.letWaitersGo(ledKey, session: session)
                finish()
            }
        }
    }
}
