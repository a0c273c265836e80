import Locking
#if URLLOADING_COUNT_LOCKS
import Synchronization
#endif

/// The task's one lock (`Lock`, with its `withLock`). Built with
/// `-DURLLOADING_COUNT_LOCKS` it counts every acquisition in one process-wide
/// number (`TaskLockCount.value`) and per call site (`TaskLockCount.sites`):
/// `tools/profile-get --locks` prints them per GET. Every other build is
/// `Lock` itself, at no cost.
struct TaskLock<Value>: ~Copyable {
    let lock: Lock<Value>

    init(_ initialValue: consuming sending Value) {
        lock = Lock(initialValue)
    }

    #if URLLOADING_COUNT_LOCKS
    /// Runs `body` with the value while holding the lock. `body` must not take it again.
    borrowing func withLock<Result: ~Copyable, E: Error>(
        file: StaticString = #fileID, line: UInt = #line, _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        TaskLockCount.counter.add(1, ordering: .relaxed)
        TaskLockCount.count(site: "\(file):\(line)")
        return try lock.withLock(body)
    }
    #else
    /// Runs `body` with the value while holding the lock. `body` must not take it again.
    borrowing func withLock<Result: ~Copyable, E: Error>(_ body: (inout sending Value) throws(E) -> sending Result) throws(E) -> sending Result {
        try lock.withLock(body)
    }
    #endif
}

extension TaskLock: Sendable {}

#if URLLOADING_COUNT_LOCKS
/// How many times tasks took their lock in this process (counting builds only).
public enum TaskLockCount {
    static let counter = Atomic<Int>(0)
    private static let bySite = Mutex<[String: Int]>([:])

    static func count(site: String) {
        bySite.withLock { $0[site, default: 0] += 1 }
    }

    /// Acquisitions so far, by every task of the process.
    public static var value: Int { counter.load(ordering: .relaxed) }

    /// Acquisitions so far by call site (`file:line`), most first.
    public static var sites: [(site: String, count: Int)] {
        bySite.withLock { $0.map { (site: $0.key, count: $0.value) } }.sorted { ($0.count, $1.site) > ($1.count, $0.site) }
    }

    /// Forgets the counts by call site.
    public static func resetSites() {
        bySite.withLock { $0 = [:] }
    }
}
#endif
