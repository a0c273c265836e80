public import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif
import Locking
import Transport

extension Session {
    /// Loads `request` and returns the body and response. Cancelling the
    /// calling Swift task cancels the transfer.
    ///
    /// - Parameters:
    ///   - request: The request to send.
    ///   - delegate: A delegate for this task alone (redirects, metrics).
    /// - Throws: `URLError` for client-side failures (its `sessionError` has our details); a 4xx or 5xx is a response.
    public func data(for request: URLRequest, delegate: (any SessionDelegate)? = nil) async throws -> (Data, URLResponse) {
        try await load(.data, request, body: nil, delegate: delegate)
    }

    /// Loads `url`.
    public func data(from url: URL, delegate: (any SessionDelegate)? = nil) async throws -> (Data, URLResponse) {
        try await data(for: URLRequest(url: url), delegate: delegate)
    }

    /// Uploads `bodyData` with `request`.
    public func upload(for request: URLRequest, from bodyData: Data, delegate: (any SessionDelegate)? = nil) async throws -> (Data, URLResponse) {
        try await load(.upload, request, body: .data(bodyData), delegate: delegate)
    }

    /// Uploads the file at `fileURL` with `request`, streamed from disk.
    public func upload(for request: URLRequest, fromFile fileURL: URL, delegate: (any SessionDelegate)? = nil) async throws -> (Data, URLResponse) {
        try await load(.upload, request, body: Session.fileBodyOf(fileURL), delegate: delegate)
    }

    private func load(
        _ kind: SessionTask.Kind, _ request: URLRequest, body: TransferRequest.Body?,
        delegate: (any SessionDelegate)?
    ) async throws -> (Data, URLResponse) {
        let ((data, response), _) = try await run(delegate: delegate) { deliver, runner in
            // The sink delivers itself: a completion handler between them
            // would be one more closure context per task.
            rawTask(
                kind, with: request, body: body, completionRunner: runner,
                sink: CollectingSink { data, ending in
                    let error = ending.error as? URLError
                    deliver(error.map { .failure($0) } ?? .success((data ?? Data(), CollectingSink.asyncResponse(ending))))
                })
        }
        // Built on the awaiting task (the completion runner), not on the transport's thread.
        guard let response else {
            throw SessionError(.badServerResponse, failingURL: request.url, message: "no response").urlError
        }
        return (data, response)
    }

    /// Downloads `request` to a file that the caller owns (and must delete).
    public func download(for request: URLRequest, delegate: (any SessionDelegate)? = nil) async throws -> (URL, URLResponse) {
        try await run(delegate: delegate) { deliver, runner in
            makeTask(
                .download, request, body: Self.body(of: request),
                sink: DownloadSink(
                    keep: { location, ending in try Self.kept(location, ending.task.response, ending.error, url: request.url) },
                    deliver: deliver), completionRunner: runner)
        }.0
    }

    /// Downloads `url` to a file that the caller owns (and must delete).
    public func download(from url: URL, delegate: (any SessionDelegate)? = nil) async throws -> (URL, URLResponse) {
        try await download(for: URLRequest(url: url), delegate: delegate)
    }

    /// Goes on with a download from resume data to a file that the
    /// caller owns (and must delete).
    public func download(resumeFrom resumeData: Data, delegate: (any SessionDelegate)? = nil) async throws -> (URL, URLResponse) {
        try await run(delegate: delegate) { deliver, runner in
            resumedTask(
                resumeData,
                sink: DownloadSink(
                    keep: { location, ending in try Self.kept(location, ending.task.response, ending.error, url: nil) },
                    deliver: deliver), completionRunner: runner)
        }.0
    }

    /// A finished download's file under a new name the caller owns: when
    /// this throws, the task deletes its own file after the handler.
    private static func kept(_ location: URL?, _ response: URLResponse?, _ error: (any Error)?, url: URL?) throws -> (URL, URLResponse) {
        if let error { throw error }
        guard let response else {
            throw SessionError(.badServerResponse, failingURL: url, message: "no response").urlError
        }
        return (try kept(location, url: url), response)
    }

    /// A finished download's file under a new name the caller owns.
    static func kept(_ location: URL?, url: URL?) throws -> URL {
        guard let location else {
            throw SessionError(.badServerResponse, failingURL: url, message: "no response").urlError
        }
        do { return try DownloadFiles.keep(location) } catch { throw error.urlError }
    }

    /// Bridges one task to async/await. The transfer's end is handled on the
    /// awaiting Swift task (the task's completion runner hands it over), so
    /// the transport's one thread, which carries every transfer of the
    /// process, only hands over; cancelling the Swift task cancels the
    /// session task.
    ///
    /// - Parameter make: Makes the task, given the function that delivers
    ///   its result and the completion runner to give it.
    func run<T: Sendable>(
        delegate: (any SessionDelegate)?,
        _ make: (
            _ deliver: @escaping @Sendable (Result<T, any Error>) -> Void,
            _ runner: @escaping @Sendable (@escaping @Sendable () -> Void) -> Void
        ) -> SessionTask
    ) async throws -> (T, SessionTask) {
        let steps = TaskSteps<T>()
        let box = TaskBox()
        return try await withTaskCancellationHandler {
            let task = make({ steps.deliver(.result($0)) }, { steps.deliver(.work($0)) })
            if let delegate { task.delegate = delegate }
            box.set(task)
            defer { steps.close() }
            task.resume()
            while true {
                switch await steps.next() {
                case .work(let work): work()
                case .result(let result): return (try result.get(), task)
                }
            }
        } onCancel: {
            box.cancel()
        }
    }
}

/// One task's steps on their way to the Swift task awaiting it: work the
/// transport's thread hands over (a transfer's end to handle) and, last,
/// the result. Steps come from any thread and are taken in order.
final class TaskSteps<T: Sendable>: Sendable {
    enum Step: Sendable {
        case work(@Sendable () -> Void)
        case result(Result<T, any Error>)
    }

    /// Steps not taken yet, in order. A task has two (its end's work, then
    /// the result), and the awaiting task usually takes the first before
    /// the second comes: one is kept inline, the rest (rarely any) in an array.
    private struct Pending {
        private var first: Step?
        private var more: [Step] = []

        mutating func append(_ step: Step) {
            if first == nil { first = step } else { more.append(step) }
        }

        mutating func removeFirst() -> Step? {
            guard let step = first else { return nil }
            first = more.isEmpty ? nil : more.removeFirst()
            return step
        }
    }

    private let state = Lock<(pending: Pending, waiter: UnsafeContinuation<Step, Never>?, closed: Bool)>((Pending(), nil, false))

    private enum Next { case resume(UnsafeContinuation<Step, Never>), run(@Sendable () -> Void), none }

    func deliver(_ step: Step) {
        let next = state.withLock { state -> Next in
            if state.closed {
                // Nobody awaits any more (the result was taken): work still runs here.
                if case .work(let work) = step { return .run(work) }
                return .none
            }
            guard let waiter = state.waiter else {
                state.pending.append(step)
                return .none
            }
            state.waiter = nil
            return .resume(waiter)
        }
        switch next {
        case .resume(let waiter): waiter.resume(returning: step)
        case .run(let work): work()
        case .none: break
        }
    }

    /// The awaiting task is done: work left behind (a transfer's end that
    /// came after the result, as after a cancel) runs now, and later work
    /// runs where it is delivered. Nothing is kept, so no cycle through the
    /// task's runner remains.
    func close() {
        var left = state.withLock { state -> Pending in
            state.closed = true
            defer { state.pending = Pending() }
            return state.pending
        }
        while let step = left.removeFirst() {
            if case .work(let work) = step { work() }
        }
    }

    /// Unsafe rather than checked: every request awaits here, and the
    /// lock above guarantees one resume per waiter (a checked continuation
    /// costs an allocation per await).
    func next() async -> Step {
        await withUnsafeContinuation { continuation in
            let step = state.withLock { state -> Step? in
                if let step = state.pending.removeFirst() { return step }
                state.waiter = continuation
                return nil
            }
            if let step { continuation.resume(returning: step) }
        }
    }
}

/// Holds the task for the cancellation handler of an async call (the
/// session's and the manager's), which may run before the task exists.
final class TaskBox: Sendable {
    private let state = Lock<(task: SessionTask?, cancelled: Bool)>((nil, false))

    /// The task, once set; the box lets go of it.
    func take() -> SessionTask? {
        state.withLock { state in
            defer { state.task = nil }
            return state.task
        }
    }

    func set(_ task: SessionTask) {
        let cancelled = state.withLock { state -> Bool in
            state.task = task
            return state.cancelled
        }
        if cancelled { task.cancel() }
    }

    func cancel() {
        let task = state.withLock { state -> SessionTask? in
            state.cancelled = true
            return state.task
        }
        task?.cancel()
    }
}
