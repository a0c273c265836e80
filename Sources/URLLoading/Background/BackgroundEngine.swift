import Foundation
#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
import Transport

/// A background task's engine: its transfer runs in transferd; here it is
/// created, resumed, suspended and cancelled there, and its events come
/// back as the delegate's calls on the task's context.
final class BackgroundEngine: TaskEngine {
    private let link: BackgroundLink
    private let state: Lock<State>
    /// Called with the task's identifier when transferd is told of it.
    private let created: (@Sendable (Int) -> Void)?

    private struct State {
        var spec: TaskSpec
        /// transferd has the task.
        var created: Bool
        /// Resumed in transferd (the task's machine stays suspended here until it ends).
        var running: Bool
        /// The task's end came from transferd, which hears when it was
        /// delivered; then this runs (the session's count of events to deliver).
        var acknowledgement: (@Sendable () -> Void)?
        /// The delegate answered with what transferd cannot take, so the task
        /// was ended there: its end says why instead of transferd's words.
        var refusal: SessionError?
    }

    /// - Parameter onCreate: Called with the task's identifier when
    ///   transferd is told of the task (not for one it has already).
    init(link: BackgroundLink, spec: TaskSpec, created: Bool, running: Bool, onCreate: (@Sendable (Int) -> Void)? = nil) {
        self.link = link
        self.created = onCreate
        state = Lock(State(spec: spec, created: created, running: running))
    }

    var isRunningElsewhere: Bool { state.withLock { $0.running } }

    /// Sends `resume` to transferd, creating the task there first.
    func resume(_ task: SessionTask) {
        let facts = task.locked.withLock { inner -> (Date?, String?)? in
            guard !inner.machine.isFinished else { return nil }
            if inner.started == nil { inner.started = Date() }
            return (inner.earliestBeginDate, inner.taskDescription)
        }
        guard let (earliestBeginDate, taskDescription) = facts else { return }
        // The span covers the task as this process sees it, to its end here.
        task.trace?.start(task.originalRequest)
        let create = state.withLock { state -> TaskSpec? in
            state.running = true
            guard !state.created else { return nil }
            state.created = true
            state.spec.task = task.taskIdentifier
            state.spec.earliestBeginDate = earliestBeginDate
            state.spec.taskDescription = taskDescription
            return state.spec
        }
        if var create {
            create.request = Self.traced(create.request, task)
            // The body's descriptor goes with the task: transferd copies the
            // file even if the app deletes it, or dies, once resume() returned.
            let body = create.bodyFile.map { open($0, O_RDONLY | O_CLOEXEC) } ?? -1
            if body >= 0 { create.bodyPassed = true }
            // One message where transferd understands it: created and started.
            let resumed = link.createsResumed
            if resumed { create.resumed = true }
            // transferd refuses a message out of its bounds (and the link with
            // it): such a task fails here, as a foreground task would, instead
            // of waiting for an answer that never comes.
            do throws(BackgroundWireError) {
                try BackgroundMessage.create(create).check()
            } catch {
                if body >= 0 { close(body) }
                state.withLock { $0.running = false }
                let refused = SessionError(.badURL, failingURL: task.currentRequest?.url, message: "the request cannot be sent: \(error.description)")
                task.perform(task.locked.withLock { $0.machine.finishWithoutTransfer(.failure(refused)) })
                return
            }
            // Counted before it is sent: created and started in one message,
            // the task can finish, and its end reach the link's reader, before
            // `send` returns (the count would then go 0, 1 and stay at 1).
            self.created?(task.taskIdentifier)
            link.send(.create(create), passing: body >= 0 ? body : nil)
            if body >= 0 { close(body) }
            if resumed { return }
        }
        link.send(.resume(task: task.taskIdentifier))
    }

    /// Sends `suspend` to transferd.
    func suspend(_ task: SessionTask) {
        guard !task.locked.withLock({ $0.machine.isFinished }) else { return }
        let created = state.withLock { state -> Bool in
            state.running = false
            return state.created
        }
        if created { link.send(.suspend(task: task.taskIdentifier)) }
    }

    /// Sends `cancel` to transferd, whose answer completes the task; a task
    /// transferd never had (or that a lost link cannot reach) ends here.
    func cancel(_ task: SessionTask) {
        guard !task.locked.withLock({ $0.machine.isFinished }) else { return }
        if state.withLock({ $0.created }), link.send(.cancel(task: task.taskIdentifier)) { return }
        LocalEngine.shared.cancel(task)
    }

    /// The delegate returned from `didCompleteWithError` of a task whose end
    /// came from transferd: transferd hears that its events were delivered
    /// (before the session can say it is invalid).
    func completionDelivered(_ task: SessionTask) {
        guard let acknowledgement = state.withLock({ $0.acknowledgement.take() }) else { return }
        link.acknowledge(task.taskIdentifier, then: acknowledgement)
    }

    /// transferd's progress of the task's bytes: the delegate hears what is new.
    func progress(_ task: SessionTask, sent: Int64, written: Int64, expectedToSend: Int64, expectedToWrite: Int64) {
        let (delta, kind, session) = task.locked.withLock { inner -> (Int64, SessionTask.Kind, Session?) in
            defer { inner.updateProgress() }
            if inner.kind == .upload {
                let delta = max(0, sent - inner.bytesSent)
                inner.bytesSent = sent
                if expectedToSend > 0 { inner.bytesExpectedToSend = expectedToSend }
                return (delta, .upload, inner.session)
            }
            let delta = max(0, written - inner.bytesReceived)
            inner.bytesReceived = written
            inner.bytesExpectedToReceive = expectedToWrite
            return (delta, .download, inner.session)
        }
        guard let session, delta > 0 else { return }
        task.events.enqueueSync {
            if kind == .upload {
                task.callDelegate {
                    $0.urlSession(session, task: task, didSendBodyData: delta, totalBytesSent: sent, totalBytesExpectedToSend: expectedToSend)
                }
            } else {
                task.callDelegate {
                    $0.urlSession(session, downloadTask: task, didWriteData: delta, totalBytesWritten: written, totalBytesExpectedToWrite: expectedToWrite)
                }
            }
        }
    }

    /// transferd asks whether the delayed task may begin. A new request
    /// transferd would refuse (not http, or past its bounds) ends the task.
    func askToBegin(_ task: SessionTask) {
        guard let session = task.session, let request = task.currentRequest else { return }
        let timeout = state.withLock { $0.spec.request.timeout }
        task.events.enqueue { [link, self] in
            let (disposition, replacement) =
                await task.askDelegate { await $0.urlSession(session, task: task, willBeginDelayedRequest: request) } ?? (.continueLoading, nil)
            var spec: RequestSpec?
            var refusal: SessionError?
            if disposition == .useNewRequest, let replacement, let url = replacement.url {
                task.locked.withLock { $0.machine.use(replacement) }
                // Sent as the original would be: with the app's cookies and the span's context.
                spec = Self.traced(BackgroundHost.spec(of: replacement, url: url, timeout: timeout, session: session), task)
                refusal = Self.refusal(of: .answerBegin(task: task.taskIdentifier, proceed: true, request: spec), url: url)
            }
            if let refusal {
                self.state.withLock { $0.refusal = refusal }
                link.send(.answerBegin(task: task.taskIdentifier, proceed: false, request: nil))
                return
            }
            link.send(.answerBegin(task: task.taskIdentifier, proceed: disposition != .cancel, request: spec))
        }
    }

    /// transferd passes on a server's challenge: the delegate answers as in
    /// a foreground session (a task delegate first, then the session's;
    /// with neither, default handling: transferd uses the session's store).
    func answerChallenge(_ task: SessionTask, _ spec: BackgroundChallenge) {
        guard let session = task.session else { return }
        let challenge = spec.challenge
        task.events.enqueue { [link, self] in
            let (disposition, credential) =
                await task.askDelegate { await $0.urlSession(session, task: task, didReceive: challenge) } ?? (.performDefaultHandling, nil)
            var answer = BackgroundChallengeAnswer(disposition, credential)
            // A credential transferd cannot take ends the task: sending the
            // request again without it would only be challenged again.
            if let refusal = Self.refusal(of: .answerChallenge(task: task.taskIdentifier, answer: answer), url: task.currentRequest?.url) {
                self.state.withLock { $0.refusal = refusal }
                answer = BackgroundChallengeAnswer(disposition: .cancelAuthenticationChallenge)
            }
            link.send(.answerChallenge(task: task.taskIdentifier, answer: answer))
        }
    }

    /// transferd's requests carry the task's span context, as a local task's do.
    private static func traced(_ request: RequestSpec, _ task: SessionTask) -> RequestSpec {
        guard let trace = task.trace else { return request }
        var request = request
        var fields = request.headers.compactMap { $0.count == 2 ? (name: $0[0], value: $0[1]) : nil }
        trace.inject(into: &fields)
        request.headers = fields.map { [$0.name, $0.value] }
        return request
    }

    /// Why transferd would refuse a message the delegate's answer makes, as
    /// the task's error (the check's words name sizes and kinds, never values).
    private static func refusal(of message: BackgroundMessage, url: URL?) -> SessionError? {
        do throws(BackgroundWireError) {
            try message.check()
            return nil
        } catch {
            switch message {
            case .answerChallenge:
                return SessionError(.userAuthenticationRequired, failingURL: url, message: "the delegate's credential cannot be sent: \(error.description)")
            default:
                let scheme = url?.scheme?.lowercased()
                guard scheme == "http" || scheme == "https" else {
                    return SessionError(.unsupportedURL, failingURL: url, message: "a background session loads http and https URLs only")
                }
                return SessionError(.badURL, failingURL: url, message: "the new request cannot be sent: \(error.description)")
            }
        }
    }

    /// transferd says how the task ended: the delegate hears it (an upload's
    /// response body, the download's file, the completion), then, when
    /// `acknowledge` is set, transferd hears that it was delivered and
    /// `acknowledged` runs.
    func finish(_ task: SessionTask, _ result: TaskResult, acknowledge: Bool, acknowledged: (@Sendable () -> Void)? = nil) {
        guard let session = task.session else { return }
        let url = task.currentRequest?.url
        let refusal = state.withLock { $0.refusal.take() }
        let failure = result.errorCode.map { refusal ?? SessionError(SessionError.Code(named: $0), failingURL: url, message: result.errorMessage ?? "") }
        var head: (URL, ResponseHead)?
        if let response = result.response, let responseURL = URL(string: response.url) {
            let fields = response.headers.compactMap { $0.count == 2 ? (name: $0[0], value: $0[1]) : nil }
            head = (
                responseURL,
                ResponseHead(status: response.status, httpVersion: response.httpVersion, headers: fields, reasonPhrase: response.reasonPhrase ?? "")
            )
        }
        let file = failure == nil ? result.file.flatMap { Self.transferdFile($0, in: link.paths.files) } : nil
        if let expected = result.expectedToWrite {
            // The last progress came with the end: the delegate hears it first.
            progress(task, sent: 0, written: result.written, expectedToSend: 0, expectedToWrite: expected)
        }
        state.withLock { state in
            state.running = false
            if acknowledge { state.acknowledgement = acknowledged ?? {} }
        }
        let kind = task.locked.withLock { inner -> SessionTask.Kind in
            if let head {
                inner.head = head
                inner.response = nil
            }
            inner.bytesReceived = max(inner.bytesReceived, result.written)
            inner.bytesSent = max(inner.bytesSent, result.sent)
            if let file { _ = inner.sink.attach(DownloadFile(handle: nil, url: file)) }
            return inner.kind
        }
        if let head, let request = task.currentRequest {
            RequestCookies.store(from: head.1, url: head.0, request: request, session: session)
        }
        if kind == .upload, let body = result.body, !body.isEmpty {
            task.events.enqueueSync { task.callDelegate { $0.urlSession(session, dataTask: task, didReceive: body) } }
        }
        task.perform(task.locked.withLock { $0.machine.finishWithoutTransfer(failure.map { .failure($0) } ?? .success(nil)) })
    }

    /// A finished download's file as transferd names it (`download-` and
    /// its record's number, ASCII digits), accepted only in transferd's own
    /// file folder (`files`, the link's: the environment is not read again
    /// for each task) and only while it is a regular file there: a file
    /// removed meanwhile is no download to deliver.
    static func transferdFile(_ path: String, in files: String) -> URL? {
        let prefix = "download-".utf8
        var utf8 = path.utf8[...]
        guard utf8.starts(with: files.utf8) else { return nil }
        utf8 = utf8.dropFirst(files.utf8.count)
        guard utf8.first == UInt8(ascii: "/") else { return nil }
        let name = utf8.dropFirst()
        guard name.starts(with: prefix), name.count > prefix.count,
            name.dropFirst(prefix.count).allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") })
        else { return nil }
        var info = stat()
        guard lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return nil }
        // Known to be a file: URL is told so rather than looking at the disk again.
        return URL(fileURLWithPath: path, isDirectory: false)
    }
}
