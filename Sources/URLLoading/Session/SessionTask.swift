public import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif
import Synchronization
import Transport

/// A task of a session (Apple's `URLSessionTask` and its data, upload and
/// download kinds, SPEC S4). Every task starts suspended; `resume()` starts it.
public final class SessionTask: Sendable, Hashable, CustomStringConvertible {
    /// The kind of task.
    public enum Kind: Sendable, Equatable { case data, upload, download }

    /// Apple's `URLSessionTask.State`.
    public enum State: Sendable, Equatable { case running, suspended, canceling, completed }

    /// How the task hands its result back.
    enum Delivery {
        /// Delegate calls for response and data.
        case delegate
        /// A completion handler with the whole body; no response or data delegate calls (SPEC S5).
        case data(@Sendable (Data?, URLResponse?, (any Error)?) -> Void)
        /// A completion handler with the downloaded file, deleted when it returns.
        case download(@Sendable (URL?, URLResponse?, (any Error)?) -> Void)
        /// A byte stream read by `Session.bytes(for:)`.
        case stream(ByteStreamBuffer)
        /// The async APIs: the body and the task, whose `response` the
        /// awaiting Swift task builds, off the transport's thread.
        case raw(@Sendable (Data?, SessionError?) -> Void)
    }

    /// Unique among the session's tasks.
    public let taskIdentifier: Int
    /// The task's progress: bytes received (bytes sent, for an upload task)
    /// against the expected total (-1 while unknown); complete when the task
    /// is. Made on first use: Foundation's `Progress` costs microseconds per
    /// update, which tasks nobody watches should not pay.
    public var progress: Progress {
        state.withLock { inner in
            if let progress = inner.progress { return progress }
            let progress = Progress(totalUnitCount: -1)
            inner.progress = progress
            updateProgress(inner)
            if inner.machine.isFinished && inner.error == nil {
                progress.totalUnitCount = max(progress.totalUnitCount, progress.completedUnitCount)
                progress.completedUnitCount = progress.totalUnitCount
            }
            return progress
        }
    }
    /// Data, upload or download.
    /// A data task can become a download task mid-transfer (`becomeDownload`).
    public var kind: Kind { state.withLock { $0.kind } }
    /// The request the task was created with.
    public let originalRequest: URLRequest?

    private let body: TransferRequest.Body
    let delivery: Delivery
    /// Where a transfer's end is handled, when not on the transport's
    /// thread (set by the async APIs before the task starts).
    let completionRunner: (@Sendable (@escaping @Sendable () -> Void) -> Void)?
    let state: Mutex<Inner>
    /// The task's serial context for delegate calls and completion
    /// handlers: its order, and its own delays only (SPEC S9).
    let events = DelegateQueue()

    struct Inner {
        var machine = StateMachine()
        var session: Session?
        var delegate: (any SessionDelegate)?
        var currentRequest: URLRequest?
        /// The response as the user sees it, built from `head` on first use
        /// (Foundation's initializer is the costliest step of a request).
        var response: HTTPURLResponse?
        var head: (url: URL, head: ResponseHead)?
        var error: SessionError?
        var canceling = false
        var bytesReceived: Int64 = 0
        var bytesSent: Int64 = 0
        /// The hop whose body `bytesSent` counts.
        var sendingHop = 0
        var bytesExpectedToReceive: Int64 = -1
        var bytesExpectedToSend: Int64 = 0
        var taskDescription: String?
        var priority: Float = 0.5
        var buffer = Data()
        var download: (handle: FileHandle, url: URL)?
        var transactions: [TaskMetrics.Transaction] = []
        var redirectCount = 0
        var started: Date?
        /// The status of the current hop's head.
        var hopStatus: Int?
        // The cache's part (SPEC C4–C6).
        var cacheKey: String?
        var cacheStatus: String?
        var revalidating: StoredResponse?
        /// The stored response a failure may fall back to (stale-if-error).
        var fallback: StoredResponse?
        var requestTime: Double = 0
        /// The final response's fields as received, for storing.
        var networkHeaders: HeaderFields?
        /// A delegate-driven task keeps a copy of a storable body for the cache.
        var keepsBodyForCache = false
        /// Who the current hop's credentials say the user is (for the cache).
        var credentialIdentity: String?
        /// The most body bytes kept for the cache (the largest tier's 5%).
        var cacheBodyLimit = 0
        /// Body bytes handed to the delegate's context and not yet delivered.
        var queuedForDelegate = 0
        /// waitsForConnectivity: retries made so far.
        var connectivityRetries = 0
        /// Request coalescing: this task leads for the key, or waited once already.
        var leadsKey: String?
        var coalesced = false
        /// The Cookie header the store gave the current hop, if any.
        var sentCookie: String?
        /// Challenges answered and credentials sent (SPEC A2–A5).
        var authentication = AuthenticationState()
        /// Data, upload or download; a data task may become a download.
        var kind = Kind.data
        /// The task's `Progress`, once somebody asked for it.
        var progress: Progress?
        // Resume data (SPEC S7).
        /// The download's validators, when its response allows resuming.
        var resumable: (entityTag: String?, lastModified: String?)?
        /// `cancel(byProducingResumeData:)` was called with this handler.
        var resumeDataHandler: (@Sendable (Data?) -> Void)?
        /// The task goes on from this resume data.
        var resumeFrom: ResumeData?
        /// Bytes of the file that were there before this task's response.
        var downloadOffset: Int64 = 0
        /// A failure known before the task starts (resume data refused).
        var startupError: SessionError?
        /// A multipart/x-mixed-replace body being split into parts (delegate data tasks).
        var mixedReplace: MixedReplaceParser?
        /// The request body comes from streams (`httpBodyStream`, `needNewBodyStream`).
        var streamedBody: StreamedBody?
        /// The trust probe failed: the real transfer reports why.
        var skipsTrustProbe = false
        /// The client identity the delegate or store gave, and whether one was asked for.
        var clientIdentity: Credential?
        var askedForClientCertificate = false
    }

    /// - Parameter streamedBodyLength: Non-nil when the body comes from
    ///   streams: the length the request declares, or -1.
    init(session: Session, identifier: Int, kind: Kind, request: URLRequest, body: TransferRequest.Body, delivery: Delivery,
         streamedBodyLength: Int64? = nil, completionRunner: (@Sendable (@escaping @Sendable () -> Void) -> Void)? = nil) {
        self.taskIdentifier = identifier
        self.originalRequest = request
        self.body = body
        self.delivery = delivery
        self.completionRunner = completionRunner
        var inner = Inner()
        inner.kind = kind
        inner.session = session
        inner.currentRequest = request
        switch body {
        case .none: inner.bytesExpectedToSend = 0
        case .data(let data): inner.bytesExpectedToSend = Int64(data.count)
        case .file(_, let length): inner.bytesExpectedToSend = length
        case .stream(_, let length): inner.bytesExpectedToSend = length
        }
        if let length = streamedBodyLength {
            inner.streamedBody = StreamedBody(length: length, next: request.httpBodyStream.map { OwnedInputStream(stream: $0) })
            inner.bytesExpectedToSend = length
        }
        state = Mutex(inner)
    }

    // MARK: Public state

    /// The request now being sent (after redirects).
    public var currentRequest: URLRequest? { state.withLock { $0.currentRequest } }
    /// The response, once its head arrived.
    public var response: URLResponse? { httpResponse }

    var httpResponse: HTTPURLResponse? {
        state.withLock { inner in
            if inner.response == nil, let (url, head) = inner.head {
                inner.response = Self.makeResponse(url: url, head: head)
            }
            return inner.response
        }
    }

    static func makeResponse(url: URL, head: ResponseHead) -> HTTPURLResponse? {
        // Lines of one name (in any case) become one value (RFC 9110 §5.3):
        // HTTPURLResponse capitalizes names, so "foo" would overwrite "Foo".
        var fields = [String: String](minimumCapacity: head.headers.count)
        var firstName = [HeaderFields.CaseInsensitiveName: String](minimumCapacity: head.headers.count)
        for field in head.headers {
            let key = HeaderFields.CaseInsensitiveName(field.name)
            if let name = firstName[key] {
                fields[name, default: ""] += ", " + field.value
            } else {
                firstName[key] = field.name
                fields[field.name] = field.value
            }
        }
        return HTTPURLResponse(url: url, statusCode: head.status, httpVersion: head.httpVersion, headerFields: fields)
    }
    /// The error the task ended with, if any.
    public var error: (any Error)? { state.withLock { $0.error } }
    /// Body bytes received (decoded).
    public var countOfBytesReceived: Int64 { state.withLock { $0.bytesReceived } }
    /// Request body bytes sent.
    public var countOfBytesSent: Int64 { state.withLock { $0.bytesSent } }
    /// The response's Content-Length, or -1 when unknown.
    public var countOfBytesExpectedToReceive: Int64 { state.withLock { $0.bytesExpectedToReceive } }
    /// The request body's length.
    public var countOfBytesExpectedToSend: Int64 { state.withLock { $0.bytesExpectedToSend } }
    /// Priority between 0 and 1 (kept; libcurl has no per-transfer priority).
    public var priority: Float {
        get { state.withLock { $0.priority } }
        set { state.withLock { $0.priority = min(1, max(0, newValue)) } }
    }
    /// An application's description of the task.
    public var taskDescription: String? {
        get { state.withLock { $0.taskDescription } }
        set { state.withLock { $0.taskDescription = newValue } }
    }
    /// A delegate for this task alone; it takes precedence over the session's.
    public var delegate: (any SessionDelegate)? {
        get { state.withLock { $0.delegate } }
        set { state.withLock { $0.delegate = newValue } }
    }

    /// Running, suspended, canceling or completed.
    public var taskState: State {
        state.withLock { inner in
            if inner.machine.isFinished { return inner.canceling && inner.session != nil ? .canceling : .completed }
            return inner.machine.suspended ? .suspended : .running
        }
    }

    /// The fraction of the body received (or sent, for uploads), 0...1.
    public var fractionCompleted: Double {
        state.withLock { inner in
            if inner.machine.isFinished && inner.error == nil { return 1 }
            if inner.kind == .upload, inner.bytesExpectedToSend > 0 { return Double(inner.bytesSent) / Double(inner.bytesExpectedToSend) }
            guard inner.bytesExpectedToReceive > 0 else { return 0 }
            return min(1, Double(inner.bytesReceived) / Double(inner.bytesExpectedToReceive))
        }
    }

    public var description: String {
        let url = originalRequest?.url.map { SessionError.redacted($0).absoluteString } ?? "?"
        return "SessionTask(\(taskIdentifier), \(kind), \(taskState), \(url))"
    }

    public static func == (a: SessionTask, b: SessionTask) -> Bool { a === b }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }

    // MARK: Control

    /// Starts the task, or continues a suspended one.
    public func resume() {
        perform(state.withLock { inner -> [StateMachine.Action] in
            if inner.started == nil { inner.started = Date() }
            return inner.machine.resume()
        })
    }

    /// Pauses the task: no more body bytes are taken until `resume()`.
    public func suspend() {
        state.withLock { $0.machine.suspend() }
    }

    /// Cancels the task: it completes with `SessionError.Code.cancelled`.
    public func cancel() {
        perform(state.withLock { inner -> [StateMachine.Action] in
            inner.canceling = true
            return inner.machine.cancel()
        })
    }

    // MARK: Running

    func perform(_ actions: [StateMachine.Action]) {
        for action in actions {
            switch action {
            case .runInterceptors: runInterceptors()
            case .startTransfer(let hop): startTransfer(hop: hop)
            case .cancelTransfer(let id): session?.multi.cancel(id)
            case .unpause(let id): session?.multi.unpause(id)
            case .decide(let head, let hop):
                // From the transport's thread: a decision that writes to a
                // store (cookies, credentials, the cache) or talks to the
                // delegate goes to the task's own context.
                if decisionTouchesStores(head) {
                    events.enqueueSync { [self] in self.decide(head, hop: hop) }
                } else {
                    decide(head, hop: hop)
                }
            case .complete(let result):
                state.withLock { inner in
                    // A finished task's progress is whole, its total now known.
                    guard let progress = inner.progress else { return }
                    let done = inner.kind == .upload ? inner.bytesSent : inner.bytesReceived
                    if progress.totalUnitCount < done { progress.totalUnitCount = done }
                    progress.completedUnitCount = max(done, progress.totalUnitCount)
                }
                complete(result)
            }
        }
    }

    var session: Session? { state.withLock { $0.session } }

    /// Mirrors the byte counts into `progress` (called under the task's lock).
    private func updateProgress(_ inner: Inner) {
        guard let progress = inner.progress else { return }
        if inner.kind == .upload {
            progress.totalUnitCount = inner.bytesExpectedToSend > 0 ? inner.bytesExpectedToSend : -1
            progress.completedUnitCount = inner.bytesSent
        } else {
            progress.totalUnitCount = inner.bytesExpectedToReceive >= 0 ? inner.bytesExpectedToReceive : -1
            progress.completedUnitCount = inner.bytesReceived
        }
    }

    /// Whether this task reads and fills the cache: data tasks that keep the
    /// whole body (completion handlers, async APIs).
    private var usesCache: Bool {
        guard kind == .data else { return false }
        switch delivery {
        case .data, .raw, .delegate: return true
        default: return false
        }
    }

    private func runInterceptors() {
        guard let session, let request = currentRequest else { return }
        if let failure = state.withLock({ $0.startupError }) {
            perform(state.withLock { $0.machine.finishWithoutTransfer(.failure(failure)) })
            return
        }
        let interceptors = session.configuration.interceptors
        if session.isInvalidated {
            perform(state.withLock { $0.machine.finishWithoutTransfer(.failure(SessionError(
                .sessionInvalidated, failingURL: request.url, message: "the session was invalidated before the task started"))) })
            return
        }
        guard !interceptors.isEmpty else {
            perform(state.withLock { $0.machine.proceed() })
            return
        }
        Task {
            var request = request
            for interceptor in interceptors {
                switch await interceptor.intercept(request) {
                case .proceed(let changed):
                    request = changed
                case .respond(let response, let data):
                    self.respondWithoutNetwork(response, data)
                    return
                case .fail(let error):
                    self.perform(self.state.withLock { $0.machine.finishWithoutTransfer(.failure(error)) })
                    return
                }
            }
            self.perform(self.state.withLock { inner in
                inner.currentRequest = request
                return inner.machine.proceed()
            })
        }
    }

    private func respondWithoutNetwork(_ response: HTTPURLResponse, _ data: Data) {
        state.withLock { inner in
            inner.response = response
            inner.bytesReceived = Int64(data.count)
            inner.bytesExpectedToReceive = Int64(data.count)
            updateProgress(inner)
        }
        guard let session else { return }
        switch delivery {
        case .delegate:
            events.enqueue { [self] in
                let disposition = await self.askDelegate { await $0.session(session, dataTask: self, didReceive: response) } ?? .allow
                if disposition == .allow, !data.isEmpty { self.callDelegate { $0.session(session, dataTask: self, didReceive: data) } }
                self.perform(self.state.withLock {
                    disposition == .allow ? $0.machine.finishWithoutTransfer(.success(nil))
                        : $0.machine.finishWithoutTransfer(.failure(SessionError(.cancelled, failingURL: response.url, message: "the delegate cancelled the task")))
                })
            }
        case .stream(let stream):
            stream.publish(response)
            if !data.isEmpty { _ = stream.offer(data) }
            perform(state.withLock { $0.machine.finishWithoutTransfer(.success(nil)) })
        case .data, .download, .raw:
            state.withLock { $0.buffer = data }
            perform(state.withLock { $0.machine.finishWithoutTransfer(.success(nil)) })
        }
    }

    func startTransfer(hop: Int) {
        guard let session, let request = currentRequest else { return }
        guard let url = request.url, let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            perform(state.withLock { $0.machine.fail(SessionError(.unsupportedURL, failingURL: request.url, message: "only http and https URLs are supported")) })
            return
        }
        if let problem = FieldSyntax.problem(method: request.httpMethod ?? "GET", fields: (request.allHTTPHeaderFields ?? [:]).map { ($0.key, $0.value) }) {
            perform(state.withLock { $0.machine.fail(SessionError(.badURL, failingURL: url, message: "the request cannot be sent: \(problem)")) })
            return
        }
        if awaitsBodyStream(hop: hop, request: request, session: session) { return }
        var transfer = session.transferRequest(for: request, body: sendsBody(hop: hop, request: request) ? body : .none)
        let cookie = Self.cookieHeader(for: request, headers: transfer.headers, session: session)
        if let cookie { transfer.headers.append(("Cookie", cookie)) }
        state.withLock { $0.sentCookie = cookie }
        for field in authorizationFields(for: request, headers: transfer.headers, session: session) {
            transfer.headers.removeAll { HeaderFields.namesEqual($0.name, field.name) }
            transfer.headers.append(field)
        }
        let (libcurlAuthentication, credentials) = state.withLock { inner in
            inner.credentialIdentity = Self.credentialIdentity(request, sent: inner.authentication.sent)
            return (inner.authentication.sent?.libcurl, inner.credentialIdentity)
        }
        transfer.httpAuthentication = libcurlAuthentication
        if hop == 0, usesCache, let cache = session.urlCache, (request.httpMethod ?? "GET") == "GET",
           let key = CachePolicy.primaryKey(url) {
            let now = Date().timeIntervalSince1970
            let headers = Self.cacheRequestHeaders(request, cookie: cookie, credentials: credentials)
            let stored = cache.lookup(key: key, requestHeaders: headers, now: now)
            let policy = request.cachePolicy == .useProtocolCachePolicy ? session.configuration.requestCachePolicy : request.cachePolicy
            let showStatus = session.configuration.sendsCacheStatus
            switch Self.cacheStep(policy: policy, requestHeaders: headers, stored: stored, now: now) {
            case .serve(var stored, let status, let revalidate):
                if revalidate { session.revalidateInBackground(request, key: key) }
                var body = stored.body
                // A range of a complete stored response is served from it (RFC 9111 §3.4 / RFC 9110 §14).
                if stored.entry.status == 200, let field = headers["Range"],
                   let range = Self.byteRange(field, length: body.count) {
                    stored.entry.status = 206
                    stored.entry.responseHeaders.set("Content-Range", "bytes \(range.lowerBound)-\(range.upperBound - 1)/\(body.count)")
                    stored.entry.responseHeaders.set("Content-Length", String(range.count))
                    body = body.subdata(in: range)
                }
                guard let response = Self.servedResponse(stored, cacheStatus: showStatus ? status : nil, now: now) else { break }
                state.withLock { $0.cacheStatus = status }
                respondWithoutNetwork(response, body)
                return
            case .fail(let error):
                perform(state.withLock { $0.machine.fail(SessionError(error.code, failingURL: url, message: error.message)) })
                return
            case .gatewayTimeout:
                let fields = showStatus ? ["Cache-Status": "\(Self.cacheName); fwd=miss; detail=only-if-cached"] : [:]
                guard let response = HTTPURLResponse(url: url, statusCode: 504, httpVersion: "HTTP/1.1", headerFields: fields) else { break }
                respondWithoutNetwork(response, Data())
                return
            case .network(let revalidating, let status):
                // Identical GETs wait for the one in flight and read its stored result.
                if revalidating == nil, policy == .useProtocolCachePolicy, !state.withLock({ $0.coalesced }) {
                    let waits = session.joinInFlight(key: key) { [self] in
                        self.state.withLock { $0.coalesced = true }
                        self.startTransfer(hop: 0)
                    }
                    if waits { return }
                    state.withLock { $0.leadsKey = key }
                }
                state.withLock { inner in
                    inner.cacheKey = key
                    inner.cacheStatus = showStatus ? status : nil
                    inner.revalidating = revalidating
                    inner.fallback = policy == .useProtocolCachePolicy ? stored : nil
                    inner.requestTime = now
                }
                if let revalidating {
                    for field in CachePolicy.conditionalHeaders(revalidating.entry)
                    where !transfer.headers.contains(where: { HeaderFields.namesEqual($0.name, field.name) }) {
                        transfer.headers.append((field.name, field.value))
                    }
                }
            }
        }
        if kind == .download { transfer.receiveBufferSize = Self.downloadBufferSize }
        applyClientIdentity(&transfer)
        if prepareServerTrust(&transfer, url: url, hop: hop, session: session) { return }
        if sendsBody(hop: hop, request: request), let stream = takeBodyStream() { transfer.body = stream }
        let id = session.multi.start(transfer, observer: HopObserver(task: self, hop: hop))
        perform(state.withLock { $0.machine.started(id, hop: hop) })
    }

    /// Whether deciding on `head` may write to a store: Set-Cookie to keep,
    /// credentials that worked, a challenge, a revalidation's answer.
    private func decisionTouchesStores(_ head: ResponseHead) -> Bool {
        if head.status == 401 || head.status == 407 { return true }
        let (revalidating, sentCredentials, request) = state.withLock { ($0.revalidating != nil, $0.authentication.sent != nil, $0.currentRequest) }
        if revalidating || sentCredentials { return true }
        guard let session, let request, Self.handlesCookies(request, session: session) else { return false }
        return head.headers.contains { HeaderFields.namesEqual($0.name, "Set-Cookie") }
    }

    /// Redirect or response decision for a hop's head (SPEC S6 order).
    private func decide(_ head: ResponseHead, hop: Int) {
        guard let session, let request = currentRequest, let url = request.url else { return }
        Self.storeCookies(of: head, url: url, request: request, session: session)
        authenticationSucceeded(status: head.status, session: session)
        if handleChallenge(head, url: url, request: request, session: session) { return }
        let revalidating = state.withLock { $0.revalidating }
        if revalidating != nil { session.urlCache?.count(head.status == 304 ? "revalidations-not-modified" : "revalidations-replaced") }
        if let stored = revalidating, head.status == 304, let cache = session.urlCache {
            // The 304 answers the conditional request made for this entry:
            // its body is served (as 200, like Apple). Its headers refresh
            // the entry only when the 304 selects it (RFC 9111 §4.3.4).
            let notModified = HeaderFields(head.headers.map { HeaderFields.Field($0.name, $0.value) })
            let now = Date().timeIntervalSince1970
            var served = stored
            if CachePolicy.notModifiedSelects(stored.entry, notModifiedHeaders: notModified).allowed {
                served.entry.responseHeaders = CachePolicy.updatedHeaders(stored.entry.responseHeaders, with: notModified)
                served.entry.requestTime = state.withLock { $0.requestTime }
                served.entry.responseTime = now
                cache.store(served, now: now)
            }
            let status = "\(Self.cacheName); fwd=stale; fwd-status=304"
            let shown = session.configuration.sendsCacheStatus ? status : nil
            if let response = Self.servedResponse(served, cacheStatus: shown, now: now) {
                state.withLock { $0.cacheStatus = shown }
                respondWithoutNetwork(response, served.body)
                return
            }
        }
        if head.status >= 500, hop == 0, serveStaleIfError(reason: "fwd-status=\(head.status)") {
            return
        }
        if let redirect = Self.redirectRequest(from: request, status: head.status, headers: head.headers) {
            let tooMany = state.withLock { $0.redirectCount >= session.configuration.httpMaximumRedirects }
            if tooMany {
                perform(state.withLock { $0.machine.fail(SessionError(
                    .httpTooManyRedirects, failingURL: url, message: "more than \(session.configuration.httpMaximumRedirects) redirects")) })
                return
            }
            events.enqueue { [self] in
                let chosen: URLRequest?
                if self.hasDelegate, let response = Self.makeResponse(url: url, head: head) {
                    chosen = await self.askDelegate {
                        await $0.session(session, task: self, willPerformHTTPRedirection: response, newRequest: redirect)
                    } ?? redirect
                } else {
                    chosen = redirect
                }
                if let chosen {
                    self.perform(self.state.withLock { inner in
                        // The redirect's own transfer may be cut short: record its exchange now.
                        if inner.transactions.count == inner.machine.hop {
                            inner.transactions.append(Self.transaction(url: url, status: inner.hopStatus, metrics: nil))
                        }
                        inner.currentRequest = chosen
                        inner.redirectCount += 1
                        inner.hopStatus = nil
                        return inner.machine.follow(.redirect, url: url)
                    })
                } else {
                    self.acceptResponse(head, url: url, session: session)
                }
            }
            return
        }
        acceptResponse(head, url: url, session: session)
    }

    func acceptResponse(_ head: ResponseHead, url: URL, session: Session) {
        let length = head.headers.first { HeaderFields.namesEqual($0.name, "Content-Length") }.flatMap { FieldNumber.length($0.value) } ?? -1
        state.withLock { inner in
            inner.networkHeaders = HeaderFields(head.headers.map { HeaderFields.Field($0.name, $0.value) })
            var shown = head
            if let status = inner.cacheStatus { shown.headers.append(("Cache-Status", status)) }
            inner.head = (url, shown)
            inner.response = nil
            inner.bytesExpectedToReceive = length
            updateProgress(inner)
            // One allocation for a body of known length, instead of doubling.
            switch delivery {
            case .data, .raw:
                if length > 0, length < 1 << 30 { inner.buffer.reserveCapacity(Int(length)) }
            case .delegate where inner.cacheKey != nil && inner.kind == .data:
                // Keep a copy only of what the cache could store (the 5% rule's largest tier).
                let request = inner.currentRequest
                let limit = max(session.urlCache?.memoryCapacity ?? 0, session.urlCache?.diskCapacity ?? 0) / 20
                inner.cacheBodyLimit = limit
                inner.keepsBodyForCache = length <= Int64(limit) && CachePolicy.storability(
                    method: request?.httpMethod ?? "GET", requestHeaders: HeaderFields(request?.allHTTPHeaderFields ?? [:]),
                    status: head.status, responseHeaders: inner.networkHeaders ?? []).allowed
            default: break
            }
        }
        if kind == .download {
            guard prepareDownloadFile(head, url: url, session: session) else { return }
        }
        if case .stream(let buffer) = delivery, let response = httpResponse { buffer.publish(response) }
        guard case .delegate = delivery, kind != .download else {
            perform(state.withLock { $0.machine.allow() })
            return
        }
        if let contentType = head.headers.first(where: { HeaderFields.namesEqual($0.name, "Content-Type") })?.value,
           let boundary = MixedReplaceParser.boundary(ofContentType: contentType) {
            // Each part gets its own didReceiveResponse, when it begins.
            perform(state.withLock { inner in
                inner.mixedReplace = MixedReplaceParser(boundary: boundary)
                inner.keepsBodyForCache = false
                return inner.machine.allow()
            })
            return
        }
        events.enqueue { [self] in
            var disposition = ResponseDisposition.allow
            if let response = self.httpResponse {
                disposition = await self.askDelegate { await $0.session(session, dataTask: self, didReceive: response) } ?? .allow
            }
            switch disposition {
            case .allow:
                self.perform(self.state.withLock { $0.machine.allow() })
            case .cancel:
                self.perform(self.state.withLock {
                    $0.machine.fail(SessionError(.cancelled, failingURL: url, message: "the delegate cancelled the task"))
                })
            case .becomeDownload:
                // No body byte was delivered yet (it waits for this answer): all of it goes to the file.
                guard self.openDownloadFile(url: url) else { return }
                self.state.withLock { inner in
                    inner.kind = .download
                    inner.keepsBodyForCache = false
                }
                self.callDelegate { $0.session(session, dataTask: self, didBecomeDownloadTask: self) }
                self.perform(self.state.withLock { $0.machine.allow() })
            }
        }
    }

    /// Creates the temporary file a download streams into; false (the task
    /// failed) when it cannot.
    func openDownloadFile(url: URL) -> Bool {
        do {
            let file = try Self.newDownloadFile()
            let handle = try FileHandle(forWritingTo: file)
            state.withLock { $0.download = (handle, file) }
            return true
        } catch {
            perform(state.withLock { $0.machine.fail(SessionError(.cannotWriteFile, failingURL: url, message: "cannot create the download file: \(error.localizedDescription)")) })
            return false
        }
    }

    /// The request a redirect asks for (RFC 9110 §15.4; browsers' method
    /// rewriting), or nil when the response is not a redirect to follow.
    static func redirectRequest(from request: URLRequest, status: Int, headers: [(name: String, value: String)]) -> URLRequest? {
        guard [301, 302, 303, 307, 308].contains(status), let base = request.url,
              let location = headers.first(where: { $0.name.caseInsensitiveCompare("Location") == .orderedSame })?.value,
              let target = URL(string: location, relativeTo: base)?.absoluteURL,
              let scheme = target.scheme?.lowercased(), scheme == "http" || scheme == "https"
        else { return nil }
        var next = request
        next.url = target
        let method = request.httpMethod ?? "GET"
        if (status == 303 && method != "HEAD") || ((status == 301 || status == 302) && method == "POST") {
            next.httpMethod = "GET"
            next.httpBody = nil
            for name in ["Content-Type", "Content-Length", "Content-Encoding", "Transfer-Encoding"] {
                next.setValue(nil, forHTTPHeaderField: name)
            }
        }
        // Credentials never cross origins (SPEC A5).
        if !CachePolicy.sameOrigin(base, target) {
            next.setValue(nil, forHTTPHeaderField: "Authorization")
            next.setValue(nil, forHTTPHeaderField: "Proxy-Authorization")
            next.setValue(nil, forHTTPHeaderField: "Cookie")
        }
        return next
    }

    /// libcurl's receive buffer for download tasks: 16 times its default,
    /// so a gigabyte goes to disk in 4,096 writes rather than 65,536.
    static let downloadBufferSize = 256 * 1024

    /// Where download tasks keep their files (and resume data points into).
    static var downloadsDirectory: URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("urlloading-downloads", isDirectory: true)
    }

    static func newDownloadFile() throws -> URL {
        let directory = downloadsDirectory
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let url = directory.appendingPathComponent("download-\(UUID().uuidString).tmp")
        guard FileManager.default.createFile(atPath: url.path, contents: nil, attributes: [.posixPermissions: 0o600]) else {
            throw SessionError(.cannotWriteFile, failingURL: nil, message: "cannot create \(url.path)")
        }
        return url
    }

    /// A byte stream's reader made room: take body bytes again.
    func continueDelivery() {
        perform(state.withLock { $0.machine.continueDelivery() })
    }

    // MARK: Transport events (on the transport's thread)

    fileprivate func received(_ head: ResponseHead, hop: Int) {
        perform(state.withLock { inner in
            if hop == inner.machine.hop { inner.hopStatus = head.status }
            return inner.machine.head(head, hop: hop)
        })
    }

    fileprivate func received(_ chunk: UnsafeRawBufferPointer, hop: Int) -> Bool {
        enum Next {
            case refuse, drop, buffered
            case deliver(Session?)
            case parts([MixedReplaceParser.Event], Session?)
            case malformed(String)
            case write(FileHandle, Int64, Int64, Session?)
        }
        if case .stream(let buffer) = delivery {
            // Under the task's lock, so a consumer's `continueDelivery` cannot
            // slip between a full buffer and the refusal.
            return state.withLock { inner -> Bool in
                guard inner.machine.chunk(hop: hop) else { return false }
                guard hop == inner.machine.hop, !inner.machine.isFinished else { return true }
                guard buffer.offer(Data(chunk)) else {
                    inner.machine.refuseChunk()
                    return false
                }
                inner.bytesReceived += Int64(chunk.count)
                updateProgress(inner)
                return true
            }
        }
        let next = state.withLock { inner -> Next in
            guard inner.machine.chunk(hop: hop) else { return .refuse }
            guard hop == inner.machine.hop, !inner.machine.isFinished else { return .drop }
            if case .delegate = delivery, inner.kind != .download {
                // Back-pressure: past the backlog the transfer pauses until
                // the delegate's context has taken half of it.
                guard inner.queuedForDelegate < Self.delegateBacklog else {
                    inner.machine.refuseChunk()
                    return .refuse
                }
                inner.queuedForDelegate += chunk.count
            }
            inner.bytesReceived += Int64(chunk.count)
            updateProgress(inner)
            switch delivery {
            case .delegate where inner.kind != .download:
                if var parser = inner.mixedReplace {
                    inner.mixedReplace = nil // one owner of its buffer while it parses
                    defer { inner.mixedReplace = parser }
                    do throws(MixedReplaceParser.Failure) {
                        let events = try parser.feed(chunk)
                        // Only the parts' bytes wait for the delegate (delimiters and part heads do not).
                        var partBytes = 0
                        for case .data(let data) in events { partBytes += data.count }
                        inner.queuedForDelegate -= chunk.count - partBytes
                        return .parts(events, inner.session)
                    } catch {
                        return .malformed(error.message)
                    }
                }
                if inner.keepsBodyForCache {
                    if inner.buffer.count + chunk.count <= inner.cacheBodyLimit {
                        Self.append(chunk, to: &inner.buffer)
                    } else {
                        // Too large for any tier (decoded bytes count): keep nothing.
                        inner.keepsBodyForCache = false
                        inner.buffer = Data()
                    }
                }
                return .deliver(inner.session)
            case .data, .raw:
                Self.append(chunk, to: &inner.buffer)
                return .buffered
            default:
                guard let download = inner.download else { return .drop }
                let expected = inner.bytesExpectedToReceive >= 0 ? inner.downloadOffset + inner.bytesExpectedToReceive : -1
                return .write(download.handle, inner.downloadOffset + inner.bytesReceived, expected, inner.session)
            }
        }
        switch next {
        case .refuse: return false
        case .drop, .buffered: return true
        case .deliver(let session):
            guard let session, hasDelegate else { return true }
            let data = Data(chunk) // the one copy
            events.enqueueSync { [self] in
                self.callDelegate { $0.session(session, dataTask: self, didReceive: data) }
                self.delegateTook(data.count)
            }
        case .parts(let parts, let session):
            guard let session, hasDelegate else { return true }
            deliverParts(parts, session: session)
        case .malformed(let message):
            perform(state.withLock { $0.machine.fail(SessionError(.badServerResponse, failingURL: currentRequest?.url, message: message)) })
        case .write(let handle, let total, let expected, let session):
            if let failure = Self.writeAll(chunk, to: handle.fileDescriptor) {
                // A full disk or a lost file: the task fails with what the system said.
                perform(state.withLock { $0.machine.fail(SessionError(.cannotWriteFile, failingURL: nil, message: "writing the download failed: \(failure)")) })
                return true
            }
            if let session, case .delegate = delivery, hasDelegate {
                let written = Int64(chunk.count)
                events.enqueueSync { [self] in
                    self.callDelegate {
                        $0.session(session, downloadTask: self, didWriteData: written, totalBytesWritten: total, totalBytesExpectedToWrite: expected)
                    }
                }
            }
        }
        return true
    }

    /// Body bytes a delegate data task may have waiting for its delegate
    /// before the transfer pauses: enough to keep a fast delegate busy,
    /// bounded whatever the body's length and the delegate's speed.
    static let delegateBacklog = 2 << 20

    /// The delegate's context delivered `count` body bytes: below half the
    /// backlog, a transfer paused for it goes on.
    func delegateTook(_ count: Int) {
        perform(state.withLock { inner in
            inner.queuedForDelegate -= count
            return inner.queuedForDelegate <= Self.delegateBacklog / 2 ? inner.machine.continueDelivery() : []
        })
    }

    /// Appends a transport chunk with one copy (Data's generic
    /// `append(contentsOf:)` walks a raw buffer byte by byte).
    static func append(_ chunk: UnsafeRawBufferPointer, to buffer: inout Data) {
        guard let start = chunk.baseAddress else { return }
        buffer.append(start.assumingMemoryBound(to: UInt8.self), count: chunk.count)
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

    fileprivate func sent(_ sent: Int64, total: Int64, hop: Int) {
        let report = state.withLock { inner -> (Session, Int64)? in
            guard hop == inner.machine.hop else { return nil }
            if hop != inner.sendingHop {
                // The body is sent anew (after a challenge or redirect): count from 0.
                inner.sendingHop = hop
                inner.bytesSent = 0
            }
            guard sent > inner.bytesSent else { return nil }
            let delta = sent - inner.bytesSent
            inner.bytesSent = sent
            updateProgress(inner)
            guard let session = inner.session, inner.delegate != nil || session.delegate != nil else { return nil }
            return (session, delta)
        }
        guard let (session, delta) = report else { return }
        events.enqueueSync { [self] in
            self.callDelegate { $0.session(session, task: self, didSendBodyData: delta, totalBytesSent: sent, totalBytesExpectedToSend: total) }
        }
    }

    fileprivate func completed(_ result: Result<TransferMetrics, TransferError>, hop: Int) {
        if case .failure(let error) = result, error.kind != .cancelled, hop == 0, serveStaleIfError(reason: "fwd-status=error") {
            return
        }
        if case .failure(let error) = result, waitForConnectivity(after: error, hop: hop) {
            return
        }
        if case .failure(let error) = result, handleClientCertificateRequest(after: error, hop: hop) {
            return
        }
        let url = currentRequest?.url
        perform(state.withLock { inner -> [StateMachine.Action] in
            guard hop == inner.machine.hop, !inner.machine.isFinished else { return [] }
            let metrics = try? result.get()
            inner.transactions.append(Self.transaction(url: url, status: inner.hopStatus, metrics: metrics))
            return inner.machine.transferCompleted(result, hop: hop)
        })
    }

    /// With `waitsForConnectivity`, a host that cannot be found or reached
    /// is tried again (after 0.25 s, doubling to 4 s) until the resource
    /// timeout, instead of failing at once; the delegate hears once that the
    /// task waits. Returns whether the task waits.
    private func waitForConnectivity(after error: TransferError, hop: Int) -> Bool {
        guard let session, session.configuration.waitsForConnectivity,
              error.kind == .curl, let code = error.curl?.code, [5, 6, 7].contains(code) else { return false }
        let deadline = session.configuration.timeoutIntervalForResource
        let retry = state.withLock { inner -> Int? in
            guard hop == inner.machine.hop, !inner.machine.isFinished,
                  Date().timeIntervalSince(inner.started ?? Date()) < deadline else { return nil }
            inner.connectivityRetries += 1
            // A retry never waits behind itself for its own cache key.
            inner.coalesced = true
            return inner.connectivityRetries
        }
        guard let retry else { return false }
        if retry == 1, hasDelegate {
            events.enqueueSync { [self] in self.callDelegate { $0.session(session, taskIsWaitingForConnectivity: self) } }
        }
        let delay = min(4.0, 0.25 * pow(2.0, Double(retry - 1)))
        DispatchQueue.global().asyncAfter(deadline: .now() + delay) { [self] in
            guard !self.state.withLock({ $0.machine.isFinished }) else { return }
            self.startTransfer(hop: hop)
        }
        return true
    }

    /// RFC 5861 §4: when the origin fails (network error or 5xx) and a
    /// stored response's stale-if-error window allows, serve that instead.
    /// Returns whether it did.
    private func serveStaleIfError(reason: String) -> Bool {
        guard let session else { return false }
        let (fallback, headers) = state.withLock { inner in
            (inner.fallback, inner.currentRequest.map { Self.cacheRequestHeaders($0, cookie: inner.sentCookie, credentials: inner.credentialIdentity) } ?? [])
        }
        let now = Date().timeIntervalSince1970
        guard let stored = fallback, CachePolicy.staleIfError(stored.entry, requestHeaders: headers, now: now).allowed else { return false }
        let status = "\(Self.cacheName); hit; \(reason); detail=stale-if-error"
        let shown = session.configuration.sendsCacheStatus ? status : nil
        guard let response = Self.servedResponse(stored, cacheStatus: shown, now: now) else { return false }
        state.withLock { inner in
            inner.fallback = nil
            inner.cacheStatus = shown
        }
        respondWithoutNetwork(response, stored.body)
        return true
    }

    /// After a response from the network: store it when RFC 9111 and the
    /// storage rules allow (SPEC C4); invalidate after an unsafe method (§4.4).
    @discardableResult
    private func updateCache(session: Session, body: Data) -> StoredResponse? {
        guard let cache = session.urlCache, let request = currentRequest, let url = request.url else { return nil }
        let (key, headers, status, requestTime, fromCache, cookie, credentials) = state.withLock { inner in
            (inner.cacheKey, inner.networkHeaders, inner.head?.head.status, inner.requestTime, inner.networkHeaders == nil, inner.sentCookie,
             inner.credentialIdentity)
        }
        guard !fromCache, let headers, let status else { return nil }
        let method = request.httpMethod ?? "GET"
        for target in CachePolicy.invalidatedURLs(method: method, status: status, url: url, responseHeaders: headers) {
            if let targetKey = CachePolicy.primaryKey(target) { cache.remove(key: targetKey) }
        }
        if method == "HEAD", status == 200, let headKey = CachePolicy.primaryKey(url) {
            Self.freshenFromHead(cache: cache, key: headKey, requestHeaders: Self.cacheRequestHeaders(request, cookie: cookie, credentials: credentials), headHeaders: headers, requestTime: requestTime)
            return nil
        }
        guard usesCache, let key, request.cachePolicy != .reloadIgnoringLocalAndRemoteCacheData else { return nil }
        if case .delegate = delivery, !state.withLock({ $0.keepsBodyForCache }) { return nil }
        let requestHeaders = Self.cacheRequestHeaders(request, cookie: cookie, credentials: credentials)
        guard CachePolicy.storability(method: method, requestHeaders: requestHeaders, status: status, responseHeaders: headers).allowed else {
            return nil
        }
        let now = Date().timeIntervalSince1970
        let candidate = StoredResponse(
            url: url.absoluteString, key: key, status: status, responseHeaders: headers, requestHeaders: requestHeaders,
            body: body, requestTime: requestTime, responseTime: now, storedAt: now)
        // A delegate-driven task asks willCacheResponse first (SPEC S6).
        if case .delegate = delivery { return candidate }
        cache.store(candidate, now: now)
        return nil
    }

    /// RFC 9111 §4.3.5: a 200 to HEAD refreshes the stored GET response it
    /// selects (same validators), like a 304; a different Content-Length
    /// means the stored one is outdated, and it is removed.
    static func freshenFromHead(cache: ResponseCache, key: String, requestHeaders: HeaderFields, headHeaders: HeaderFields, requestTime: Double) {
        guard let stored = cache.lookup(key: key, requestHeaders: requestHeaders) else { return }
        if let length = headHeaders["Content-Length"], let storedLength = stored.entry.responseHeaders["Content-Length"], length != storedLength {
            cache.remove(key: key, variant: stored.variant)
            return
        }
        guard CachePolicy.notModifiedSelects(stored.entry, notModifiedHeaders: headHeaders).allowed else { return }
        var updated = stored
        updated.entry.responseHeaders = CachePolicy.updatedHeaders(stored.entry.responseHeaders, with: headHeaders)
        let now = Date().timeIntervalSince1970
        updated.entry.requestTime = requestTime > 0 ? requestTime : now
        updated.entry.responseTime = now
        cache.store(updated, now: now)
    }

    /// SPEC S6: the delegate sees the proposed response after all data and
    /// may keep it, change it (data, userInfo, storage policy) or drop it.
    private func offerToCache(_ candidate: StoredResponse, session: Session) async {
        guard let cache = session.urlCache, let response = candidate.httpResponse() else { return }
        let proposed = CachedResponse(response: response, data: candidate.body)
        guard let decided = await askDelegate({ await $0.session(session, dataTask: self, willCacheResponse: proposed) }) ?? proposed else { return }
        var stored = candidate
        if decided.response !== response {
            var headers = HeaderFields()
            for (name, value) in decided.response.allHeaderFields { headers.append("\(name)", "\(value)") }
            stored.entry.status = decided.response.statusCode
            stored.entry.responseHeaders = CachePolicy.removingConnectionFields(headers)
        }
        stored.body = decided.data
        stored.userInfo = decided.userInfo
        stored.storagePolicy = decided.storagePolicy
        cache.store(stored, now: Date().timeIntervalSince1970)
    }

    static func transaction(url: URL?, status: Int?, metrics: TransferMetrics?) -> TaskMetrics.Transaction {
        // The URL as requested: metrics go to the application's own delegate.
        TaskMetrics.Transaction(
            url: url, statusCode: status,
            networkProtocolName: metrics?.httpVersion ?? "", isReusedConnection: metrics?.reusedConnection ?? false,
            domainLookupSeconds: metrics?.nameLookup ?? 0, connectSeconds: metrics?.connect ?? 0,
            secureConnectionSeconds: metrics?.tlsHandshake ?? 0, requestSentSeconds: metrics?.requestSent ?? 0,
            firstByteSeconds: metrics?.firstByte ?? 0, totalSeconds: metrics?.total ?? 0,
            requestBodyBytesSent: metrics?.bytesSent ?? 0, responseBodyBytesReceived: metrics?.bytesReceived ?? 0,
            responseHeaderBytesReceived: metrics?.headerBytes ?? 0, remoteAddress: metrics?.remoteAddress,
            remotePort: metrics?.remotePort, localAddress: metrics?.localAddress, localPort: metrics?.localPort,
            cacheStatus: nil)
    }

    // MARK: Completion

    private func complete(_ result: Result<TransferMetrics?, SessionError>) {
        let url = currentRequest?.url
        let (tail, tailSession) = state.withLock { inner in (inner.mixedReplace?.finish() ?? [], inner.session) }
        if case .success = result, !tail.isEmpty, let tailSession, hasDelegate {
            deliverParts(tail, session: tailSession)
        }
        let (session, buffer, download, metrics) = state.withLock { inner in
            if case .failure(let error) = result {
                inner.error = SessionError(error.code, failingURL: error.failingURL ?? url, message: error.message)
            }
            let metrics = TaskMetrics(
                transactions: inner.transactions,
                taskInterval: DateInterval(start: inner.started ?? Date(), end: max(Date(), inner.started ?? Date())),
                redirectCount: inner.redirectCount)
            defer {
                inner.buffer = Data()
                inner.download = nil
            }
            return (inner.session, inner.buffer, inner.download, metrics)
        }
        var failure = self.error
        try? download?.handle.close()
        let (resume, resumeHandler) = state.withLock { inner in (resumeData(inner, download: download), inner.resumeDataHandler) }
        if let resume, let sessionFailure = failure as? SessionError, resumeHandler == nil {
            var carrying = sessionFailure
            carrying.resumeData = resume.encoded()
            failure = carrying
            state.withLock { $0.error = carrying }
        }
        let error = failure
        // A file that resume data points to stays; every other goes when the task is done.
        let keptFile = resume != nil
        if let resumeHandler { resumeHandler(resume?.encoded()) }
        guard let session else { return }
        let finish: @Sendable () -> Void = { [self] in
            switch delivery {
            case .delegate:
                if let download, error == nil {
                    self.callDelegate { $0.session(session, downloadTask: self, didFinishDownloadingTo: download.url) }
                }
                if let download, !keptFile { try? FileManager.default.removeItem(at: download.url) }
            case .data(let handler):
                self.callDelegate { $0.session(session, task: self, didFinishCollecting: metrics) }
                handler(error == nil ? buffer : nil, self.response, error)
            case .raw(let handler):
                self.callDelegate { $0.session(session, task: self, didFinishCollecting: metrics) }
                handler(error == nil ? buffer : nil, error as? SessionError)
            case .download(let handler):
                self.callDelegate { $0.session(session, task: self, didFinishCollecting: metrics) }
                handler(error == nil ? download?.url : nil, self.response, error)
                if let download, !keptFile { try? FileManager.default.removeItem(at: download.url) }
            case .stream(let stream):
                self.callDelegate { $0.session(session, task: self, didFinishCollecting: metrics) }
                stream.finish(error as? SessionError)
            }
            if case .delegate = delivery {
                self.callDelegate { $0.session(session, task: self, didFinishCollecting: metrics) }
            }
            self.callDelegate { $0.session(session, task: self, didCompleteWithError: error) }
            self.state.withLock { $0.session = nil; $0.delegate = nil }
            session.taskDidComplete(self)
        }
        let ledKey = state.withLock { inner -> String? in
            defer { inner.leadsKey = nil }
            return inner.leadsKey
        }
        // The end runs off the transport's thread and never inside resume():
        // on the Swift task awaiting this one (the async APIs), else on the
        // task's own delegate context. Cache writes go with it.
        if !hasDelegate {
            let end: @Sendable () -> Void = { [self] in
                if error == nil { _ = self.updateCache(session: session, body: buffer) }
                if let ledKey { session.leaveInFlight(key: ledKey) }
                finish()
            }
            if let runner = completionRunner { runner(end) } else { events.enqueueSync(end) }
        } else {
            events.enqueue { [self] in
                if error == nil, let candidate = self.updateCache(session: session, body: buffer) {
                    await self.offerToCache(candidate, session: session)
                }
                if let ledKey { session.leaveInFlight(key: ledKey) }
                finish()
            }
        }
    }
}

/// The transport's observer for one hop of a task.
private final class HopObserver: TransferObserver {
    let task: SessionTask
    let hop: Int

    init(task: SessionTask, hop: Int) {
        self.task = task
        self.hop = hop
    }

    func transferDidReceiveHead(_ head: ResponseHead) { task.received(head, hop: hop) }
    func transferDidReceive(_ chunk: UnsafeRawBufferPointer) -> Bool { task.received(chunk, hop: hop) }
    func transferDidSendBody(sent: Int64, total: Int64) { task.sent(sent, total: total, hop: hop) }
    func transferDidComplete(_ result: Result<TransferMetrics, TransferError>) {
        // The async APIs run the completion's bookkeeping on the awaiting
        // task: the transport's one thread carries every transfer.
        if let runner = task.completionRunner {
            let (task, hop) = (self.task, self.hop)
            runner { task.completed(result, hop: hop) }
        } else {
            task.completed(result, hop: hop)
        }
    }
}
