import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
import Transport

/// Starting a hop: interceptors, the cache before the network (SPEC C6),
/// cookies and credentials, then the transfer.
extension SessionTask {
    func runInterceptors() {
        guard let session, let request = currentRequest else { return }
        if let failure = locked.withLock({ $0.startupError }) {
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
        locked.withLock { inner in
            inner.response = response
            inner.bytesReceived = Int64(data.count)
            inner.bytesExpectedToReceive = Int64(data.count)
            updateProgress(inner)
        }
        guard let session else { return }
        switch locked.withLock({ $0.sink.serve(response, data) }) {
        case .finish:
            perform(locked.withLock { $0.machine.finishWithoutTransfer(.success(nil)) })
        case .askDelegate:
            events.enqueue { [self] in
                let disposition = await self.askDelegate { await $0.urlSession(session, dataTask: self, didReceive: response) } ?? .allow
                if disposition == .allow, !data.isEmpty { self.callDelegate { $0.urlSession(session, dataTask: self, didReceive: data) } }
                self.perform(
                    self.locked.withLock {
                        disposition == .allow
                            ? $0.machine.finishWithoutTransfer(.success(nil))
                            : $0.machine.finishWithoutTransfer(.failure(SessionError(.cancelled, failingURL: response.url, message: "the delegate cancelled the task")))
                    })
            }
        }
    }

    func startTransfer(hop: Int) {
        guard let session, let request = currentRequest else { return }
        guard let url = request.url, let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            perform(locked.withLock { $0.machine.fail(SessionError(.unsupportedURL, failingURL: request.url, message: "only http and https URLs are supported")) })
            return
        }
        if let problem = FieldSyntax.problem(method: request.httpMethod ?? "GET", fields: (request.allHTTPHeaderFields ?? [:]).map { ($0.key, $0.value) }) {
            perform(locked.withLock { $0.machine.fail(SessionError(.badURL, failingURL: url, message: "the request cannot be sent: \(problem)")) })
            return
        }
        let deadline = locked.withLock { $0.deadline }
        if let deadline, deadline.timeIntervalSinceNow <= 0 {
            let limit = session.settings.timeoutIntervalForResource
            perform(locked.withLock { $0.machine.fail(SessionError(.timedOut, failingURL: url, message: "the resource timeout of \(limit) s passed")) })
            return
        }
        if awaitsBodyStream(hop: hop, request: request, session: session) { return }
        var transfer = session.transferRequest(for: request, body: sendsBody(hop: hop, request: request) ? body : .none, deadline: deadline)
        let cookie = Self.cookieHeader(for: request, headers: transfer.headers, session: session)
        if let cookie { transfer.headers.append(("Cookie", cookie)) }
        locked.withLock { $0.sentCookie = cookie }
        for field in authorizationFields(for: request, headers: transfer.headers, session: session) {
            transfer.headers.removeAll { HeaderFields.namesEqual($0.name, field.name) }
            transfer.headers.append(field)
        }
        let (libcurlAuthentication, credentials) = locked.withLock { inner in
            inner.credentialIdentity = Self.credentialIdentity(request, sent: inner.authentication.sent)
            return (inner.authentication.sent?.libcurl, inner.credentialIdentity)
        }
        transfer.httpAuthentication = libcurlAuthentication
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
                    inner.cacheStatus = status
                    inner.transactions.append(Self.cacheTransaction(request, response: response, cacheStatus: status))
                }
                respondWithoutNetwork(response, stored.body)
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
                if revalidating == nil, policy == .useProtocolCachePolicy, !locked.withLock({ $0.coalesced }) {
                    guard locked.withLock({ $0.machine.wait(.otherRequest, hop: 0) }) else { return }
                    let waits = session.joinInFlight(key: key) { [self] in
                        self.perform(
                            self.locked.withLock { inner in
                                inner.coalesced = true
                                return inner.machine.proceedHop(0)
                            })
                    }
                    if waits { return }
                    _ = locked.withLock { $0.machine.proceedHop(0) }  // leads: goes on at once
                    locked.withLock { $0.leadsKey = key }
                }
                locked.withLock { inner in
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
        guard let multi = session.multi else {
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
        if sendsBody(hop: hop, request: request), let stream = takeBodyStream() { transfer.body = stream }
        let (startedAt, viaProxy) = (Date(), transfer.proxy != nil)
        let id = multi.start(transfer, observer: HopObserver(task: self, hop: hop))
        perform(
            locked.withLock { inner in
                if hop == inner.machine.hop {
                    inner.hopStarted = startedAt
                    inner.hopViaProxy = viaProxy
                }
                return inner.machine.started(id, hop: hop)
            })
    }
}
