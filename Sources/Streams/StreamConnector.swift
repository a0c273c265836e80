import Foundation
import Locking
#if canImport(Glibc)
import Glibc
#endif

/// Where connections are opened: name resolution, connect and a proxy's
/// tunnel block, so they run on a few threads of their own (at most
/// `limit`, started when work comes and gone when none is left), never on
/// a loop. A connect waits its turn when `limit` others are under way.
enum StreamConnector {
    /// Connects under way at once, at most.
    static let limit = 8

    private struct Pool {
        /// Taken jobs are nil: what they hold goes with them.
        var waiting: [(@Sendable () -> Void)?] = []
        var next = 0
        var threads = 0
    }

    private static let pool = Lock(Pool())

    /// Runs `job` on a connecting thread.
    static func submit(_ job: @escaping @Sendable () -> Void) {
        let start = pool.withLock { pool -> Bool in
            pool.waiting.append(job)
            guard pool.threads < limit else { return false }
            pool.threads += 1
            return true
        }
        guard start else { return }
        let thread = Thread {
            Thread.current.name = "URLStreamConn"
            work()
        }
        thread.start()
    }

    private static func work() {
        while let job = take() { job() }
    }

    /// The next job, or nil (and one thread fewer) when none waits.
    private static func take() -> (@Sendable () -> Void)? {
        pool.withLock { pool -> (@Sendable () -> Void)? in
            guard pool.next < pool.waiting.count else {
                pool.waiting.removeAll(keepingCapacity: pool.waiting.count <= 1024)
                pool.next = 0
                pool.threads -= 1
                return nil
            }
            defer {
                pool.waiting[pool.next] = nil
                pool.next += 1
            }
            return pool.waiting[pool.next]
        }
    }
}
