#if URLLOADING_TSAN
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
#else
public import Synchronization
#endif

/// A value behind a lock: `Synchronization.Mutex` with its `withLock` shape,
/// and the one lock type of every module here.
///
/// Why not `Mutex` directly: on Linux `Mutex` locks with futex system calls
/// inside the standard library, which is not built with ThreadSanitizer, so
/// a sanitizer run cannot see that the lock orders what it guards and reports
/// every guarded access as a race. Builds made with `-DURLLOADING_TSAN`
/// (`tools/test --sanitize=thread`) lock a `pthread_mutex_t` instead, which
/// the sanitizer intercepts (and checks for lock-order inversions too); every
/// other build is `Mutex` itself, inlined, at no cost.
public struct Lock<Value>: ~Copyable {
    #if URLLOADING_TSAN
    @usableFromInline let box: PThreadBox<Value>
    #else
    @usableFromInline let mutex: Mutex<Value>
    #endif

    /// A lock guarding `initialValue`.
    @inlinable
    public init(_ initialValue: consuming sending Value) {
        #if URLLOADING_TSAN
        box = PThreadBox(initialValue)
        #else
        mutex = Mutex(initialValue)
        #endif
    }

    /// Runs `body` with the value while holding the lock, and returns what
    /// it returns. `body` must not take the same lock again.
    @inlinable
    public borrowing func withLock<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        #if URLLOADING_TSAN
        return try box.withLock(body)
        #else
        return try mutex.withLock(body)
        #endif
    }

    /// As `withLock`, when the lock is free; nil at once, `body` not run,
    /// when another thread holds it.
    @inlinable
    public borrowing func withLockIfAvailable<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result? {
        #if URLLOADING_TSAN
        return try box.withLockIfAvailable(body)
        #else
        return try mutex.withLockIfAvailable(body)
        #endif
    }
}

// The lock hands its value to one thread at a time, as `Mutex` does.
extension Lock: Sendable {}

#if URLLOADING_TSAN
/// The sanitizer build's storage: a heap-allocated `pthread_mutex_t` (a
/// pthread mutex must never move) beside the value it guards.
@usableFromInline
final class PThreadBox<Value>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    /// The value, with a byte after it. Alone, a value of no size (a lock
    /// guarding `()`) would sit one past the end of this object, at the
    /// start of the next heap block: the sanitizer's record of an access
    /// there outlives this object, and another lock later allocated before
    /// that address had its accesses reported as racing with it (the cookie
    /// store's writer lock, which guards `()`, was reported so).
    private nonisolated(unsafe) var storage: (value: Value, padding: UInt8)

    @usableFromInline
    init(_ value: consuming sending Value) {
        mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        let status = pthread_mutex_init(mutex, nil)
        precondition(status == 0, "pthread_mutex_init failed: \(status)")
        self.storage = (value, 0)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    @usableFromInline
    func withLock<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&storage.value)
    }

    @usableFromInline
    func withLockIfAvailable<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result? {
        guard pthread_mutex_trylock(mutex) == 0 else { return nil }
        defer { pthread_mutex_unlock(mutex) }
        return try body(&storage.value)
    }
}
#endif
