import Foundation
#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Transport

/// A background task's life in this process: its transfer runs in
/// transferd; here it is created, resumed, suspended and cancelled there,
/// and its events come back as the delegate's calls on the task's context.
extension SessionTask {
    /// Sends `resume` to transferd (creating the task there first); false
    /// for tasks that do not run in transferd.
    func resumeInBackground() -> Bool {
        let step = locked.withLock { inner -> (BackgroundTaskLink, TaskSpec?)? in
            guard var tie = inner.background, !inner.machine.isFinished else { return nil }
            var create: TaskSpec?
            if !tie.created {
                tie.created = true
                tie.spec.earliestBeginDate = inner.earliestBeginDate
                tie.spec.taskDescription = inner.taskDescription
                create = tie.spec
                inner.background = tie
                if inner.started == nil { inner.started = Date() }
            }
            inner.remoteRunning = true
            return (tie, create)
        }
        guard let (tie, create) = step else { return false }
        if var create {
            // The body's descriptor goes with the task: transferd copies the
            // file even if the app deletes it, or dies, once resume() returned.
            let body = create.bodyFile.map { open($0, O_RDONLY | O_CLOEXEC) } ?? -1
            if body >= 0 { create.bodyPassed = true }
            tie.link.send(.create(create), passing: body >= 0 ? body : nil)
            if body >= 0 { close(body) }
        }
        tie.link.send(.resume(task: taskIdentifier))
        return true
    }

    /// Sends `suspend` to transferd; false for tasks that do not run there.
    func suspendInBackground() -> Bool {
        guard
            let tie = locked.withLock({ inner -> BackgroundTaskLink? in
                guard let tie = inner.background, !inner.machine.isFinished else { return nil }
                inner.remoteRunning = false
                return tie
            })
        else { return false }
        if tie.created { tie.link.send(.suspend(task: taskIdentifier)) }
        return true
    }

    /// Sends `cancel` to transferd, whose answer completes the task; false
    /// for tasks that do not run there (or never reached it).
    func cancelInBackground() -> Bool {
        guard
            let tie = locked.withLock({ inner -> BackgroundTaskLink? in
                guard let tie = inner.background, tie.created, !inner.machine.isFinished else { return nil }
                return tie
            })
        else { return false }
        return tie.link.send(.cancel(task: taskIdentifier))
    }

    func backgroundProgress(sent: Int64, written: Int64, expectedToSend: Int64, expectedToWrite: Int64) {
        let delta = locked.withLock { inner -> (Int64, Kind) in
            defer { inner.updateProgress() }
            if inner.kind == .upload {
                let delta = max(0, sent - inner.bytesSent)
                inner.bytesSent = sent
                if expectedToSend > 0 { inner.bytesExpectedToSend = expectedToSend }
                return (delta, .upload)
            }
            let delta = max(0, written - inner.bytesReceived)
            inner.bytesReceived = written
            inner.bytesExpectedToReceive = expectedToWrite
            return (delta, .download)
        }
        guard let session, delta.0 > 0 else { return }
        events.enqueue { [self] in
            if delta.1 == .upload {
                callDelegate {
                    $0.urlSession(session, task: self, didSendBodyData: delta.0, totalBytesSent: sent, totalBytesExpectedToSend: expectedToSend)
                }
            } else {
                callDelegate {
                    $0.urlSession(
                        session, downloadTask: self, didWriteData: delta.0, totalBytesWritten: written, totalBytesExpectedToWrite: expectedToWrite)
                }
            }
        }
    }

    /// transferd asks whether the delayed task may begin.
    func askToBeginInBackground() {
        guard let session, let tie = locked.withLock({ $0.background }), let request = currentRequest else { return }
        events.enqueue { [self] in
            let (disposition, replacement) =
                await askDelegate { await $0.urlSession(session, task: self, willBeginDelayedRequest: request) } ?? (.continueLoading, nil)
            var spec: RequestSpec?
            if disposition == .useNewRequest, let replacement, let url = replacement.url {
                locked.withLock { $0.currentRequest = replacement }
                let headers = (replacement.allHTTPHeaderFields ?? [:]).sorted { $0.key < $1.key }.map { [$0.key, $0.value] }
                spec = RequestSpec(url: url.absoluteString, method: replacement.httpMethod ?? "GET", headers: headers, timeout: tie.spec.request.timeout)
            }
            tie.link.send(.answerBegin(task: taskIdentifier, proceed: disposition != .cancel, request: spec))
        }
    }

    /// transferd passes on a server's challenge: the delegate answers as in
    /// a foreground session (a task delegate first, then the session's;
    /// with neither, default handling: transferd uses the session's store).
    func answerChallengeInBackground(_ spec: BackgroundChallenge) {
        guard let session, let tie = locked.withLock({ $0.background }) else { return }
        let challenge = spec.challenge
        events.enqueue { [self] in
            let (disposition, credential) =
                await askDelegate { await $0.urlSession(session, task: self, didReceive: challenge) } ?? (.performDefaultHandling, nil)
            tie.link.send(.answerChallenge(task: taskIdentifier, answer: BackgroundChallengeAnswer(disposition, credential)))
        }
    }

    /// transferd says how the task ended: the delegate hears it (an upload's
    /// response body, the download's file, the completion), then transferd
    /// hears that it was delivered.
    func finishFromBackground(_ result: TaskResult, acknowledge: Bool) {
        guard let session, locked.withLock({ $0.background != nil }) else { return }
        let url = currentRequest?.url
        let failure = result.errorCode.map { SessionError(SessionError.Code(named: $0), failingURL: url, message: result.errorMessage ?? "") }
        var head: (URL, ResponseHead)?
        if let response = result.response, let responseURL = URL(string: response.url) {
            let fields = response.headers.compactMap { $0.count == 2 ? (name: $0[0], value: $0[1]) : nil }
            head = (responseURL, ResponseHead(status: response.status, httpVersion: response.httpVersion, headers: fields))
        }
        let file = failure == nil ? result.file.flatMap(Self.transferdFile) : nil
        let kind = locked.withLock { inner -> Kind in
            inner.remoteRunning = false
            if let head {
                inner.head = head
                inner.response = nil
            }
            inner.bytesReceived = max(inner.bytesReceived, result.written)
            inner.bytesSent = max(inner.bytesSent, result.sent)
            if let file, let handle = FileHandle(forReadingAtPath: file.path) {
                _ = inner.sink.attach(DownloadFile(handle: handle, url: file))
            }
            return inner.kind
        }
        if let head, let request = currentRequest {
            SessionTask.storeCookies(of: head.1, url: head.0, request: request, session: session)
        }
        if kind == .upload, let body = result.body, !body.isEmpty {
            events.enqueue { [self] in callDelegate { $0.urlSession(session, dataTask: self, didReceive: body) } }
        }
        locked.withLock { $0.acknowledgesCompletion = acknowledge }
        perform(locked.withLock { $0.machine.finishWithoutTransfer(failure.map { .failure($0) } ?? .success(nil)) })
    }

    /// The delegate returned from `didCompleteWithError` of a task whose end
    /// came from transferd: transferd hears that its events were delivered
    /// (before the session can say it is invalid).
    func acknowledgeInBackground() {
        guard
            let (tie, session) = locked.withLock({ inner -> (BackgroundTaskLink, Session?)? in
                guard inner.acknowledgesCompletion, let tie = inner.background else { return nil }
                inner.acknowledgesCompletion = false
                return (tie, inner.session)
            })
        else { return }
        tie.link.send(.acknowledge(task: taskIdentifier))
        session?.backgroundAcknowledged(taskIdentifier)
    }

    /// A finished download's file as transferd names it, accepted only in
    /// transferd's own file folder under its own naming.
    private static func transferdFile(_ path: String) -> URL? {
        let folder = BackgroundPaths().files + "/"
        guard path.hasPrefix(folder) else { return nil }
        let name = path.dropFirst(folder.count)
        guard name.hasPrefix("download-"), !name.contains("/"), name.dropFirst(9).allSatisfy(\.isNumber) else { return nil }
        return URL(fileURLWithPath: path)
    }
}
