import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Transport

extension SessionTask {
    /// The life of a task as pure state: events come in, actions go out; the
    /// task applies them under its lock and performs them after releasing it
    /// (transport commands, delegate calls). Each phase carries what only it
    /// needs; what spans hops sits beside it: the current hop and its record,
    /// the task's one deadline, the authentication and trust rounds, the
    /// cache's part, the counts of redirects and connectivity tries.
    ///
    /// ```
    /// suspended ─resume→ intercepting ─proceed→ awaitingHead ─head→ deciding ─allow→ receiving ─done→ finished
    ///                                       ↑ │ ↑   │ started(id)   │ follow (redirect, challenge)   ↑
    ///                         proceedHop ───┘ │ └───┴───────────────┘                                │
    ///                                    wait ↓                                                        │
    ///             waiting(body stream, server trust, client certificate, connectivity, other request)  │
    ///        any phase ─cancel / fail / finishWithoutTransfer────────────────────────────────────────────┘
    /// ```
    ///
    /// The machine's events are the current hop's: the task hands on a
    /// hop's event only after `isCurrent` said it is, in the same turn of its
    /// lock (a hop the task moved past, after a redirect or a challenge,
    /// still hears its transfer's end: `Hop`). An event once the task is
    /// finished (a cancel raced the transport) is expected and ignored. Any
    /// other event out of its phase is a bug of ours: it changes nothing and
    /// comes back as `.impossible`, which the task logs.
    struct StateMachine {
        enum Phase: Equatable {
            /// Made and never resumed.
            case suspended
            /// Resumed before its earliest begin date: waits for the date and
            /// the delegate's `willBeginDelayedRequest`.
            case delayed
            /// Interceptors and the cache are consulted.
            case intercepting
            /// The hop's transfer waits before it starts (again).
            case waiting(Wait)
            /// The hop's transfer runs; its head has not come.
            case awaitingHead(Exchange)
            /// The head is decided (cookies, challenges, redirects, the delegate).
            case deciding(Exchange)
            /// The body flows to the sink.
            case receiving(Exchange)
            case finished(Outcome)
        }

        /// What a hop waits for before its transfer starts.
        enum Wait: Equatable {
            /// The delegate's `needNewBodyStream`.
            case bodyStream
            /// The server-trust probe and the delegate's answer.
            case serverTrust
            /// The delegate's client identity, after the server asked for one.
            case clientCertificate
            /// The host could not be reached; the hop goes again later.
            case connectivity
            /// An identical request in flight, whose stored result may serve this one.
            case otherRequest
        }

        /// One hop's transfer, as the phases from its start to its end see it.
        struct Exchange: Equatable {
            var transfer: CurlMulti.TransferID?
            /// A body chunk was refused: the transfer is paused until unpaused.
            var refusedChunk = false
            /// A transfer that ended while its head (or a multipart part's) was being decided.
            var pendingCompletion: Result<TransferMetrics, TransferError>?
            /// Parts of a multipart/x-mixed-replace body whose didReceiveResponse
            /// is not answered yet: the task does not complete before they are,
            /// so that a `.cancel` still ends it.
            var openPartDecisions = 0
        }

        /// How the task ended. A failure's error names the URL it failed
        /// at and, once made, carries the task's resume data.
        enum Outcome: Equatable {
            case succeeded
            case failed(SessionError)
            case cancelled(SessionError)
            /// The task handed its connection to a stream task (`becomeStream`):
            /// it ends without an error and without another delegate call.
            case becameStream

            var error: SessionError? {
                switch self {
                case .succeeded, .becameStream: nil
                case .failed(let error), .cancelled(let error): error
                }
            }

            var isCancelled: Bool {
                if case .cancelled = self { return true }
                return false
            }
        }

        enum Action: Equatable {
            case awaitBeginDate
            case runInterceptors
            case startTransfer(Hop)
            case cancelTransfer(CurlMulti.TransferID)
            case unpause(CurlMulti.TransferID)
            case decide(ResponseHead, Hop)
            /// Boxed: the metrics and the error are large, and every
            /// action of every event is copied at the size of the largest.
            indirect case complete(Result<TransferMetrics?, SessionError>)
            /// An event that cannot happen in this phase: nothing changed.
            case impossible(String)
        }

        /// Why a task sends another request.
        enum FollowReason: Equatable {
            case redirect
            case authentication
            /// A resumable upload goes on at its resumption URL (`ResumableUpload`).
            case resumption
        }

        private(set) var phase: Phase = .suspended
        /// The request the task is at: the original, then as interceptors, a
        /// `URLProtocol` class, the delegate, a redirect or a resumed upload
        /// changed it (Apple's `currentRequest`).
        private(set) var request: URLRequest?
        /// The current hop (the exchange of `request`); nil before the first
        /// and once the task is finished (the hop holds the task: this drops
        /// the cycle).
        private(set) var hop: Hop?
        /// `suspend()` was called on a started task: no body byte is taken.
        private(set) var paused = false
        /// Redirects followed (metrics, and the configuration's limit).
        private(set) var redirects = 0
        /// Challenges answered by sending the request again.
        private(set) var authentications = 0
        /// Tries after the host could not be reached (waitsForConnectivity).
        private(set) var connectivityRetries = 0
        /// What the current hop sent and saw; a new one with each hop.
        private(set) var record = HopRecord()
        /// The cache's part of the task.
        private(set) var cache = CacheRecord()
        /// When `timeoutIntervalForResource` runs out: set once, at the first
        /// resume, from when the task may begin; the bound of every hop,
        /// retry and challenge round.
        private(set) var deadline: Date?
        /// Challenges answered and credentials sent, across hops: a new hop
        /// carries what was queued for it (the machine begins each hop).
        var authentication = AuthenticationState()
        /// The server-trust probe and the client identity, across hops.
        var trust = TrustState()

        init(request: URLRequest? = nil) {
            self.request = request
        }

        /// Whether `hop` is the task's current one and the task runs: its
        /// events may reach the machine.
        func isCurrent(_ hop: Hop) -> Bool { self.hop === hop }

        var isFinished: Bool {
            if case .finished = phase { return true }
            return false
        }

        /// Apple's suspended state: never resumed, or suspended since.
        var isSuspended: Bool { phase == .suspended || (paused && !isFinished) }

        /// How the task ended; nil while it runs.
        var outcome: Outcome? {
            if case .finished(let outcome) = phase { return outcome }
            return nil
        }

        /// Why the task failed or was cancelled; nil while it runs and after a success.
        var error: SessionError? { outcome?.error }

        /// The task ended without an error (it succeeded, or became a stream task).
        var succeeded: Bool { isFinished && error == nil }

        /// The current hop's exchange, in the phases that have one.
        private var exchange: Exchange? {
            switch phase {
            case .awaitingHead(let exchange), .deciding(let exchange), .receiving(let exchange): exchange
            default: nil
            }
        }

        /// The current hop's transfer, while it runs.
        var currentTransfer: CurlMulti.TransferID? { exchange?.transfer }

        /// Changes the current exchange in place, keeping the phase.
        private mutating func updateExchange(_ change: (inout Exchange) -> Void) {
            switch phase {
            case .awaitingHead(var exchange): change(&exchange); phase = .awaitingHead(exchange)
            case .deciding(var exchange): change(&exchange); phase = .deciding(exchange)
            case .receiving(var exchange): change(&exchange); phase = .receiving(exchange)
            default: break
            }
        }

        private func impossible(_ event: String) -> Actions {
            Actions(.impossible("\(event) in phase \(phase) of hop \(hop.map { "\($0.index)" } ?? "none")"))
        }

        /// The first resume sets the deadline, `resourceTimeout` seconds after
        /// the task may begin (nil or out of range: none); a task whose
        /// earliest begin date is still to come waits for it.
        mutating func resume(at now: Date = Date(), earliestBegin: Date? = nil, resourceTimeout: TimeInterval? = nil) -> Actions {
            guard !isFinished else { return Actions() }
            if phase == .suspended {
                let begins = max(now, earliestBegin ?? now)
                deadline = resourceTimeout.flatMap { Session.deadline(from: begins, resourceTimeout: $0) }
                if begins > now {
                    phase = .delayed
                    return Actions(.awaitBeginDate)
                }
                phase = .intercepting
                return Actions(.runInterceptors)
            }
            guard paused else { return Actions() }
            paused = false
            return unpauseIfRefused()
        }

        /// The begin date came and the delegate let the task go on, with
        /// `replacement` in place of its request if it gave one.
        mutating func beginDelayed(with replacement: URLRequest? = nil) -> Actions {
            guard !isFinished else { return Actions() }
            guard phase == .delayed else { return impossible("beginDelayed") }
            if let replacement { request = replacement }
            phase = .intercepting
            return Actions(.runInterceptors)
        }

        mutating func suspend() {
            if !isFinished && phase != .suspended { paused = true }
        }

        mutating func cancel() -> Actions {
            guard !isFinished else { return Actions() }
            return finish(.failure(SessionError(.cancelled, failingURL: nil, message: "the task was cancelled")))
        }

        /// Whether the task's deadline is still ahead (a task without one has time).
        func hasTime(at now: Date = Date()) -> Bool {
            deadline.map { $0 > now } ?? true
        }

        /// Interceptors let `request` through (as they made it): `first` sends it.
        mutating func proceed(with first: Hop, request: URLRequest) -> Actions {
            guard !isFinished else { return Actions() }
            guard phase == .intercepting else { return impossible("proceed") }
            self.request = request
            begin(first)
            return Actions(.startTransfer(first))
        }

        /// `next` is the task's request from now on, with a record of its own
        /// and the credentials queued for it.
        private mutating func begin(_ next: Hop) {
            hop = next
            phase = .awaitingHead(Exchange())
            record = HopRecord()
            authentication.beginHop()
        }

        /// The hop waits before its transfer starts (again). False when its
        /// transfer started already or the task is over: the caller stops.
        mutating func wait(_ reason: Wait) -> Bool {
            guard case .awaitingHead = phase else { return false }
            if reason == .connectivity { connectivityRetries += 1 }
            phase = .waiting(reason)
            return true
        }

        /// What the hop waited for is there: its transfer starts.
        mutating func proceedHop() -> Actions {
            guard !isFinished, let hop else { return Actions() }
            guard case .waiting = phase else { return impossible("proceedHop") }
            phase = .awaitingHead(Exchange())
            return Actions(.startTransfer(hop))
        }

        /// The host could not be reached and the task waits for connectivity
        /// (the caller decides whether it may): the same hop goes again.
        /// Returns the number of this try, from 1; nil when the hop's head
        /// came or the deadline has passed.
        mutating func retryForConnectivity(at now: Date = Date()) -> Int? {
            hasTime(at: now) && wait(.connectivity) ? connectivityRetries : nil
        }

        /// The server asked for a client certificate: the hop waits for the
        /// delegate's identity, once per task and never when one is given.
        /// False when it may not ask (the transfer then fails as it is).
        mutating func waitForClientCertificate() -> Bool {
            guard trust.mayAskForClientCertificate, wait(.clientCertificate) else { return false }
            trust.askedForClientCertificate()
            return true
        }

        /// An interceptor or the cache answered (or failed): the task ends
        /// without (more of) a transfer.
        mutating func finishWithoutTransfer(_ result: Result<TransferMetrics?, SessionError>) -> Actions {
            guard !isFinished else { return Actions() }
            return finish(result)
        }

        /// The hop's transfer was handed to the transport.
        /// The id comes back from the transport after the transfer started
        /// on its thread: its head (even its body) may have come first.
        mutating func started(_ id: CurlMulti.TransferID) -> Actions {
            guard exchange?.transfer == nil else { return Actions(.cancelTransfer(id)) }
            switch phase {
            case .awaitingHead, .deciding, .receiving: updateExchange { $0.transfer = id }
            default: return Actions(.cancelTransfer(id))
            }
            // A chunk refused before the id was known still needs its unpause.
            return unpauseIfRefused()
        }

        mutating func head(_ head: ResponseHead, at date: Date = Date()) -> Actions {
            guard !isFinished, let hop else { return Actions() }
            guard case .awaitingHead(let exchange) = phase else { return impossible("a second head") }
            phase = .deciding(exchange)
            record.head = head
            record.headDate = date
            return Actions(.decide(head, hop))
        }

        /// Whether a body chunk may be consumed now.
        mutating func chunk() -> Bool {
            if case .receiving = phase, !paused { return true }
            refuseChunk()
            return isFinished  // a finished task's bytes are dropped
        }

        /// A consumer further on (a byte stream, a slow delegate) could not
        /// take a consumed chunk: the transfer pauses until `continueDelivery`.
        mutating func refuseChunk() {
            updateExchange { $0.refusedChunk = true }
        }

        /// The consumer has room again.
        mutating func continueDelivery() -> Actions {
            unpauseIfRefused()
        }

        /// The delegate (or the session) decided to follow a redirect (to
        /// `next`), or to answer a challenge. Past `maximumRedirects`
        /// redirects, or `maximumHops` requests in all, the task fails.
        mutating func follow(_ reason: FollowReason, url: URL?, to next: URLRequest? = nil, maximumRedirects: Int = .max) -> Actions {
            guard !isFinished else { return Actions() }
            guard case .deciding(let exchange) = phase, let current = hop else { return impossible("follow") }
            if let next { request = next }
            if reason == .redirect, redirects >= maximumRedirects {
                return finish(.failure(SessionError(.httpTooManyRedirects, failingURL: url, message: "more than \(maximumRedirects) redirects")))
            }
            guard current.index + 1 < SessionTask.maximumHops else { return finish(.failure(Self.tooManyHops(reason, url: url))) }
            var actions = Actions()
            if let transfer = exchange.transfer { actions.append(.cancelTransfer(transfer)) }
            switch reason {
            case .redirect: redirects += 1
            case .authentication: authentications += 1
            case .resumption: break
            }
            let next = current.next()
            begin(next)
            actions.append(.startTransfer(next))
            return actions
        }

        /// A challenge is answered with `authorization`: the next hop carries it.
        mutating func answerChallenge(with authorization: SentAuthorization, url: URL?) -> Actions {
            guard !isFinished else { return Actions() }
            guard case .deciding = phase else { return impossible("answerChallenge") }
            authentication.queue(authorization)
            return follow(.authentication, url: url)
        }

        /// The hop's transfer failed and the task goes on with another
        /// request (a resumable upload asks the server how much it has),
        /// within `maximumHops`.
        mutating func resend(url: URL?) -> Actions {
            guard !isFinished else { return Actions() }
            guard let current = hop, exchange != nil else { return impossible("resend") }
            guard current.index + 1 < SessionTask.maximumHops else { return finish(.failure(Self.tooManyHops(.resumption, url: url))) }
            let next = current.next()
            begin(next)
            return Actions(.startTransfer(next))
        }

        private static func tooManyHops(_ reason: FollowReason, url: URL?) -> SessionError {
            let limit = "more than \(SessionTask.maximumHops) requests for one task"
            switch reason {
            case .redirect: return SessionError(.httpTooManyRedirects, failingURL: url, message: limit)
            case .authentication: return SessionError(.userAuthenticationRequired, failingURL: url, message: "the server kept challenging: \(limit)")
            case .resumption: return SessionError(.networkConnectionLost, failingURL: url, message: "the upload kept failing: \(limit)")
            }
        }

        /// The response is accepted: receive its body.
        mutating func allow() -> Actions {
            guard !isFinished else { return Actions() }
            guard case .deciding(var exchange) = phase else { return impossible("allow") }
            if let pending = exchange.pendingCompletion {
                return completion(pending)
            }
            exchange.pendingCompletion = nil
            phase = .receiving(exchange)
            return unpauseIfRefused()
        }

        /// The task goes on with `request` in place of the one it was at (a
        /// `URLProtocol` class's canonical form, the delegate's replacement
        /// for a background task, a resumed upload's next request).
        mutating func use(_ request: URLRequest) {
            guard !isFinished else { return }
            self.request = request
        }

        /// The delegate made the task a stream task, which took its connection.
        mutating func becameStream() -> Actions {
            guard !isFinished else { return Actions() }
            guard case .deciding(let exchange) = phase else { return impossible("becameStream") }
            var actions = Actions()
            if let transfer = exchange.transfer { actions.append(.cancelTransfer(transfer)) }
            hop = nil
            phase = .finished(.becameStream)
            actions.append(.complete(.success(nil)))
            return actions
        }

        /// The task's resume data was made after it ended: its error carries it.
        mutating func attachResumeData(_ data: Data, resumesUpload: Bool) {
            guard case .finished(let outcome) = phase, var error = outcome.error else { return }
            error.resumeData = data
            error.resumesUpload = resumesUpload
            phase = .finished(outcome.isCancelled ? .cancelled(error) : .failed(error))
        }

        /// The task fails (delegate cancelled, a limit reached, ...).
        mutating func fail(_ error: SessionError) -> Actions {
            guard !isFinished else { return Actions() }
            return finish(.failure(error))
        }

        mutating func transferCompleted(_ result: Result<TransferMetrics, TransferError>) -> Actions {
            guard !isFinished else { return Actions() }
            switch phase {
            case .deciding(var exchange) where (try? result.get()) != nil:
                exchange.pendingCompletion = result
                phase = .deciding(exchange)
                return Actions()
            case .receiving(var exchange) where exchange.openPartDecisions > 0:
                exchange.pendingCompletion = result
                phase = .receiving(exchange)
                return Actions()
            default:
                return completion(result)
            }
        }

        /// A part's response goes to the delegate.
        mutating func partDecisionOpened() {
            updateExchange { $0.openPartDecisions += 1 }
        }

        /// The delegate allowed a part (a cancel goes through `fail`).
        mutating func partDecisionClosed() -> Actions {
            guard case .receiving(var exchange) = phase else { return Actions() }
            exchange.openPartDecisions = max(0, exchange.openPartDecisions - 1)
            phase = .receiving(exchange)
            guard exchange.openPartDecisions == 0, let pending = exchange.pendingCompletion else { return Actions() }
            return completion(pending)
        }

        // MARK: What a hop sent, and the cache's part

        /// The hop's request was planned: the Cookie field and credentials it carries.
        mutating func planned(cookie: String?, credentialIdentity: String?) {
            guard !isFinished else { return }
            record.cookie = cookie
            record.credentialIdentity = credentialIdentity
        }

        /// The hop's transfer was handed to the transport at `date`.
        mutating func handedOver(at date: Date, viaProxy: Bool) {
            guard !isFinished else { return }
            record.startedAt = date
            record.viaProxy = viaProxy
        }

        /// The first hop goes to the network after consulting the cache.
        mutating func cacheConsulted(key: String, status: String?, revalidating: StoredResponse?, fallback: StoredResponse?, requestTime: Double) {
            guard !isFinished else { return }
            cache.key = key
            cache.status = status
            cache.revalidating = revalidating
            cache.fallback = fallback
            cache.requestTime = requestTime
        }

        /// The cache answers (a fresh entry, a revalidated one, or a stale
        /// one after an error): the response shows `status`, and no failure
        /// falls back any more.
        mutating func cacheAnswered(status: String?) {
            cache.status = status
            cache.fallback = nil
        }

        /// The network's final response is accepted with these fields.
        mutating func responseAccepted(headers: HeaderFields) {
            cache.networkHeaders = headers
        }

        /// This task's request leads for `key`: identical ones wait for it.
        mutating func leadInFlight(_ key: String) {
            cache.leadsKey = key
        }

        /// A `URLProtocol` class's storage policy for its response: not
        /// allowed takes the response out of the cache's hands; memory only
        /// limits where it is stored.
        mutating func limitStorage(_ policy: CacheStoragePolicy) {
            if policy == .notAllowed {
                cache.key = nil
            } else {
                cache.storagePolicyLimit = policy
            }
        }

        /// The task waited for another request (or must never wait behind itself).
        mutating func markCoalesced() {
            cache.coalesced = true
        }

        /// The fleet let the task fetch its key: the hop waiting for an
        /// identical request (in another process) goes, and the task holds
        /// the claim until it ends. False when the task is over, or its hop
        /// waits for nothing: the caller lets go of the claim.
        mutating func fleetClaimGranted(_ claim: any FleetClaim) -> Actions? {
            guard !isFinished, phase == .waiting(.otherRequest) else { return nil }
            cache.fleetClaim = claim
            cache.coalesced = true  // it never waits behind itself again
            return proceedHop()
        }

        /// The key this task led for and its fleet claim, once: the caller
        /// lets the waiting ones go.
        mutating func endLead() -> (key: String?, claim: (any FleetClaim)?) {
            defer { (cache.leadsKey, cache.fleetClaim) = (nil, nil) }
            return (cache.leadsKey, cache.fleetClaim)
        }

        private mutating func finish(_ result: Result<TransferMetrics?, SessionError>) -> Actions {
            var actions = Actions()
            if let transfer = exchange?.transfer { actions.append(.cancelTransfer(transfer)) }
            actions.append(.complete(end(result)))
            return actions
        }

        private mutating func completion(_ result: Result<TransferMetrics, TransferError>) -> Actions {
            Actions(.complete(end(result.map { Optional($0) }.mapError { SessionError(transfer: $0) })))
        }

        /// The task is finished with `result`; a failure that names no URL
        /// fails at the request the task was at.
        private mutating func end(_ result: Result<TransferMetrics?, SessionError>) -> Result<TransferMetrics?, SessionError> {
            hop = nil
            switch result {
            case .success:
                phase = .finished(.succeeded)
                return result
            case .failure(let error):
                var failure = SessionError(error.code, failingURL: error.failingURL ?? request?.url, message: error.message)
                failure.reportedURLErrorCode = error.reportedURLErrorCode
                phase = .finished(failure.code == .cancelled ? .cancelled(failure) : .failed(failure))
                return .failure(failure)
            }
        }

        private mutating func unpauseIfRefused() -> Actions {
            guard case .receiving(var exchange) = phase, exchange.refusedChunk, !paused, let transfer = exchange.transfer else { return Actions() }
            exchange.refusedChunk = false
            phase = .receiving(exchange)
            return Actions(.unpause(transfer))
        }
    }
}
