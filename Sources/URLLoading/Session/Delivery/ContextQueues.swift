import Dispatch
import Locking

/// Where the jobs of the tasks' and sessions' contexts run: serial Dispatch
/// queues, reused, never Dispatch's global queues.
///
/// On Linux, Swift's task executor runs on Dispatch's global threads, as
/// many as the cores, and libdispatch adds one about once a second while
/// they are all blocked. A delegate method, a completion handler or a store
/// waiting for another process's lock that blocked one of those would hold
/// back every Swift task of the process, a second more for each such job.
/// A serial queue runs on Dispatch's overcommitting threads instead, one of
/// which is added at once whenever all are busy.
enum ContextQueues {
    /// Queues with nothing to run, for the next jobs; when none is idle a
    /// new one is made (a queue holds a thread only while it runs a job).
    private static let idle = Lock<[DispatchQueue]>([])
    /// How many idle queues are kept for reuse.
    private static let kept = 64

    /// Runs `job` on a thread that may block without holding back Swift's tasks.
    static func async(_ job: @escaping @Sendable () -> Void) {
        let queue = idle.withLock { $0.popLast() } ?? DispatchQueue(label: "urlloading.context")
        queue.async {
            job()
            idle.withLock { queues in
                if queues.count < kept { queues.append(queue) }
            }
        }
    }
}
