import Dispatch
import Foundation
import Locking

/// The last bookkeeping of released disk tiers (LRU touches and counters
/// a ledger still held), written on one serial queue after the tier is
/// gone: dropping a cache never waits for a write transaction and the
/// checkpoint that closing the database then does (about 2.5 ms with the
/// file system's syncs, most of a short-lived process's cache time).
///
/// Nothing is lost or reordered: opening a database with a write pending
/// waits for it, and so does the process's normal exit (`exit` or a
/// return from `main`). Each write is bounded by its database's busy
/// timeout, as any write is.
enum ReleasedWrites {
    /// Writes pending, by database path.
    private static let pending = Lock<[String: Int]>([:])
    private static let queue = DispatchQueue(label: "urlloading.cache.released-writes", qos: .utility)

    /// Runs `write` for the database at `path` after the caller returns.
    static func run(path: String, _ write: @escaping @Sendable () -> Void) {
        _ = exitHook
        pending.withLock { $0[path, default: 0] += 1 }
        queue.async {
            write()
            pending.withLock { pending in
                let left = (pending[path] ?? 1) - 1
                pending[path] = left > 0 ? left : nil
            }
        }
    }

    /// Returns once no write for `path` is pending.
    static func wait(for path: String) {
        guard pending.withLock({ $0[path] != nil }) else { return }
        queue.sync {}
    }

    /// Waits for every pending write, once per process at its exit.
    private static let exitHook: Void = {
        atexit { ReleasedWrites.queue.sync {} }
    }()
}
