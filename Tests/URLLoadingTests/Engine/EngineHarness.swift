import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
import Testing
import TestSupport
@testable import URLLoading

/// A session on a `ScriptedExecutor`, and what its tasks ended with.
struct EngineHarness {
    let executor: ScriptedExecutor
    let session: Session

    /// - Parameter configure: Changes to an ephemeral configuration (its
    ///   memory cache, cookie and credential stores are the session's own).
    /// - Parameter playsInStart: Plays each transfer's events inside the
    ///   executor's `start` (`ScriptedExecutor.init`).
    init(
        delegate: (any SessionDelegate)? = nil, processesCancels: Bool = true, configure: (SessionConfiguration) -> Void = { _ in },
        playsInStart: (@Sendable (ScriptedExecutor.Transfer) -> Void)? = nil
    ) {
        executor = ScriptedExecutor(processesCancels: processesCancels, playsInStart: playsInStart)
        let configuration = SessionConfiguration.ephemeral
        configure(configuration)
        session = Session(configuration: configuration, delegate: delegate, transport: executor)
    }

    /// A URL on a host nothing resolves: no byte of these tests leaves the process.
    static func url(_ path: String) -> URL {
        URL(string: "http://engine.invalid\(path)")!
    }

    /// A data task with a completion handler, made and not resumed.
    func task(_ path: String, configure: (inout URLRequest) -> Void = { _ in }) -> (SessionTask, Outcome) {
        var request = URLRequest(url: Self.url(path))
        configure(&request)
        let outcome = Outcome()
        let task = session.dataTask(with: request) { data, response, error in outcome.set(data, response, error) }
        return (task, outcome)
    }

    /// An upload task of `body` with a completion handler, resumed at once.
    func upload(_ path: String, body: Data) -> (SessionTask, Outcome) {
        var request = URLRequest(url: Self.url(path))
        request.httpMethod = "POST"
        let outcome = Outcome()
        let task = session.uploadTask(with: request, from: body) { data, response, error in outcome.set(data, response, error) }
        task.resume()
        return (task, outcome)
    }

    /// A task resumed at once.
    func start(_ path: String, configure: (inout URLRequest) -> Void = { _ in }) -> (SessionTask, Outcome) {
        let (task, outcome) = task(path, configure: configure)
        task.resume()
        return (task, outcome)
    }

    /// A task whose response and body go to the session's delegate, resumed.
    func delegated(_ path: String) -> SessionTask {
        let task = session.dataTask(with: Self.url(path))
        task.resume()
        return task
    }

    /// Plays a whole 200 with `body` on the next transfer and waits for the
    /// task's end: a response for the cache, or a first hop out of the way.
    func answer(_ index: Int, status: Int = 200, fields: [(String, String)] = [], body: String) async -> ScriptedExecutor.Transfer? {
        guard let transfer = await executor.transfer(index) else { return nil }
        transfer.head(status, fields + [("Content-Length", "\(body.utf8.count)")])
        if !body.isEmpty, !(await transfer.bodyTaken(body)) {
            Issue.record("the body of transfer \(index) was never taken")
            return nil
        }
        transfer.finish(bytesReceived: Int64(body.utf8.count))
        return transfer
    }
}

/// Waits for `latch` at most `seconds` (scaled under a sanitizer); false,
/// and a recorded issue naming `what`, when it did not open in time.
@discardableResult
func bounded(_ latch: CompletionLatch, _ what: String, seconds: Int = 30) async -> Bool {
    // Whichever comes first resumes the wait; a latch that never opens keeps
    // only its own waiter (a task group would wait for that child forever).
    final class Waiter: Sendable {
        let continuation = Lock<CheckedContinuation<Bool, Never>?>(nil)
        func resume(_ value: Bool) { continuation.withLock { $0.take() }?.resume(returning: value) }
    }
    let waiter = Waiter()
    let opened = await withCheckedContinuation { continuation in
        waiter.continuation.withLock { $0 = continuation }
        Task {
            await latch.wait()
            waiter.resume(true)
        }
        // A latch opened while every cooperative thread was busy counts:
        // the bound is on the engine, not on the waiting task's turn.
        DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(seconds * Sanitizer.timeScale)) { waiter.resume(latch.isOpen) }
    }
    if !opened { Issue.record("\(what) did not happen within \(seconds) s") }
    return opened
}

/// What a completion handler was given, once it was called.
final class Outcome: Sendable {
    private let state = Lock<(data: Data?, response: HTTPURLResponse?, error: URLError?, calls: Int)>((nil, nil, nil, 0))
    private let latch = CompletionLatch()

    func set(_ data: Data?, _ response: URLResponse?, _ error: (any Error)?) {
        state.withLock { state in
            state.calls += 1
            state.data = data
            state.response = response as? HTTPURLResponse
            state.error = error as? URLError
        }
        latch.open()
    }

    /// Waits for the handler (bounded: a test fails rather than hangs).
    @discardableResult
    func wait(seconds: Int = 30) async -> Bool {
        await bounded(latch, "the completion handler", seconds: seconds)
    }

    var body: String? { state.withLock { $0.data.map { String(decoding: $0, as: UTF8.self) } } }
    var response: HTTPURLResponse? { state.withLock { $0.response } }
    var error: URLError? { state.withLock { $0.error } }
    var code: URLError.Code? { error?.code }
    var calls: Int { state.withLock { $0.calls } }
    var isFinished: Bool { calls > 0 }
}

/// A delegate that holds a decision until the test lets it go: the head's
/// (`didReceive response`), the cache's (`willCacheResponse`), and answers
/// challenges with one credential.
final class HoldingDelegate: SessionDataDelegate {
    let headAsked = CompletionLatch()
    let letHeadGo = CompletionLatch()
    let cacheAsked = CompletionLatch()
    let letCacheGo = CompletionLatch()
    let completed = CompletionLatch()
    private let ending = Lock<URLError?>(nil)
    let holdsHead: Bool
    let holdsCache: Bool
    let credential: Credential?
    private let received = Lock(Data())

    init(holdsHead: Bool = false, holdsCache: Bool = false, credential: Credential? = nil) {
        self.holdsHead = holdsHead
        self.holdsCache = holdsCache
        self.credential = credential
    }

    var data: String { String(decoding: received.withLock { $0 }, as: UTF8.self) }
    /// The error `didCompleteWithError` was given.
    var error: URLError? { ending.withLock { $0 } }

    func urlSession(_ session: Session, task: SessionTask, didCompleteWithError error: (any Error)?) {
        ending.withLock { $0 = error as? URLError }
        completed.open()
    }

    func urlSession(_ session: Session, dataTask: SessionTask, didReceive response: URLResponse) async -> Session.ResponseDisposition {
        headAsked.open()
        if holdsHead { await letHeadGo.wait() }
        return .allow
    }

    func urlSession(_ session: Session, dataTask: SessionTask, didReceive data: Data) {
        received.withLock { $0.append(data) }
    }

    func urlSession(_ session: Session, dataTask: SessionTask, willCacheResponse proposedResponse: CachedResponse) async -> CachedResponse? {
        cacheAsked.open()
        if holdsCache { await letCacheGo.wait() }
        return proposedResponse
    }

    func urlSession(_ session: Session, task: SessionTask, didReceive challenge: AuthenticationChallenge) async -> (
        Session.AuthChallengeDisposition, Credential?
    ) {
        guard let credential, challenge.previousFailureCount == 0 else { return (.performDefaultHandling, nil) }
        return (.useCredential, credential)
    }
}
