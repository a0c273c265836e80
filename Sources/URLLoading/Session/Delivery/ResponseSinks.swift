import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Transport

/// The whole body, kept for a completion handler or an async call (no
/// response or data delegate calls).
struct CollectingSink: ResponseSink {
    var deliversToHandler: Bool { true }
    /// Hands the body (nil on failure) and the task's end to the caller.
    let deliver: @Sendable (Data?, SinkEnding) -> Void
    private(set) var body = Data()

    init(deliver: @escaping @Sendable (Data?, SinkEnding) -> Void) {
        self.deliver = deliver
    }

    /// A completion handler with the body and the response (the task's
    /// own: the caller holds the task).
    static func completionHandler(_ handler: @escaping @Sendable (Data?, URLResponse?, (any Error)?) -> Void) -> CollectingSink {
        CollectingSink { data, ending in handler(data, ending.task.response, ending.error) }
    }

    /// The async APIs: the response is built from the end's values on the
    /// awaiting Swift task, without the task's lock; the task's own when a
    /// task delegate may have seen (and may compare) it.
    static func asyncCall(_ handler: @escaping @Sendable (Data?, URLError?, HTTPURLResponse?) -> Void) -> CollectingSink {
        CollectingSink { data, ending in handler(data, ending.error as? URLError, asyncResponse(ending)) }
    }

    /// The response an async call returns: built from the end's values,
    /// or the task's own when a task delegate may have seen it.
    static func asyncResponse(_ ending: SinkEnding) -> HTTPURLResponse? {
        ending.taskDelegate == nil ? ending.response() : ending.task.httpURLResponse
    }

    var usesCache: Bool { true }

    mutating func accept(length: Int64, cacheCopyLimit: Int) {
        // One allocation for a body of known length, instead of doubling.
        if length > 0, length < 1 << 30 { body.reserveCapacity(Int(length)) }
    }

    mutating func take(_ chunk: UnsafeRawBufferPointer, delegateListens: Bool) -> SinkStep {
        appendChunk(chunk, to: &body)
        return .taken
    }

    mutating func serve(_ response: HTTPURLResponse, _ data: Data) -> ServeStep {
        body = data
        return .finish
    }

    mutating func close() -> SinkContents {
        defer { body = Data() }
        return SinkContents(body: body)
    }

    func end(_ contents: SinkContents, _ ending: SinkEnding) {
        ending.reportMetrics()
        deliver(ending.error == nil ? contents.body ?? Data() : nil, ending)
    }
}

/// The delegate's data task: it decides on the response and hears the body
/// chunk by chunk, with back-pressure; a copy of a storable body is kept
/// for the cache up to a limit; a multipart/x-mixed-replace body is split
/// into parts.
struct DelegateDataSink: ResponseSink {
    /// Body bytes the delegate may have waiting before the transfer pauses:
    /// enough to keep a fast delegate busy, bounded whatever the body's
    /// length and the delegate's speed.
    static let backlog = 2 << 20

    /// Body bytes handed to the delegate's context and not yet delivered.
    private(set) var queued = 0
    var streamsServedBody: Bool { true }
    private var cacheCopy: Data?
    private var cacheCopyLimit = 0
    private var parts: MixedReplaceParser?

    var asksDelegate: Bool { true }
    var usesCache: Bool { true }

    mutating func accept(length: Int64, cacheCopyLimit: Int) {
        // Keep a copy only of what the cache could store.
        self.cacheCopyLimit = cacheCopyLimit
        cacheCopy = cacheCopyLimit > 0 && length <= Int64(cacheCopyLimit) ? Data() : nil
    }

    mutating func splitParts(boundary: String) {
        parts = MixedReplaceParser(boundary: boundary)
        cacheCopy = nil
    }

    mutating func take(_ chunk: UnsafeRawBufferPointer, delegateListens: Bool) -> SinkStep {
        if delegateListens {
            // Back-pressure: past the backlog the transfer pauses until the
            // delegate's context has taken half of it.
            guard queued < Self.backlog else { return .refuse }
            queued += chunk.count
            if var parser = parts {
                parts = nil  // one owner of its buffer while it parses
                defer { parts = parser }
                do throws(MixedReplaceParser.Failure) {
                    let events = try parser.feed(chunk)
                    // Only the parts' bytes wait for the delegate (delimiters and part heads do not).
                    var partBytes = 0
                    for case .data(let data) in events { partBytes += data.count }
                    queued -= chunk.count - partBytes
                    return .parts(events)
                } catch {
                    return .malformed(error.message)
                }
            }
        }
        if var copy = cacheCopy {
            cacheCopy = nil  // one owner while it grows
            // Past the limit (decoded bytes count) nothing is kept.
            if copy.count + chunk.count <= cacheCopyLimit {
                appendChunk(chunk, to: &copy)
                cacheCopy = copy
            }
        }
        return delegateListens ? .deliver : .taken
    }

    mutating func delegateTook(_ count: Int) -> Bool {
        queued -= count
        return queued <= Self.backlog / 2
    }

    mutating func serve(_ response: HTTPURLResponse, _ data: Data) -> ServeStep {
        .askDelegate
    }

    mutating func close() -> SinkContents {
        defer { cacheCopy = nil }
        let tail = parts?.finish() ?? []
        parts = nil
        return SinkContents(body: cacheCopy, tail: tail)
    }

    func end(_ contents: SinkContents, _ ending: SinkEnding) {
        ending.reportMetrics()
    }
}

/// A download: the body streams into a private file, handed to the
/// delegate's `didFinishDownloadingTo` or to a completion handler, and
/// deleted when that returns (unless resume data points at it, or the
/// handler took the file away under a name of its own).
struct DownloadSink: ResponseSink {
    /// nil: the delegate hears of the download. Given the file (nil on
    /// failure) and the task's end; returns whether it took the file away
    /// (renamed it), so the task has nothing left to delete.
    let handler: (@Sendable (URL?, SinkEnding) -> Bool)?
    var deliversToHandler: Bool { handler != nil }
    private(set) var file: DownloadFile?
    private var expected: Int64 = -1
    private var written: Int64 = 0

    init(handler: (@Sendable (URL?, URLResponse?, (any Error)?) -> Void)? = nil, file: DownloadFile? = nil) {
        if let handler {
            self.handler = { location, ending in
                handler(location, ending.task.response, ending.error)
                return false
            }
        } else {
            self.handler = nil
        }
        self.file = file
    }

    /// A download whose `keep` step reads the task's end and moves the
    /// file to a name of its own, or throws; `deliver` gets what it kept
    /// or why not. The task deletes the file only when `keep` threw.
    init<Kept>(
        keep: @escaping @Sendable (URL?, SinkEnding) throws -> Kept,
        deliver: @escaping @Sendable (Result<Kept, any Error>) -> Void
    ) {
        self.handler = { location, ending in
            let kept = Result { try keep(location, ending) }
            deliver(kept)
            if case .success = kept { return true }
            return false
        }
    }

    mutating func accept(length: Int64, cacheCopyLimit: Int) {
        expected = length
    }

    mutating func attach(_ file: DownloadFile) -> Bool {
        self.file = file
        written = 0
        return handler == nil
    }

    mutating func take(_ chunk: UnsafeRawBufferPointer, delegateListens: Bool) -> SinkStep {
        guard let file, let handle = file.handle else { return .taken }
        written += Int64(chunk.count)
        // The offset is the partial file's size and the length the server's:
        // checked, so a lying length cannot trap.
        let (total, overflow) = file.offset.addingReportingOverflow(written)
        let (whole, wholeOverflow) = file.offset.addingReportingOverflow(expected)
        return .write(
            handle, total: overflow ? .max : total, expected: expected < 0 || wholeOverflow ? -1 : whole,
            report: handler == nil && delegateListens)
    }

    mutating func serve(_ response: HTTPURLResponse, _ data: Data) -> ServeStep {
        handler == nil ? .askDelegate : .finish
    }

    mutating func close() -> SinkContents {
        defer { file = nil }
        return SinkContents(file: file)
    }

    func end(_ contents: SinkContents, _ ending: SinkEnding) {
        if let handler {
            ending.reportMetrics()
            let taken = handler(ending.error == nil ? contents.file?.url : nil, ending)
            if !taken { ending.removeFile(contents) }
            return
        }
        if let file = contents.file, ending.error == nil {
            ending.task.callDelegate { $0.urlSession(ending.session, downloadTask: ending.task, didFinishDownloadingTo: file.url) }
        }
        ending.removeFile(contents)
        ending.reportMetrics()
    }
}

/// `Session.bytes(for:)`: the body goes to a byte stream that its reader
/// drains; a full stream pauses the transfer.
struct StreamSink: ResponseSink {
    var deliversToHandler: Bool { true }
    let buffer: ByteStreamBuffer
    /// The reader wants the head as it came (swift-http-types' calls), not
    /// Foundation's response.
    var publishesHead = false

    func publish(head: (url: URL, head: ResponseHead)?, _ response: () -> HTTPURLResponse?) {
        if publishesHead, let head {
            buffer.publish(.head(head.head))
        } else if let response = response() {
            buffer.publish(.built(response))
        }
    }

    mutating func take(_ chunk: UnsafeRawBufferPointer, delegateListens: Bool) -> SinkStep {
        buffer.offer(Data(chunk)) ? .taken : .refuse
    }

    mutating func serve(_ response: HTTPURLResponse, _ data: Data) -> ServeStep {
        buffer.publish(.built(response))
        if !data.isEmpty { _ = buffer.offer(data) }
        return .finish
    }

    mutating func close() -> SinkContents { SinkContents() }

    func end(_ contents: SinkContents, _ ending: SinkEnding) {
        ending.reportMetrics()
        buffer.finish(ending.error as? URLError)
    }
}
