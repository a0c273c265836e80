import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
import Transport

/// Starting a hop: interceptors, the cache before the network,
/// cookies and credentials, then the transfer.
extension SessionTask {
    /// What the first hop's start reads of the task: taken in the turn of
    /// the lock that resumed the task, or in one of its own.
    struct StartContext {
        let session: Session?
        let request: URLRequest?
        let startupError: SessionError?

        /// `inout` so that the task's state is read in place, not copied whole.
        init(_ inner: inout Inner) {
            (session, request, startupError) = (inner.session, inner.machine.request, inner.startupError)
        }
    }

    /// The first hop's work (interceptors, cookies, the cache's lookup,
    /// credentials) reads a file, or waits on a lock another process may
    /// hold, only through a disk cache: then it runs on the task's own
    /// context, never in the caller's `resume()` (Apple's and corelibs'
    /// resume only schedule). Without one it is memory work, done at once
    /// (a hop to another thread costs 10-20 % of a request's CPU at 16 in flight).
    func runInterceptors(_ known: StartContext? = nil, onOwnContext: Bool = false) {
        let context = known ?? locked.withLock { StartContext(&$0) }
        guard let session = context.session, let request = context.request else { return }
        if !onOwnContext, session.urlCache?.hasDiskTier == true {
            events.enqueueSync { [self] in runInterceptors(context, onOwnContext: true) }
            return
        }
        if let failure = context.startupError {
            perform(locked.withLock { $0.machine.finishWithoutTransfer(.failure(failure)) })
            return
        }
        let interceptors = session.settings.interceptors
        // Tasks made before the session was invalidated run to their end
        // (Apple's finishTasksAndInvalidate); only others are refused.
        if !session.owns(self) {
            perform(
                locked.withLock {
                    $0.machine.finishWithoutTransfer(
                        .failure(
                            SessionError(
                                .sessionInvalidated, failingURL: request.url, message: "the session was invalidated before the task started")))
                })
            return
        }
        guard !interceptors.isEmpty else {
            // The hop's start reads the task in the same turn of the lock.
            let first = Hop(task: self, index: 0)
            let (actions, inputs) = locked.withLock { inner in (inner.machine.proceed(with: first, request: request), HopInputs(&inner, hop: first)) }
            for action in actions {
                if case .startTransfer(let hop) = action { startTransfer(hop, inputs) } else { perform(StateMachine.Actions(action)) }
            }
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
                    self.perform(self.locked.withLock { $0.machine.finishWithoutTransfer(.failure(error)) })
                    return
                }
            }
            let first = Hop(task: self, index: 0)
            self.perform(
                self.locked.withLock { inner in
                    inner.machine.proceed(with: first, request: request)
                })
        }
    }

    func respondWithoutNetwork(_ response: HTTPURLResponse, _ data: Data) {
        respondWithoutNetwork(response, body: .inline(data))
    }

    /// A stored response's body as the cache hands it: in memory, or its file.
    enum ServedBody: Sendable {
        case inline(Data)
        case file(StoredBodyFile)

        init(_ stored: StoredResponse) {
            self = stored.bodyFile.map { .file($0) } ?? .inline(stored.body)
        }

        var count: Int {
            switch self {
            case .inline(let data): data.count
            case .file(let file): file.count
            }
        }
    }

    /// Answers the task without the network (an interceptor, the cache): a
    /// delegate data task hears a body file's bytes in chunks as they are
    /// read, so a large entry never sits in memory whole; other deliveries
    /// (completion handlers, byte streams) take the body whole.
    ///
    /// - Parameter prelude: What the answer changes of the task first, in
    ///   the same turn of its lock.
    func respondWithoutNetwork(_ response: HTTPURLResponse, body: ServedBody, prelude: ((inout Inner) -> Void)? = nil) {
        if case .inline(let data) = body {
            // All in one turn of the lock: the response, the sink's serving
            // and, when the sink takes the body at once, the task's end.
            let served = locked.withLock { inner -> (session: Session, step: ServeStep, actions: StateMachine.Actions, end: Ended?)? in
                prelude?(&inner)
                Self.record(response, length: body.count, &inner)
                guard let session = inner.session else { return nil }
                let step = inner.sink.serve(response, data)
                guard case .finish = step else { return (session, step, [], nil) }
                let actions = inner.machine.finishWithoutTransfer(.success(nil))
                guard actions.count == 1, case .complete(let result) = actions[0] else { return (session, step, actions, nil) }
                return (session, step, [], (result, ending(&inner, result)))
            }
            guard let served else { return }
            perform(served.actions)
            if let (result, end) = served.end { complete(result, end) }
            if case .askDelegate = served.step { askDelegateToServe(response, body: body, data: data, streams: false, session: served.session) }
            return
        }
        let (session, streams) = locked.withLock { inner in
            prelude?(&inner)
            Self.record(response, length: body.count, &inner)
            return (inner.session, inner.sink.streamsServedBody)
        }
        guard let session else { return }
        var data = Data()
        switch body {
        case .inline(let inline): data = inline
        case .file(let file) where !streams:
            do {
                data = try file.readAll()
            } catch {
                perform(locked.withLock { $0.machine.fail(Self.unreadableBody(response.url, error)) })
                return
            }
        case .file: break
        }
        // A body the sink takes at once ends the task in the same turn of the lock.
        let (step, actions) = locked.withLock { inner -> (ServeStep, StateMachine.Actions) in
            let step = inner.sink.serve(response, data)
            guard case .finish = step else { return (step, []) }
            return (step, inner.machine.finishWithoutTransfer(.success(nil)))
        }
        switch step {
        case .finish: perform(actions)
        case .askDelegate: askDelegateToServe(response, body: body, data: data, streams: streams, session: session)
        }
    }

    /// A task's end as the turn of the lock that finished it read it.
    typealias Ended = (result: Result<TransferMetrics?, SessionError>, end: Ending?)

    /// The response answered without the network, as the task's.
    private static func record(_ response: HTTPURLResponse, length: Int, _ inner: inout Inner) {
        inner.response = response
        inner.bytesReceived = Int64(length)
        inner.bytesExpectedToReceive = Int64(length)
        inner.updateProgress()
    }

    /// A delegate's data task hears the response answered without the
    /// network first, then its body, on the task's context.
    private func askDelegateToServe(_ response: HTTPURLResponse, body: ServedBody, data: Data, streams: Bool, session: Session) {
        events.enqueue { [self, data] in
            let disposition = await self.askDelegate { await $0.urlSession(session, dataTask: self, didReceive: response) } ?? .allow
            guard disposition == .allow else {
                let cancelled = SessionError(.cancelled, failingURL: response.url, message: "the delegate cancelled the task")
                self.perform(self.locked.withLock { $0.machine.finishWithoutTransfer(.failure(cancelled)) })
                return
            }
            if case .file(let file) = body, streams {
                if let failure = self.deliverChunks(of: file, session: session, url: response.url) {
                    self.perform(self.locked.withLock { $0.machine.finishWithoutTransfer(.failure(failure)) })
                    return
                }
            } else if !data.isEmpty {
                self.callDelegate { $0.urlSession(session, dataTask: self, didReceive: data) }
            }
            self.perform(self.locked.withLock { $0.machine.finishWithoutTransfer(.success(nil)) })
        }
    }

    /// Hands a body file to the delegate chunk by chunk, on the task's
    /// context; stops when the task ended meanwhile (cancelled). Returns the
    /// failure when the file cannot be read.
    private func deliverChunks(of file: StoredBodyFile, session: Session, url: URL?) -> SessionError? {
        var position = 0
        while position < file.count {
            if locked.withLock({ $0.machine.isFinished }) { return nil }
            let chunk: Data
            do {
                chunk = try file.read(at: position, length: StoredBodyFile.chunkSize)
            } catch {
                return Self.unreadableBody(url, error)
            }
            callDelegate { $0.urlSession(session, dataTask: self, didReceive: chunk) }
            position += chunk.count
        }
        return nil
    }

    /// A `data:` URL is its own response: a 200 with its media type and
    /// bytes (a download task gets them as its file); a malformed one fails
    /// with `badURL`. A redirect to one is refused as any other scheme.
    private func answer(_ parsed: Result<DataURL, DataURL.Malformed>, url: URL) {
        let contents: DataURL
        switch parsed {
        case .success(let parsed): contents = parsed
        case .failure(let malformed):
            perform(locked.withLock { $0.machine.fail(SessionError(.badURL, failingURL: url, message: malformed.message)) })
            return
        }
        let fields = ["Content-Type": contents.contentType, "Content-Length": "\(contents.body.count)"]
        guard let response = HTTPURLResponse(url: url, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: fields) else {
            perform(locked.withLock { $0.machine.fail(SessionError(.badURL, failingURL: url, message: "the data: URL's response cannot be made")) })
            return
        }
        guard kind == .download else {
            respondWithoutNetwork(response, contents.body)
            return
        }
        do throws(SessionError) {
            let (handle, fileURL) = try DownloadFiles.create()
            if let failure = contents.body.withUnsafeBytes({ Self.writeAll($0, to: handle.fileDescriptor) }) {
                try? FileManager.default.removeItem(at: fileURL)
                throw SessionError(.cannotWriteFile, failingURL: url, message: "writing the download failed: \(failure)")
            }
            perform(
                locked.withLock { inner in
                    inner.response = response
                    inner.bytesReceived = Int64(contents.body.count)
                    inner.bytesExpectedToReceive = Int64(contents.body.count)
                    inner.updateProgress()
                    _ = inner.sink.attach(DownloadFile(handle: handle, url: fileURL))
                    return inner.machine.finishWithoutTransfer(.success(nil))
                })
        } catch {
            perform(locked.withLock { $0.machine.fail(error) })
        }
    }

    static func unreadableBody(_ url: URL?, _ error: any Error) -> SessionError {
        SessionError(.resourceUnavailable, failingURL: url, message: "the cached body cannot be read: \(error.localizedDescription)")
    }

    /// What a hop's start reads of the task, in one turn of its lock.
    struct HopInputs {
        let session: Session?
        let request: URLRequest?
        let deadline: Date?
        let kind: Kind
        let usesCache: Bool
        /// Nil without a streamed body; false when its next stream is still to come.
        let streamed: Bool?
        let identity: Credential?
        let taskDelegate: (any SessionDelegate)?
        /// What the hop carries for a challenge answered.
        let pendingAuthorization: SentAuthorization?
        /// The hop's body when it is not the task's (a resumed upload's).
        let hopBody: TransferRequest.Body?
        /// The fields a resumable upload announces itself with.
        let resumableFields: [(name: String, value: String)]?

        init(_ inner: inout Inner, hop: Hop) {
            hopBody = inner.hopBody
            resumableFields = SessionTask.resumableFields(&inner)
            pendingAuthorization = inner.machine.authentication.sent
            session = inner.session
            request = inner.machine.request
            deadline = inner.machine.deadline
            kind = inner.kind
            usesCache = inner.kind == .data && inner.sink.usesCache
            streamed = inner.streamedBody.map { $0.next != nil }
            identity = inner.machine.trust.clientIdentity
            taskDelegate = inner.delegate
        }
    }

    func startTransfer(_ hop: Hop, _ known: HopInputs? = nil) {
        let inputs = known ?? locked.withLock { HopInputs(&$0, hop: hop) }
        guard let session = inputs.session, let request = inputs.request else { return }
        if hop.isFirst, let url = request.url, url.scheme?.lowercased() == "data" {
            // On the task's context: a download writes its file, never inside resume().
            events.enqueueSync { [self] in answer(DataURL.parse(url.absoluteString), url: url) }
            return
        }
        if let transfers = session.protocolTransfers, let protocolClass = transfers.protocolClass(for: request) {
            startThroughProtocolClass(protocolClass, transfers: transfers, request: request, hop: hop, usesCache: inputs.usesCache, session: session)
            return
        }
        // Refusals first (scheme, CR/LF, the deadline), then what the stores give, then the plan's completion.
        let hopBody = inputs.hopBody ?? body
        let base = HopPlan.base(
            request, body: sendsBody(hop, request: request) ? hopBody : .none, settings: session.settings, deadline: inputs.deadline, now: Date())
        guard case .success(var transfer) = base, let url = request.url else {
            if case .failure(let refusal) = base { perform(locked.withLock { $0.machine.fail(refusal) }) }
            return
        }
        for field in inputs.resumableFields ?? [] where !transfer.headers.contains(where: { HeaderFields.namesEqual($0.name, field.name) }) {
            transfer.headers.append(field)
        }
        if inputs.streamed == false, awaitsBodyStream(hop, request: request, session: session) { return }
        let cookie = RequestCookies.header(for: request, headers: transfer.headers, session: session)
        let (authorization, sent) = authorizationFields(for: request, headers: transfer.headers, pending: inputs.pendingAuthorization, session: session)
        // Recorded (for the cache's keys) before the transfer starts, below.
        let (libcurlAuthentication, credentials) = (sent?.libcurl, CacheView.credentialIdentity(request, sent: sent))
        var validators: [(name: String, value: String)] = []
        // Whether the cache's consultation recorded what the hop sends.
        var planRecorded = false
        if hop.isFirst, inputs.usesCache, let cache = session.urlCache, (request.httpMethod ?? "GET") == "GET",
            let key = CachePolicy.primaryKey(url)
        {
            let now = Date().timeIntervalSince1970
            let headers = CacheView.requestHeaders(request, cookie: cookie, credentials: credentials)
            let stored = cache.lookup(key: key, requestHeaders: headers, now: now)
            let policy = request.cachePolicy == .useProtocolCachePolicy ? session.settings.requestCachePolicy : request.cachePolicy
            let showStatus = session.settings.sendsCacheStatus
            switch CacheExchange.before(policy: policy, requestHeaders: headers, stored: stored, now: now) {
            case .serve(let stored, let status, let revalidate):
                if revalidate { session.revalidateInBackground(request, key: key) }
                guard let response = CacheView.servedResponse(stored, cacheStatus: showStatus ? status : nil, now: now) else { break }
                respondWithoutNetwork(response, body: ServedBody(stored)) { inner in
                    inner.machine.cacheAnswered(status: status)
                    if self.metricsAreRead(inner) { inner.transactions.append(TaskTransactions.cached(request, response: response, cacheStatus: status)) }
                }
                return
            case .fail(let message):
                perform(locked.withLock { $0.machine.fail(SessionError(.resourceUnavailable, failingURL: url, message: message)) })
                return
            case .gatewayTimeout(let status):
                let fields = showStatus ? ["Cache-Status": status] : [:]
                guard let response = HTTPURLResponse(url: url, statusCode: 504, httpVersion: "HTTP/1.1", headerFields: fields) else { break }
                locked.withLock { if metricsAreRead($0) { $0.transactions.append(TaskTransactions.cached(request, response: response, cacheStatus: status)) } }
                respondWithoutNetwork(response, Data())
                return
            case .network(let revalidating, let status):
                // Identical GETs wait for the one in flight and read its stored result.
                let consulted: (inout StateMachine) -> Void = {
                    $0.planned(cookie: cookie, credentialIdentity: credentials)
                    $0.cacheConsulted(
                        key: key, status: showStatus ? status : nil, revalidating: revalidating,
                        fallback: policy == .useProtocolCachePolicy ? stored : nil, requestTime: now)
                }
                if revalidating == nil, policy == .useProtocolCachePolicy {
                    // Waits unless it waited once already (or must never wait behind itself).
                    let waiting = locked.withLock { inner -> Bool? in
                        guard inner.machine.isCurrent(hop) else { return nil }
                        return inner.machine.cache.coalesced ? false : (inner.machine.wait(.otherRequest) ? true : nil)
                    }
                    guard let waiting else { return }
                    if waiting {
                        let waits = session.joinInFlight(key: key) { [self] in
                            self.waitEnded(for: hop) { $0.machine.markCoalesced() }
                        }
                        if waits { return }
                        let fleet = cache.fleet
                        locked.withLock { inner in
                            inner.machine.leadInFlight(key)
                            guard fleet == nil, inner.machine.isCurrent(hop) else { return }
                            _ = inner.machine.proceedHop()  // leads: goes on at once
                            consulted(&inner.machine)
                        }
                        if let fleet {
                            // Leads in this process; across a fleet it first claims the key, then looks again.
                            fleet.claim(key: key) { [self] claim in self.fleetClaimGranted(claim, for: hop) }
                            return
                        }
                    } else {
                        locked.withLock { consulted(&$0.machine) }
                    }
                } else {
                    locked.withLock { consulted(&$0.machine) }
                }
                planRecorded = true
                if let revalidating { validators = CachePolicy.conditionalHeaders(revalidating.entry).map { ($0.name, $0.value) } }
            }
        }
        HopPlan.complete(
            &transfer, cookie: cookie, authorization: authorization, libcurlAuthentication: libcurlAuthentication, validators: validators,
            isDownload: inputs.kind == .download)
        Self.apply(inputs.identity, to: &transfer)
        guard let transport = session.transport else {
            // libcurl could not start when the session was made.
            perform(
                locked.withLock {
                    $0.machine.fail(
                        SessionError(
                            .unknown, failingURL: url, message: "the session has no transport: libcurl could not start"))
                })
            return
        }
        if prepareServerTrust(&transfer, url: url, hop: hop, session: session) { return }
        if inputs.streamed != nil, sendsStreamedBody(hop, request: request), let stream = takeBodyStream() { transfer.body = stream }
        let (startedAt, viaProxy) = (Date(), transfer.proxy != nil)
        let executor: any TransferExecutor = runsOnOwnConnection(transfer, kind: inputs.kind, taskDelegate: inputs.taskDelegate, session: session) ? session.ownedTransfers : transport
        // The cache keys its entry by what the hop sent: recorded before the
        // transfer starts (its end may come before the hand-over's turn),
        // with the cache's consultation when there was one.
        if session.urlCache != nil, !planRecorded {
            locked.withLock { if $0.machine.isCurrent(hop) { $0.machine.planned(cookie: cookie, credentialIdentity: credentials) } }
        }
        trace?.inject(into: &transfer.headers)
        let id = executor.start(transfer, observer: hop)
        perform(
            locked.withLock { inner in
                // A hop the task moved past (it was cancelled meanwhile) gives its transfer up.
                guard inner.machine.isCurrent(hop) else { return StateMachine.Actions(.cancelTransfer(id)) }
                inner.machine.handedOver(at: startedAt, viaProxy: viaProxy)
                return inner.machine.started(id)
            })
    }
}
