import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Transport

/// An `InputStream` handed from its owner to the one thread that reads it.
/// Foundation's streams are not `Sendable`; this box moves one across once
/// and nobody else touches it afterwards.
struct OwnedInputStream: @unchecked Sendable {
    let stream: InputStream
}

extension SessionTask {
    /// Where a task's streamed request body comes from: the request's `httpBodyStream` first, then the delegate's
    /// `needNewBodyStream` each time the body must be sent (again): after a
    /// challenge, or a redirect that keeps the method. A stream is read once.
    ///
    /// ```
    /// ready(stream) ─transfer starts→ used ─body needed again→ asking delegate ─stream→ ready
    ///                                                                          └─nil→ task fails (bodyStreamExhausted)
    /// ```
    ///
    /// A body made by its caller (`remake` set) is made again by it instead
    /// of asking the delegate; a body that can be sent only once fails the
    /// task when it is needed again.
    struct StreamedBody: Sendable {
        /// The body's length from the request's Content-Length, or -1.
        var length: Int64
        /// The source for the next transfer, when one is at hand.
        var next: BodySource?
        /// Makes the body anew; nil when it can be sent only once. Unused
        /// (`.delegate`) for bodies the delegate gives.
        var remake: Remake = .delegate
        /// Where the next transfer's body starts in the whole body (a
        /// resumable upload's append goes on from the server's offset).
        var from: Int64 = 0
        /// Bytes at the start of the next stream that are not sent: the
        /// delegate gave the whole body for an append from `from`.
        var skip: Int64 = 0

        enum Remake: Sendable {
            case delegate
            case once
            case by(@Sendable () -> BodySource)
        }
    }

    /// Where a streamed body's bytes come from.
    enum BodySource: Sendable {
        /// Foundation's stream, read on a thread of its own.
        case stream(OwnedInputStream)
        /// An async producer that sends into the pipe (and finishes it).
        case producer(@Sendable (BodyPipe) async -> Void)
    }

    /// Whether the transfer about to start needs a body stream that is not
    /// at hand yet: then the delegate is asked, and the transfer starts
    /// (again, through `startTransfer`) once it answered. Returns true when
    /// the caller must stop here.
    func awaitsBodyStream(_ hop: Hop, request: URLRequest, session: Session) -> Bool {
        guard sendsStreamedBody(hop, request: request) else { return false }
        let missing = locked.withLock { inner -> StreamedBody.Remake? in
            guard let streamed = inner.streamedBody, streamed.next == nil else { return nil }
            return streamed.remake
        }
        switch missing {
        case nil: return false
        case .by(let remake)?:
            let source = remake()
            locked.withLock { $0.streamedBody?.next = source }
            return false
        case .once?:
            perform(
                locked.withLock { inner in
                    guard inner.machine.isCurrent(hop) else { return [] }
                    return inner.machine.fail(
                        SessionError(
                            .requestBodyStreamExhausted, failingURL: request.url,
                            message: "the body must be sent again (a redirect or a challenge) and it can be sent only once"))
                })
            return true
        case .delegate?: break
        }
        guard let from = locked.withLock({ $0.machine.isCurrent(hop) && $0.machine.wait(.bodyStream) ? $0.streamedBody?.from ?? 0 : nil })
        else { return true }
        events.enqueue { [self] in
            var owned: OwnedInputStream?? = nil
            var skip: Int64 = 0
            if from > 0 {
                // An append: a stream from the server's offset, else the whole body with that much skipped.
                owned = await self.askFirstImplemented { delegate -> OwnedInputStream? in
                    await delegate.urlSession(session, needNewBodyStreamForTask: self, from: from).map(OwnedInputStream.init)
                }
                if owned == nil { skip = from }
            }
            if owned == nil {
                owned = await self.askDelegate { delegate -> OwnedInputStream? in
                    await delegate.urlSession(session, needNewBodyStreamForTask: self).map(OwnedInputStream.init)
                }
            }
            let stream = owned??.stream
            guard let stream else {
                self.perform(
                    self.locked.withLock { inner in
                        guard inner.machine.isCurrent(hop) else { return [] }
                        return inner.machine.fail(
                            SessionError(
                                .requestBodyStreamExhausted, failingURL: request.url,
                                message: "the body must be sent again and the delegate gave no new body stream"))
                    })
                return
            }
            self.waitEnded(for: hop) { inner in
                inner.streamedBody?.next = .stream(OwnedInputStream(stream: stream))
                inner.streamedBody?.skip = skip
            }
        }
        return true
    }

    /// Whether this hop sends the task's body: the first, and any that
    /// keeps a method with a body.
    func sendsBody(_ hop: Hop, request: URLRequest) -> Bool {
        hop.isFirst || request.httpMethod != "GET"
    }

    /// Whether this hop sends a streamed body: as `sendsBody`, never for a
    /// resumable upload's `HEAD` (whose other bodies are `.none` already).
    func sendsStreamedBody(_ hop: Hop, request: URLRequest) -> Bool {
        sendsBody(hop, request: request) && request.httpMethod != "HEAD"
    }

    /// Takes the stream at hand and starts reading it into a pipe the
    /// transfer sends from; nil when the task has no streamed body.
    func takeBodyStream() -> TransferRequest.Body? {
        guard
            let (source, length, skip) = locked.withLock({ inner -> (BodySource, Int64, Int64)? in
                guard let streamed = inner.streamedBody, let source = streamed.next else { return nil }
                inner.streamedBody?.next = nil
                inner.streamedBody?.skip = 0
                return (source, streamed.length >= 0 ? max(0, streamed.length - streamed.from) : -1, streamed.skip)
            })
        else { return nil }
        let pipe = BodyPipe()
        switch source {
        case .stream(let stream): BodyStreamReader.start(stream, into: pipe, skipping: skip)
        case .producer(let produce): Task.detached { await produce(pipe) }
        }
        return .stream(pipe, length: length)
    }
}

/// Reads an `InputStream` on a thread of its own into a `BodyPipe`: a
/// stream's `read` may block (a pipe, a socket), and it must block neither
/// the transport's thread nor Swift's cooperative pool. The pipe's capacity
/// bounds the memory; the thread ends with the stream, or when the
/// transfer closes the pipe.
enum BodyStreamReader {
    static let chunkSize = 64 * 1024

    /// - Parameter skipping: Bytes at the stream's start that are read and
    ///   not sent (an append from an offset, from a whole-body stream).
    static func start(_ owned: OwnedInputStream, into pipe: BodyPipe, skipping: Int64 = 0) {
        let thread = Thread {
            // Named from the thread itself (see `CurlLoop.start`).
            Thread.current.name = "urlloading.body-stream"
            let stream = owned.stream
            if stream.streamStatus == .notOpen { stream.open() }
            defer { stream.close() }
            var buffer = [UInt8](repeating: 0, count: chunkSize)
            var left = max(0, skipping)
            while true {
                let count = buffer.withUnsafeMutableBufferPointer { bytes in
                    stream.read(bytes.baseAddress!, maxLength: bytes.count)
                }
                if count < 0 {
                    pipe.finish(error: stream.streamError.map { "\($0.localizedDescription)" } ?? "the stream reported an error")
                    return
                }
                if count == 0 {
                    if left > 0 {
                        pipe.finish(error: "the body stream ended before the offset the upload goes on from")
                    } else {
                        pipe.finish()
                    }
                    return
                }
                let skipped = Int(min(left, Int64(count)))
                left -= Int64(skipped)
                guard skipped < count else { continue }
                guard pipe.write(Data(buffer[skipped..<count])) else { return }
            }
        }
        thread.start()
    }
}

extension SessionTask {
    /// Hands a multipart/x-mixed-replace body's parts to the delegate: a
    /// `didReceiveResponse` when each part begins (its response carries the
    /// part's header fields over the whole response's), then the part's
    /// bytes. A `.cancel` answer ends the task; the bytes after it are dropped.
    func deliverParts(_ parts: [MixedReplaceParser.Event], session: Session) {
        for event in parts {
            switch event {
            case .part(let fields):
                // The transfer may end before the delegate answers (its queue
                // runs behind the transport): the task waits for the answer.
                locked.withLock { $0.machine.partDecisionOpened() }
                events.enqueue { [self] in
                    guard !self.locked.withLock({ $0.machine.isFinished }), let response = self.partResponse(fields) else {
                        self.perform(self.locked.withLock { $0.machine.partDecisionClosed() })
                        return
                    }
                    let disposition = await self.askDelegate { await $0.urlSession(session, dataTask: self, didReceive: response) } ?? .allow
                    self.perform(
                        self.locked.withLock { inner in
                            disposition == .cancel
                                ? inner.machine.fail(SessionError(.cancelled, failingURL: response.url, message: "the delegate cancelled the task"))
                                : inner.machine.partDecisionClosed()
                        })
                }
            case .data(let data):
                events.enqueueSync { [self] in
                    defer { self.delegateTook(data.count) }
                    guard !self.locked.withLock({ $0.machine.error != nil }) else { return }
                    self.callDelegate { $0.urlSession(session, dataTask: self, didReceive: data) }
                }
            }
        }
    }

    /// The response of one part: the whole response's status and fields,
    /// with the part's fields (Content-Type, ...) in place of the whole's.
    private func partResponse(_ fields: [HeaderFields.Field]) -> HTTPURLResponse? {
        guard let (url, head) = locked.withLock({ $0.head }) else { return nil }
        var merged = head
        merged.headers.removeAll { field in
            HeaderFields.namesEqual(field.name, "Content-Length") || fields.contains { HeaderFields.namesEqual($0.name, field.name) }
        }
        merged.headers += fields.map { (name: $0.name, value: $0.value) }
        return Self.makeResponse(url: url, head: merged)
    }
}
