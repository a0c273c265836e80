/// One serial context per session: delegate calls run one after another,
/// in the order they were enqueued, each awaited before the next (SPEC S6,
/// STYLE 7). Async delegate methods are awaited in place.
final class DelegateQueue: Sendable {
    typealias Job = @Sendable () async -> Void
    private let continuation: AsyncStream<Job>.Continuation

    init() {
        let (stream, continuation) = AsyncStream.makeStream(of: Job.self)
        self.continuation = continuation
        Task.detached {
            for await job in stream { await job() }
        }
    }

    deinit {
        continuation.finish()
    }

    /// Runs `job` after every job enqueued before it.
    func enqueue(_ job: @escaping Job) {
        continuation.yield(job)
    }
}
