import Dispatch
import Foundation
import Locking
import Transport
import URLLoading

/// A download transferd runs on the transport itself, as a session's
/// download task runs its own: each chunk goes to the partial file on the
/// transport's thread, the head to the daemon, which decides on it in a
/// turn of its own (heads that arrive together are journaled together),
/// and the end, once the file is durable, to the daemon too. No task, no
/// delegate call, no hop between threads per chunk.
///
/// A first try (from byte 0, no validator journaled) writes its body
/// while the daemon journals the head: a crash before that journal write
/// leaves bytes without a validator, which the next start throws away.
/// Any other try holds its body until the head is on disk, so that a
/// resumed range is never joined to bytes of another version.
///
/// The session keeps what it decides: a redirect, a 401 or a 407 ends this
/// transfer before any byte of its body is written, and the download runs
/// again on a task of the session from the same offset.
///
/// ```
/// awaitingHead ─head→ deciding ─wanted→ receiving ─end→ (file closed) → daemon
///      │  │               └─not wanted / stopped→ dropping ─end→ daemon
///      │  └─head of a first try→ receiving ─not wanted→ dropping
///      └─3xx, 401, 407→ handingOver ─end→ task of the session
/// ```
final class DirectDownload: TransferObserver, Sendable {
    private enum Phase {
        case awaitingHead, deciding, receiving, handingOver, dropping
    }

    private struct State {
        var phase = Phase.awaitingHead
        /// The transport's identifier, known once `start` returned.
        var id: CurlMulti.TransferID?
        /// A command that came before the identifier did.
        var cancelWhenStarted = false
        var unpauseWhenStarted = false
    }

    let running: RunningTransfer
    private let url: URL
    private let request: TransferRequest
    private let executor: any TransferExecutor
    private let daemon: Daemon
    /// Where the transfer started, for a hand-over to the session.
    private let from: Int64
    private let ifRange: String?
    /// The body goes to the file while the head is journaled (a first try).
    private let writesBeforeJournal: Bool
    private let state = Lock(State())
    /// Where ends make their files durable: never the transport's thread,
    /// which carries every other transfer, nor the daemon's.
    private static let closing = DispatchQueue(label: "urlloading.transferd.closing", attributes: .concurrent)

    init(
        running: RunningTransfer, url: URL, request: TransferRequest, executor: any TransferExecutor, daemon: Daemon, from: Int64, ifRange: String?,
        writesBeforeJournal: Bool
    ) {
        self.writesBeforeJournal = writesBeforeJournal
        self.running = running
        self.url = url
        self.request = request
        self.executor = executor
        self.daemon = daemon
        self.from = from
        self.ifRange = ifRange
    }

    func start() {
        let id = executor.start(request, observer: self)
        let (cancel, unpause) = state.withLock { state in
            state.id = id
            return (state.cancelWhenStarted, state.unpauseWhenStarted)
        }
        if cancel {
            executor.cancel(id)
        } else if unpause {
            executor.unpause(id)
        }
    }

    /// Ends the transfer (a cancel, a suspend, a head not wanted).
    func cancel() {
        let id = state.withLock { state -> CurlMulti.TransferID? in
            if state.id == nil { state.cancelWhenStarted = true }
            if state.phase != .handingOver { state.phase = .dropping }
            return state.id
        }
        if let id { executor.cancel(id) }
    }

    private func proceed() {
        let id = state.withLock { state -> CurlMulti.TransferID? in
            guard state.phase == .deciding else { return nil }
            state.phase = .receiving
            if state.id == nil { state.unpauseWhenStarted = true }
            return state.id
        }
        if let id { executor.unpause(id) }
    }

    // MARK: TransferObserver (on the transport's thread)

    func transferDidReceiveHead(_ head: ResponseHead) {
        if (300..<400).contains(head.status) || head.status == 401 || head.status == 407 {
            let (handsOver, id) = state.withLock { state -> (Bool, CurlMulti.TransferID?) in
                guard state.phase == .awaitingHead else { return (false, nil) }
                state.phase = .handingOver
                if state.id == nil { state.cancelWhenStarted = true }
                return (true, state.id)
            }
            if handsOver, let id { executor.cancel(id) }
            return
        }
        let spec = ResponseSpec(head, url: url.absoluteString)
        if writesBeforeJournal { running.expect(spec.contentLength) }
        let decides = state.withLock { state -> Bool in
            guard state.phase == .awaitingHead else { return false }
            state.phase = writesBeforeJournal ? .receiving : .deciding
            return true
        }
        guard decides else { return }
        daemon.directHeadArrived(running.id, spec, held: !writesBeforeJournal) { [self] wanted in
            if wanted { proceed() } else { cancel() }
        }
    }

    func transferDidReceive(_ chunk: UnsafeRawBufferPointer) -> Bool {
        switch state.withLock({ $0.phase }) {
        case .awaitingHead, .deciding:
            // Held until the daemon has journaled the head.
            return false
        case .handingOver, .dropping:
            return true
        case .receiving:
            guard running.write(chunk) else {
                cancel()
                return true
            }
            if let (bytes, expected) = running.progressDue() { daemon.reportProgress(running, bytes: bytes, expected: expected) }
            return true
        }
    }

    func transferDidSendBody(sent: Int64, total: Int64) {}

    func transferDidComplete(_ result: Result<TransferMetrics, TransferError>) {
        if state.withLock({ $0.phase }) == .handingOver {
            daemon.handOver(running, from: from, ifRange: ifRange)
            return
        }
        let (running, daemon, url) = (running, daemon, url)
        Self.closing.async {
            if let (bytes, expected) = running.progressDue(final: true) {
                daemon.reportProgress(running, bytes: bytes, expected: expected, final: true)
            }
            var failure: (any Error)?
            if case .failure(let error) = result { failure = SessionError(transfer: error, url: url).urlError }
            if let problem = running.writeError {
                failure = SessionError(.cannotWriteFile, failingURL: nil, message: "cannot write the partial file: \(problem)").urlError
            }
            let bytes = running.close()
            daemon.transferEnded(running.id, bytes: bytes, error: failure, body: nil)
        }
    }
}

extension Daemon {
    /// A direct download's head: decided in a turn with the heads and ends
    /// that arrived with it.
    ///
    /// - Parameter held: The body waits for a yes, which comes after this
    ///   turn's commit: it goes on only once its head is on disk. A no
    ///   comes at once.
    func directHeadArrived(_ id: Int64, _ head: ResponseSpec, held: Bool, answer: @escaping @Sendable (Bool) -> Void) {
        fromTransfer { [self] in
            guard decide(id, on: head) else { return answer(false) }
            if held { owner.async { answer(true) } }
        }
    }

    /// A direct download's head asked for what the session decides: the
    /// download runs again on a task, from the same offset (nothing of
    /// this transfer's body was written).
    func handOver(_ running: RunningTransfer, from: Int64, ifRange: String?) {
        fromTransfer { [self] in
            // Nothing of this transfer was written: the file needs no flush.
            let bytes = running.close(flush: false)
            // Cancelled or suspended meanwhile: the daemon let it go already.
            guard state.withLock({ $0.running[running.id] }) === running else { return }
            guard !running.isStopped else {
                let cancelled = SessionError(.cancelled, failingURL: nil, message: "the task was cancelled")
                transferEnded(running.id, bytes: bytes, error: cancelled.urlError, body: nil)
                return
            }
            state.withLock { _ = $0.running.removeValue(forKey: running.id) }
            startTransfer(running.id, from: from, ifRange: ifRange, onSession: true)
        }
    }
}
