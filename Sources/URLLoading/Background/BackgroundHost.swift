import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
import Transport

/// A background session's side of `transferd`: its tasks run in transferd;
/// this process creates them (each with a `BackgroundEngine`), adopts the
/// ones transferd already has, and turns transferd's messages into the
/// delegate's calls, acknowledging each task's events once the delegate
/// returned from the last of them.
final class BackgroundHost: RemoteTaskHost {
    /// The connection to transferd (nil when the session could not attach).
    let link: BackgroundLink?
    let failure: SessionError?
    private let settings: SessionConfiguration.Values
    private let attached: BackgroundLink.Attached
    private let events: Lock<Events>
    /// The session it serves, once made (its tasks and delegate).
    private let session = Lock<Weak?>(nil)
    /// The tasks transferd holds and has not finished, for the session's
    /// gauge of them (with a metrics backend).
    private let queued = Lock<Set<Int>>([])

    private struct Weak {
        weak var session: Session?
    }

    /// Events still to be delivered, for
    /// `urlSessionDidFinishEvents(forBackgroundURLSession:)`.
    private struct Events {
        var pending = 0
        var unacknowledged: Set<Int> = []
        var allSent = false
        var told = false
    }

    init(link: BackgroundLink, attached: BackgroundLink.Attached, settings: SessionConfiguration.Values) {
        self.link = link
        self.failure = nil
        self.attached = attached
        self.settings = settings
        events = Lock(Events(pending: attached.pending))
    }

    init(failure: SessionError, settings: SessionConfiguration.Values) {
        self.link = nil
        self.failure = failure
        self.attached = BackgroundLink.Attached(nextTask: 1, tasks: [], pending: 0)
        self.settings = settings
        events = Lock(Events())
    }

    var firstTaskIdentifier: Int { attached.nextTask }

    /// Events that waited in transferd when the session attached.
    var pendingEvents: Int { events.withLock { $0.pending } }

    func start(_ session: Session) {
        self.session.withLock { $0 = Weak(session: session) }
        guard let link else { return }
        adopt(attached.tasks, into: session)
        link.start { [weak self] message in self?.received(message) }
    }

    func close() {
        link?.close()
    }

    /// Task objects for the tasks transferd already has (a re-attached session).
    private func adopt(_ summaries: [TaskSummary], into session: Session) {
        guard let link else { return }
        for summary in summaries {
            let exists = session.state.withLock { $0.tasks[summary.spec.task] != nil }
            guard !exists, let url = URL(string: summary.spec.request.url) else { continue }
            var request = URLRequest(url: url)
            request.httpMethod = summary.spec.request.method
            for pair in summary.spec.request.headers where pair.count == 2 { request.addValue(pair[1], forHTTPHeaderField: pair[0]) }
            let download = summary.spec.kind == .download
            let task = SessionTask(
                session: session, identifier: summary.spec.task, kind: download ? .download : .upload, request: request, body: .none,
                sink: download ? DownloadSink() as any ResponseSink : DelegateDataSink(),
                engine: BackgroundEngine(link: link, spec: summary.spec, created: true, running: !summary.finished))
            if !summary.finished { queue(session) { _ = $0.insert(summary.spec.task) } }
            task.locked.withLock { inner in
                inner.bytesReceived = summary.written
                inner.bytesSent = summary.sent
                inner.bytesExpectedToReceive = summary.expectedToWrite
                inner.taskDescription = summary.spec.taskDescription
                inner.started = Date()
            }
            session.state.withLock { state in
                state.tasks[task.taskIdentifier] = task
                state.nextIdentifier = max(state.nextIdentifier, summary.spec.task + 1)
            }
        }
    }

    func engine(
        kind: SessionTask.Kind, request: URLRequest, body: TransferRequest.Body, sink: any ResponseSink, session: Session
    ) -> Result<any TaskEngine, SessionError> {
        let refusal: String?
        var bodyFile: String?
        switch kind {
        case .download where (sink as? DownloadSink)?.handler == nil: refusal = nil
        case .download: refusal = "download tasks with a completion handler are not supported in a background session: use the delegate"
        case .upload:
            if case .file(let path, 0, _) = body, sink is DelegateDataSink {
                refusal = nil
                bodyFile = path
            } else {
                refusal = "upload tasks in a background session send a file: use uploadTask(with:fromFile:) without a completion handler"
            }
        case .data: refusal = "data tasks are not supported in a background session: use a download task"
        }
        let scheme = request.url?.scheme?.lowercased()
        if let failure { return .failure(failure) }
        if let refusal { return .failure(SessionError(.notSupportedInBackground, failingURL: request.url, message: refusal)) }
        guard scheme == "http" || scheme == "https", let link, let url = request.url else {
            return .failure(SessionError(.unsupportedURL, failingURL: request.url, message: "a background session loads http and https URLs only"))
        }
        let timeout = RequestSpec.carried(
            request.timeoutInterval > 0 && request.timeoutInterval != 60 ? request.timeoutInterval : settings.timeoutIntervalForRequest)
        // The task's identifier goes in when transferd is told of the task (at its first resume).
        let spec = TaskSpec(
            task: 0, kind: kind == .download ? .download : .upload,
            request: Self.spec(of: request, url: url, timeout: timeout, session: session),
            bodyFile: bodyFile, earliestBeginDate: nil, isDiscretionary: settings.isDiscretionary, taskDescription: nil,
            proxies: settings.chosenProxies, trustRootsFile: settings.trustRootsFile,
            resumableUploadVersion: settings.resumableUploadVersion ?? 0,
            tlsMinimumVersion: settings.tlsMinimumSupportedVersion.map { [$0.major, $0.minor] },
            tlsMaximumVersion: settings.tlsMaximumSupportedVersion.map { [$0.major, $0.minor] })
        return .success(
            BackgroundEngine(link: link, spec: spec, created: false, running: false) { [weak self, weak session] task in
                guard let self, let session else { return }
                self.queue(session) { _ = $0.insert(task) }
            })
    }

    /// A request as transferd sends it: the app's own fields and, as the
    /// configuration says, the cookies of the app's store (transferd has none).
    static func spec(of request: URLRequest, url: URL, timeout: TimeInterval, session: Session) -> RequestSpec {
        var headers = (request.allHTTPHeaderFields ?? [:]).sorted { $0.key < $1.key }.map { [$0.key, $0.value] }
        let pairs = headers.map { (name: $0[0], value: $0[1]) }
        if let cookie = RequestCookies.header(for: request, headers: pairs, session: session) { headers.append(["Cookie", cookie]) }
        return RequestSpec(url: url.absoluteString, method: request.httpMethod ?? "GET", headers: headers, timeout: timeout)
    }

    /// A message from transferd (on the link's reader thread).
    private func received(_ message: BackgroundMessage) {
        guard let session = session.withLock({ $0?.session }) else { return }
        switch message {
        case .attached(let nextTask, let tasks, let pending, _):
            // Attached again after transferd restarted.
            adopt(tasks, into: session)
            session.state.withLock { $0.nextIdentifier = max($0.nextIdentifier, nextTask) }
            events.withLock { $0 = Events(pending: pending) }
        case .refused(let reason):
            // transferd is gone for good: the tasks cannot finish here.
            let failure = SessionError(.backgroundSessionWasDisconnected, failingURL: nil, message: reason)
            queue(session) { $0.removeAll() }
            for task in session.allTasks {
                (task.engine as? BackgroundEngine)?.finish(
                    task,
                    TaskResult(
                        task: task.taskIdentifier, file: nil, response: nil, body: nil,
                        errorCode: failure.code.description, errorMessage: reason, sent: 0, written: 0), acknowledge: false)
            }
        case .progress(let id, let sent, let written, let expectedToSend, let expectedToWrite):
            guard let (task, engine) = task(id, of: session) else { return }
            engine.progress(task, sent: sent, written: written, expectedToSend: expectedToSend, expectedToWrite: expectedToWrite)
        case .askBegin(let id):
            guard let (task, engine) = task(id, of: session) else { return }
            engine.askToBegin(task)
        case .challenge(let id, let challenge):
            if let (task, engine) = task(id, of: session) {
                engine.answerChallenge(task, challenge)
            } else {
                // A task this process does not know: as if its delegate had no challenge method.
                link?.send(.answerChallenge(task: id, answer: BackgroundChallengeAnswer(disposition: .performDefaultHandling)))
            }
        case .finished(let result):
            events.withLock { events in
                if !events.allSent { events.unacknowledged.insert(result.task) }
            }
            queue(session) { _ = $0.remove(result.task) }
            if let (task, engine) = task(result.task, of: session) {
                engine.finish(task, result, acknowledge: true) { [weak self] in self?.acknowledged(result.task) }
            } else {
                // A task this process never made: acknowledged all the same (nobody to tell).
                link?.send(.acknowledge(task: result.task))
            }
        case .eventsDone:
            events.withLock { $0.allSent = true }
            tellEventsDelivered(session)
        default:
            break
        }
    }

    /// Changes the set of tasks transferd holds unfinished; the session's
    /// gauge hears the new count in the same turn of the lock, so that
    /// changes from the app's threads and the link's reach it in order.
    private func queue(_ session: Session, _ change: (inout Set<Int>) -> Void) {
        guard let meters = session.meters else { return }
        queued.withLock { queued in
            change(&queued)
            meters.backgroundTasks(queued.count)
        }
    }

    private func task(_ id: Int, of session: Session) -> (SessionTask, BackgroundEngine)? {
        guard let task = session.state.withLock({ $0.tasks[id] }), let engine = task.engine as? BackgroundEngine else { return nil }
        return (task, engine)
    }

    /// A task's events were delivered and acknowledged.
    private func acknowledged(_ id: Int) {
        events.withLock { _ = $0.unacknowledged.remove(id) }
        if let session = session.withLock({ $0?.session }) { tellEventsDelivered(session) }
    }

    /// `urlSessionDidFinishEvents(forBackgroundURLSession:)`, once every event
    /// that waited when the session attached was delivered.
    private func tellEventsDelivered(_ session: Session) {
        let now = events.withLock { events -> Bool in
            guard events.allSent, events.unacknowledged.isEmpty, events.pending > 0, !events.told else { return false }
            events.told = true
            return true
        }
        guard now, let delegate = session.delegate else { return }
        session.events.enqueue { delegate.urlSessionDidFinishEvents(forBackgroundURLSession: session) }
    }
}
