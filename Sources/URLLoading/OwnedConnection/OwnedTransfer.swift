import Foundation
import Locking
import Streams
import Transport

/// One request on a connection of the session's own, in HTTP/1.1 (libcurl
/// cannot give a connection up after a response): what lets a data task
/// become a stream task (`becomeStream`), the bytes after the head not lost,
/// a `101 Switching Protocols` included. It drives its `TransferObserver`
/// as a libcurl transfer does, from the connection's loop thread.
///
/// After the head nothing more is read or delivered until the task lets
/// the body go on (`transferMayProceedPastHead`), so a connection handed
/// over begins exactly after the head.
final class OwnedTransfer: Sendable {
    /// Where the request goes: its connection's endpoint, and the request's
    /// first line and head as sent.
    struct Plan: Sendable {
        var endpoint: StreamConnection.Endpoint
        var secure: Bool
        var head: [UInt8]
        var method: String
    }

    let id: CurlMulti.TransferID
    let plan: Plan
    private let observer: any TransferObserver
    private let connection: StreamConnection
    private let body: TransferRequest.Body
    private let idleTimeout: Duration?
    /// Tells the registry the transfer is over.
    private let ended: @Sendable (CurlMulti.TransferID) -> Void
    /// Seconds from the start to the connection's, set on its thread.
    private let connectedAt: ConnectTime

    fileprivate struct State {
        var reader: HTTP1ResponseReader
        /// The task has not yet let the response go on past its head.
        var heldAfterHead = false
        var finished = false
        var reading = false
        var metrics = TransferMetrics()
        var started = ContinuousClock.now
        var receivedRaw: Int64 = 0
    }

    private let state: Lock<State>

    /// Starts connecting; the observer hears the rest.
    init(
        id: CurlMulti.TransferID, plan: Plan, request: TransferRequest, observer: any TransferObserver,
        ended: @escaping @Sendable (CurlMulti.TransferID) -> Void
    ) {
        self.id = id
        self.ended = ended
        self.plan = plan
        self.observer = observer
        self.body = request.body
        self.idleTimeout = request.idleTimeout
        var initial = State(reader: HTTP1ResponseReader(method: plan.method, maximumHeadBytes: CurlMulti.maximumHeadBytes))
        initial.metrics.viaProxy = plan.endpoint.proxy != nil
        initial.metrics.remotePort = plan.endpoint.port
        initial.metrics.requestHeaderBytes = Int64(plan.head.count)
        self.state = Lock(initial)
        // A failed connect fails the operations queued below, which report it.
        let started = initial.started
        let connectedAt = ConnectTime()
        self.connectedAt = connectedAt
        self.connection = StreamConnection(plan.endpoint) { failure in
            if failure == nil { connectedAt.seconds.withLock { $0 = started.secondsSince } }
        }
    }

    /// Queues the exchange's first operations; they run once connected, in order.
    func begin(totalTimeout: Duration?) {
        if let totalTimeout {
            let seconds = Double(totalTimeout.components.seconds) + Double(totalTimeout.components.attoseconds) / 1e18
            DispatchQueue.global().asyncAfter(deadline: .now() + min(max(0, seconds), 31_536_000)) { [weak self] in
                self?.fail(StreamError(.timedOut, "the request took longer than its resource timeout"))
            }
        }
        if plan.secure {
            connection.startTLS(serverName: plan.endpoint.host) { [weak self] failure in
                guard let self else { return }
                if let failure { return self.fail(failure) }
                self.state.withLock { $0.metrics.tlsHandshake = $0.seconds }
            }
        }
        sendHead()
    }

    // MARK: Control (any thread)

    /// Ends the transfer; the observer hears `.cancelled`.
    func cancel() {
        guard let metrics = end() else { return }
        connection.cancel()
        observer.transferWasCancelled(after: metrics)
        observer.transferDidComplete(.failure(.cancelled))
    }

    /// The task lets the response go on (a body, or its end).
    func unpause() {
        // On the connection's loop thread, after anything queued.
        connection.afterEarlierOperations { [weak self] _ in
            guard let self else { return }
            let go = self.state.withLock { state -> Bool in
                guard state.heldAfterHead, !state.finished else { return false }
                state.heldAfterHead = false
                return true
            }
            if go { self.drive() }
        }
    }

    /// The connection, with every byte after the head, for a stream task;
    /// nil unless the transfer waits right after its head.
    func handOver() -> (StreamConnection, [UInt8])? {
        state.withLock { state -> (StreamConnection, [UInt8])? in
            guard state.heldAfterHead, !state.finished, !state.reading else { return nil }
            state.finished = true
            return (connection, Array(state.reader.unread))
        }
    }

    // MARK: The exchange (the connection's loop thread)

    private func sendHead() {
        connection.write(Data(plan.head), timeout: idleTimeout) { [weak self] failure in
            guard let self else { return }
            if let failure { return self.fail(failure) }
            self.sendBody()
        }
    }

    private func sendBody() {
        switch body {
        case .none:
            requestSent()
        case .data(let data):
            connection.write(data, timeout: idleTimeout) { [weak self] failure in
                guard let self else { return }
                if let failure { return self.fail(failure) }
                self.observer.transferDidSendBody(sent: Int64(data.count), total: Int64(data.count))
                self.state.withLock { $0.metrics.bytesSent = Int64(data.count) }
                self.requestSent()
            }
        case .file(let path, let offset, let length):
            guard let handle = FileHandle(forReadingAtPath: path) else {
                return finish(.failure(.bodyUnreadable("cannot open the body file")))
            }
            guard offset >= 0, (try? handle.seek(toOffset: UInt64(offset))) != nil else {
                try? handle.close()
                return finish(.failure(.bodyUnreadable("cannot read the body file from byte \(offset)")))
            }
            sendFile(handle, sent: 0, length: length)
        case .stream:
            finish(.failure(.bodyUnreadable("a streamed body cannot go on a connection of the session's own")))
        }
    }

    /// Sends the file in pieces, each read after the one before went out.
    private func sendFile(_ handle: FileHandle, sent: Int64, length: Int64) {
        guard sent < length else {
            try? handle.close()
            return requestSent()
        }
        let piece: Data
        do {
            piece = try handle.read(upToCount: Int(min(256 * 1024, length - sent))) ?? Data()
        } catch {
            try? handle.close()
            return finish(.failure(.bodyUnreadable("reading the body file failed")))
        }
        guard !piece.isEmpty else {
            try? handle.close()
            return finish(.failure(.bodyUnreadable("the body file is shorter than its length")))
        }
        connection.write(piece, timeout: idleTimeout) { [weak self] failure in
            guard let self else { return }
            if let failure {
                try? handle.close()
                return self.fail(failure)
            }
            let total = sent + Int64(piece.count)
            self.observer.transferDidSendBody(sent: total, total: length)
            self.state.withLock { $0.metrics.bytesSent = total }
            self.sendFile(handle, sent: total, length: length)
        }
    }

    private func requestSent() {
        let connect = connectedAt.seconds.withLock { $0 } ?? 0
        state.withLock {
            $0.metrics.connect = connect
            $0.metrics.requestSent = $0.seconds
        }
        drive()
    }

    private func read() {
        let start = state.withLock { state -> Bool in
            guard !state.finished, !state.reading else { return false }
            state.reading = true
            return true
        }
        guard start else { return }
        connection.read(minimum: 1, maximum: 64 * 1024, timeout: idleTimeout) { [weak self] result in
            guard let self else { return }
            switch result {
            case .success(let read):
                self.state.withLock { state in
                    state.reading = false
                    state.receivedRaw += Int64(read.data.count)
                    state.reader.append(read.data)
                    if read.atEOF { state.reader.appendEnd() }
                }
                self.drive()
            case .failure(let failure):
                self.state.withLock { $0.reading = false }
                self.fail(failure)
            }
        }
    }

    /// Takes the reader's steps until it needs bytes or the task holds it.
    private func drive() {
        while true {
            let (step, trial) = state.withLock { state -> (HTTP1ResponseReader.Step?, HTTP1ResponseReader) in
                guard !state.finished, !state.heldAfterHead else { return (nil, state.reader) }
                var trial = state.reader
                return (trial.next(), trial)
            }
            guard let step else { return }
            switch step {
            case .needMore:
                state.withLock { $0.reader = trial }
                return read()
            case .interim(let head):
                state.withLock { $0.reader = trial }
                observer.transferDidReceiveInterimHead(head)
            case .head(let head):
                state.withLock { state in
                    state.reader = trial
                    state.metrics.firstByte = state.seconds
                    state.metrics.httpVersion = head.httpVersion
                    state.metrics.headerBytes = state.receivedRaw - Int64(trial.unread.count)
                }
                observer.transferDidReceiveHead(head)
                // Nothing after the head until the task lets it go on.
                let proceeds = observer.transferMayProceedPastHead()
                if !proceeds {
                    let held = state.withLock { state -> Bool in
                        guard !state.finished else { return false }
                        state.heldAfterHead = true
                        return true
                    }
                    if held { return }
                }
            case .body(let bytes):
                let taken = bytes.withUnsafeBytes { observer.transferDidReceive($0) }
                guard taken else {
                    // Refused: the task unpauses when it has room.
                    state.withLock { $0.heldAfterHead = true }
                    return
                }
                state.withLock { state in
                    state.reader = trial
                    state.metrics.bytesReceived += Int64(bytes.count)
                }
            case .end:
                state.withLock { $0.reader = trial }
                if !trial.trailers.isEmpty { observer.transferDidReceiveTrailers(trial.trailers) }
                return finish(.success(()))
            case .failed(let error):
                return finish(.failure(error))
            }
        }
    }

    private func fail(_ failure: StreamError) {
        let kind: TransferError.Failure
        switch failure.kind {
        case .cannotFindHost: kind = .cannotFindHost
        case .cannotConnect, .proxy: kind = .cannotConnect
        case .timedOut: kind = .timedOut
        case .closed, .io: kind = .connectionLost
        case .tls: kind = failure.message.contains("not trusted") ? .serverCertificateUntrusted : .tlsFailed
        case .cancelled: kind = .cancelled
        }
        finish(.failure(.connection(kind, "\(plan.endpoint.host):\(plan.endpoint.port): \(failure.message)")))
    }

    private func finish(_ result: Result<Void, TransferError>) {
        guard let metrics = end() else { return }
        connection.cancel(StreamError(.closed, "the request is complete"))
        observer.transferDidComplete(result.map { metrics })
    }

    /// Marks the end once; the figures so far, nil when it had ended.
    private func end() -> TransferMetrics? {
        let metrics = state.withLock { state -> TransferMetrics? in
            guard !state.finished else { return nil }
            state.finished = true
            state.metrics.total = state.seconds
            state.metrics.endDate = Date()
            return state.metrics
        }
        if metrics != nil { ended(id) }
        return metrics
    }
}

/// When the connection was made, as its thread reports it.
private final class ConnectTime: Sendable {
    let seconds = Lock<Double?>(nil)
}

extension OwnedTransfer.State {
    /// Seconds since the transfer began.
    fileprivate var seconds: Double { started.secondsSince }
}

extension ContinuousClock.Instant {
    /// Seconds from this instant to now.
    fileprivate var secondsSince: Double {
        let elapsed = ContinuousClock.now - self
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }
}
