import Dispatch
import Foundation
import Locking
import Testing
import TestSupport
import Transport

/// A transport played by a test: it records what the engine starts, cancels
/// and unpauses, and the test plays each transfer's events (head, body,
/// bytes sent, the end) in the order it chooses — the engine cannot tell it
/// from libcurl's loops. Events reach the observer on one serial queue, as
/// they reach it on a loop's thread, and keep `TransferExecutor`'s contract:
/// a refused chunk is delivered again after `unpause`, a cancel ends a
/// running transfer with `.cancelled` once, and so does `shutdown`.
final class ScriptedExecutor: TransferExecutor {
    /// One started transfer, as the test sees it.
    final class Transfer: Sendable {
        let id: CurlMulti.TransferID
        let request: TransferRequest
        fileprivate let observer: any TransferObserver
        fileprivate let executor: ScriptedExecutor

        fileprivate init(id: CurlMulti.TransferID, request: TransferRequest, observer: any TransferObserver, executor: ScriptedExecutor) {
            self.id = id
            self.request = request
            self.observer = observer
            self.executor = executor
        }

        /// The request's field `name` (case-insensitive), if sent.
        func field(_ name: String) -> String? {
            request.headers.first { $0.name.caseInsensitiveCompare(name) == .orderedSame && !$0.value.isEmpty }?.value
        }

        /// Plays the final head. Delivered even to a transfer the engine
        /// cancelled: a head already on its way when the cancel was sent.
        func head(_ status: Int, _ fields: [(String, String)] = []) {
            let head = ResponseHead(status: status, httpVersion: "HTTP/1.1", headers: fields.map { (name: $0.0, value: $0.1) })
            executor.queue.sync { observer.transferDidReceiveHead(head) }
        }

        /// Plays a 1xx head.
        func interim(_ status: Int, _ fields: [(String, String)] = []) {
            let head = ResponseHead(status: status, httpVersion: "HTTP/1.1", headers: fields.map { (name: $0.0, value: $0.1) })
            executor.queue.sync { observer.transferDidReceiveInterimHead(head) }
        }

        /// Plays a body chunk; false when the observer refused it (the
        /// transfer is paused and the chunk comes again after `unpause`).
        @discardableResult
        func body(_ text: String) -> Bool {
            body(Array(text.utf8))
        }

        @discardableResult
        func body(_ bytes: [UInt8]) -> Bool {
            executor.queue.sync {
                guard executor.isRunning(id) else { return false }
                guard !isPaused else {
                    Issue.record("a chunk played while the transfer is paused: libcurl would not deliver it")
                    return false
                }
                let taken = bytes.withUnsafeBytes { observer.transferDidReceive($0) }
                if !taken { executor.state.withLock { $0.transfers[id]?.refused = bytes } }
                return taken
            }
        }

        /// Plays a chunk and waits until it was taken: at once, or after the
        /// engine unpaused the transfer (a head still being decided holds
        /// the body). False when it was not taken within the bound.
        func bodyTaken(_ text: String, within bound: Duration = .seconds(20)) async -> Bool {
            if body(text) { return true }
            return await eventually(within: bound) { !isPaused }
        }

        /// Plays progress of the request body.
        func sent(_ count: Int64, of total: Int64) {
            executor.queue.sync { observer.transferDidSendBody(sent: count, total: total) }
        }

        /// Plays the transfer's successful end.
        func finish(bytesReceived: Int64 = 0) {
            var metrics = TransferMetrics()
            metrics.bytesReceived = bytesReceived
            metrics.httpVersion = "HTTP/1.1"
            metrics.endDate = Date()
            end(.success(metrics))
        }

        /// Plays the successful end unless the engine's cancel ended the
        /// transfer first: after a head the engine answers without the body
        /// (a 304 it merges, a redirect), the end and the cancel race on the
        /// wire, and either may arrive first.
        func finishUnlessCancelled() {
            executor.queue.sync {
                guard executor.isRunning(id) else { return }
                executor.state.withLock { $0.transfers[id]?.ended = true }
                var metrics = TransferMetrics()
                metrics.httpVersion = "HTTP/1.1"
                metrics.endDate = Date()
                observer.transferDidComplete(.success(metrics))
            }
        }

        /// Plays the transfer's failure.
        func fail(_ error: TransferError) {
            end(.failure(error))
        }

        private func end(_ result: Result<TransferMetrics, TransferError>) {
            executor.queue.sync {
                let running = executor.state.withLock { state -> Bool in
                    guard let running = state.transfers[id], !running.ended else { return false }
                    state.transfers[id]?.ended = true
                    return true
                }
                guard running else {
                    Issue.record("played the end of a transfer that had ended: each ends once")
                    return
                }
                observer.transferDidComplete(result)
            }
        }

        /// Whether the engine sent a cancel for this transfer.
        var wasCancelled: Bool { executor.state.withLock { $0.transfers[id]?.cancelCommands ?? 0 > 0 } }
        /// How many times the engine let it go on after a refused chunk.
        var unpauses: Int { executor.state.withLock { $0.transfers[id]?.unpauseCommands ?? 0 } }
        /// Whether it ended (played, cancelled or shut down).
        var hasEnded: Bool { executor.state.withLock { $0.transfers[id]?.ended ?? true } }
        /// A chunk refused and not delivered again yet.
        var isPaused: Bool { executor.state.withLock { $0.transfers[id]?.refused != nil } }
    }

    fileprivate struct Running {
        let transfer: Transfer
        var ended = false
        var refused: [UInt8]?
        var cancelCommands = 0
        var unpauseCommands = 0
    }

    fileprivate struct State {
        var next: UInt64 = 1
        var started: [Transfer] = []
        var transfers: [CurlMulti.TransferID: Running] = [:]
        var shutDown = false
    }

    /// The transport's one thread.
    fileprivate let queue = DispatchQueue(label: "urlloading.test.scripted-transport")
    fileprivate let state = Lock(State())
    /// Whether a cancel ends the transfer at once; when false the cancel is
    /// only recorded, as one the transport had not reached yet while the
    /// transfer's own events (and its end) still came.
    private let processesCancels: Bool
    /// Plays a transfer's events inside `start`, before it returns: a
    /// transfer that ends before the engine hears its id, as a loop thread
    /// on another core can make happen.
    private let playsInStart: (@Sendable (Transfer) -> Void)?

    init(processesCancels: Bool = true, playsInStart: (@Sendable (Transfer) -> Void)? = nil) {
        self.processesCancels = processesCancels
        self.playsInStart = playsInStart
    }

    /// Every transfer started so far, in order.
    var started: [Transfer] { state.withLock { $0.started } }

    /// The `index`th transfer started (from 0), once the engine started it;
    /// nil (and a recorded issue) when it did not within the bound.
    func transfer(_ index: Int, within bound: Duration = .seconds(20)) async -> Transfer? {
        guard await eventually(within: bound, { state.withLock { $0.started.count > index } }) else {
            Issue.record("transfer \(index) never started; started: \(started.map(\.request.url))")
            return nil
        }
        return state.withLock { $0.started[index] }
    }

    fileprivate func isRunning(_ id: CurlMulti.TransferID) -> Bool {
        state.withLock { $0.transfers[id].map { !$0.ended } ?? false }
    }

    // MARK: TransferExecutor

    func start(_ request: TransferRequest, observer: any TransferObserver) -> CurlMulti.TransferID {
        let (id, shutDown) = state.withLock { state -> (CurlMulti.TransferID, Bool) in
            let id = CurlMulti.TransferID(state.next)
            state.next += 1
            guard !state.shutDown else { return (id, true) }
            let transfer = Transfer(id: id, request: request, observer: observer, executor: self)
            state.started.append(transfer)
            state.transfers[id] = Running(transfer: transfer)
            return (id, false)
        }
        if shutDown {
            observer.transferDidComplete(.failure(.shutDown))
        } else if let playsInStart, let transfer = state.withLock({ $0.transfers[id]?.transfer }) {
            playsInStart(transfer)
        }
        return id
    }

    func cancel(_ id: CurlMulti.TransferID) {
        state.withLock { $0.transfers[id]?.cancelCommands += 1 }
        guard processesCancels else { return }
        queue.async { [self] in
            let observer = state.withLock { state -> (any TransferObserver)? in
                guard let running = state.transfers[id], !running.ended else { return nil }
                state.transfers[id]?.ended = true
                return running.transfer.observer
            }
            guard let observer else { return }
            observer.transferWasCancelled(after: TransferMetrics())
            observer.transferDidComplete(.failure(.cancelled))
        }
    }

    func unpause(_ id: CurlMulti.TransferID) {
        state.withLock { $0.transfers[id]?.unpauseCommands += 1 }
        queue.async { [self] in
            let pending = state.withLock { state -> (any TransferObserver, [UInt8])? in
                guard let running = state.transfers[id], !running.ended, let refused = running.refused else { return nil }
                state.transfers[id]?.refused = nil
                return (running.transfer.observer, refused)
            }
            guard let (observer, bytes) = pending else { return }
            let taken = bytes.withUnsafeBytes { observer.transferDidReceive($0) }
            if !taken { state.withLock { $0.transfers[id]?.refused = bytes } }
        }
    }

    func shutdown() {
        let running = state.withLock { state -> [CurlMulti.TransferID] in
            state.shutDown = true
            return state.transfers.filter { !$0.value.ended }.map(\.key)
        }
        for id in running { cancel(id) }
    }
}
