public import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif
import Logging
import Locking
import Tracing
package import Transport

/// A session (Apple's `URLSession`): makes tasks from requests,
/// runs them on libcurl, and reports to its delegate from one serial context.
///
/// The session keeps its delegate until it is invalidated
/// (`finishTasksAndInvalidate` or `invalidateAndCancel`); after that it
/// makes no new transfers.
public final class Session: Sendable, CustomStringConvertible {
    /// What the session copied of its configuration when it was made.
    let settings: SessionConfiguration.Values
    /// The session's counters and timers; nil without a metrics backend.
    let meters: SessionMeters?
    /// The tracer each task's span goes to; nil when only swift-distributed-tracing's no-op one is there.
    let tracer: (any Tracer)?
    /// Which of the delegate's per-task methods it is known to lack.
    let delegateAbilities = DelegateAbilities()
    /// The session was made with a delegate (which may hear task metrics).
    let madeWithDelegate: Bool
    /// A copy of the configuration the session was made with (a new object
    /// on each access, as Apple's).
    public var configuration: SessionConfiguration {
        // As Apple's: the copy names the stores this session uses (an
        // ephemeral session's private ones included).
        var values = settings
        values.urlCache = urlCache
        values.httpCookieStorage = cookieStore
        values.urlCredentialStorage = credentialStore
        return SessionConfiguration(values)
    }
    /// The response cache the configuration resolved to, if any.
    public let urlCache: ResponseCache?
    /// The cookie store the configuration resolved to, if any.
    public let cookieStore: CookieStore?
    /// The credential store the configuration resolved to, if any.
    public let credentialStore: CredentialStore?
    /// Why a persistent store of the configuration, or libcurl, could not be
    /// opened when the session was made, in that order; empty when all was
    /// well. A store that could not be opened is replaced by one in memory
    /// (the session works, remembering nothing across processes); without
    /// libcurl every task fails with this error. Each is also logged once.
    public let startupErrors: [any Error]
    /// A label for the session (Apple's `sessionDescription`).
    public var sessionDescription: String? {
        get { state.withLock { $0.sessionDescription } }
        set { state.withLock { $0.sessionDescription = newValue } }
    }

    /// The session of the default configuration without a delegate (Apple's
    /// `URLSession.shared`). Invalidating it does nothing.
    public static let shared = Session(configuration: .default, isShared: true)
    private let isShared: Bool

    /// The transport of the session's hops: libcurl's loops by default, a
    /// script in the engine's tests; nil when libcurl could not start (see
    /// `startupErrors`).
    let transport: (any TransferExecutor)?
    /// The process that runs a background session's transfers; nil for other sessions.
    let remote: (any RemoteTaskHost)?
    let events = DelegateQueue()
    /// Requests on connections of the session's own (`becomeStream`).
    let ownedTransfers: OwnedTransfers
    /// Loads through the configuration's `URLProtocol` classes; nil without any.
    let protocolTransfers: ProtocolClassTransfers?
    let state: Lock<State>

    struct State {
        var delegate: (any SessionDelegate)?
        var sessionDescription: String?
        var tasks: [Int: SessionTask] = [:]
        /// Stream tasks until they end: kept alive, as Apple's session keeps
        /// its running tasks, and cancelled by `invalidateAndCancel()`.
        var streamTasks: [Int: SessionStreamTask] = [:]
        /// WebSocket tasks until they end (as stream tasks).
        var webSocketTasks: [Int: SessionWebSocketTask] = [:]
        /// No task of any kind is left (what `finishTasksAndInvalidate()` waits for).
        var hasNoTask: Bool { tasks.isEmpty && streamTasks.isEmpty && webSocketTasks.isEmpty }
        var nextIdentifier = 1
        var invalidating = false
        /// `invalidateAndCancel()` was called: no task is listed any more.
        var cancelledAll = false
        var invalidated = false
        /// Keys being revalidated in the background: one request each.
        var revalidating: Set<String> = []
        /// Keys with a request on the network, and the tasks waiting for it.
        var inFlight: [String: [@Sendable () -> Void]] = [:]
        /// Credentials that worked, by origin, for pre-emptive use.
        var authenticated: [String: SessionTask.SentAuthorization] = [:]
        /// Server-trust decisions by "host:port".
        var trust: [String: SessionTask.TrustDecision] = [:]
    }

    /// Creates a session (Apple's `init(configuration:delegate:delegateQueue:)`).
    ///
    /// Never fails: a persistent store that cannot be opened (damaged beyond
    /// repair, locked past the busy timeout, a read-only or full disk, a file
    /// others can read) is replaced by one in memory, and the reason is in
    /// `startupErrors` and the log.
    ///
    /// - Parameters:
    ///   - configuration: Copied; later changes to it do not reach the session.
    ///   - delegate: Receives the session's events; kept until invalidation.
    ///   - delegateQueue: Accepted for source compatibility and not used:
    ///     calls arrive on the session's own serial contexts, in order per
    ///     task (the DocC article "Threads and delegate calls").
    public convenience init(
        configuration: SessionConfiguration = .default, delegate: (any SessionDelegate)? = nil, delegateQueue: OperationQueue? = nil
    ) {
        self.init(configuration: configuration, delegate: delegate, isShared: false)
    }

    /// A session whose hops run on `transport` instead of libcurl's loops:
    /// the engine's tests drive it with a script, without sockets.
    package convenience init(configuration: SessionConfiguration, delegate: (any SessionDelegate)? = nil, transport: any TransferExecutor) {
        self.init(configuration: configuration, delegate: delegate, isShared: false, transport: transport)
    }

    private init(configuration: SessionConfiguration, delegate: (any SessionDelegate)? = nil, isShared: Bool, transport: (any TransferExecutor)? = nil) {
        let settings = {
            var settings = configuration.snapshot
            settings.resolveProxies()
            return settings
        }()
        self.settings = settings
        self.isShared = isShared
        madeWithDelegate = delegate != nil
        meters = SessionMeters(sessionLabel: settings.metricsLabel ?? settings.identifier ?? "default")
        let tracer = InstrumentationSystem.tracer
        self.tracer = tracer is NoOpTracer ? nil : tracer
        let logger = Logger(label: "urlloading.session")
        var errors: [any Error] = []
        // Shared stores that could not open their files keep memory only;
        // they logged why when they were made.
        urlCache = settings.resolveCache()
        cookieStore = settings.resolveCookieStore()
        credentialStore = settings.resolveCredentialStore()
        errors += [urlCache?.startupError, cookieStore?.startupError, credentialStore?.startupError].compactMap { $0 }
        if let transport {
            self.transport = transport
        } else {
            do {
                self.transport = try CurlMulti(
                    maximumConnectionsPerHost: settings.httpMaximumConnectionsPerHost, loops: settings.transportLoops, spins: settings.transportSpins)
            } catch {
                let failure = SessionError(.unknown, failingURL: nil, message: "libcurl could not start: \(error)")
                logger.error("\(failure)")
                errors.append(failure)
                self.transport = nil
            }
        }
        ownedTransfers = OwnedTransfers { host, port, proxy in Self.streamEndpoint(host: host, port: port, proxy: proxy, settings: settings) }
        protocolTransfers = settings.protocolClasses.isEmpty ? nil : ProtocolClassTransfers(classes: settings.protocolClasses)
        remote = settings.remoteTaskHost(delegate: delegate, credentialStore: credentialStore?.directory?.path)
        if let failure = remote?.failure {
            logger.error("\(failure)")
            errors.append(failure)
        }
        startupErrors = errors
        state = Lock(State(delegate: delegate, nextIdentifier: remote?.firstTaskIdentifier ?? 1))
        remote?.start(self)
    }

    deinit {
        transport?.shutdown()
        protocolTransfers?.shutdown()
        remote?.close()
    }

    /// The session's delegate (nil after invalidation).
    public var delegate: (any SessionDelegate)? { state.withLock { $0.delegate } }

    /// The executor that runs transfer `id`: the session's own connections
    /// and the protocol classes number theirs apart from the transport's.
    func executor(of id: CurlMulti.TransferID) -> (any TransferExecutor)? {
        if id.isOwned { return ownedTransfers }
        if id.isProtocolClass { return protocolTransfers }
        return transport
    }

    /// Whether `task` is one of the session's unfinished tasks (made before
    /// any invalidation).
    func owns(_ task: SessionTask) -> Bool {
        state.withLock { $0.tasks[task.taskIdentifier] === task }
    }

    /// The configuration's kind and the number of tasks.
    public var description: String {
        "Session(\(settings.kind), \(state.withLock { $0.tasks.count }) tasks)"
    }

    // MARK: Tasks

    /// A data task whose response and data go to the delegate.
    public func dataTask(with request: URLRequest) -> SessionTask {
        makeTask(.data, request, body: Self.body(of: request), sink: DelegateDataSink())
    }

    /// A data task for `url`.
    public func dataTask(with url: URL) -> SessionTask {
        dataTask(with: URLRequest(url: url))
    }

    /// A data task that hands the whole body to `completionHandler` (on the
    /// session's delegate context) and makes no response or data delegate calls.
    public func dataTask(with request: URLRequest, completionHandler: @escaping @Sendable (Data?, URLResponse?, (any Error)?) -> Void) -> SessionTask {
        makeTask(.data, request, body: Self.body(of: request), sink: CollectingSink.completionHandler(completionHandler))
    }

    /// An upload task sending `bodyData` (the request's own body is ignored).
    public func uploadTask(with request: URLRequest, from bodyData: Data) -> SessionTask {
        makeTask(.upload, Self.uploading(request), body: .data(bodyData), sink: DelegateDataSink())
    }

    /// An upload task with a completion handler.
    public func uploadTask(
        with request: URLRequest, from bodyData: Data,
        completionHandler: @escaping @Sendable (Data?, URLResponse?, (any Error)?) -> Void
    ) -> SessionTask {
        makeTask(.upload, Self.uploading(request), body: .data(bodyData), sink: CollectingSink.completionHandler(completionHandler))
    }

    /// An upload task streaming the file at `fileURL` from disk.
    public func uploadTask(with request: URLRequest, fromFile fileURL: URL) -> SessionTask {
        makeTask(.upload, Self.uploading(request), body: Self.fileBody(fileURL), sink: DelegateDataSink())
    }

    /// An upload task from a file, with a completion handler.
    public func uploadTask(
        with request: URLRequest, fromFile fileURL: URL,
        completionHandler: @escaping @Sendable (Data?, URLResponse?, (any Error)?) -> Void
    ) -> SessionTask {
        makeTask(.upload, Self.uploading(request), body: Self.fileBody(fileURL), sink: CollectingSink.completionHandler(completionHandler))
    }

    /// An upload task whose body comes from streams: the delegate's
    /// `needNewBodyStream` gives the first, and another each time the body
    /// must be sent again (after a challenge, or a redirect that keeps the
    /// method). The request's own body and body stream are ignored. Its
    /// length is the request's `Content-Length` if set; else unknown, and
    /// HTTP/1.1 sends it chunked.
    public func uploadTask(withStreamedRequest request: URLRequest) -> SessionTask {
        var prepared = Self.uploading(request)
        prepared.httpBodyStream = nil
        return makeTask(.upload, prepared, body: .none, sink: DelegateDataSink(), streamsBody: true)
    }

    /// A download task: the body goes to a temporary file handed to
    /// `didFinishDownloadingTo`, deleted when that method returns.
    public func downloadTask(with request: URLRequest) -> SessionTask {
        makeTask(.download, request, body: Self.body(of: request), sink: DownloadSink())
    }

    /// A download task with a completion handler; the file is deleted when
    /// the handler returns.
    public func downloadTask(with request: URLRequest, completionHandler: @escaping @Sendable (URL?, URLResponse?, (any Error)?) -> Void) -> SessionTask {
        makeTask(.download, request, body: Self.body(of: request), sink: DownloadSink(handler: completionHandler))
    }

    /// A data (or upload) task for the async APIs: the response is built by
    /// the awaiting Swift task, off the transport's thread.
    ///
    /// - Parameter completionRunner: Runs a transfer's end (given as a
    ///   closure) where the caller wants it, off the transport's thread.
    func rawTask(
        _ kind: SessionTask.Kind, with request: URLRequest, body: TransferRequest.Body?,
        completionRunner: (@Sendable (@escaping @Sendable () -> Void) -> Void)? = nil,
        handler: @escaping @Sendable (Data?, URLError?, HTTPURLResponse?) -> Void
    ) -> SessionTask {
        rawTask(kind, with: request, body: body, completionRunner: completionRunner, sink: CollectingSink.asyncCall(handler))
    }

    /// A data (or upload) task whose whole body goes to `sink`.
    func rawTask(
        _ kind: SessionTask.Kind, with request: URLRequest, body: TransferRequest.Body?,
        completionRunner: (@Sendable (@escaping @Sendable () -> Void) -> Void)?, sink: CollectingSink
    ) -> SessionTask {
        let prepared = kind == .upload ? Self.uploading(request) : request
        return makeTask(kind, prepared, body: body ?? Self.body(of: request), sink: sink, completionRunner: completionRunner)
    }

    static func fileBodyOf(_ url: URL) -> TransferRequest.Body { fileBody(url) }

    func streamTask(
        with request: URLRequest, buffer: ByteStreamBuffer, publishesHead: Bool = false, streamedBody: SessionTask.StreamedBody? = nil
    ) -> SessionTask {
        makeTask(
            .data, request, body: streamedBody == nil ? Self.body(of: request) : .none,
            sink: StreamSink(buffer: buffer, publishesHead: publishesHead), streamedBody: streamedBody)
    }

    /// Every task not yet completed.
    public var allTasks: [SessionTask] {
        // After invalidateAndCancel none, though cancelled tasks may still deliver their last calls (Apple's).
        state.withLock { $0.cancelledAll ? [] : Array($0.tasks.values) }.sorted { $0.taskIdentifier < $1.taskIdentifier }
    }

    /// - Parameters:
    ///   - streamsBody: The body comes from the delegate's streams (a
    ///     streamed upload task); a request with an `httpBodyStream` streams too.
    ///   - streamedBody: A streamed body the caller makes.
    func makeTask(
        _ kind: SessionTask.Kind, _ request: URLRequest, body: TransferRequest.Body, sink: any ResponseSink,
        streamsBody: Bool = false, streamedBody: SessionTask.StreamedBody? = nil, completionRunner: (@Sendable (@escaping @Sendable () -> Void) -> Void)? = nil
    ) -> SessionTask {
        var request = request
        for (name, value) in settings.httpAdditionalHeaders where request.value(forHTTPHeaderField: name) == nil {
            request.setValue(value, forHTTPHeaderField: name)
        }
        let streamed = streamsBody || (request.httpBodyStream != nil && request.httpBody == nil)
        let length = streamed ? request.value(forHTTPHeaderField: "Content-Length").flatMap(FieldNumber.length) ?? -1 : nil
        // A task the remote host cannot run is a local one that fails when resumed.
        var engine: any TaskEngine = LocalEngine.shared
        var startupError: SessionError?
        switch remote?.engine(kind: kind, request: request, body: body, sink: sink, session: self) {
        case .success(let remoteEngine)?: engine = remoteEngine
        case .failure(let failure)?: startupError = failure
        case nil: break
        }
        let (task, delegate) = state.withLock { state in
            let task = SessionTask(
                session: self, identifier: state.nextIdentifier, kind: kind, request: request, body: body, sink: sink,
                streamedBodyLength: length, streamedBody: streamedBody, completionRunner: completionRunner, engine: engine)
            state.nextIdentifier += 1
            if !state.invalidated && !state.invalidating { state.tasks[task.taskIdentifier] = task }
            return (task, state.delegate)
        }
        if let startupError { task.locked.withLock { $0.startupError = startupError } }
        // On the task's own context, so it comes before any other call for it.
        if let delegate, !delegateAbilities.lacks(.didCreateTask) {
            let abilities = delegateAbilities
            task.events.enqueueSync { [self] in abilities.call(.didCreateTask) { delegate.urlSession(self, didCreateTask: task) } }
        }
        return task
    }

    static func body(of request: URLRequest) -> TransferRequest.Body {
        request.httpBody.map { .data($0) } ?? .none
    }

    private static func uploading(_ request: URLRequest) -> URLRequest {
        var request = request
        if request.httpMethod == nil || request.httpMethod == "GET" { request.httpMethod = "POST" }
        request.httpBody = nil
        return request
    }

    private static func fileBody(_ url: URL) -> TransferRequest.Body {
        let size = (try? FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int) ?? nil
        return .file(path: url.path, length: Int64(size ?? 0))
    }

    /// When a task begun at `start` runs out of time; nil without a limit.
    static func deadline(from start: Date, resourceTimeout: TimeInterval) -> Date? {
        timeLimit(resourceTimeout).map { _ in start.addingTimeInterval(resourceTimeout) }
    }

    /// A timeout in seconds as the transport takes it: nil (no limit) for
    /// zero, less, NaN, infinity or more than a year (values a caller may
    /// well set, which must never trap in a conversion); else milliseconds,
    /// at least one.
    static func timeLimit(_ seconds: TimeInterval) -> Duration? {
        guard seconds.isFinite, seconds > 0, seconds <= 365 * 86_400 else { return nil }
        return .milliseconds(max(1, Int64(seconds * 1000)))
    }

    // MARK: Life cycle

    /// Lets running tasks finish, then invalidates: `urlSession(_:didBecomeInvalidWithError:)`
    /// is called and the delegate released. No new task runs after this.
    public func finishTasksAndInvalidate() {
        guard !isShared else { return }
        let now = state.withLock { state -> Bool in
            guard !state.invalidating, !state.invalidated else { return false }
            state.invalidating = true
            return state.hasNoTask
        }
        if now { invalidate() }
    }

    /// Cancels every task and invalidates: each task's
    /// `didCompleteWithError` (cancelled) comes first, then
    /// `urlSession(_:didBecomeInvalidWithError:)`.
    public func invalidateAndCancel() {
        guard !isShared else { return }
        let (tasks, now) = state.withLock { state -> ([SessionTask], Bool) in
            guard !state.invalidated else { return ([], false) }
            state.invalidating = true
            state.cancelledAll = true
            return (Array(state.tasks.values), state.tasks.isEmpty)
        }
        tasks.forEach { $0.cancel() }
        cancelStreamTasks()
        // Otherwise the last cancelled task's completion invalidates.
        if now { invalidate() }
    }

    /// Writes pending bookkeeping of the stores to disk.
    public func flush() async {
        urlCache?.flush()
        do {
            try cookieStore?.flush()
        } catch {
            // The store keeps the changes in memory and retries with the next one.
            Logger(label: "urlloading.cookies").error("cookie store flush failed", metadata: ["error": "\(error)"])
        }
    }

    /// Empties the stores of this session's configuration: its cache, its
    /// cookies and its credentials (the shared ones for a default
    /// configuration), and forgets the credentials it sent pre-emptively.
    public func reset() async {
        urlCache?.removeAllCachedResponses()
        cookieStore?.removeAll()
        credentialStore?.removeAll()
        state.withLock { $0.authenticated = [:] }
    }

    // MARK: Authentication

    private static func originKey(_ space: ProtectionSpace) -> String {
        "\(space.isProxy ? "proxy " : "")\(space.protocol)://\(space.host):\(space.port)"
    }

    /// Credentials that answered a challenge: later requests to the same
    /// origin send them before being asked (Basic as is, Digest with the
    /// same nonce and the next nonce count).
    func rememberAuthentication(_ sent: SessionTask.SentAuthorization) {
        state.withLock { $0.authenticated[Self.originKey(sent.space)] = sent }
    }

    /// The delegate's server-trust decision for a host, once made.
    func trustDecision(host: String, port: Int) -> SessionTask.TrustDecision? {
        state.withLock { $0.trust["\(host):\(port)"] }
    }

    func setTrustDecision(_ decision: SessionTask.TrustDecision, host: String, port: Int) {
        state.withLock { $0.trust["\(host):\(port)"] = decision }
    }

    /// Pre-emptive credentials for a request, while the store still holds them.
    func preemptiveAuthorization(for url: URL, method: String, proxy: Bool = false) -> SessionTask.SentAuthorization? {
        // Most sessions never authenticate: no space to build then.
        guard !state.withLock({ $0.authenticated.isEmpty }), var origin = ProtectionSpace(url: url) else { return nil }
        origin.isProxy = proxy
        let key = Self.originKey(origin)
        guard var sent = state.withLock({ $0.authenticated[key] }) else { return nil }
        guard let user = sent.credential.user, let password = sent.credential.password,
            credentialStore?.credentials(for: sent.space)?[user] != nil
        else {
            state.withLock { _ = $0.authenticated.removeValue(forKey: key) }
            return nil
        }
        if let digest = sent.digest {
            let count = state.withLock { state -> UInt32 in
                let next = (state.authenticated[key]?.nonceCount ?? sent.nonceCount) &+ 1
                state.authenticated[key]?.nonceCount = next
                return next
            }
            sent = SessionTask.digestAuthorization(
                digest, user: user, password: password, space: sent.space, credential: sent.credential,
                url: url, method: method, fieldName: sent.fieldName, nonceCount: count)
        }
        return sent
    }

    /// Starts one background revalidation of `key` (stale-while-revalidate,
    /// RFC 5861 §3) unless one is already running; it refreshes or replaces
    /// the stored response and delivers nothing to anybody.
    func revalidateInBackground(_ request: URLRequest, key: String) {
        let start = state.withLock { state -> Bool in
            guard !state.invalidating, !state.invalidated else { return false }
            return state.revalidating.insert(key).inserted
        }
        guard start else { return }
        var background = request
        background.cachePolicy = .reloadRevalidatingCacheData
        let task = rawTask(.data, with: background, body: nil) { [weak self] _, _, _ in
            _ = self?.state.withLock { $0.revalidating.remove(key) }
        }
        task.resume()
    }

    /// Request coalescing: the first task for `key` leads (returns false);
    /// later ones wait (returns true) and `resume` runs when the leader ends.
    func joinInFlight(key: String, resume: @escaping @Sendable () -> Void) -> Bool {
        state.withLock { state in
            if state.inFlight[key] != nil {
                state.inFlight[key, default: []].append(resume)
                return true
            }
            state.inFlight[key] = []
            return false
        }
    }

    /// The leader for `key` ended (its response stored, or not): the waiting
    /// tasks look in the cache again.
    func leaveInFlight(key: String) {
        let waiting = state.withLock { $0.inFlight.removeValue(forKey: key) } ?? []
        waiting.forEach { $0() }
    }

    func taskDidComplete(_ task: SessionTask) {
        let finishNow = state.withLock { state -> Bool in
            state.tasks[task.taskIdentifier] = nil
            return state.invalidating && !state.invalidated && state.hasNoTask
        }
        if finishNow { invalidate() }
    }

    /// A stream or WebSocket task ended: the session lets go of it, and
    /// invalidates when it was the last task `finishTasksAndInvalidate()` waited for.
    func otherTaskEnded(stream identifier: Int? = nil, webSocket: Int? = nil) {
        let finishNow = state.withLock { state -> Bool in
            if let identifier { state.streamTasks[identifier] = nil }
            if let webSocket { state.webSocketTasks[webSocket] = nil }
            return state.invalidating && !state.invalidated && state.hasNoTask
        }
        if finishNow { invalidate() }
    }

    private func invalidate() {
        let delegate = state.withLock { state -> (any SessionDelegate)?? in
            guard !state.invalidated else { return .none }
            state.invalidated = true
            return .some(state.delegate)
        }
        guard case .some(let delegate) = delegate else { return }
        events.enqueue { [self] in
            // An ephemeral configuration's stores are wiped with the session, before it says it is invalid.
            if case .ephemeral = settings.cacheChoice { urlCache?.removeAllCachedResponses() }
            if case .ephemeral = settings.cookieChoice { cookieStore?.removeAll() }
            if case .ephemeral = settings.credentialChoice { credentialStore?.removeAll() }
            self.state.withLock { $0.authenticated = [:] }
            delegate?.urlSession(self, didBecomeInvalidWithError: nil)
            // Held until now: the tasks' last calls came before.
            self.state.withLock { $0.delegate = nil }
            self.transport?.shutdown()
            // A remote host keeps the session's unfinished tasks for the next one.
            self.remote?.close()
        }
    }
}
