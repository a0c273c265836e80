import Locking
#if URLLOADING_COUNT_LOCKS
import Synchronization
#endif

/// The task's one lock (`Lock`, with its `withLock`). Built with
/// `-DURLLOADING_COUNT_LOCKS` it counts every acquisition in one process-wide
/// number (`TaskLockCount.value`): `tools/profile-get --locks` prints it per
/// GET. Every other build is `Lock` itself, at no cost.
struct TaskLock<Value>: ~Copyable {
    let lock: Lock<Value>

    init(_ initialValue: consuming sending Value) {
        lock = Lock(initialValue)
    }

    /// Runs `body` with the value while holding the lock. `body` must not take it again.
    borrowing func withLock<Result: ~Copyable, E: Error>(_ body: (inout sending Value) throws(E) -> sending Result) throws(E) -> sending Result {
        #if URLLOADING_COUNT_LOCKS
        TaskLockCount.counter.add(1, ordering: .relaxed)
        #endif
        return try lock.withLock(body)
    }
}

extension TaskLock: Sendable {}

#if URLLOADING_COUNT_LOCKS
/// How many times tasks took their lock in this process (counting builds only).
public enum TaskLockCount {
    static let counter = Atomic<Int>(0)

    /// Acquisitions so far, by every task of the process.
    public static var value: Int { counter.load(ordering: .relaxed) }
}
#endif
