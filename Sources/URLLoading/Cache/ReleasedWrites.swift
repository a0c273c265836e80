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
    /// Writes pending, by database path: a few paths, searched in order
    /// (not a `Dictionary`, whose first use of a key type scans the
    /// process's conformance records: see `KeyedTable`).
    private static let pending = Lock<[(path: String, writes: Int)]>([])
    private static let queue = DispatchQueue(label: "urlloading.cache.released-writes", qos: .utility)

    /// Runs `write` for the database at `path` after the caller returns.
    static func run(path: String, _ write: @escaping @Sendable () -> Void) {
        _ = exitHook
        pending.withLock { pending in
            if let index = pending.firstIndex(where: { $0.path == path }) {
                pending[index].writes += 1
            } else {
                pending.append((path, 1))
            }
        }
        queue.async {
            write()
            pending.withLock { pending in
                guard let index = pending.firstIndex(where: { $0.path == path }) else { return }
                pending[index].writes -= 1
                if pending[index].writes == 0 { pending.remove(at: index) }
            }
        }
    }

    /// Returns once no write for `path` is pending.
    static func wait(for path: String) {
        guard pending.withLock({ $0.contains { $0.path == path } }) else { return }
        queue.sync {}
    }

    /// Waits for every pending write, once per process at its exit.
    private static let exitHook: Void = {
        atexit { ReleasedWrites.queue.sync {} }
    }()
}
