package import Foundation
import Locking
#if canImport(Glibc)
import Glibc
#endif

/// A TCP connection a stream task owns (Apple's `URLSessionStreamTask`'s
/// transport): reads, writes, half-closes and TLS begun or ended on the
/// open connection, each an operation in a queue, carried out by one of
/// the process's few stream loops (`StreamLoop`), which run sockets and
/// OpenSSL only, for every connection. Reads are served in order, writes in
/// order, the two side by side; TLS's start and end wait for every
/// operation before them. Completions are called on the loop's thread and
/// must not block: the owner hands them to the user's context.
package final class StreamConnection: Sendable {
    /// Where to connect.
    package struct Endpoint: Sendable {
        package var host: String
        package var port: Int
        /// A proxy that tunnels the connection: `http://` (`CONNECT`),
        /// `socks5://` or `socks5h://`; credentials in its URL are sent to it.
        package var proxy: URL?
        /// How TLS, when started, checks the peer.
        package var tls: TLSOptions
        /// Bound on the connect (and the proxy's answer).
        package var connectTimeout: Duration

        package init(host: String, port: Int, proxy: URL?, tls: TLSOptions, connectTimeout: Duration) {
            self.host = host
            self.port = port
            self.proxy = proxy
            self.tls = tls
            self.connectTimeout = connectTimeout
        }
    }

    /// A read's result: the bytes, and whether the peer ended its side.
    package typealias ReadCompletion = @Sendable (Result<(data: Data, atEOF: Bool), StreamError>) -> Void
    /// A write's, a TLS start's or a close's result.
    package typealias Completion = @Sendable (StreamError?) -> Void

    enum Operation {
        case read(minimum: Int, maximum: Int, deadline: ContinuousClock.Instant?, ReadCompletion)
        case write(Data, deadline: ContinuousClock.Instant?, Completion)
        case closeWrite(Completion)
        case closeRead
        case startTLS(serverName: String, Completion)
        case stopTLS(Completion)
        /// Completes once every operation before it is done.
        case barrier(Completion)

        /// Waits for every operation before it.
        var isBarrier: Bool {
            switch self {
            case .startTLS, .stopTLS, .barrier: true
            default: false
            }
        }
        var isRead: Bool {
            switch self {
            case .read, .closeRead: true
            default: false
            }
        }
    }

    let channel: StreamChannel

    /// Resolves `endpoint` on a connecting thread (and opens a proxy's
    /// tunnel there), then connects and runs on a loop; `connected` is
    /// called once, on one of those threads, with nil or why it failed.
    package init(_ endpoint: Endpoint, connected: @escaping Completion) {
        let loop = StreamLoop.next()
        channel = StreamChannel(loop: loop)
        let worker = StreamWorker(channel: channel, endpoint: endpoint)
        guard let loop else {
            let reason = StreamError(.io, "no stream loop could start: \(String(cString: strerror(errno)))")
            worker.cancel(reason)
            StreamConnector.submit { worker.open(connected: connected, on: nil) }
            return
        }
        StreamConnector.submit { worker.open(connected: connected, on: loop) }
    }

    /// Nobody can ask anything of the connection any more: it closes.
    deinit {
        cancel(StreamError(.cancelled, "the stream task was released"))
    }

    /// Reads at least `minimum` bytes (fewer at the end of the stream) and
    /// at most `maximum`, within `timeout` (nil: none).
    package func read(minimum: Int, maximum: Int, timeout: Duration?, completion: @escaping ReadCompletion) {
        let maximum = max(1, maximum)
        channel.enqueue(.read(minimum: min(max(0, minimum), maximum), maximum: maximum, deadline: timeout.map { .now + $0 }, completion))
    }

    /// Writes all of `data` within `timeout` (nil: none).
    package func write(_ data: Data, timeout: Duration?, completion: @escaping Completion) {
        channel.enqueue(.write(data, deadline: timeout.map { .now + $0 }, completion))
    }

    /// Ends the write side once earlier writes are done (close_notify first
    /// under TLS); `completion` hears when it is closed.
    package func closeWrite(completion: @escaping Completion) { channel.enqueue(.closeWrite(completion)) }

    /// Ends the read side once earlier reads are done; later reads fail.
    package func closeRead() { channel.enqueue(.closeRead) }

    /// Begins TLS once every earlier operation is done, checking the
    /// server's certificate for `serverName`.
    package func startTLS(serverName: String, completion: @escaping Completion) {
        channel.enqueue(.startTLS(serverName: serverName, completion))
    }

    /// Ends TLS (close_notify) once every earlier operation is done; the
    /// connection goes on in the clear.
    package func stopTLS(completion: @escaping Completion) { channel.enqueue(.stopTLS(completion)) }

    /// Calls `completion` once every operation queued before it is done
    /// (with the reason when the connection ended first).
    package func afterEarlierOperations(completion: @escaping Completion) { channel.enqueue(.barrier(completion)) }

    /// Fails every queued operation with `reason` and closes the connection.
    package func cancel(_ reason: StreamError = StreamError(.cancelled, "cancelled")) {
        channel.shared.withLock { state in
            if state.cancelled == nil { state.cancelled = reason }
        }
        channel.signal()
    }
}

/// What the owner's threads and the connection's loop share: the queue
/// of operations (behind one lock), and the way to tell the loop.
final class StreamChannel: Sendable {
    struct Shared {
        var operations: [StreamConnection.Operation] = []
        var cancelled: StreamError?
        var ended = false
    }

    let shared = Lock(Shared())
    private let loop: StreamLoop?
    /// The connection's key on its loop.
    let identifier: UInt64

    init(loop: StreamLoop?) {
        self.loop = loop
        identifier = loop?.makeIdentifier() ?? 0
    }

    /// Queues an operation; after the end it fails at once.
    func enqueue(_ operation: StreamConnection.Operation) {
        let failure = shared.withLock { state -> StreamError? in
            if let reason = state.cancelled ?? (state.ended ? StreamError(.closed, "the connection is closed") : nil) { return reason }
            state.operations.append(operation)
            return nil
        }
        guard let failure else { return signal() }
        Self.fail(operation, failure)
    }

    /// The loop services the connection soon.
    func signal() {
        loop?.ready(identifier)
    }

    static func fail(_ operation: StreamConnection.Operation, _ error: StreamError) {
        switch operation {
        case .read(_, _, _, let completion): completion(.failure(error))
        case .write(_, _, let completion), .startTLS(_, let completion), .stopTLS(let completion), .closeWrite(let completion),
            .barrier(let completion):
            completion(error)
        case .closeRead: break
        }
    }
}
