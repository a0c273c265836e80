public import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif
import Locking
import Streams

/// A WebSocket connection made through a session (Apple's
/// `URLSessionWebSocketTask`): the RFC 6455 opening handshake over a
/// connection of our own (TLS for `wss:`, the session's proxy tunnels it),
/// then text and binary messages, pings, and the closing handshake. Frames
/// are read by `WebSocketReader` (a pure state machine) and written masked
/// with a fresh key from the system's strong random source.
///
/// Messages sent before the server accepted wait for it; handlers run on
/// the task's own context, in order.
public final class SessionWebSocketTask: Sendable, Hashable, CustomStringConvertible {
    /// Unique within its session.
    public let taskIdentifier: Int
    /// The request the task was made with.
    public let originalRequest: URLRequest?
    private let protocols: [String]
    weak let session: Session?
    private let endpoint: StreamConnection.Endpoint
    let events = DelegateQueue()
    /// How long `cancel(with:reason:)` waits for the server's close frame.
    static let closeWait: Duration = .seconds(5)

    enum Phase: Equatable {
        case suspended, connecting, open
        /// Our close frame is sent; the server's is awaited.
        case closing
        case closed
    }

    struct Inner {
        var phase = Phase.suspended
        var connection: StreamConnection?
        /// A 401 to the handshake was answered once already.
        var answeredChallenge = false
        var reader: WebSocketReader?
        var maximumMessageSize = 1 << 20
        var received: [Message] = []
        var receivers: [@Sendable (Result<Message, any Error>) -> Void] = []
        var pongs: [@Sendable ((any Error)?) -> Void] = []
        /// Messages and pings (and their handlers) waiting for the handshake.
        var unsent: [Unsent] = []
        /// permessage-deflate, when the server accepted it.
        var deflate: Deflate?
        var closeCode = CloseCode.invalid
        var closeCodeValue: UInt16?
        var closeReason: Data?
        var error: SessionError?
        var selectedProtocol: String?
        var taskDescription: String?
    }

    let inner = Lock(Inner())

    /// A frame to write once the connection is open.
    struct Unsent: Sendable {
        var opcode: WebSocketFrame.Opcode
        var payload: Data
        var done: @Sendable ((any Error)?) -> Void
    }

    /// Both directions of permessage-deflate (RFC 7692), used under `inner`'s lock.
    struct Deflate: Sendable {
        let compressor: MessageDeflate
        let decompressor: MessageDeflate
        let parameters: DeflateParameters
    }

    init(session: Session, identifier: Int, request: URLRequest, protocols: [String], endpoint: StreamConnection.Endpoint) {
        self.session = session
        self.taskIdentifier = identifier
        self.originalRequest = request
        self.protocols = protocols
        self.endpoint = endpoint
    }

    /// Whether both are the same task.
    public static func == (lhs: SessionWebSocketTask, rhs: SessionWebSocketTask) -> Bool { lhs === rhs }
    /// Hashes the task's identity.
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
    /// The task's identifier and state (never its URL, which may hold a secret).
    public var description: String { "SessionWebSocketTask \(taskIdentifier) (\(state))" }

    /// `running` from `resume()` until the connection closes.
    public var state: SessionTask.State {
        inner.withLock { inner in
            switch inner.phase {
            case .suspended: .suspended
            case .connecting, .open: .running
            case .closing: .canceling
            case .closed: .completed
            }
        }
    }

    /// Why the task failed, if it did.
    public var error: (any Error)? { inner.withLock { $0.error?.urlError } }
    /// The close code: the server's, or the one given to `cancel(with:reason:)`.
    public var closeCode: CloseCode { inner.withLock { $0.closeCode } }
    /// The close code as a number, also for codes `CloseCode` does not name.
    public var closeCodeValue: Int? { inner.withLock { $0.closeCodeValue.map(Int.init) } }
    /// The close frame's reason, if it had one.
    public var closeReason: Data? { inner.withLock { $0.closeReason } }
    /// The largest message `receive` accepts (default 1 MiB, Apple's); a
    /// bigger one closes the connection with 1009. Set it before `resume()`.
    public var maximumMessageSize: Int {
        get { inner.withLock { $0.maximumMessageSize } }
        set { inner.withLock { $0.maximumMessageSize = max(0, newValue) } }
    }
    /// A description of the app's choosing.
    public var taskDescription: String? {
        get { inner.withLock { $0.taskDescription } }
        set { inner.withLock { $0.taskDescription = newValue } }
    }

    /// Connects and sends the opening handshake.
    public func resume() {
        let started = inner.withLock { inner -> Bool in
            guard inner.phase == .suspended else { return false }
            inner.phase = .connecting
            inner.reader = WebSocketReader(role: .client, maximumMessageSize: inner.maximumMessageSize)
            return true
        }
        if started { handshake(authorization: nil) }
    }

    /// Opens a connection and sends the handshake, with `authorization`
    /// after a 401 (else the session's remembered one, if any).
    func handshake(authorization: (name: String, value: String)?) {
        let connection = inner.withLock { inner -> StreamConnection? in
            guard inner.phase == .connecting else { return nil }
            let owner = WeakWebSocketTask(task: self)
            let connection = StreamConnection(endpoint) { failure in
                if let failure { owner.task?.end(SessionError(SessionStreamTask.code(failure), failingURL: owner.task?.originalRequest?.url, message: failure.message)) }
            }
            inner.connection?.cancel(StreamError(.closed, "the handshake goes on with credentials on a new connection"))
            inner.connection = connection
            return connection
        }
        guard let connection, let url = originalRequest?.url else { return }
        if url.scheme?.lowercased() == "wss" || url.scheme?.lowercased() == "https" {
            let owner = WeakWebSocketTask(task: self)
            connection.startTLS(serverName: endpoint.host) { failure in
                if let failure { owner.task?.end(SessionError(SessionStreamTask.code(failure), failingURL: url, message: failure.message)) }
            }
        }
        let key = WebSocketHandshake.makeKey()
        let given = additionalFields + (originalRequest?.allHTTPHeaderFields ?? [:]).sorted { $0.key < $1.key }.map { (name: $0.key, value: $0.value) }
        readHead(connection, key: key, gathered: [])
        // The cookie and credential stores are read on the task's context, never in resume().
        events.enqueueSync { [self] in
            var fields = given + (cookieHeader(existing: given).map { [(name: "Cookie", value: $0)] } ?? [])
            if let authorization = authorization ?? rememberedAuthorization(existing: fields) { fields.append(authorization) }
            let request = WebSocketHandshake.request(url: url, key: key, protocols: protocols, fields: fields, offersDeflate: true)
            connection.write(Data(request), timeout: nil) { _ in }
        }
    }

    /// The URL cookies are kept under: `ws` is `http`, `wss` is `https` (RFC 6455 §4.1).
    var cookieURL: URL? {
        guard let url = originalRequest?.url, var parts = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return nil }
        switch parts.scheme?.lowercased() {
        case "ws": parts.scheme = "http"
        case "wss": parts.scheme = "https"
        default: break
        }
        return parts.url
    }

    /// The session's cookies for the handshake, unless cookies are off or
    /// the request sets its own Cookie field.
    private func cookieHeader(existing fields: [(name: String, value: String)]) -> String? {
        guard let session, let request = originalRequest, let url = cookieURL else { return nil }
        return RequestCookies.header(for: request, url: url, headers: fields, session: session)
    }

    /// Keeps the `Set-Cookie` fields of the server's answer (on the task's context).
    func storeCookies(_ answer: WebSocketHandshake.Answer) {
        guard let session, let request = originalRequest, let url = cookieURL else { return }
        RequestCookies.store(answer.fields, url: url, request: request, session: session)
    }

    /// The session's additional header fields the request does not set itself.
    private var additionalFields: [(name: String, value: String)] {
        guard let session else { return [] }
        let own = Set((originalRequest?.allHTTPHeaderFields ?? [:]).keys.map { $0.lowercased() })
        return session.settings.httpAdditionalHeaders.sorted { $0.key < $1.key }.filter { !own.contains($0.key.lowercased()) }.map { (name: $0.key, value: $0.value) }
    }

    /// Reads until the answer's head is whole, then checks it.
    private func readHead(_ connection: StreamConnection, key: String, gathered: [UInt8]) {
        let owner = WeakWebSocketTask(task: self)
        // The session's request timeout, as the connect already uses it.
        let timeout = endpoint.connectTimeout
        connection.read(minimum: 1, maximum: 16 << 10, timeout: timeout) { result in
            guard let task = owner.task else { return }
            switch result {
            case .failure(let failure):
                task.end(SessionError(SessionStreamTask.code(failure), failingURL: task.originalRequest?.url, message: "the handshake failed: \(failure.message)"))
            case .success(let read):
                let bytes = gathered + read.data
                guard let end = WebSocketHandshake.headEnd(bytes) else {
                    if read.atEOF || bytes.count > WebSocketHandshake.maximumHead {
                        return task.end(SessionError(.badServerResponse, failingURL: task.originalRequest?.url, message: "the server's answer to the handshake has no end of head"))
                    }
                    return task.readHead(connection, key: key, gathered: bytes)
                }
                switch WebSocketHandshake.check(head: Array(bytes[..<end]), key: key, protocols: task.protocols, offeredDeflate: true) {
                case .failure(let failure) where failure.status == 401:
                    task.events.enqueueSync { task.challenged(failure.challenges) }
                case .failure(let failure):
                    task.end(SessionError(.badServerResponse, failingURL: task.originalRequest?.url, message: "the WebSocket handshake failed: \(failure.reason)"))
                case .success(let answer):
                    task.opened(answer, connection: connection, leftover: Data(bytes[end...]))
                }
            }
        }
    }

    private func opened(_ answer: WebSocketHandshake.Answer, connection: StreamConnection, leftover: Data) {
        let deflate = answer.deflate.flatMap { parameters -> Deflate? in
            guard let compressor = MessageDeflate(inflating: false, windowBits: parameters.clientMaxWindowBits),
                let decompressor = MessageDeflate(inflating: true, windowBits: 15)
            else { return nil }
            return Deflate(compressor: compressor, decompressor: decompressor, parameters: parameters)
        }
        let opened = inner.withLock { inner -> Bool in
            guard inner.phase == .connecting else { return false }
            inner.phase = .open
            inner.selectedProtocol = answer.selectedProtocol
            inner.deflate = deflate
            inner.reader = WebSocketReader(role: .client, maximumMessageSize: inner.maximumMessageSize, allowsCompression: deflate != nil)
            // In order, under the lock: a compressed message's window follows the one before.
            for message in inner.unsent { writeFrame(message, &inner, on: connection) }
            inner.unsent = []
            return true
        }
        guard opened else { return }
        if answer.deflate != nil, deflate == nil {
            return end(SessionError(.unknown, failingURL: originalRequest?.url, message: "zlib could not start permessage-deflate"))
        }
        // Cookies first: a message handler may read them.
        events.enqueueSync { [self] in storeCookies(answer) }
        if let session, let delegate = session.delegate {
            let chosen = answer.selectedProtocol
            events.enqueueSync { [self] in delegate.urlSession(session, webSocketTask: self, didOpenWithProtocol: chosen) }
        }
        if !leftover.isEmpty { took(leftover, atEOF: false, connection: connection) } else { readFrames(connection) }
    }

    /// Encodes (compressing a message when permessage-deflate is on) and
    /// writes one frame; called under `inner`'s lock so that frames keep
    /// the order their compression window assumed.
    func writeFrame(_ message: Unsent, _ inner: inout Inner, on connection: StreamConnection) {
        var payload = message.payload
        var compressed = false
        if !message.opcode.isControl, let deflate = inner.deflate {
            payload = deflate.compressor.compress(payload)
            if deflate.parameters.clientNoContextTakeover { deflate.compressor.reset() }
            compressed = true
        }
        let frame = payload.withUnsafeBytes {
            WebSocketFrame.encode(message.opcode, payload: $0, compressed: compressed, mask: WebSocketFrame.randomMask())
        }
        write(frame, on: connection, done: message.done)
    }

    /// Writes a frame; `done` hears the result on the task's context.
    func write(_ frame: [UInt8], on connection: StreamConnection, done: @escaping @Sendable ((any Error)?) -> Void) {
        let url = originalRequest?.url
        connection.write(Data(frame), timeout: nil) { [events] failure in
            events.enqueueSync { done(failure.map { SessionError(SessionStreamTask.code($0), failingURL: url, message: $0.message).urlError }) }
        }
    }

    func readFrames(_ connection: StreamConnection) {
        let owner = WeakWebSocketTask(task: self)
        connection.read(minimum: 1, maximum: 256 << 10, timeout: nil) { result in
            guard let task = owner.task else { return }
            switch result {
            case .success(let read): task.took(read.data, atEOF: read.atEOF, connection: connection)
            case .failure(let failure): task.lost(failure.message)
            }
        }
    }
}

/// A WebSocket task as its own closures hold it: weakly.
struct WeakWebSocketTask: Sendable {
    weak var task: SessionWebSocketTask?
}
