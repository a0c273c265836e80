public import Foundation
import Locking
import Streams

/// A TCP connection made through a session (Apple's `URLSessionStreamTask`):
/// reads and writes of bytes, half-closes, and TLS begun on the open
/// connection (`startSecureConnection`, as STARTTLS needs). The session's
/// proxy (an `http://` one tunnels the connection with `CONNECT`, a SOCKS5 one
/// with its own `CONNECT`), its
/// trusted roots and TLS versions apply.
///
/// Operations may be queued before `resume()`; they run, in order, once the
/// connection is open. Reads are served in order, writes in order, the two
/// side by side; `startSecureConnection` and `stopSecureConnection` wait for
/// every operation before them. Completion handlers run on the task's own
/// context, one after another, never on the connection's loop thread.
public final class SessionStreamTask: Sendable, Hashable, CustomStringConvertible {
    /// Unique within its session (shared with the session's other tasks).
    public let taskIdentifier: Int
    /// The host given to `streamTask(withHostName:port:)`.
    public let host: String
    /// The port given to `streamTask(withHostName:port:)`.
    public let port: Int

    private weak let session: Session?
    private let endpoint: StreamConnection.Endpoint
    /// Completions and delegate calls run here, in order.
    let events = DelegateQueue()

    /// An operation asked for before the connection exists: how to run
    /// it, and how its handler hears that the task ended first.
    private struct Waiting: Sendable {
        let run: @Sendable (StreamConnection) -> Void
        let failed: @Sendable (any Error) -> Void
    }

    private struct Inner {
        var state = SessionTask.State.suspended
        var connection: StreamConnection?
        /// Operations asked for before `resume()` (or while it hands them on).
        var waiting: [Waiting] = []
        /// `resume()` is handing the waiting operations to the connection:
        /// later ones queue behind them.
        var handingOn = false
        var error: SessionError?
        var taskDescription: String?
        /// The read side saw the end; the write side was closed.
        var readEnded = false
        var writeEnded = false
        /// `captureStreams()` handed the connection over.
        var captured = false
        /// Bytes that came before the task had the connection (a data
        /// task's after its head): reads take them first.
        var prefix: [UInt8] = []
    }

    private let inner = Lock(Inner())

    /// A task that connects at `resume()`; or, given `connection`, one
    /// that has it already (a data task's, `becomeStream`), running, whose
    /// reads begin with `leftover`.
    init(
        session: Session, identifier: Int, host: String, port: Int, endpoint: StreamConnection.Endpoint,
        connection: StreamConnection? = nil, leftover: [UInt8] = []
    ) {
        self.session = session
        self.taskIdentifier = identifier
        self.host = host
        self.port = port
        self.endpoint = endpoint
        if let connection {
            inner.withLock { inner in
                inner.connection = connection
                inner.state = .running
                inner.prefix = leftover
            }
        }
    }

    /// Where the task stands (`running` from `resume()` until it is cancelled or fails).
    public var state: SessionTask.State { inner.withLock { $0.state } }

    /// Why the task ended, if it failed or was cancelled.
    public var error: (any Error)? { inner.withLock { $0.error?.urlError } }

    /// A description of the app's choosing.
    public var taskDescription: String? {
        get { inner.withLock { $0.taskDescription } }
        set { inner.withLock { $0.taskDescription = newValue } }
    }

    /// The task's identifier, host, port and state.
    public var description: String { "SessionStreamTask \(taskIdentifier) \(host):\(port) (\(state))" }

    /// Whether both are the same task.
    public static func == (lhs: SessionStreamTask, rhs: SessionStreamTask) -> Bool { lhs === rhs }
    /// Hashes the task's identity.
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }

    /// Opens the connection; operations queued before run after it.
    public func resume() {
        let connection = inner.withLock { inner -> StreamConnection? in
            guard inner.error == nil else { return nil }
            inner.state = .running
            guard inner.connection == nil else { return nil }
            let connection = StreamConnection(endpoint) { [weak self] failure in
                if let failure { self?.fail(failure) }
            }
            inner.connection = connection
            inner.handingOn = true
            return connection
        }
        guard let connection else { return }
        // Outside the lock (a completion may come at once and take it), in order.
        while true {
            let batch = inner.withLock { inner -> [Waiting] in
                defer { inner.waiting = [] }
                if inner.waiting.isEmpty { inner.handingOn = false }
                return inner.waiting
            }
            if batch.isEmpty { return }
            for operation in batch { operation.run(connection) }
        }
    }

    /// Stream tasks do not pause: the call is accepted and changes nothing
    /// but `state` (Apple's stream tasks behave alike).
    public func suspend() {
        inner.withLock { inner in
            if inner.state == .running { inner.state = .suspended }
        }
    }

    /// Closes the connection; queued and later operations fail with `cancelled`.
    public func cancel() {
        fail(StreamError(.cancelled, "the stream task was cancelled"))
    }

    /// Reads at least `minBytes` (fewer only at the end of the stream) and
    /// at most `maxBytes`. `timeout` 0 means none.
    ///
    /// The handler gets the bytes (nil on failure), whether the peer ended
    /// its side after them, and the error.
    public func readData(
        ofMinLength minBytes: Int, maxLength maxBytes: Int, timeout: TimeInterval,
        completionHandler: @escaping @Sendable (Data?, Bool, (any Error)?) -> Void
    ) {
        let deadline = Self.duration(timeout)
        let owner = WeakStreamTask(task: self)
        let (minBytes, maxBytes) = (max(0, minBytes), max(1, maxBytes))
        let early = takePrefix(maxBytes)
        if !early.isEmpty && early.count >= minBytes {
            events.enqueueSync { completionHandler(early, false, nil) }
            return
        }
        submit { [events] connection in
            connection.read(minimum: minBytes - early.count, maximum: maxBytes - early.count, timeout: deadline) { result in
                events.enqueueSync {
                    switch result {
                    case .success(let read):
                        if read.atEOF { owner.task?.sideClosed(.read) }
                        completionHandler(early.isEmpty ? read.data : early + read.data, read.atEOF, nil)
                    case .failure(let error):
                        completionHandler(nil, false, owner.task?.urlError(error) ?? Self.plainError(error))
                    }
                }
            }
        } failed: { error in
            completionHandler(nil, false, error)
        }
    }

    /// At most `maximum` bytes of the prefix, taken.
    private func takePrefix(_ maximum: Int) -> Data {
        inner.withLock { inner in
            guard !inner.prefix.isEmpty, inner.error == nil, !inner.captured else { return Data() }
            let count = min(maximum, inner.prefix.count)
            defer { inner.prefix.removeFirst(count) }
            return Data(inner.prefix[..<count])
        }
    }

    /// Reads as `readData(ofMinLength:maxLength:timeout:completionHandler:)` does.
    public func readData(ofMinLength minBytes: Int, maxLength maxBytes: Int, timeout: TimeInterval) async throws -> (Data?, Bool) {
        try await withCheckedThrowingContinuation { continuation in
            readData(ofMinLength: minBytes, maxLength: maxBytes, timeout: timeout) { data, atEOF, error in
                if let error { continuation.resume(throwing: error) } else { continuation.resume(returning: (data, atEOF)) }
            }
        }
    }

    /// Writes all of `data`; the handler gets nil once the system took it.
    /// `timeout` 0 means none.
    public func write(_ data: Data, timeout: TimeInterval, completionHandler: @escaping @Sendable ((any Error)?) -> Void) {
        let deadline = Self.duration(timeout)
        let owner = WeakStreamTask(task: self)
        submit { [events] connection in
            connection.write(data, timeout: deadline) { failure in
                events.enqueueSync { completionHandler(failure.map { owner.task?.urlError($0) ?? Self.plainError($0) }) }
            }
        } failed: { error in
            completionHandler(error)
        }
    }

    /// Writes as `write(_:timeout:completionHandler:)` does.
    public func write(_ data: Data, timeout: TimeInterval) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            write(data, timeout: timeout) { error in
                if let error { continuation.resume(throwing: error) } else { continuation.resume() }
            }
        }
    }

    /// Ends the write side once earlier writes are done (the peer reads the end).
    public func closeWrite() {
        let owner = WeakStreamTask(task: self)
        submit { [events] connection in
            connection.closeWrite { failure in
                if failure == nil { events.enqueueSync { owner.task?.sideClosed(.write) } }
            }
        } failed: { _ in
        }
    }

    /// Ends the read side once earlier reads are done; later reads fail.
    public func closeRead() {
        submit { connection in
            connection.closeRead()
        } failed: { _ in
        }
    }

    /// Begins TLS once every earlier operation is done; the server's
    /// certificate is checked against the session's trusted roots and the
    /// host name. A failed handshake fails the task
    /// (`secureConnectionFailed` or `serverCertificateUntrusted`).
    public func startSecureConnection() {
        let (owner, host) = (WeakStreamTask(task: self), host)
        submit { connection in
            connection.startTLS(serverName: host) { failure in
                if let failure { owner.task?.fail(failure) }
            }
        } failed: { _ in
        }
    }

    /// Ends TLS (close_notify) once every earlier operation is done; the
    /// connection goes on in the clear. Apple deprecated it ("TLS cannot be
    /// disabled once it is enabled"); kept for source compatibility.
    public func stopSecureConnection() {
        let owner = WeakStreamTask(task: self)
        submit { connection in
            connection.stopTLS { failure in
                if let failure { owner.task?.fail(failure) }
            }
        } failed: { _ in
        }
    }

    /// Once the reads and writes queued before it are done, hands the
    /// connection over as an `InputStream` and `OutputStream` through the
    /// delegate's `urlSession(_:streamTask:didBecome:outputStream:)`; the
    /// task is then complete and later operations fail.
    ///
    /// On Linux the streams are this package's subclasses: reads and writes
    /// block until done; scheduled in a run loop with a delegate, they post
    /// their events there.
    public func captureStreams() {
        let owner = WeakStreamTask(task: self)
        submit { [events] connection in
            connection.afterEarlierOperations { failure in
                events.enqueueSync { owner.task?.handOver(connection, failure) }
            }
        } failed: { _ in
        }
    }

    /// On the task's context: the streams go to the delegate.
    private func handOver(_ connection: StreamConnection, _ failure: StreamError?) {
        if let failure { return fail(failure) }
        let taken = inner.withLock { inner -> [UInt8]? in
            guard inner.error == nil, !inner.captured else { return nil }
            inner.captured = true
            inner.state = .completed
            inner.connection = nil
            defer { inner.prefix = [] }
            return inner.prefix
        }
        guard let leftover = taken else { return }
        let (host, port) = (host, port)
        let describe: @Sendable (StreamError) -> any Error = { failure in
            SessionError(Self.code(failure), failingURL: nil, message: "\(host):\(port): \(failure.message)").urlError
        }
        let input = StreamTaskInputStream(CapturedInputSource(connection, leftover: leftover), describe: describe)
        let output = StreamTaskOutputStream(connection, describe: describe)
        session?.streamTaskEnded(taskIdentifier)
        if let session, let delegate = session.delegate {
            delegate.urlSession(session, streamTask: self, didBecome: input, outputStream: output)
        }
    }

    // MARK: Running

    /// Runs `operation` on the connection, or keeps it until `resume()`;
    /// after the end, `failed` hears why on the task's context.
    private func submit(_ operation: @escaping @Sendable (StreamConnection) -> Void, failed: @escaping @Sendable (any Error) -> Void) {
        let (connection, ended) = inner.withLock { inner -> (StreamConnection?, SessionError?) in
            if let error = inner.error { return (nil, error) }
            if inner.captured {
                return (nil, SessionError(.cancelled, failingURL: nil, message: "the stream task's connection was handed over by captureStreams()"))
            }
            guard let connection = inner.connection, !inner.handingOn else {
                inner.waiting.append(Waiting(run: operation, failed: failed))
                return (nil, nil)
            }
            return (connection, nil)
        }
        if let ended {
            events.enqueueSync { failed(ended.urlError) }
            return
        }
        connection.map(operation)
    }

    /// The task ends with `failure`: the connection closes, every queued
    /// operation fails, later ones too.
    private func fail(_ failure: StreamError) {
        let error = SessionError(Self.code(failure), failingURL: nil, message: "\(host):\(port): \(failure.message)")
        let (connection, waiting) = inner.withLock { inner -> (StreamConnection?, [Waiting]) in
            guard inner.error == nil else { return (nil, []) }
            inner.error = error
            inner.state = .completed
            defer { inner.waiting = [] }
            return (inner.connection, inner.waiting)
        }
        connection?.cancel(failure)
        for operation in waiting { events.enqueueSync { operation.failed(error.urlError) } }
        session?.streamTaskEnded(taskIdentifier)
    }

    private enum Side { case read, write }

    /// A read saw the end, or the write side closed (on the task's context):
    /// the delegate hears it once; with both sides closed the task is complete.
    private func sideClosed(_ side: Side) {
        let (first, both) = inner.withLock { inner -> (Bool, Bool) in
            let first = side == .read ? !inner.readEnded : !inner.writeEnded
            if side == .read { inner.readEnded = true } else { inner.writeEnded = true }
            return (first, inner.readEnded && inner.writeEnded)
        }
        guard first else { return }
        if let session, let delegate = session.delegate {
            switch side {
            case .read: delegate.urlSession(session, readClosedFor: self)
            case .write: delegate.urlSession(session, writeClosedFor: self)
            }
        }
        if both { completeAfterBothSides() }
    }

    /// Both sides are closed: the task is complete and its connection goes.
    private func completeAfterBothSides() {
        let connection = inner.withLock { inner -> StreamConnection? in
            guard inner.error == nil else { return nil }
            inner.state = .completed
            return inner.connection
        }
        connection?.cancel(StreamError(.closed, "the stream task is complete: both sides are closed"))
        session?.streamTaskEnded(taskIdentifier)
    }

    private func urlError(_ failure: StreamError) -> URLError {
        SessionError(Self.code(failure), failingURL: nil, message: "\(host):\(port): \(failure.message)").urlError
    }

    private static func plainError(_ failure: StreamError) -> URLError {
        SessionError(code(failure), failingURL: nil, message: failure.message).urlError
    }

    static func code(_ failure: StreamError) -> SessionError.Code {
        switch failure.kind {
        case .cannotFindHost: .cannotFindHost
        case .cannotConnect, .proxy: .cannotConnectToHost
        case .timedOut: .timedOut
        case .closed, .io: .networkConnectionLost
        case .tls: failure.message.contains("not trusted") ? .serverCertificateUntrusted : .secureConnectionFailed
        case .cancelled: .cancelled
        }
    }

    /// Apple's timeout: 0 (or less) is none.
    private static func duration(_ timeout: TimeInterval) -> Duration? {
        guard timeout > 0, timeout.isFinite else { return nil }
        return .milliseconds(Int64(min(timeout, 31_536_000) * 1000))
    }
}
