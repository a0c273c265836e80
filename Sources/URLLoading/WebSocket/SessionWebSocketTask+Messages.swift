public import Foundation
import Streams

/// Messages, pings and the closing handshake.
extension SessionWebSocketTask {
    /// Sends a message; the handler hears nil once the system took it.
    public func send(_ message: Message, completionHandler: @escaping @Sendable ((any Error)?) -> Void) {
        switch message {
        case .string(let text): submit(Unsent(opcode: .text, payload: Data(text.utf8), done: completionHandler))
        case .data(let data): submit(Unsent(opcode: .binary, payload: data, done: completionHandler))
        }
    }

    /// Sends a message as `send(_:completionHandler:)` does.
    public func send(_ message: Message) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            send(message) { error in
                if let error { continuation.resume(throwing: error) } else { continuation.resume() }
            }
        }
    }

    /// The next message, in the order they came; fails once the connection closed.
    public func receive(completionHandler: @escaping @Sendable (Result<Message, any Error>) -> Void) {
        let now = inner.withLock { inner -> Result<Message, any Error>? in
            if !inner.received.isEmpty { return .success(inner.received.removeFirst()) }
            if inner.phase == .closed || inner.phase == .closing { return .failure(Self.notConnected(inner, url: originalRequest?.url)) }
            inner.receivers.append(completionHandler)
            return nil
        }
        if let now { events.enqueueSync { completionHandler(now) } }
    }

    /// The next message, as `receive(completionHandler:)` gives it.
    public func receive() async throws -> Message {
        try await withCheckedThrowingContinuation { continuation in
            receive { continuation.resume(with: $0) }
        }
    }

    /// Sends a ping; the handler hears nil when the pong came, or why not.
    public func sendPing(pongReceiveHandler: @escaping @Sendable ((any Error)?) -> Void) {
        let queued = inner.withLock { inner -> Bool in
            guard inner.phase == .open || inner.phase == .connecting else { return false }
            inner.pongs.append(pongReceiveHandler)
            return true
        }
        guard queued else {
            let error = inner.withLock { Self.notConnected($0, url: originalRequest?.url) }
            events.enqueueSync { pongReceiveHandler(error) }
            return
        }
        submit(Unsent(opcode: .ping, payload: Data(Digests.randomBytes(4))) { _ in })
    }

    /// Starts the closing handshake with `closeCode` and `reason` (at most
    /// 123 bytes are sent): the server's close frame is awaited for a few
    /// seconds, then the connection closes.
    public func cancel(with closeCode: CloseCode, reason: Data?) {
        let reasonText = reason.flatMap { String(data: $0, encoding: .utf8) } ?? ""
        let code = closeCode == .invalid ? nil : UInt16(clamping: closeCode.rawValue)
        let (connection, wasOpen) = inner.withLock { inner -> (StreamConnection?, Bool) in
            guard inner.phase == .open else { return (inner.connection, false) }
            inner.phase = .closing
            inner.closeCode = closeCode
            inner.closeCodeValue = code
            inner.closeReason = reason
            return (inner.connection, true)
        }
        guard wasOpen, let connection else {
            end(SessionError(.cancelled, failingURL: originalRequest?.url, message: "the WebSocket task was cancelled"))
            return
        }
        let payload = WebSocketFrame.closePayload(code: code, reason: reasonText)
        let frame = payload.withUnsafeBytes { WebSocketFrame.encode(.close, payload: $0, mask: WebSocketFrame.randomMask()) }
        write(frame, on: connection) { _ in }
        let owner = WeakWebSocketTask(task: self)
        DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(Int(Self.closeWait.components.seconds))) {
            owner.task?.finish(nil)
        }
    }

    /// Closes the connection at once: pending receives fail with `cancelled`.
    public func cancel() {
        end(SessionError(.cancelled, failingURL: originalRequest?.url, message: "the WebSocket task was cancelled"))
    }

    // MARK: Reading

    /// Bytes from the connection: what they complete is acted on, then the
    /// next read (unless the connection is closing).
    func took(_ bytes: Data, atEOF: Bool, connection: StreamConnection) {
        var replies: [[UInt8]] = []
        var deliveries: [@Sendable () -> Void] = []
        var closing: (reply: [UInt8]?, error: SessionError?)?
        let url = originalRequest?.url
        inner.withLock { inner in
            // Read in place: a copy of the reader would share its message's
            // buffer with `inner`, and every append would copy the whole
            // message (100 MiB took 49 s).
            guard inner.reader != nil else { return }
            let events = bytes.withUnsafeBytes { inner.reader?.read($0) ?? [] }
            for event in events {
                switch event {
                case .text(let text): deliver(.string(text), &inner, &deliveries)
                case .binary(let data): deliver(.data(data), &inner, &deliveries)
                case .ping(let payload):
                    replies.append(payload.withUnsafeBytes { WebSocketFrame.encode(.pong, payload: $0, mask: WebSocketFrame.randomMask()) })
                case .pong:
                    if !inner.pongs.isEmpty {
                        let handler = inner.pongs.removeFirst()
                        deliveries.append { handler(nil) }
                    }
                case .close(let code, let reason):
                    let initiatedByServer = inner.phase == .open
                    if initiatedByServer {
                        inner.closeCode = CloseCode(number: code)
                        inner.closeCodeValue = code
                        inner.closeReason = reason.isEmpty ? nil : Data(reason.utf8)
                    }
                    inner.phase = .closed
                    // The server's code goes back (§5.5.1), unless we closed first.
                    let reply = WebSocketFrame.closePayload(code: code, reason: "")
                    closing = (initiatedByServer ? reply.withUnsafeBytes { WebSocketFrame.encode(.close, payload: $0, mask: WebSocketFrame.randomMask()) } : nil, nil)
                case .failed(let code, let reason):
                    inner.closeCode = CloseCode(number: code)
                    inner.closeCodeValue = code
                    inner.phase = .closed
                    let payload = WebSocketFrame.closePayload(code: code, reason: "")
                    closing = (
                        payload.withUnsafeBytes { WebSocketFrame.encode(.close, payload: $0, mask: WebSocketFrame.randomMask()) },
                        SessionError(.badServerResponse, failingURL: url, message: "the server broke the WebSocket protocol: \(reason)")
                    )
                case .compressed(let payload, let isText):
                    switch Self.inflate(payload, isText: isText, &inner) {
                    case .success(let message): deliver(message, &inner, &deliveries)
                    case .failure(let failure):
                        inner.closeCode = CloseCode(number: failure.code)
                        inner.closeCodeValue = failure.code
                        inner.phase = .closed
                        let close = WebSocketFrame.closePayload(code: failure.code, reason: "")
                        closing = (
                            close.withUnsafeBytes { WebSocketFrame.encode(.close, payload: $0, mask: WebSocketFrame.randomMask()) },
                            SessionError(.badServerResponse, failingURL: url, message: "the server broke the WebSocket protocol: \(failure.reason)")
                        )
                    }
                }
            }
        }
        for reply in replies { write(reply, on: connection) { _ in } }
        for delivery in deliveries { events.enqueueSync(delivery) }
        if let closing {
            if let reply = closing.reply {
                let owner = WeakWebSocketTask(task: self)
                write(reply, on: connection) { _ in owner.task?.finish(closing.error) }
            } else {
                finish(closing.error)
            }
            return
        }
        if atEOF { return lost("the server closed the connection without a close frame") }
        readFrames(connection)
    }

    private struct InflateFailure: Error {
        let code: UInt16
        let reason: String
    }

    /// A compressed message inflated (within the maximum) and, for text, checked.
    private static func inflate(_ payload: Data, isText: Bool, _ inner: inout Inner) -> Result<Message, InflateFailure> {
        guard let deflate = inner.deflate else {
            return .failure(InflateFailure(code: WebSocketFrame.Code.protocolError, reason: "a compressed message without permessage-deflate"))
        }
        let inflated = deflate.decompressor.decompress(payload, limit: inner.maximumMessageSize)
        if deflate.parameters.serverNoContextTakeover { deflate.decompressor.reset() }
        switch inflated {
        case .failure(.tooBig): return .failure(InflateFailure(code: WebSocketFrame.Code.messageTooBig, reason: "a message over \(inner.maximumMessageSize) bytes inflated"))
        case .failure(.corrupt): return .failure(InflateFailure(code: WebSocketFrame.Code.invalidFramePayloadData, reason: "a compressed message zlib cannot inflate"))
        case .success(let data):
            guard isText else { return .success(.data(data)) }
            guard UTF8Validator.isValid(data) else {
                return .failure(InflateFailure(code: WebSocketFrame.Code.invalidFramePayloadData, reason: "a text message that is not UTF-8"))
            }
            return .success(.string(String(decoding: data, as: UTF8.self)))
        }
    }

    private func deliver(_ message: Message, _ inner: inout Inner, _ deliveries: inout [@Sendable () -> Void]) {
        guard !inner.receivers.isEmpty else { return inner.received.append(message) }
        let receiver = inner.receivers.removeFirst()
        deliveries.append { receiver(.success(message)) }
    }

    /// The connection ended without a closing handshake: 1006.
    func lost(_ reason: String) {
        inner.withLock { inner in
            if inner.closeCode == .invalid {
                inner.closeCode = .abnormalClosure
                inner.closeCodeValue = 1006
            }
        }
        end(SessionError(.networkConnectionLost, failingURL: originalRequest?.url, message: reason))
    }

    // MARK: The end

    /// The closing handshake is done (or given up on): the delegate hears
    /// the close, waiting receives fail, the connection goes.
    func finish(_ error: SessionError?) {
        // Once: the close wait's timer may come after the server's frame.
        guard inner.withLock({ $0.connection != nil }) else { return }
        let session = self.session
        let (code, reason) = inner.withLock { ($0.closeCode, $0.closeReason) }
        if let session, let delegate = session.delegate, error == nil, inner.withLock({ $0.error == nil }) {
            events.enqueueSync { [self] in delegate.urlSession(session, webSocketTask: self, didCloseWith: code, reason: reason) }
        }
        end(error ?? SessionError(.networkConnectionLost, failingURL: originalRequest?.url, message: "the WebSocket connection is closed"), recordsError: error != nil)
    }

    /// Ends the task: the connection closes, whatever waits fails.
    func end(_ error: SessionError, recordsError: Bool = true) {
        let (connection, receivers, pongs, unsent) = inner.withLock { inner in
            let taken = (inner.connection, inner.receivers, inner.pongs, inner.unsent)
            inner.phase = .closed
            if recordsError, inner.error == nil { inner.error = error }
            inner.connection = nil
            inner.receivers = []
            inner.pongs = []
            inner.unsent = []
            return taken
        }
        connection?.cancel(StreamError(.closed, error.message))
        let failure = error.urlError
        for receiver in receivers { events.enqueueSync { receiver(.failure(failure)) } }
        for pong in pongs { events.enqueueSync { pong(failure) } }
        for message in unsent { events.enqueueSync { message.done(failure) } }
        session?.webSocketTaskEnded(taskIdentifier)
    }

    /// Writes a frame now, or after the handshake; fails after the end.
    private func submit(_ message: Unsent) {
        let failure = inner.withLock { inner -> (any Error)? in
            switch inner.phase {
            case .suspended, .connecting:
                inner.unsent.append(message)
                return nil
            case .open:
                if let connection = inner.connection { writeFrame(message, &inner, on: connection) }
                return nil
            case .closing, .closed: return Self.notConnected(inner, url: originalRequest?.url)
            }
        }
        if let failure { events.enqueueSync { message.done(failure) } }
    }

    static func notConnected(_ inner: Inner, url: URL?) -> any Error {
        (inner.error ?? SessionError(.networkConnectionLost, failingURL: url, message: "the WebSocket connection is closed")).urlError
    }
}
