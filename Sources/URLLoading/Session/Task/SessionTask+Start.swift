import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
import Transport

/// Starting a hop: interceptors, the cache before the network,
/// cookies and credentials, then the transfer.
extension SessionTask {
    func runInterceptors() {
        let (session, request, startupError) = locked.withLock { ($0.session, $0.currentRequest, $0.startupError) }
        guard let session, let request else { return }
        if let failure = startupError {
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
            perform(locked.withLock { $0.machine.proceed() })
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
            self.perform(
                self.locked.withLock { inner in
                    inner.currentRequest = request
                    return inner.machine.proceed()
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
    func respondWithoutNetwork(_ response: HTTPURLResponse, body: ServedBody) {
        let (session, streams) = locked.withLock { inner in
            inner.response = response
            inner.bytesReceived = Int64(body.count)
            inner.bytesExpectedToReceive = Int64(body.count)
            inner.updateProgress()
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
        let (step, actions) = locked.withLock { inner -> (ServeStep, [StateMachine.Action]) in
            let step = inner.sink.serve(response, data)
            guard case .finish = step else { return (step, []) }
            return (step, inner.machine.finishWithoutTransfer(.success(nil)))
        }
        switch step {
        case .finish:
            perform(actions)
        case .askDelegate:
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

    func startTransfer(hop: Int) {
        // What the hop reads of the task, in one turn of its lock.
        let (session, request, deadline, kind, usesCache, streamed, identity, taskDelegate) = locked.withLock { inner in
            (
                inner.session, inner.currentRequest, inner.deadline, inner.kind, inner.kind == .data && inner.sink.usesCache,
                inner.streamedBody.map { $0.next != nil }, inner.trust.clientIdentity, inner.delegate
            )
        }
        let streamMissing = streamed == false
        guard let session, let request else { return }
        if hop == 0, let url = request.url, url.scheme?.lowercased() == "data" {
            // On the task's context: a download writes its file, never inside resume().
            events.enqueueSync { [self] in answer(DataURL.parse(url.absoluteString), url: url) }
            return
        }
        if let transfers = session.protocolTransfers, let protocolClass = transfers.protocolClass(for: request) {
            startThroughProtocolClass(protocolClass, transfers: transfers, request: request, hop: hop, usesCache: usesCache, session: session)
            return
        }
        // Refusals first (scheme, CR/LF, the deadline), then what the stores give, then the plan's completion.
        let base = HopPlan.base(request, body: sendsBody(hop: hop, request: request) ? body : .none, settings: session.settings, deadline: deadline, now: Date())
        guard case .success(var transfer) = base, let url = request.url else {
            if case .failure(let refusal) = base { perform(locked.withLock { $0.machine.fail(refusal) }) }
            return
        }
        if streamMissing, awaitsBodyStream(hop: hop, request: request, session: session) { return }
        let cookie = Self.cookieHeader(for: request, headers: transfer.headers, session: session)
        let authorization = authorizationFields(for: request, headers: transfer.headers, session: session)
        let (libcurlAuthentication, credentials) = locked.withLock { inner in
            let identity = Self.credentialIdentity(request, sent: inner.authentication.sent)
            inner.machine.planned(cookie: cookie, credentialIdentity: identity, hop: hop)
            return (inner.authentication.sent?.libcurl, identity)
        }
        var validators: [(name: String, value: String)] = []
        if hop == 0, usesCache, let cache = session.urlCache, (request.httpMethod ?? "GET") == "GET",
            let key = CachePolicy.primaryKey(url)
        {
            let now = Date().timeIntervalSince1970
            let headers = Self.cacheRequestHeaders(request, cookie: cookie, credentials: credentials)
            let stored = cache.lookup(key: key, requestHeaders: headers, now: now)
            let policy = request.cachePolicy == .useProtocolCachePolicy ? session.settings.requestCachePolicy : request.cachePolicy
            let showStatus = session.settings.sendsCacheStatus
            switch CacheExchange.before(policy: policy, requestHeaders: headers, stored: stored, now: now) {
            case .serve(let stored, let status, let revalidate):
                if revalidate { session.revalidateInBackground(request, key: key) }
                guard let response = Self.servedResponse(stored, cacheStatus: showStatus ? status : nil, now: now) else { break }
                locked.withLock { inner in
                    inner.machine.cacheAnswered(status: status)
                    inner.transactions.append(Self.cacheTransaction(request, response: response, cacheStatus: status))
                }
                respondWithoutNetwork(response, body: ServedBody(stored))
                return
            case .fail(let message):
                perform(locked.withLock { $0.machine.fail(SessionError(.resourceUnavailable, failingURL: url, message: message)) })
                return
            case .gatewayTimeout(let status):
                let fields = showStatus ? ["Cache-Status": status] : [:]
                guard let response = HTTPURLResponse(url: url, statusCode: 504, httpVersion: "HTTP/1.1", headerFields: fields) else { break }
                locked.withLock { $0.transactions.append(Self.cacheTransaction(request, response: response, cacheStatus: status)) }
                respondWithoutNetwork(response, Data())
                return
            case .network(let revalidating, let status):
                // Identical GETs wait for the one in flight and read its stored result.
                if revalidating == nil, policy == .useProtocolCachePolicy, !locked.withLock({ $0.machine.cache.coalesced }) {
                    guard locked.withLock({ $0.machine.wait(.otherRequest, hop: 0) }) else { return }
                    let waits = session.joinInFlight(key: key) { [self] in
                        self.perform(
                            self.locked.withLock { inner in
                                inner.machine.markCoalesced()
                                return inner.machine.proceedHop(0)
                            })
                    }
                    if waits { return }
                    locked.withLock { $0.machine.leadInFlight(key) }
                    if let fleet = cache.fleet {
                        // Leads in this process; across a fleet it first claims the key, then looks again.
                        fleet.claim(key: key) { [self] claim in self.fleetClaimGranted(claim) }
                        return
                    }
                    _ = locked.withLock { $0.machine.proceedHop(0) }  // leads: goes on at once
                }
                locked.withLock {
                    $0.machine.cacheConsulted(
                        key: key, status: showStatus ? status : nil, revalidating: revalidating,
                        fallback: policy == .useProtocolCachePolicy ? stored : nil, requestTime: now)
                }
                if let revalidating { validators = CachePolicy.conditionalHeaders(revalidating.entry).map { ($0.name, $0.value) } }
            }
        }
        HopPlan.complete(
            &transfer, cookie: cookie, authorization: authorization, libcurlAuthentication: libcurlAuthentication, validators: validators,
            isDownload: kind == .download)
        Self.apply(identity, to: &transfer)
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
        if streamed != nil, sendsBody(hop: hop, request: request), let stream = takeBodyStream() { transfer.body = stream }
        let (startedAt, viaProxy) = (Date(), transfer.proxy != nil)
        let executor: any TransferExecutor = runsOnOwnConnection(transfer, kind: kind, taskDelegate: taskDelegate, session: session) ? session.ownedTransfers : transport
        let id = executor.start(transfer, observer: HopObserver(task: self, hop: hop))
        perform(
            locked.withLock { inner in
                inner.machine.handedOver(at: startedAt, viaProxy: viaProxy, hop: hop)
                return inner.machine.started(id, hop: hop)
            })
    }
}
