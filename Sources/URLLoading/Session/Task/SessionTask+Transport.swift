import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPTypes
import Locking
import Transport

/// What the transport reports of a hop: head, body chunks, bytes sent and
/// the end, each handed on quickly (the transport's thread runs no user
/// code and no store I/O).
extension SessionTask {
    // MARK: Transport events (on the transport's thread)

    /// A 1xx head: to the delegate on the task's context, before the final
    /// response's calls (they are queued after it). swift-http-types' form
    /// first; Foundation's is built only for a delegate without that one.
    func receivedInterim(_ head: ResponseHead, from hop: Hop) {
        // A resumable upload's 104 names where it goes on (on the request's origin only).
        let (url, ignored) = locked.withLock { inner -> (URL?, Bool) in
            guard inner.machine.isCurrent(hop), let url = inner.machine.request?.url else { return (nil, false) }
            let location = head.headers.first { HeaderFields.namesEqual($0.name, "Location") }?.value
            let refused = inner.resumableUpload?.informational(status: head.status, location: location, requestURL: url)
            return (url, refused != nil)
        }
        if ignored { Self.logIgnoredResumption(task: taskIdentifier) }
        guard hasDelegate, let session, let url else { return }
        events.enqueueSync { [self] in
            if let fields = HTTPResponse(head),
                self.callDelegateIfImplemented({ $0.urlSession(session, task: self, didReceiveInformationalResponse: fields) })
            {
                return
            }
            guard let response = Self.makeResponse(url: url, head: head) else { return }
            self.callDelegate { $0.urlSession(session, task: self, didReceiveInformationalResponse: response) }
        }
    }

    /// A chunked body's trailer fields: to the delegate on the task's
    /// context, after the body's chunks and before the end.
    func receivedTrailers(_ fields: [(name: String, value: String)], from hop: Hop) {
        guard hasDelegate, let session, locked.withLock({ $0.machine.isCurrent(hop) }) else { return }
        var trailers = HTTPFields()
        for field in fields {
            guard let name = HTTPField.Name(field.name) else { continue }
            trailers.append(HTTPField(name: name, value: field.value))
        }
        guard !trailers.isEmpty else { return }
        events.enqueueSync { [self, trailers] in
            self.callDelegate { $0.urlSession(session, task: self, didReceiveTrailers: trailers) }
        }
    }

    func received(_ head: ResponseHead, from hop: Hop) {
        // The decision reads the task in the head's turn of the lock; a
        // plain response that writes to no store is accepted in it too.
        let (actions, inputs, touchesStores, accepted) = locked.withLock {
            inner -> (StateMachine.Actions, DecisionInputs?, Bool, (url: URL, session: Session, kind: Kind, published: Published?)?) in
            guard inner.machine.isCurrent(hop) else { return ([], nil, false, nil) }
            let actions = inner.machine.head(head, at: Date())
            guard actions.contains(where: { if case .decide = $0 { true } else { false } }) else { return (actions, nil, false, nil) }
            if inner.resumableUpload != nil, let next = resumableStep(&inner, head) { return (next, nil, false, nil) }
            let inputs = DecisionInputs(&inner, status: head.status)
            let touchesStores = decisionTouchesStores(head, inputs)
            guard !touchesStores, inputs.revalidating == nil, let session = inputs.session,
                let request = inputs.request, let url = request.url,
                HeadDecision.of(status: head.status, headers: head.headers, request: request, firstRequest: hop.isFirst, revalidating: false)
                    == .response
            else { return (actions, inputs, touchesStores, nil) }
            let (kind, published) = Self.accept(&inner, head, url: url, session: session)
            return ([], nil, false, (url, session, kind, published))
        }
        if let accepted {
            self.accepted(head, url: accepted.url, session: accepted.session, kind: accepted.kind, published: accepted.published)
            return
        }
        for action in actions {
            if case .decide(let head, let hop) = action, let inputs {
                decideOnHead(head, of: hop, inputs, touchesStores: touchesStores)
            } else {
                perform(StateMachine.Actions(action))
            }
        }
    }

    func received(_ chunk: UnsafeRawBufferPointer, from hop: Hop) -> Bool {
        // The sink decides under the task's lock, so a consumer's
        // `continueDelivery` cannot slip between a refusal and the pause.
        let (step, session) = locked.withLock { inner -> (SinkStep, Session?) in
            // An earlier hop's bytes, or a finished task's, are dropped.
            guard inner.machine.isCurrent(hop) else { return (.taken, nil) }
            guard inner.machine.chunk() else { return (.refuse, nil) }
            let listens = inner.delegate != nil || inner.session?.delegate != nil
            let step = inner.sink.take(chunk, delegateListens: listens)
            if step == .refuse {
                inner.machine.refuseChunk()
                return (.refuse, nil)
            }
            inner.bytesReceived += Int64(chunk.count)
            inner.updateProgress()
            return (step, inner.session)
        }
        switch step {
        case .refuse: return false
        case .taken: return true
        case .deliver:
            guard let session else { return true }
            let data = Data(chunk)  // the one copy
            events.enqueueSync { [self] in
                self.callDelegate { $0.urlSession(session, dataTask: self, didReceive: data) }
                self.delegateTook(data.count)
            }
        case .parts(let parts):
            guard let session else { return true }
            deliverParts(parts, session: session)
        case .malformed(let message):
            // No URL: the machine names the request the task is at (the lock is held here).
            perform(locked.withLock { $0.machine.fail(SessionError(.badServerResponse, failingURL: nil, message: message)) })
        case .write(let handle, let total, let expected, let report):
            if let failure = Self.writeAll(chunk, to: handle.fileDescriptor) {
                // A full disk or a lost file: the task fails with what the system said.
                perform(locked.withLock { $0.machine.fail(SessionError(.cannotWriteFile, failingURL: nil, message: "writing the download failed: \(failure)")) })
                return true
            }
            if report, let session {
                let written = Int64(chunk.count)
                events.enqueueSync { [self] in
                    self.callDelegate {
                        $0.urlSession(session, downloadTask: self, didWriteData: written, totalBytesWritten: total, totalBytesExpectedToWrite: expected)
                    }
                }
            }
        }
        return true
    }

    /// The delegate's context delivered `count` body bytes: a transfer
    /// paused for it goes on once the sink has room.
    func delegateTook(_ count: Int) {
        perform(
            locked.withLock { inner in
                inner.sink.delegateTook(count) ? inner.machine.continueDelivery() : []
            })
    }

    /// Writes all of `bytes` to `descriptor` straight from the transport's
    /// buffer (FileHandle's write copies through a Data first); the system's
    /// reason on failure, nil on success.
    static func writeAll(_ bytes: UnsafeRawBufferPointer, to descriptor: Int32) -> String? {
        guard var cursor = bytes.baseAddress else { return nil }
        var left = bytes.count
        while left > 0 {
            let written = write(descriptor, cursor, left)
            if written < 0 {
                if errno == EINTR { continue }
                return String(cString: strerror(errno))
            }
            cursor += written
            left -= written
        }
        return nil
    }

    func sent(_ sent: Int64, total: Int64, from hop: Hop) {
        let report = locked.withLock { inner -> (Session, delta: Int64, sent: Int64, total: Int64)? in
            guard inner.machine.isCurrent(hop) else { return nil }
            if hop.index != inner.sendingHop {
                // The body is sent anew (after a challenge or redirect): count from 0,
                // or from what the server had (a resumed upload).
                inner.sendingHop = hop.index
                inner.bytesSent = inner.sendBase
            }
            let sent = inner.sendBase + sent
            guard sent > inner.bytesSent else { return nil }
            let delta = sent - inner.bytesSent
            inner.bytesSent = sent
            inner.updateProgress()
            guard let session = inner.session, inner.delegate != nil || session.delegate != nil else { return nil }
            return (session, delta, sent, inner.resumableUpload == nil ? total : inner.bytesExpectedToSend)
        }
        guard let (session, delta, sent, total) = report else { return }
        events.enqueueSync { [self] in
            self.callDelegate { $0.urlSession(session, task: self, didSendBodyData: delta, totalBytesSent: sent, totalBytesExpectedToSend: total) }
        }
    }

    func completed(_ result: Result<TransferMetrics, TransferError>, of hop: Hop) {
        if case .failure(let error) = result, resumeUpload(after: error, of: hop) {
            return
        }
        if case .failure(let error) = result, error.kind != .cancelled, hop.isFirst, serveStaleIfError(reason: "fwd-status=error") {
            return
        }
        if case .failure(let error) = result, waitForConnectivity(after: error, of: hop) {
            return
        }
        if case .failure(let error) = result, handleClientCertificateRequest(after: error, of: hop) {
            return
        }
        // A transfer that ends the task: its end is read in the same turn of the lock.
        let (actions, end) = locked.withLock { inner -> (StateMachine.Actions, (Result<TransferMetrics?, SessionError>, Ending?)?) in
            guard inner.machine.isCurrent(hop) else {
                if case .success(let metrics) = result { TaskTransactions.fillCutShort(&inner, hop: hop, metrics) }
                return ([], nil)
            }
            if metricsAreRead(inner) { inner.transactions.append(TaskTransactions.network(&inner, metrics: try? result.get())) }
            let actions = inner.machine.transferCompleted(result)
            guard actions.count == 1, case .complete(let ended) = actions[0] else { return (actions, nil) }
            return ([], (ended, ending(&inner, ended)))
        }
        perform(actions)
        if let (result, end) = end { complete(result, end) }
    }

    /// Whether anything reads the task's metrics at its end: a delegate of
    /// the task's or of its session's, the session's meters, the task's
    /// span. Without, the exchanges are not recorded: each record is a
    /// large value (the request, the response, a dozen dates and counts)
    /// and an allocation that nobody would read.
    func metricsAreRead(_ inner: Inner) -> Bool {
        trace != nil || inner.delegate != nil || inner.session.map { $0.madeWithDelegate || $0.meters != nil } ?? false
    }

    /// A hop's transfer was cancelled (cut short): its figures so far.
    func cancelled(after metrics: TransferMetrics, of hop: Hop) {
        locked.withLock { TaskTransactions.fillCutShort(&$0, hop: hop, metrics) }
    }

    /// With `waitsForConnectivity`, a host that cannot be found or reached
    /// is tried again (after 0.25 s, doubling to 4 s) until the resource
    /// timeout, instead of failing at once; the delegate hears once that the
    /// task waits. Returns whether the task waits.
    func waitForConnectivity(after error: TransferError, of hop: Hop) -> Bool {
        guard let session, session.settings.waitsForConnectivity,
            error.failure == .cannotFindHost || error.failure == .cannotConnect
        else { return false }
        let retry = locked.withLock { inner -> Int? in
            guard inner.machine.isCurrent(hop), let retry = inner.machine.retryForConnectivity()
            else { return nil }
            // A retry never waits behind itself for its own cache key.
            inner.machine.markCoalesced()
            return retry
        }
        guard let retry else { return false }
        if let trace {
            // The tracer's code: never on the transport's thread (see `complete`).
            // With a completion runner this end already runs on the awaiting task.
            let failure = SessionError(transfer: error)
            if completionRunner != nil {
                trace.retrying(after: failure, try: retry)
            } else {
                events.enqueueSync { trace.retrying(after: failure, try: retry) }
            }
        }
        if retry == 1, hasDelegate {
            events.enqueueSync { [self] in self.callDelegate { $0.urlSession(session, taskIsWaitingForConnectivity: self) } }
        }
        let delay = min(4.0, 0.25 * pow(2.0, Double(retry - 1)))
        DispatchQueue.global().asyncAfter(deadline: .now() + delay) { [self] in
            self.waitEnded(for: hop)
        }
        return true
    }
}
