public import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking

/// A session with a base URL, a request serializer and response
/// serializers (AFNetworking's `AFHTTPSessionManager`): verbs with
/// success and failure closures or `async`, progress, validation, decoding.
///
/// ```swift
/// let api = HTTPSessionManager(baseURL: URL(string: "https://api.example.com/v1"))
/// let users = try await api.get("users", parameters: ["page": 2], as: [User].self)
/// api.post("users", parameters: ["name": "Ann"], success: { task, json in print(json["id"] ?? .null) },
///          failure: { task, error in print(error.response?.statusCode ?? 0, error) })
/// ```
///
/// The manager is its session's delegate: it keeps one handler per task
/// (its upload and download `Progress`, its closures). Closures run on the
/// session's delegate context, one task's in order.
public final class HTTPSessionManager: Sendable {
    /// Relative paths are resolved against it (`URL(string:relativeTo:)`);
    /// a base whose path does not end in `/` gets one, so that `users`
    /// under `https://api.example.com/v1` is `.../v1/users`.
    public let baseURL: URL?
    /// The session the manager's tasks run on.
    public let session: Session
    let router: ManagerDelegate
    private let serializers: Lock<(request: RequestSerializer, response: JSONResponseSerializer)>
    let interceptors = Lock<(adapter: (any RequestAdapter)?, retrier: (any RequestRetrier)?)>((nil, nil))

    /// A manager over a new session made from `configuration`; `monitors`
    /// hear every task's resume, suspension and end, and the session's
    /// invalidation (as the notifications named `.managerTask...` do).
    public init(baseURL: URL? = nil, configuration: SessionConfiguration = .default, monitors: [any ManagerEventMonitor] = []) {
        self.baseURL = baseURL.map(Self.directoryURL)
        router = ManagerDelegate(monitors: monitors)
        session = Session(configuration: configuration, delegate: router, delegateQueue: nil)
        serializers = Lock((RequestSerializer(), JSONResponseSerializer()))
    }

    /// How requests are built (parameters as form by default).
    public var requestSerializer: RequestSerializer {
        get { serializers.withLock { $0.request } }
        set { serializers.withLock { $0.request = newValue } }
    }

    /// How the closure verbs without a serializer read responses (JSON,
    /// validated for 2xx and JSON media types).
    public var responseSerializer: JSONResponseSerializer {
        get { serializers.withLock { $0.response } }
        set { serializers.withLock { $0.response = newValue } }
    }

    /// Cancels the tasks and invalidates the session (`invalidateAndCancel`)
    /// or lets them finish first.
    public func invalidateSession(cancelingTasks: Bool) {
        if cancelingTasks { session.invalidateAndCancel() } else { session.finishTasksAndInvalidate() }
    }

    /// The task's upload progress while the manager runs it.
    public func uploadProgress(for task: SessionTask) -> Progress? { router.handler(task)?.uploadProgress }

    /// The task's download progress while the manager runs it.
    public func downloadProgress(for task: SessionTask) -> Progress? { router.handler(task)?.downloadProgress }

    // MARK: URLs and requests

    /// `path` against the base URL; an absolute URL stands as it is.
    public func url(_ path: String) throws(ManagerError) -> URL {
        guard let url = URL(string: path, relativeTo: baseURL)?.absoluteURL, url.scheme != nil, url.host != nil else {
            throw ManagerError(.invalidURL, message: "\"\(path)\" is not a URL\(baseURL.map { " relative to \($0.absoluteString)" } ?? "")")
        }
        return url
    }

    static func directoryURL(_ url: URL) -> URL {
        guard !url.path.isEmpty, !url.absoluteString.hasSuffix("/") else {
            return url.path.isEmpty ? url.appendingPathComponent("") : url
        }
        return url.appendingPathComponent("")
    }

    // MARK: Tasks

    /// A data task for `request`. Without progress closures it is made with
    /// a completion handler: the body arrives whole, with no delegate call
    /// per chunk (the session's fast path); challenges, redirects and the
    /// closures that override them still reach the manager's delegate.
    /// A response or willCacheResponse closure needs the delegate path too.
    func makeDataTask(_ request: URLRequest, wantsProgress: Bool) -> (Session) -> SessionTask {
        guard !needsDelegate(wantsProgress: wantsProgress) else { return { $0.dataTask(with: request) } }
        let router = router
        return { session in
            let made = TaskBox()
            let task = session.dataTask(with: request) { [weak session] data, _, error in
                // Taken, not read: the box and the task's handler would hold each other.
                guard let session, let task = made.take() else { return }
                router.completed(task, session: session, data: data, error: error)
            }
            made.set(task)
            return task
        }
    }

    /// Whether a task must send its body and response through the delegate.
    func needsDelegate(wantsProgress: Bool) -> Bool {
        wantsProgress || router.overrides.withLock { $0.response != nil || $0.willCache != nil }
    }

    /// Makes a task with a handler and resumes it. `make` builds the task
    /// from the session; the handler is in place before it starts.
    func start(_ make: (Session) -> SessionTask, handler: TaskHandler) -> SessionTask {
        let task = make(session)
        let (events, session) = (router.events, session)
        handler.attach(to: task) { task, resumed in
            if resumed { events.resumed(task, session: session) } else { events.suspended(task, session: session) }
        }
        router.handlers.withLock { $0[task.taskIdentifier] = handler }
        task.resume()
        events.resumed(task, session: session)
        return task
    }

    /// The completion of a data or upload task: serialize, then call one of the two.
    static func finish<S: ResponseSerializer>(
        _ serializer: S, task: SessionTask, outcome: TaskHandler.Outcome, success: (@Sendable (SessionTask, S.Output) -> Void)?,
        failure: (@Sendable (SessionTask?, ManagerError) -> Void)?
    ) {
        switch result(serializer, request: task.originalRequest, outcome: outcome) {
        case .success(let value): success?(task, value)
        case .failure(let error): failure?(task, error)
        }
    }

    static func result<S: ResponseSerializer>(_ serializer: S, request: URLRequest?, outcome: TaskHandler.Outcome) -> Result<S.Output, ManagerError> {
        if let error = outcome.error { return .failure(error) }
        guard let response = outcome.response else {
            return .failure(ManagerError(.transport, message: "the task ended without a response", data: outcome.data))
        }
        do throws(ManagerError) {
            return .success(try serializer.serialize(outcome.data, response: response, request: request))
        } catch {
            return .failure(error)
        }
    }
}
