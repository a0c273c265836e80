import Dispatch
import Locking

/// A serial context for the user's code: jobs run one after another, in the
/// order they were enqueued, each finished (an async one awaited) before the
/// next starts, as Apple's delegate queue. Each task has one, and the session one for
/// its own events, so a slow delegate method or completion handler delays
/// only the task it belongs to.
///
/// Jobs run on Dispatch's global threads, never on the caller's: a job that
/// blocks (a completion handler waiting on a semaphore, a store waiting on
/// another process's lock) holds a Dispatch thread, not one of Swift's few
/// cooperative threads. An async job runs in a Swift task and the queue
/// goes on when it returns.
///
/// ```
/// idle ─enqueue→ scheduled ─drain: next job─→ running sync job ─→ (more? drain : idle)
///                                        └──→ running async job in a Task ─done→ scheduled
/// ```
final class DelegateQueue: Sendable {
    typealias Job = @Sendable () -> Void
    typealias AsyncJob = @Sendable () async -> Void

    private enum Item {
        case sync(Job)
        case async(AsyncJob)
    }

    private struct State {
        var items: [Item] = []
        var next = 0
        /// A drain is scheduled or running (or an async job is in flight).
        var busy = false
    }

    private let state = Lock(State())

    init() {}

    /// True when no job waits or runs: work done elsewhere now cannot
    /// overtake one of this queue's.
    var isIdle: Bool { state.withLock { !$0.busy } }

    /// Runs `job` after every job enqueued before it.
    func enqueue(_ job: @escaping AsyncJob) {
        add(.async(job))
    }

    /// Runs the synchronous `job` after every job enqueued before it.
    func enqueueSync(_ job: @escaping Job) {
        add(.sync(job))
    }

    private func add(_ item: Item) {
        let start = state.withLock { state -> Bool in
            state.items.append(item)
            guard !state.busy else { return false }
            state.busy = true
            return true
        }
        if start { schedule() }
    }

    private func schedule() {
        DispatchQueue.global().async { self.drain() }
    }

    /// The next item, or nil (and idle) when there is none.
    private func take() -> Item? {
        state.withLock { state -> Item? in
            guard state.next < state.items.count else {
                state.items.removeAll(keepingCapacity: state.items.count <= 64)
                state.next = 0
                state.busy = false
                return nil
            }
            let item = state.items[state.next]
            // Let go of the job (and what it holds) once it is taken.
            state.items[state.next] = .sync({})
            state.next += 1
            if state.next >= 256, state.next * 2 >= state.items.count {
                state.items.removeFirst(state.next)
                state.next = 0
            }
            return item
        }
    }

    private func drain() {
        while let item = take() {
            switch item {
            case .sync(let job):
                job()
            case .async(let job):
                // The queue stays busy until the job returns, then drains on.
                Task {
                    await job()
                    self.schedule()
                }
                return
            }
        }
    }
}
