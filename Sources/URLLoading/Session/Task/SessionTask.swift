public import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif
import Logging
import Locking
import Synchronization
import Tracing
import Transport

/// A task of a session (Apple's `URLSessionTask` and its data, upload and
/// download kinds). Every task starts suspended; `resume()` starts it.
public final class SessionTask: Sendable, Hashable, CustomStringConvertible {
    /// The kind of task.
    public enum Kind: Sendable, Equatable {
        /// A data task: the body in memory or to the delegate.
        case data
        /// An upload task: a body sent, the response's body as for data.
        case upload
        /// A download task: the body to a file.
        case download
    }

    /// Apple's `URLSessionTask.State`.
    public enum State: Sendable, Equatable {
        /// Resumed and not finished.
        case running
        /// Made and not resumed yet, or suspended.
        case suspended
        /// Cancelled, with its last calls still to come.
        case canceling
        /// Finished: its completion was delivered.
        case completed
    }

    /// Unique among the session's tasks.
    public let taskIdentifier: Int
    /// The task's progress: bytes received (bytes sent, for an upload task)
    /// against the expected total (-1 while unknown); complete when the task
    /// is. Made on first use: Foundation's `Progress` costs microseconds per
    /// update, which tasks nobody watches should not pay.
    public var progress: Progress {
        locked.withLock { inner in
            if let progress = inner.progress { return progress }
            let progress = Progress(totalUnitCount: -1)
            inner.progress = progress
            inner.updateProgress()
            if inner.machine.succeeded {
                progress.totalUnitCount = max(progress.totalUnitCount, progress.completedUnitCount)
                progress.completedUnitCount = progress.totalUnitCount
            }
            return progress
        }
    }
    /// Data, upload or download.
    /// A data task can become a download task mid-transfer (`becomeDownload`).
    public var kind: Kind { locked.withLock { $0.kind } }
    /// The request the task was created with.
    public let originalRequest: URLRequest?

    let body: TransferRequest.Body
    /// Where a transfer's end is handled, when not on the transport's
    /// thread (set by the async APIs before the task starts).
    let completionRunner: (@Sendable (@escaping @Sendable () -> Void) -> Void)?
    let locked: TaskLock<Inner>
    /// Where the task's work runs: this process, or a background session's transferd.
    let engine: any TaskEngine
    /// The task's serial context for delegate calls and completion
    /// handlers: its order, and its own delays only.
    let events = DelegateQueue()
    /// The task's span, when its session has a tracer.
    let trace: TaskTrace?

    /// - Parameters:
    ///   - streamedBodyLength: Non-nil when the body comes from streams:
    ///     the length the request declares, or -1.
    ///   - streamedBody: A streamed body its caller makes (instead of the
    ///     request's stream and the delegate's).
    init(
        session: Session, identifier: Int, kind: Kind, request: URLRequest, body: TransferRequest.Body, sink: any ResponseSink,
        streamedBodyLength: Int64? = nil, streamedBody: StreamedBody? = nil, completionRunner: (@Sendable (@escaping @Sendable () -> Void) -> Void)? = nil,
        engine: any TaskEngine = LocalEngine.shared
    ) {
        self.taskIdentifier = identifier
        self.engine = engine
        self.originalRequest = request
        self.body = body
        self.completionRunner = completionRunner
        // The span's parent: the service context of the code making the task.
        trace = session.tracer.map { TaskTrace(tracer: $0, parent: ServiceContext.current ?? .topLevel) }
        var inner = Inner(sink: sink)
        inner.kind = kind
        inner.session = session
        inner.machine = StateMachine(request: request)
        switch body {
        case .none: inner.bytesExpectedToSend = 0
        case .data(let data): inner.bytesExpectedToSend = Int64(data.count)
        case .file(_, _, let length): inner.bytesExpectedToSend = length
        case .stream(_, let length): inner.bytesExpectedToSend = length
        }
        if let streamedBody {
            inner.streamedBody = streamedBody
            inner.bytesExpectedToSend = streamedBody.length
        } else if let length = streamedBodyLength {
            inner.streamedBody = StreamedBody(length: length, next: request.httpBodyStream.map { .stream(OwnedInputStream(stream: $0)) })
            inner.bytesExpectedToSend = length
        }
        inner.resumableUpload = Self.resumableUpload(
            kind: kind, body: body, streamed: inner.streamedBody, version: session.settings.resumableUploadVersion)
        locked = TaskLock(inner)
    }

    // MARK: Public state

    /// The request now being sent (after redirects).
    public var currentRequest: URLRequest? { locked.withLock { $0.machine.request } }
    /// The response, once its head arrived.
    public var response: URLResponse? { httpURLResponse }

    var httpURLResponse: HTTPURLResponse? {
        locked.withLock { Self.response(of: &$0) }
    }

    /// The response as the user sees it, built on first use.
    static func response(of inner: inout Inner) -> HTTPURLResponse? {
        if inner.response == nil, let (url, head) = inner.head {
            inner.response = makeResponse(url: url, head: head)
        }
        return inner.response
    }

    /// Foundation responses built in this process: the paths that promise
    /// none (swift-http-types' calls) are checked against it.
    static let responsesBuilt = Atomic<Int>(0)

    static func makeResponse(url: URL, head: ResponseHead) -> HTTPURLResponse? {
        responsesBuilt.add(1, ordering: .relaxed)
        // Lines of one name (in any case) become one value (RFC 9110 §5.3):
        // HTTPURLResponse capitalizes names, so "foo" would overwrite "Foo".
        // A usual head has a few fields: looking back over the names already
        // seen costs less than hashing each name folded to one case. A head
        // of many (a hostile server may send thousands) is hashed, so the
        // work stays linear.
        let headers = head.headers
        var fields = [String: String](minimumCapacity: headers.count)
        if headers.count <= 32 {
            for (index, field) in headers.enumerated() {
                if let first = headers[..<index].first(where: { HeaderFields.namesEqual($0.name, field.name) }) {
                    fields[first.name, default: ""] += ", " + field.value
                } else {
                    fields[field.name] = field.value
                }
            }
        } else {
            var firstName = [HeaderFields.CaseInsensitiveName: String](minimumCapacity: headers.count)
            for field in headers {
                let key = HeaderFields.CaseInsensitiveName(field.name)
                if let name = firstName[key] {
                    fields[name, default: ""] += ", " + field.value
                } else {
                    firstName[key] = field.name
                    fields[field.name] = field.value
                }
            }
        }
        return HTTPURLResponse(url: url, statusCode: head.status, httpVersion: head.httpVersion, headerFields: fields)
    }
    /// The error the task ended with, if any.
    public var error: (any Error)? { locked.withLock { $0.machine.error }?.urlError }
    /// Body bytes received (decoded).
    public var countOfBytesReceived: Int64 { locked.withLock { $0.bytesReceived } }
    /// Request body bytes sent.
    public var countOfBytesSent: Int64 { locked.withLock { $0.bytesSent } }
    /// The response's Content-Length, or -1 when unknown.
    public var countOfBytesExpectedToReceive: Int64 { locked.withLock { $0.bytesExpectedToReceive } }
    /// The request body's length.
    public var countOfBytesExpectedToSend: Int64 { locked.withLock { $0.bytesExpectedToSend } }
    /// Priority between 0 and 1 (kept; libcurl has no per-transfer priority).
    public var priority: Float {
        get { locked.withLock { $0.priority } }
        set { locked.withLock { $0.priority = min(1, max(0, newValue)) } }
    }
    /// An application's description of the task.
    public var taskDescription: String? {
        get { locked.withLock { $0.taskDescription } }
        set { locked.withLock { $0.taskDescription = newValue } }
    }
    /// A delegate for this task alone; it takes precedence over the session's.
    public var delegate: (any SessionDelegate)? {
        get { locked.withLock { $0.delegate } }
        set { locked.withLock { $0.delegate = newValue } }
    }

    /// Running, suspended, canceling or completed (Apple's `state`).
    public var state: State {
        locked.withLock { inner in
            // Cancelled and still delivering its last calls: canceling.
            if let outcome = inner.machine.outcome { return outcome.isCancelled && inner.session != nil ? .canceling : .completed }
            return inner.machine.isSuspended && !engine.isRunningElsewhere ? .suspended : .running
        }
    }

    /// The fraction of the body received (or sent, for uploads), 0...1.
    public var fractionCompleted: Double {
        locked.withLock { inner in
            if inner.machine.succeeded { return 1 }
            if inner.kind == .upload, inner.bytesExpectedToSend > 0 { return Double(inner.bytesSent) / Double(inner.bytesExpectedToSend) }
            guard inner.bytesExpectedToReceive > 0 else { return 0 }
            return min(1, Double(inner.bytesReceived) / Double(inner.bytesExpectedToReceive))
        }
    }

    /// The task's identifier, kind, state and URL without secrets.
    public var description: String {
        let url = originalRequest?.url.map { SessionError.redacted($0).absoluteString } ?? "?"
        return "SessionTask(\(taskIdentifier), \(kind), \(state), \(url))"
    }

    /// Whether both are the same task.
    public static func == (a: SessionTask, b: SessionTask) -> Bool { a === b }

    /// The task itself, as Apple's `NSCopying` task answers `copy()`: a task
    /// is one transfer, never duplicated.
    public func copy() -> Any { self }
    /// Whether `object` is this task (Apple's `NSObject.isEqual`).
    public func isEqual(_ object: Any?) -> Bool { (object as? SessionTask) === self }
    /// Apple's `NSObject.hash`, the same as `hashValue`.
    public var hash: Int { hashValue }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }

    // MARK: Control

    /// Starts the task, or continues a suspended one.
    public func resume() { engine.resume(self) }

    /// Pauses the task: no more body bytes are taken until `resume()`.
    public func suspend() { engine.suspend(self) }

    /// Cancels the task: it completes with `SessionError.Code.cancelled`.
    public func cancel() { engine.cancel(self) }

    // MARK: Running

    func perform(_ actions: StateMachine.Actions) {
        for action in actions {
            switch action {
            case .awaitBeginDate: awaitBeginDate()
            case .runInterceptors: runInterceptors()
            case .startTransfer(let hop): startTransfer(hop)
            case .cancelTransfer(let id): session?.executor(of: id)?.cancel(id)
            case .impossible(let what):
                // A bug of ours, never the network's: logged, nothing changed.
                Logger(label: "urlloading.session").error("task \(taskIdentifier): impossible event: \(what)")
            case .unpause(let id): session?.executor(of: id)?.unpause(id)
            case .decide(let head, let hop):
                decideOnHead(head, of: hop, locked.withLock { DecisionInputs(&$0, status: head.status) })
            case .complete(let result): complete(result)
            }
        }
    }

    /// What `hop` waited for is there (a body stream, the server's trust,
    /// a client identity, connectivity, another request's stored result):
    /// unless the task moved past the hop or ended, `change` records what
    /// came, and the hop's transfer starts (again).
    func waitEnded(for hop: Hop, _ change: (inout Inner) -> Void = { _ in }) {
        perform(
            locked.withLock { inner in
                guard inner.machine.isCurrent(hop) else { return [] }
                change(&inner)
                return inner.machine.proceedHop()
            })
    }

    var session: Session? { locked.withLock { $0.session } }

    /// Whether this task reads and fills the cache: data tasks whose sink
    /// keeps the body (completion handlers, async APIs, a delegate's copy).
    var usesCache: Bool {
        locked.withLock { $0.kind == .data && $0.sink.usesCache }
    }
}
