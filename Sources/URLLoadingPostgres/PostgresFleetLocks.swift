import Foundation
import Locking
import Logging
import Postgres
import URLLoading

/// Coalescing of cache misses across a fleet with one PostgreSQL
/// advisory lock per cache key: the worker that takes it fetches, the others
/// block on it in the server and look in the cache again when it is let go
/// (without keeping it: a response that was not stored sends them all to the
/// origin at once, not one after another). A worker that dies lets its
/// locks go with its connections, so the waiters fetch themselves; a wait is
/// bounded (`waitBound`), after which the waiter fetches without the lock.
///
/// Locks are held on connections of a pool of their own, so a fetch that
/// holds one never takes a connection the stores need; each wait or hold
/// runs on a thread of its own (a blocked call in libpq).
final class PostgresFleetLocks: FleetCoalescing, Sendable {
    private let pool: PostgresPool
    private let waitBound: TimeInterval
    private let logger = Logger(label: "urlloading.cache")

    /// Lock connections per process: distinct keys in flight at once.
    static let maximumHeld = 32

    init(database: PostgresDatabase, waitBound: TimeInterval = 30) throws(StoreError) {
        do throws(PostgresError) {
            pool = try database.pool.sibling(maximum: Self.maximumHeld, applicationName: "urlloading-fleet-locks")
        } catch {
            throw PostgresDatabase.storeError(error)
        }
        self.waitBound = max(0.1, waitBound)
    }

    /// A stable 64-bit key for the lock (FNV-1a: the same in every process,
    /// unlike Swift's seeded hashing). Two cache keys sharing one only wait
    /// for each other needlessly; each still looks, and fetches, for itself.
    static func lockKey(_ key: String) -> Int64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in "urlloading-cache:\(key)".utf8 {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01b3
        }
        return Int64(bitPattern: hash)
    }

    func claim(key: String, granted: @escaping @Sendable (any FleetClaim) -> Void) {
        let lockKey = Self.lockKey(key)
        let thread = Thread { [pool, waitBound, logger] in
            // Named from the thread itself: on Linux a name given before `start()` is not the system's.
            Thread.current.name = "urlloading-fleet-lock"
            let connection: PostgresConnection
            do {
                connection = try pool.borrow()
            } catch {
                logger.warning("no connection to wait for a key across the fleet; fetching alone", metadata: ["error": "\(error)"])
                granted(Unclaimed())
                return
            }
            do {
                let free = try connection.query("SELECT pg_try_advisory_lock($1)", [.int(lockKey)]) { $0.bool(0) }.first ?? nil
                if free == true {
                    // Nobody fetches this key: this worker does, holding the lock until its response is stored.
                    granted(HeldLock(pool: pool, connection: connection, lockKey: lockKey))
                    return
                }
                // Another worker fetches it: wait for its lock to go, and let it go at once. The
                // response is stored by then (a look in the cache finds it), or will not be (not
                // cacheable, or the holder died): then every waiter fetches for itself, together,
                // rather than each holding the lock in turn while it fetches.
                // The wait's own bound (the connection's statement timeout would end it sooner).
                try connection.run("SET lock_timeout = \(Int(waitBound * 1000))")
                try connection.run("SET statement_timeout = \(Int(waitBound * 1000) + 1000)")
                try connection.run("SELECT pg_advisory_lock($1)", [.int(lockKey)])
                try connection.run("SELECT pg_advisory_unlock($1)", [.int(lockKey)])
                pool.giveBack(connection)
                granted(Unclaimed())
            } catch {
                // A lock timeout: the holder is slow or stuck; this worker fetches alone.
                logger.warning("waited for a key across the fleet until the bound; fetching alone", metadata: ["error": "\(error)"])
                pool.giveBack(connection)
                granted(Unclaimed())
            }
        }
        thread.start()
    }
}

/// An advisory lock held on a connection of the lock pool.
private final class HeldLock: FleetClaim, Sendable {
    private let pool: PostgresPool
    private let connection: Lock<PostgresConnection?>
    private let lockKey: Int64

    init(pool: PostgresPool, connection: PostgresConnection, lockKey: Int64) {
        self.pool = pool
        self.connection = Lock(connection)
        self.lockKey = lockKey
    }

    deinit { release() }

    func release() {
        guard let held = connection.withLock({ $0.take() }) else { return }
        // A broken connection has lost the lock with it: the pool drops it.
        _ = try? held.run("SELECT pg_advisory_unlock($1)", [.int(lockKey)])
        pool.giveBack(held)
    }
}

/// No lock: the wait ended without one (the bound, no connection).
private struct Unclaimed: FleetClaim {
    func release() {}
}
