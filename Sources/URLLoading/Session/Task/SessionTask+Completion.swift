import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
import Tracing
import Transport

/// The end of a task: metrics, resume data, the cache, then the delivery
/// and `didCompleteWithError` on the task's context.
extension SessionTask {
    // MARK: Completion

    /// The task's end, read and changed in a turn of its lock; nil when the
    /// task became a stream task.
    func ending(_ inner: inout Inner, _ result: Result<TransferMetrics?, SessionError>) -> Ending? {
        // A finished task's progress is whole, its total now known.
        if let progress = inner.progress {
            let done = inner.kind == .upload ? inner.bytesSent : inner.bytesReceived
            if progress.totalUnitCount < done { progress.totalUnitCount = done }
            progress.completedUnitCount = max(done, progress.totalUnitCount)
        }
        if inner.machine.outcome == .becameStream { return nil }
        return Ending(&inner, result: result, task: self)
    }

    /// - Parameter known: The end, when the turn of the lock that finished
    ///   the task read it (`ending`).
    func complete(_ result: Result<TransferMetrics?, SessionError>, _ known: Ending?? = nil) {
        let end = known ?? locked.withLock { ending(&$0, result) }
        guard let end else {
            // The stream task has the connection; the data task hears nothing more.
            let session = locked.withLock { inner in
                defer { inner.session = nil; inner.delegate = nil }
                _ = inner.sink.close()
                return inner.session
            }
            session?.taskDidComplete(self)
            if let trace {
                let endedAt = DefaultTracerClock.now
                events.enqueueSync { [originalRequest] in trace.end(originalRequest, status: nil, error: nil, metrics: nil, at: endedAt) }
            }
            return
        }
        let (session, contents, metrics, taskDelegate, sessionDelegate, metricsListeners) = (
            end.session, end.contents, end.metrics, end.taskDelegate, end.sessionDelegate, end.metricsListeners
        )
        let sessionListens = sessionDelegate != nil
        let (resume, resumeHandler, sink, ledKey, claim) = (end.resume, end.resumeHandler, end.sink, end.ledKey, end.fleetClaim)
        if case .success = result, !contents.tail.isEmpty, let session, taskDelegate != nil || sessionListens {
            deliverParts(contents.tail, session: session)
        }
        var failure = end.error
        try? contents.file?.handle?.close()
        let uploadResume = end.uploadResume?.make()
        // A copy of the body that no resume data names any more goes.
        if let spill = end.spill, uploadResume?.spill != spill { DownloadFiles.remove(spill) }
        let resumeData = resume?.encoded() ?? uploadResume?.encoded()
        if let resumeData, let sessionFailure = failure, resumeHandler == nil {
            var carrying = sessionFailure
            carrying.resumeData = resumeData
            carrying.resumesUpload = uploadResume != nil
            failure = carrying
            locked.withLock { $0.machine.attachResumeData(resumeData, resumesUpload: uploadResume != nil) }
        }
        // Apple's form from here on: what handlers, delegates and async calls get.
        let error: (any Error)? = failure?.urlError
        if let resumeHandler { resumeHandler(resumeData) }
        guard let session else { return }
        // The session's meters and the task's span are the application's
        // code (a backend's locks, an exporter's queue): they hear the end
        // where its delegate would, never on the transport's thread, and
        // the span ends at the moment the task did.
        let endedAt = trace == nil ? nil : DefaultTracerClock.now
        let failed = failure
        // A file that resume data points to stays; every other goes when the task is done.
        let sinkEnding = SinkEnding(
            task: self, session: session, error: error, keepsFile: resume != nil, metrics: metrics, taskDelegate: taskDelegate,
            sessionDelegate: sessionDelegate, shown: end.shown)
        let (buffer, cacheUpdate) = (contents.body, end.cacheUpdate)
        // A function, not a closure: the closures below that call it carry
        // what it reads in their own contexts (one allocation, not two).
        @Sendable func finish() {
            let status = end.shown.head?.head.status ?? end.shown.response?.statusCode
            if let meters = session.meters {
                let method = metrics.transactionMetrics.last?.request.httpMethod ?? originalRequest?.httpMethod
                meters.record(SessionMeters.taskEnd(method: method, status: status, failed: failed != nil, metrics: metrics))
            }
            if let endedAt { trace?.end(originalRequest, status: status, error: failed, metrics: metrics, at: endedAt) }
            sink.end(contents, sinkEnding)
            if sink.deliversToHandler {
                // The handler had the end; only a task's own delegate hears it too.
                taskDelegate?.urlSession(session, task: self, didCompleteWithError: error)
            } else {
                self.callDelegate(
                    .didCompleteWithError, taskDelegate: taskDelegate, sessionDelegate: sessionDelegate, abilities: session.delegateAbilities
                ) {
                    $0.urlSession(session, task: self, didCompleteWithError: error)
                }
            }
            self.engine.completionDelivered(self)
            if !end.letGoOfSession {
                self.locked.withLock {
                    $0.session = nil; $0.delegate = nil
                }
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
            let last: @Sendable () -> Void = { [self] in
                if error == nil { _ = self.updateCache(session: session, body: buffer, cacheUpdate) }
                self.letWaitersGo(ledKey, claim: claim, session: session)
                finish()
            }
            if let runner = completionRunner { runner(last) } else { events.enqueueSync(last) }
        } else if sink.asksDelegate {
            // willCacheResponse may be asked: an async job.
            events.enqueue { [self] in
                if error == nil, let candidate = self.updateCache(session: session, body: buffer, cacheUpdate) {
                    await self.offerToCache(candidate, session: session)
                }
                self.letWaitersGo(ledKey, claim: claim, session: session)
                finish()
            }
        } else {
            events.enqueueSync { [self] in
                if error == nil { _ = self.updateCache(session: session, body: buffer, cacheUpdate) }
                self.letWaitersGo(ledKey, claim: claim, session: session)
                finish()
            }
        }
    }
}

extension SessionTask {
    /// What a task's end reads of it, taken in one turn of its lock: the
    /// outcome recorded, the sink closed, the lead and fleet claim let go of.
    struct Ending: Sendable {
        let session: Session?
        let taskDelegate: (any SessionDelegate)?
        let sessionDelegate: (any SessionDelegate)?
        /// A delegate hears the metrics.
        let metricsListeners: Bool
        let contents: SinkContents
        let metrics: TaskMetrics
        let error: SessionError?
        let resume: ResumeData?
        let uploadResume: UploadResumeDraft?
        /// The session's copy of the body this upload was resumed with.
        let spill: String?
        let resumeHandler: (@Sendable (Data?) -> Void)?
        let sink: any ResponseSink
        /// The cache key this task led for, to let identical requests go.
        let ledKey: String?
        let fleetClaim: (any FleetClaim)?
        let cacheUpdate: CacheUpdateInputs
        let shown: ShownResponse
        /// No delegate is left to call: the task let go of its session in
        /// this turn (else after the last delegate call).
        let letGoOfSession: Bool

        init(_ inner: inout Inner, result: Result<TransferMetrics?, SessionError>, task: SessionTask) {
            let sessionDelegate = inner.session?.delegate
            let sessionHearsMetrics = sessionDelegate != nil && inner.session?.delegateAbilities.lacks(.didFinishCollectingMetrics) == false
            let metricsListeners = inner.delegate != nil || sessionHearsMetrics
            metrics = TaskMetrics(
                transactionMetrics: metricsListeners ? TaskTransactions.readyToRead(inner.transactions) : inner.transactions,
                taskInterval: DateInterval(start: inner.started ?? Date(), end: max(Date(), inner.started ?? Date())),
                redirectCount: inner.machine.redirects)
            session = inner.session
            taskDelegate = inner.delegate
            self.sessionDelegate = sessionDelegate
            self.metricsListeners = metricsListeners
            contents = inner.sink.close()
            error = inner.machine.error
            resume = task.resumeData(&inner, file: contents.file)
            uploadResume = task.uploadResumeDraft(&inner)
            spill = inner.uploadResumeFrom?.spill
            resumeHandler = inner.resumeDataHandler
            sink = inner.sink
            (ledKey, fleetClaim) = inner.machine.endLead()
            cacheUpdate = CacheUpdateInputs(&inner)
            shown = ShownResponse(response: inner.response, head: inner.head)
            // A cancelled task stays `canceling` until its end is delivered (`state`).
            letGoOfSession = inner.delegate == nil && sessionDelegate == nil && inner.machine.outcome?.isCancelled != true
            if letGoOfSession { inner.session = nil }
        }
    }
}
