package import Foundation

/// A request body produced while it is being sent (an upload from a
/// stream): a producer on a thread of its own writes chunks (or an async
/// producer sends them, suspending while the pipe is full), the transport
/// reads them from libcurl's read callback. The pipe holds at most
/// `capacity` bytes, so a body of any length passes in constant memory: a
/// producer ahead of the network waits, and a reader ahead of the producer
/// pauses the transfer (`CURL_READFUNC_PAUSE`) until `write` wakes it.
///
/// States: open → ended (the producer's last byte) or failed (the producer
/// could not read) → closed (the transfer is over; a waiting producer is
/// released and later writes are refused). `NSCondition` is the one lock
/// over all of them.
package final class BodyPipe: @unchecked Sendable {
    /// Bytes buffered before the producer waits.
    package static let capacity = 256 * 1024

    /// What a read found.
    package enum ReadResult: Equatable {
        /// This many bytes were copied.
        case bytes(Int)
        /// Nothing yet: the reader is woken through its handler when bytes come.
        case wouldBlock
        /// The body is complete.
        case end
        /// The producer failed; the transfer must stop.
        case failed(String)
    }

    private let condition = NSCondition()
    private var chunks: [Data] = []
    /// Bytes of `chunks[0]` already read.
    private var consumed = 0
    private var buffered = 0
    private var ended = false
    private var failure: String?
    private var closed = false
    private var readerWaiting = false
    private var onReadable: (@Sendable () -> Void)?
    /// An async producer waiting for room (`send`).
    private var roomWaiter: CheckedContinuation<Void, Never>?

    package init() {}

    /// Adds bytes, waiting while the pipe is full. Returns false when the
    /// transfer is over and the producer should stop.
    @discardableResult
    package func write(_ data: Data) -> Bool {
        guard !data.isEmpty else { return true }
        condition.lock()
        while buffered >= Self.capacity && !closed { condition.wait() }
        guard !closed else {
            condition.unlock()
            return false
        }
        chunks.append(data)
        buffered += data.count
        let wake = takeWaitingReader()
        condition.unlock()
        wake?()
        return true
    }

    /// Adds bytes from an async producer, suspending (not blocking a
    /// thread) while the pipe is full. Returns false when the transfer is
    /// over and the producer should stop.
    package func send(_ data: Data) async -> Bool {
        guard !data.isEmpty else { return true }
        while true {
            switch offer(data) {
            case .taken: return true
            case .closed: return false
            case .full:
                await withCheckedContinuation { continuation in
                    if !waitForRoom(continuation) { continuation.resume() }
                }
            }
        }
    }

    private enum Offer { case taken, full, closed }

    /// Appends `data` when there is room; never waits.
    private func offer(_ data: Data) -> Offer {
        condition.lock()
        guard !closed else {
            condition.unlock()
            return .closed
        }
        guard buffered < Self.capacity else {
            condition.unlock()
            return .full
        }
        chunks.append(data)
        buffered += data.count
        let wake = takeWaitingReader()
        condition.unlock()
        wake?()
        return .taken
    }

    /// Parks `continuation` until the reader makes room or the pipe
    /// closes; false when there is room (or the pipe closed) already.
    private func waitForRoom(_ continuation: CheckedContinuation<Void, Never>) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        guard buffered >= Self.capacity, !closed else { return false }
        roomWaiter = continuation
        return true
    }

    /// The producer is done: with the body complete, or with `error`.
    package func finish(error: String? = nil) {
        condition.lock()
        if !ended && failure == nil {
            if let error { failure = error } else { ended = true }
        }
        let wake = takeWaitingReader()
        condition.unlock()
        wake?()
    }

    /// Copies buffered bytes into `buffer` (the transport's read callback).
    package func read(into buffer: UnsafeMutableRawBufferPointer) -> ReadResult {
        condition.lock()
        let (result, producer) = copy(into: buffer)
        condition.unlock()
        producer?.resume()
        return result
    }

    /// `read`'s work, under the lock: the result, and an async producer to
    /// wake when bytes left the pipe.
    private func copy(into buffer: UnsafeMutableRawBufferPointer) -> (ReadResult, CheckedContinuation<Void, Never>?) {
        if let failure { return (.failed(failure), nil) }
        var copied = 0
        while copied < buffer.count, let first = chunks.first {
            let count = min(buffer.count - copied, first.count - consumed)
            first.withUnsafeBytes { source in
                let start = source.baseAddress! + consumed
                (buffer.baseAddress! + copied).copyMemory(from: start, byteCount: count)
            }
            copied += count
            consumed += count
            if consumed == first.count {
                chunks.removeFirst()
                consumed = 0
            }
        }
        buffered -= copied
        if copied > 0 {
            condition.broadcast()
            defer { roomWaiter = nil }
            return (.bytes(copied), roomWaiter)
        }
        if ended { return (.end, nil) }
        readerWaiting = true
        return (.wouldBlock, nil)
    }

    /// Sets what wakes the reader after a `wouldBlock` (the transport
    /// unpauses the transfer).
    package func setReadableHandler(_ handler: @escaping @Sendable () -> Void) {
        condition.lock()
        onReadable = handler
        condition.unlock()
    }

    /// The transfer is over: a waiting producer returns, later writes are
    /// refused, the reader's handler is dropped.
    package func close() {
        condition.lock()
        closed = true
        chunks.removeAll()
        buffered = 0
        onReadable = nil
        condition.broadcast()
        let producer = roomWaiter
        roomWaiter = nil
        condition.unlock()
        producer?.resume()
    }

    /// Whether the transfer closed the pipe.
    package var isClosed: Bool {
        condition.lock()
        defer { condition.unlock() }
        return closed
    }

    private func takeWaitingReader() -> (@Sendable () -> Void)? {
        guard readerWaiting else { return nil }
        readerWaiting = false
        return onReadable
    }
}
