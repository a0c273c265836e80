import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif
import HTTPTypes
import Transport

/// Where a task's response goes: one sink per way of delivering it
/// (delegate data, collected for a completion handler or an async call, a
/// download file, a byte stream). A sink is a value inside the task's state:
/// the task calls its mutating methods under its lock and carries out the
/// step they return after releasing it; `end` runs on the task's context.
protocol ResponseSink: Sendable {
    /// Whether the delegate decides on the response and hears its body
    /// (`didReceive response`, `didReceive data`, multipart parts).
    var asksDelegate: Bool { get }
    /// Whether a data task with this sink reads and fills the cache.
    var usesCache: Bool { get }
    /// The task's end goes to a completion handler, an async call or a
    /// byte stream: the session delegate hears nothing of its response,
    /// data or completion (Apple's rule; challenges, redirects and metrics
    /// still reach it).
    var deliversToHandler: Bool { get }
    /// A body served without the network (a cache file) goes to the
    /// delegate in chunks instead of whole to `serve`.
    var streamsServedBody: Bool { get }
    /// The download's file, once open.
    var file: DownloadFile? { get }

    /// The response was accepted; `length` is its declared body length
    /// (-1 unknown), `cacheCopyLimit` the most body bytes to keep for the
    /// cache (0: keep none).
    mutating func accept(length: Int64, cacheCopyLimit: Int)
    /// The body is multipart/x-mixed-replace: each part goes to the
    /// delegate as a response of its own (sinks that ask the delegate).
    mutating func splitParts(boundary: String)
    /// The download's file is open; true when the delegate hears where it
    /// resumes (`didResumeAtOffset`).
    mutating func attach(_ file: DownloadFile) -> Bool
    /// The accepted response, for sinks that publish it: its head as the
    /// transport read it, and Foundation's response built on demand (the
    /// costliest step of a request).
    func publish(head: (url: URL, head: ResponseHead)?, _ response: () -> HTTPURLResponse?)
    /// One body chunk; `delegateListens` says whether any delegate exists.
    mutating func take(_ chunk: UnsafeRawBufferPointer, delegateListens: Bool) -> SinkStep
    /// The delegate's context delivered `count` body bytes; true when a
    /// paused transfer may go on.
    mutating func delegateTook(_ count: Int) -> Bool
    /// A response served without the network (cache, interceptor).
    mutating func serve(_ response: HTTPURLResponse, _ data: Data) -> ServeStep
    /// The body ends: what is left to deliver, the sink emptied.
    mutating func close() -> SinkContents
    /// The delivery's last calls (on the task's context), around which the
    /// task makes `didCompleteWithError`.
    func end(_ contents: SinkContents, _ ending: SinkEnding)
}

/// What the task does with a chunk once its lock is released.
enum SinkStep: Equatable {
    /// Taken (kept, dropped, or offered to a stream).
    case taken
    /// No room now: the transfer pauses until the consumer takes some.
    case refuse
    /// A copy goes to the delegate's `didReceive data`.
    case deliver
    /// A multipart body's events go to the delegate.
    case parts([MixedReplaceParser.Event])
    /// The body cannot be split into parts: the task fails.
    case malformed(String)
    /// The chunk goes to the download file at `total` bytes so far; the
    /// delegate hears of it when `report`.
    case write(FileHandle, total: Int64, expected: Int64, report: Bool)

    static func == (a: SinkStep, b: SinkStep) -> Bool {
        switch (a, b) {
        case (.taken, .taken), (.refuse, .refuse), (.deliver, .deliver): true
        case (.parts(let x), .parts(let y)): x == y
        case (.malformed(let x), .malformed(let y)): x == y
        case let (.write(h1, t1, e1, r1), .write(h2, t2, e2, r2)): h1 === h2 && t1 == t2 && e1 == e2 && r1 == r2
        default: false
        }
    }
}

/// What the task does with a response served without the network.
enum ServeStep: Equatable {
    /// The task ends now.
    case finish
    /// The delegate decides on the response first, and hears its body.
    case askDelegate
}

/// A download's file: its handle while the task writes it, where it is, and
/// the bytes that were there before this response (a resumed download).
struct DownloadFile: Sendable {
    /// nil for a file another process wrote whole (transferd's finished
    /// download): the task only hands its location to the delegate.
    let handle: FileHandle?
    let url: URL
    var offset: Int64 = 0
}

/// What a sink held when the body ended.
struct SinkContents: Sendable {
    /// The collected body, or the copy kept for the cache; nil when none.
    var body: Data?
    var file: DownloadFile?
    /// A multipart body's last events, not yet delivered.
    var tail: [MixedReplaceParser.Event] = []
}

/// A task's response as its end found it: the one built (a delegate or a
/// property asked for it, or the cache served it), else the head to build it from.
struct ShownResponse: Sendable {
    let response: HTTPURLResponse?
    let head: (url: URL, head: ResponseHead)?
}

/// The end of a task as a sink sees it.
struct SinkEnding: Sendable {
    let task: SessionTask
    let session: Session
    let error: (any Error)?
    /// Resume data points at the download's file: it stays.
    let keepsFile: Bool
    let metrics: TaskMetrics
    /// The delegates as the task's end read them.
    let taskDelegate: (any SessionDelegate)?
    let sessionDelegate: (any SessionDelegate)?
    /// The task's response as its end found it: built, or its head.
    let shown: ShownResponse

    /// The task's response, built here when nobody asked for it before
    /// (it is not kept on the task: callers that hold the task use `task.response`).
    func response() -> HTTPURLResponse? {
        shown.response ?? shown.head.flatMap { SessionTask.makeResponse(url: $0.url, head: $0.head) }
    }

    /// The response as swift-http-types' type, without Foundation's: from
    /// the head the transport read when there is one, else from the
    /// response that was served (the cache's, an interceptor's).
    func fieldsResponse() -> HTTPResponse? {
        if let head = shown.head { return HTTPResponse(head.head) }
        return shown.response.flatMap { HTTPResponse(bridging: $0) }
    }

    func reportMetrics() {
        task.callDelegate(.didFinishCollectingMetrics, taskDelegate: taskDelegate, sessionDelegate: sessionDelegate, abilities: session.delegateAbilities) {
            $0.urlSession(session, task: task, didFinishCollecting: metrics)
        }
    }

    /// Removes a download's file after its delegate or handler returned.
    /// The file is one regular file of ours, which the delegate may have
    /// moved away already: one `unlink`, not FileManager's walk of what
    /// is at the path (and the error it builds when nothing is).
    func removeFile(_ contents: SinkContents) {
        if let file = contents.file, !keepsFile { _ = unlink(file.url.path) }
    }
}

extension ResponseSink {
    var asksDelegate: Bool { false }
    var deliversToHandler: Bool { false }
    var streamsServedBody: Bool { false }
    var usesCache: Bool { false }
    var file: DownloadFile? { nil }
    mutating func accept(length: Int64, cacheCopyLimit: Int) {}
    mutating func splitParts(boundary: String) {}
    mutating func attach(_ file: DownloadFile) -> Bool { false }
    func publish(head: (url: URL, head: ResponseHead)?, _ response: () -> HTTPURLResponse?) {}
    mutating func delegateTook(_ count: Int) -> Bool { true }
}

/// Appends a transport chunk with one copy (Data's generic
/// `append(contentsOf:)` walks a raw buffer byte by byte).
func appendChunk(_ chunk: UnsafeRawBufferPointer, to buffer: inout Data) {
    guard let start = chunk.baseAddress else { return }
    buffer.append(start.assumingMemoryBound(to: UInt8.self), count: chunk.count)
}
