import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
import Transport

/// A background session's side of `transferd`: its tasks run in `transferd`;
/// this process creates them, forwards resume, suspend and cancel, and
/// turns transferd's messages into the delegate's calls, acknowledging
/// each task's events once the delegate returned from the last of them.
extension Session {
    /// The identifier a process was started with by `transferd` for launch
    /// events (Apple's `application(_:handleEventsForBackgroundURLSession:)`
    /// role): make a background session with it and its events arrive,
    /// then `urlSessionDidFinishEvents(forBackgroundURLSession:)`.
    public static var launchedForBackgroundSession: String? {
        ProcessInfo.processInfo.environment["URLLOADING_BACKGROUND_SESSION"].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// What a background session found when it attached.
    struct BackgroundStart {
        var link: BackgroundLink?
        var failure: SessionError?
        var attached = BackgroundLink.Attached(nextTask: 1, tasks: [], pending: 0)
    }

    /// Events of a background session still to be delivered, for
    /// `urlSessionDidFinishEvents(forBackgroundURLSession:)`.
    struct BackgroundEvents {
        var pending = 0
        var unacknowledged: Set<Int> = []
        var allSent = false
        var told = false
    }

    /// - Parameter credentialStore: The folder of the session's persistent
    ///   credential store: transferd answers challenges from it when no app is attached.
    static func startBackground(_ settings: SessionConfiguration.Values, delegate: (any SessionDelegate)?, credentialStore: String?) -> BackgroundStart? {
        guard case .background(let identifier) = settings.kind else { return nil }
        guard delegate != nil else {
            return BackgroundStart(
                failure: SessionError(
                    .notSupportedInBackground, failingURL: nil, message: "a background session needs a delegate: its events arrive only there"))
        }
        // Only a command the app named: a program not written for launch
        // events, run again with its own arguments, would repeat its action.
        let command = settings.sessionSendsLaunchEvents ? settings.launchCommand : nil
        do throws(SessionError) {
            let (link, attached) = try BackgroundLink.attach(identifier: identifier, launchCommand: command, credentialStore: credentialStore)
            return BackgroundStart(link: link, attached: attached)
        } catch {
            return BackgroundStart(failure: error)
        }
    }

    /// Task objects for the tasks transferd already has (a re-attached session).
    func adoptBackgroundTasks(_ summaries: [TaskSummary]) {
        guard let link = background else { return }
        for summary in summaries {
            let exists = state.withLock { $0.tasks[summary.spec.task] != nil }
            guard !exists, let url = URL(string: summary.spec.request.url) else { continue }
            var request = URLRequest(url: url)
            request.httpMethod = summary.spec.request.method
            for pair in summary.spec.request.headers where pair.count == 2 { request.addValue(pair[1], forHTTPHeaderField: pair[0]) }
            let download = summary.spec.kind == .download
            let task = SessionTask(
                session: self, identifier: summary.spec.task, kind: download ? .download : .upload, request: request, body: .none,
                sink: download ? DownloadSink() as any ResponseSink : DelegateDataSink())
            task.locked.withLock { inner in
                inner.background = BackgroundTaskLink(link: link, spec: summary.spec, created: true)
                inner.remoteRunning = !summary.finished
                inner.bytesReceived = summary.written
                inner.bytesSent = summary.sent
                inner.bytesExpectedToReceive = summary.expectedToWrite
                inner.taskDescription = summary.spec.taskDescription
                inner.started = Date()
            }
            state.withLock { state in
                state.tasks[task.taskIdentifier] = task
                state.nextIdentifier = max(state.nextIdentifier, summary.spec.task + 1)
            }
        }
    }

    /// A new task of a background session: what transferd will run, or why it cannot.
    func prepareBackground(_ task: SessionTask, kind: SessionTask.Kind, request: URLRequest, body: TransferRequest.Body, sink: any ResponseSink) {
        let refusal: String?
        var bodyFile: String?
        switch kind {
        case .download where (sink as? DownloadSink)?.handler == nil: refusal = nil
        case .download: refusal = "download tasks with a completion handler are not supported in a background session: use the delegate"
        case .upload:
            if case .file(let path, _) = body, sink is DelegateDataSink {
                refusal = nil
                bodyFile = path
            } else {
                refusal = "upload tasks in a background session send a file: use uploadTask(with:fromFile:) without a completion handler"
            }
        case .data: refusal = "data tasks are not supported in a background session: use a download task"
        }
        let scheme = request.url?.scheme?.lowercased()
        let failure: SessionError?
        if let startFailure = backgroundFailure {
            failure = startFailure
        } else if let refusal {
            failure = SessionError(.notSupportedInBackground, failingURL: request.url, message: refusal)
        } else if scheme != "http" && scheme != "https" {
            failure = SessionError(.unsupportedURL, failingURL: request.url, message: "a background session loads http and https URLs only")
        } else {
            failure = nil
        }
        guard failure == nil, let link = background, let url = request.url else {
            task.locked.withLock { $0.startupError = failure }
            return
        }
        var headers = (request.allHTTPHeaderFields ?? [:]).sorted { $0.key < $1.key }.map { [$0.key, $0.value] }
        let pairs = headers.map { (name: $0[0], value: $0[1]) }
        if let cookie = SessionTask.cookieHeader(for: request, headers: pairs, session: self) { headers.append(["Cookie", cookie]) }
        let timeout = request.timeoutInterval > 0 && request.timeoutInterval != 60 ? request.timeoutInterval : settings.timeoutIntervalForRequest
        let spec = TaskSpec(
            task: task.taskIdentifier, kind: kind == .download ? .download : .upload,
            request: RequestSpec(url: url.absoluteString, method: request.httpMethod ?? "GET", headers: headers, timeout: timeout),
            bodyFile: bodyFile, earliestBeginDate: nil, isDiscretionary: settings.isDiscretionary, taskDescription: nil)
        task.locked.withLock { $0.background = BackgroundTaskLink(link: link, spec: spec, created: false) }
    }

    /// A message from transferd (on the link's reader thread).
    func backgroundMessage(_ message: BackgroundMessage) {
        switch message {
        case .attached(let nextTask, let tasks, let pending):
            // Attached again after transferd restarted.
            adoptBackgroundTasks(tasks)
            state.withLock { $0.nextIdentifier = max($0.nextIdentifier, nextTask) }
            backgroundEvents.withLock { $0 = BackgroundEvents(pending: pending) }
        case .refused(let reason):
            // transferd is gone for good: the tasks cannot finish here.
            let failure = SessionError(.backgroundSessionWasDisconnected, failingURL: nil, message: reason)
            for task in allTasks where task.locked.withLock({ $0.background != nil }) {
                task.finishFromBackground(
                    TaskResult(
                        task: task.taskIdentifier, file: nil, response: nil, body: nil,
                        errorCode: failure.code.description, errorMessage: reason, sent: 0, written: 0), acknowledge: false)
            }
        case .progress(let id, let sent, let written, let expectedToSend, let expectedToWrite):
            task(id)?.backgroundProgress(sent: sent, written: written, expectedToSend: expectedToSend, expectedToWrite: expectedToWrite)
        case .askBegin(let id):
            task(id)?.askToBeginInBackground()
        case .challenge(let id, let challenge):
            if let task = task(id) {
                task.answerChallengeInBackground(challenge)
            } else {
                // A task this process does not know: as if its delegate had no challenge method.
                background?.send(.answerChallenge(task: id, answer: BackgroundChallengeAnswer(disposition: .performDefaultHandling)))
            }
        case .finished(let result):
            backgroundEvents.withLock { events in
                if !events.allSent { events.unacknowledged.insert(result.task) }
            }
            if let task = task(result.task) {
                task.finishFromBackground(result, acknowledge: true)
            } else {
                // A task this process never made: acknowledged all the same (nobody to tell).
                background?.send(.acknowledge(task: result.task))
            }
        case .eventsDone:
            backgroundEvents.withLock { $0.allSent = true }
            tellEventsDelivered()
        default:
            break
        }
    }

    private func task(_ id: Int) -> SessionTask? {
        state.withLock { $0.tasks[id] }
    }

    /// A task's events were delivered and acknowledged.
    func backgroundAcknowledged(_ id: Int) {
        backgroundEvents.withLock { _ = $0.unacknowledged.remove(id) }
        tellEventsDelivered()
    }

    /// `urlSessionDidFinishEvents(forBackgroundURLSession:)`, once every event
    /// that waited when the session attached was delivered.
    private func tellEventsDelivered() {
        let now = backgroundEvents.withLock { events -> Bool in
            guard events.allSent, events.unacknowledged.isEmpty, events.pending > 0, !events.told else { return false }
            events.told = true
            return true
        }
        guard now, let delegate else { return }
        events.enqueue { [self] in delegate.urlSessionDidFinishEvents(forBackgroundURLSession: self) }
    }
}

/// A task's tie to transferd.
struct BackgroundTaskLink: Sendable {
    let link: BackgroundLink
    var spec: TaskSpec
    /// transferd has the task.
    var created: Bool
}
