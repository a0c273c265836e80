import Transport

extension SessionTask {
    /// The life of a task as pure state: events come in, actions go out; the
    /// task applies them under its lock and performs them after releasing it
    /// (transport commands, delegate calls).
    ///
    /// ```
    /// initial ─resume→ starting ─proceed→ awaitingHead ─head→ deciding ─allow→ receiving ─done→ finished
    ///                                       ↑   │ started(id)     │ follow (redirect, challenge)      ↑
    ///                                       └───┴─────────────────┘                                   │
    ///        any state ─cancel / fail / finishWithoutTransfer──────────────────────────────────────────┘
    /// ```
    ///
    /// Two kinds of late events are expected and ignored: any event once the
    /// task is finished (a cancel raced the transport), and transport events
    /// of a hop that is no longer current (after a redirect or challenge).
    /// Any other event out of its phase is a bug of ours: it changes nothing
    /// and comes back as `.impossible`, which the task logs.
    struct StateMachine {
        enum Phase: Equatable {
            case initial
            case starting
            case awaitingHead
            case deciding
            case receiving
            case finished
        }

        enum Action: Equatable {
            case runInterceptors
            case startTransfer(hop: Int)
            case cancelTransfer(CurlMulti.TransferID)
            case unpause(CurlMulti.TransferID)
            case decide(ResponseHead, hop: Int)
            case complete(Result<TransferMetrics?, SessionError>)
            /// An event that cannot happen in this phase: nothing changed.
            case impossible(String)
        }

        /// Why a task sends another request.
        enum FollowReason: Equatable {
            case redirect
            case authentication
        }

        private(set) var phase: Phase = .initial
        private(set) var hop = 0
        private(set) var suspended = true
        /// Redirects followed (metrics, and the configuration's limit).
        private(set) var redirects = 0
        /// Tries after the host could not be reached (waitsForConnectivity).
        private(set) var connectivityRetries = 0
        private var transfer: CurlMulti.TransferID?
        private var refusedChunk = false
        /// A transfer that ended while its head (or a multipart part's) was being decided.
        private var pendingCompletion: Result<TransferMetrics, TransferError>?
        /// Parts of a multipart/x-mixed-replace body whose didReceiveResponse
        /// is not answered yet: the task does not complete before they are,
        /// so that a `.cancel` still ends it.
        private var openPartDecisions = 0

        var isFinished: Bool { phase == .finished }

        private func impossible(_ event: String) -> [Action] {
            [.impossible("\(event) in phase \(phase) of hop \(hop)")]
        }

        mutating func resume() -> [Action] {
            guard phase != .finished, suspended else { return [] }
            suspended = false
            if phase == .initial {
                phase = .starting
                return [.runInterceptors]
            }
            return unpauseIfRefused()
        }

        mutating func suspend() {
            if phase != .finished && phase != .initial { suspended = true }
        }

        mutating func cancel() -> [Action] {
            guard phase != .finished else { return [] }
            return finish(.failure(SessionError(.cancelled, failingURL: nil, message: "the task was cancelled")))
        }

        /// Interceptors let the request through: start the first hop.
        mutating func proceed() -> [Action] {
            guard phase != .finished else { return [] }
            guard phase == .starting else { return impossible("proceed") }
            phase = .awaitingHead
            return [.startTransfer(hop: hop)]
        }

        /// An interceptor or the cache answered (or failed): the task ends
        /// without (more of) a transfer.
        mutating func finishWithoutTransfer(_ result: Result<TransferMetrics?, SessionError>) -> [Action] {
            guard phase != .finished else { return [] }
            return finish(result)
        }

        /// The hop's transfer was handed to the transport.
        mutating func started(_ id: CurlMulti.TransferID, hop: Int) -> [Action] {
            guard hop == self.hop, phase != .finished else { return [.cancelTransfer(id)] }
            transfer = id
            // A chunk refused before the id was known still needs its unpause.
            return unpauseIfRefused()
        }

        mutating func head(_ head: ResponseHead, hop: Int) -> [Action] {
            guard hop == self.hop, phase != .finished else { return [] }
            guard phase == .awaitingHead else { return impossible("a second head") }
            phase = .deciding
            return [.decide(head, hop: hop)]
        }

        /// Whether a body chunk may be consumed now.
        mutating func chunk(hop: Int) -> Bool {
            guard hop == self.hop else { return true } // a stale hop's bytes are dropped
            if phase == .receiving && !suspended { return true }
            refusedChunk = true
            return false
        }

        /// A consumer further on (a byte stream, a slow delegate) could not
        /// take a consumed chunk: the transfer pauses until `continueDelivery`.
        mutating func refuseChunk() {
            refusedChunk = true
        }

        /// The consumer has room again.
        mutating func continueDelivery() -> [Action] {
            unpauseIfRefused()
        }

        /// The delegate (or the session) decided to follow a redirect, or to
        /// answer a challenge. Past `maximumRedirects` redirects, or
        /// `maximumHops` requests in all, the task fails.
        mutating func follow(_ reason: FollowReason, url: URL?, maximumRedirects: Int = .max) -> [Action] {
            guard phase != .finished else { return [] }
            guard phase == .deciding else { return impossible("follow") }
            if reason == .redirect, redirects >= maximumRedirects {
                return finish(.failure(SessionError(.httpTooManyRedirects, failingURL: url, message: "more than \(maximumRedirects) redirects")))
            }
            guard hop + 1 < SessionTask.maximumHops else {
                let error = reason == .redirect
                    ? SessionError(.httpTooManyRedirects, failingURL: url, message: "more than \(SessionTask.maximumHops) requests for one task")
                    : SessionError(.userAuthenticationRequired, failingURL: url,
                                   message: "the server kept challenging: more than \(SessionTask.maximumHops) requests for one task")
                return finish(.failure(error))
            }
            var actions: [Action] = []
            if let transfer { actions.append(.cancelTransfer(transfer)) }
            transfer = nil
            refusedChunk = false
            pendingCompletion = nil
            if reason == .redirect { redirects += 1 }
            hop += 1
            phase = .awaitingHead
            actions.append(.startTransfer(hop: hop))
            return actions
        }

        /// The host could not be reached and the task waits for connectivity
        /// (the caller decides whether it may): the same hop goes again.
        /// Returns the number of this try, from 1.
        mutating func retryForConnectivity(hop: Int) -> Int? {
            guard hop == self.hop, phase == .awaitingHead else { return nil }
            transfer = nil
            connectivityRetries += 1
            return connectivityRetries
        }

        /// The response is accepted: receive its body.
        mutating func allow() -> [Action] {
            guard phase != .finished else { return [] }
            guard phase == .deciding else { return impossible("allow") }
            phase = .receiving
            if let pending = pendingCompletion {
                pendingCompletion = nil
                return completion(pending)
            }
            return unpauseIfRefused()
        }

        /// The task fails (delegate cancelled, a limit reached, ...).
        mutating func fail(_ error: SessionError) -> [Action] {
            guard phase != .finished else { return [] }
            return finish(.failure(error))
        }

        mutating func transferCompleted(_ result: Result<TransferMetrics, TransferError>, hop: Int) -> [Action] {
            guard hop == self.hop, phase != .finished else { return [] }
            if phase == .deciding, case .success = result {
                pendingCompletion = result
                return []
            }
            if phase == .receiving, openPartDecisions > 0 {
                pendingCompletion = result
                return []
            }
            return completion(result)
        }

        /// A part's response goes to the delegate.
        mutating func partDecisionOpened() {
            openPartDecisions += 1
        }

        /// The delegate allowed a part (a cancel goes through `fail`).
        mutating func partDecisionClosed() -> [Action] {
            openPartDecisions = max(0, openPartDecisions - 1)
            guard openPartDecisions == 0, phase == .receiving, let pending = pendingCompletion else { return [] }
            pendingCompletion = nil
            return completion(pending)
        }

        private mutating func finish(_ result: Result<TransferMetrics?, SessionError>) -> [Action] {
            phase = .finished
            var actions: [Action] = []
            if let transfer { actions.append(.cancelTransfer(transfer)) }
            transfer = nil
            actions.append(.complete(result))
            return actions
        }

        private mutating func completion(_ result: Result<TransferMetrics, TransferError>) -> [Action] {
            phase = .finished
            transfer = nil
            return [.complete(result.map { Optional($0) }.mapError { SessionError(transfer: $0) })]
        }

        private mutating func unpauseIfRefused() -> [Action] {
            guard refusedChunk, phase == .receiving, !suspended, let transfer else { return [] }
            refusedChunk = false
            return [.unpause(transfer)]
        }
    }
}

extension SessionError {
    /// The session's view of a transport failure.
    init(transfer error: TransferError, url: URL? = nil) {
        let code: Code
        switch error.failure {
        case .cancelled: self.init(.cancelled, failingURL: url, message: "the task was cancelled"); return
        case .shutDown: code = .sessionInvalidated
        case .unsupportedURL: code = .unsupportedURL
        case .cannotFindHost: code = .cannotFindHost
        case .cannotConnect: code = .cannotConnectToHost
        case .timedOut: code = .timedOut
        case .connectionLost: code = .networkConnectionLost
        case .badResponse: code = .badServerResponse
        case .tlsFailed: code = .secureConnectionFailed
        case .serverCertificateUntrusted: code = .serverCertificateUntrusted
        case .clientCertificateRejected, .clientCertificateRequired: code = .clientCertificateRejected
        case .bodyUnreadable: code = .cannotReadBody
        case .cannotWrite: code = .cannotWriteFile
        case .other: code = .unknown
        }
        self.init(code, failingURL: url, message: error.message)
    }
}

#if canImport(Foundation)
import Foundation
#endif
