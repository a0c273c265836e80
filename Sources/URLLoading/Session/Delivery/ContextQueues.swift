import CDispatchOvercommit
import Dispatch

/// Where the tasks' and sessions' contexts run: libdispatch's
/// overcommitting global queue, never its plain global queue.
///
/// On Linux, Swift's task executor runs on the plain global queue's
/// threads, as many as the cores, and libdispatch adds one about once a
/// second while they are all blocked. A delegate method, a completion
/// handler or a store waiting for another process's lock that blocked one
/// of those would hold back every Swift task of the process, a second more
/// for each such job. The overcommitting queue adds a thread at once
/// whenever all of its own are busy (as a serial queue of one's own does;
/// asking for it directly costs no queue per task).
enum ContextQueues {
    /// The overcommitting queue; the plain one should this libdispatch
    /// refuse the flag (it has taken it since its first release).
    private static var queue: urlloading_dispatch_queue_t? {
        urlloading_dispatch_get_global_queue(Int(urlloading_dispatch_priority_default), UInt(urlloading_dispatch_overcommit))
            ?? urlloading_dispatch_get_global_queue(Int(urlloading_dispatch_priority_default), 0)
    }

    /// Runs `job` on a thread that may block without holding back Swift's tasks.
    static func async(_ job: @escaping @Sendable () -> Void) {
        guard let queue else {
            DispatchQueue.global().async(execute: job)
            return
        }
        let context = Unmanaged.passRetained(Job(job)).toOpaque()
        urlloading_dispatch_async_f(queue, context) { context in
            guard let context else { return }
            Unmanaged<Job>.fromOpaque(context).takeRetainedValue().run()
        }
    }

    /// Drains `delegateQueue` there: libdispatch's continuation is the one
    /// allocation (the queue itself is the context).
    static func drain(_ delegateQueue: DelegateQueue) {
        guard let queue else {
            DispatchQueue.global().async { delegateQueue.drain() }
            return
        }
        let context = Unmanaged.passRetained(delegateQueue).toOpaque()
        urlloading_dispatch_async_f(queue, context) { context in
            guard let context else { return }
            Unmanaged<DelegateQueue>.fromOpaque(context).takeRetainedValue().drain()
        }
    }

    private final class Job: Sendable {
        let run: @Sendable () -> Void
        init(_ run: @escaping @Sendable () -> Void) { self.run = run }
    }
}
