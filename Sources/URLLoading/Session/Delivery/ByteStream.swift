public import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif
import HTTPTypes
import Locking
import Transport

/// A streamed response as its reader gets it: Foundation's, or the head as
/// the transport read it (for swift-http-types' calls).
enum StreamResponse: Sendable {
    case built(HTTPURLResponse)
    case head(ResponseHead)

    /// swift-http-types' response.
    var fields: HTTPResponse? {
        switch self {
        case .built(let response): HTTPResponse(bridging: response)
        case .head(let head): HTTPResponse(head)
        }
    }

    /// Foundation's response (a head is published only to readers of the other form).
    var built: HTTPURLResponse? {
        if case .built(let response) = self { return response }
        return nil
    }
}

/// Between a task's transfer and a `ByteStream` reader: a bounded queue of
/// chunks. When it holds `limit` bytes the transfer pauses (back-pressure);
/// the reader's progress resumes it.
final class ByteStreamBuffer: Sendable {
    /// Bytes held before the transfer pauses: enough to keep a fast network
    /// busy, little enough that a slow reader costs a bounded amount.
    static let limit = 1 << 20

    private struct State {
        var chunks: [Data] = []
        var held = 0
        /// An offer was refused (the transfer paused) since the reader last took a chunk.
        var refused = false
        var finished = false
        var error: URLError?
        var waiter: CheckedContinuation<Void, Never>?
        var response: StreamResponse?
        var responseWaiter: CheckedContinuation<StreamResponse?, Never>?
    }

    private let state = Lock(State())
    /// Set once the task exists.
    private let task = Lock<SessionTask?>(nil)

    func attach(_ task: SessionTask) { self.task.withLock { $0 = task } }

    /// Takes a chunk unless the buffer is full (then the transfer pauses).
    func offer(_ chunk: Data) -> Bool {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>?? in
            guard state.held < Self.limit else {
                state.refused = true
                return .none
            }
            state.chunks.append(chunk)
            state.held += chunk.count
            defer { state.waiter = nil }
            return .some(state.waiter)
        }
        guard case .some(let continuation) = waiter else { return false }
        if let continuation { TurnWakeups.run { continuation.resume() } }
        return true
    }

    func publish(_ response: StreamResponse) {
        let waiter = state.withLock { state -> CheckedContinuation<StreamResponse?, Never>? in
            state.response = response
            defer { state.responseWaiter = nil }
            return state.responseWaiter
        }
        if let waiter { TurnWakeups.run { waiter.resume(returning: response) } }
    }

    func finish(_ error: URLError?) {
        // The task holds this buffer (its sink does): it lets go of the task
        // here, or neither would ever be freed.
        task.withLock { $0 = nil }
        let (waiter, responseWaiter) = state.withLock { state in
            state.finished = true
            state.error = error
            defer { state.waiter = nil; state.responseWaiter = nil }
            return (state.waiter, state.responseWaiter)
        }
        if waiter != nil || responseWaiter != nil {
            TurnWakeups.run {
                waiter?.resume()
                responseWaiter?.resume(returning: nil)
            }
        }
    }

    /// The response, or nil when the task failed before one arrived.
    func response() async -> StreamResponse? {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> StreamResponse?? in
                if let response = state.response { return .some(response) }
                if state.finished { return .some(nil) }
                state.responseWaiter = continuation
                return .none
            }
            if case .some(let response) = ready { continuation.resume(returning: response) }
        }
    }

    var error: URLError? { state.withLock { $0.error } }

    /// The next chunk; nil at the end.
    func next() async throws -> Data? {
        while true {
            let (chunk, done, error, paused) = state.withLock { state -> (Data?, Bool, URLError?, Bool) in
                if !state.chunks.isEmpty {
                    let chunk = state.chunks.removeFirst()
                    state.held -= chunk.count
                    defer { state.refused = false }
                    return (chunk, false, nil, state.refused)
                }
                return (nil, state.finished, state.error, false)
            }
            if let chunk {
                // Only a transfer this buffer paused needs resuming.
                if paused { task.withLock { $0 }?.continueDelivery() }
                return chunk
            }
            if done {
                if let error { throw error }
                return nil
            }
            // A reader's Swift task cancelled while it waits cancels the
            // transfer, whose end wakes it (as Apple's AsyncBytes).
            await withTaskCancellationHandler {
                await withCheckedContinuation { continuation in
                    let ready = state.withLock { state -> Bool in
                        if !state.chunks.isEmpty || state.finished { return true }
                        state.waiter = continuation
                        return false
                    }
                    if ready { continuation.resume() }
                }
            } onCancel: {
                cancel()
            }
        }
    }

    func cancel() {
        task.withLock { $0 }?.cancel()
    }
}

/// The body of a response as it arrives (Apple's `URLSession.AsyncBytes`),
/// byte by byte or chunk by chunk, with back-pressure: the transfer pauses
/// while the reader is more than a mebibyte behind.
public struct ByteStream: AsyncSequence, Sendable {
    /// The body, byte by byte.
    public typealias Element = UInt8

    /// Cancels the task when the last stream or iterator is gone, so a reader
    /// that stops early does not leave a paused transfer behind.
    final class Reader: Sendable {
        let buffer: ByteStreamBuffer
        init(_ buffer: ByteStreamBuffer) { self.buffer = buffer }
        deinit { buffer.cancel() }
    }

    let reader: Reader
    var buffer: ByteStreamBuffer { reader.buffer }

    init(buffer: ByteStreamBuffer) {
        reader = Reader(buffer)
    }

    /// The body in chunks as they arrived.
    public var chunks: Chunks { Chunks(reader: reader) }

    public func makeAsyncIterator() -> Iterator { Iterator(reader: reader) }

    /// Reads byte by byte from the current chunk.
    public struct Iterator: AsyncIteratorProtocol {
        let reader: Reader
        var buffer: ByteStreamBuffer { reader.buffer }
        var chunk = Data()
        var index = 0

        public mutating func next() async throws -> UInt8? {
            while index >= chunk.count {
                guard let next = try await buffer.next() else { return nil }
                chunk = next
                index = chunk.startIndex
            }
            defer { index += 1 }
            return chunk[index]
        }
    }

    /// The body as chunks.
    public struct Chunks: AsyncSequence, Sendable {
        public typealias Element = Data
        let reader: Reader

        public func makeAsyncIterator() -> Iterator { Iterator(reader: reader) }

        public struct Iterator: AsyncIteratorProtocol {
            let reader: Reader
            public mutating func next() async throws -> Data? { try await reader.buffer.next() }
        }
    }
}

extension Session {
    /// Starts loading `request` and returns as soon as the response head
    /// arrives, with the body as a stream. Cancelling the calling Swift task
    /// cancels the transfer.
    ///
    /// - Throws: `URLError` when no response arrives.
    public func bytes(for request: URLRequest, delegate: (any SessionDelegate)? = nil) async throws -> (ByteStream, URLResponse) {
        try await stream(request, delegate: delegate, publishesHead: false) { $0.built }
    }

    /// Streams `request`'s body; `read` takes what the sink published.
    func stream<Response: Sendable>(
        _ request: URLRequest, streamedBody: SessionTask.StreamedBody? = nil, delegate: (any SessionDelegate)?, publishesHead: Bool,
        _ read: @escaping @Sendable (StreamResponse) -> Response?
    ) async throws -> (ByteStream, Response) {
        let buffer = ByteStreamBuffer()
        let task = streamTask(with: request, buffer: buffer, publishesHead: publishesHead, streamedBody: streamedBody)
        task.delegate = delegate
        buffer.attach(task)
        return try await withTaskCancellationHandler {
            task.resume()
            guard let response = await buffer.response().flatMap(read) else {
                throw buffer.error ?? SessionError(.badServerResponse, failingURL: request.url, message: "no response").urlError
            }
            return (ByteStream(buffer: buffer), response)
        } onCancel: {
            buffer.cancel()
        }
    }

    /// Loads `url` as a byte stream.
    public func bytes(from url: URL, delegate: (any SessionDelegate)? = nil) async throws -> (ByteStream, URLResponse) {
        try await bytes(for: URLRequest(url: url), delegate: delegate)
    }
}
