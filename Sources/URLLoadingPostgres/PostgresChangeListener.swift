import Foundation
import Locking
import Logging
import Postgres
import Synchronization
import URLLoading

/// Keeps the memory tiers of a fleet honest (issue 23): a worker that stores
/// or removes a key says so with `NOTIFY` in the same transaction, and every
/// other worker's listener drops that key from its memory tier when the
/// transaction commits. A thread of its own waits on a dedicated connection
/// (`LISTEN`); when the connection breaks it reconnects (0.5 s doubling to
/// 30 s) and, having maybe missed changes, drops the whole memory tier.
final class PostgresChangeListener: Sendable {
    /// The channel of cache changes.
    static let channel = "urlloading_cache"
    /// Payloads are limited to 8000 bytes; a longer key is sent as "all".
    static let longestKey = 7000

    /// This process's storage, so that its own changes are not undone here.
    let instance = String(UUID().uuidString.prefix(13)).lowercased()
    private let state: Shared

    private final class Shared: Sendable {
        let stopped = Atomic<Bool>(false)
        let heard = Atomic<Int>(0)
        let handler = Lock<(@Sendable (CacheChange) -> Void)?>(nil)
    }

    /// Listens from now on: the first `LISTEN` is done before this returns,
    /// so no change made after the cache opened is missed.
    init(pool: PostgresPool) throws(PostgresError) {
        let state = Shared()
        self.state = state
        let instance = self.instance
        let first = try pool.dedicatedConnection()
        try first.run("LISTEN \(Self.channel)")
        let thread = Thread { Self.listen(pool: pool, connection: first, instance: instance, state: state) }
        thread.name = "urlloading-cache-listener"
        thread.start()
    }

    deinit { stop() }

    /// Where changes of other processes go.
    func observe(_ handler: @escaping @Sendable (CacheChange) -> Void) {
        state.handler.withLock { $0 = handler }
    }

    /// How many changes of other processes this listener has passed on.
    var changesHeard: Int { state.heard.load(ordering: .relaxed) }

    /// Ends the thread (within a second) and closes its connection.
    func stop() {
        state.stopped.store(true, ordering: .relaxed)
    }

    /// The payload announcing `change` from this process.
    func payload(_ change: CacheChange) -> String {
        switch change {
        case .key(let key) where key.utf8.count <= Self.longestKey: "\(instance) k \(key)"
        case .key, .all: "\(instance) *"
        }
    }

    /// The change a payload from another process announces; nil for this
    /// process's own, or for a payload that is not ours.
    static func change(_ payload: String, ignoring instance: String) -> CacheChange? {
        let parts = payload.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count >= 2, parts[0] != instance else { return nil }
        switch parts[1] {
        case "*": return .all
        case "k" where parts.count == 3: return .key(String(parts[2]))
        default: return nil
        }
    }

    private static func listen(pool: PostgresPool, connection first: PostgresConnection, instance: String, state: Shared) {
        let logger = Logger(label: "urlloading.cache")
        var connection: PostgresConnection? = first
        var backoff = 0.5
        var missedSome = false
        func deliver(_ change: CacheChange) {
            state.handler.withLock { $0 }?(change)
            state.heard.add(1, ordering: .relaxed)
        }
        while !state.stopped.load(ordering: .relaxed) {
            guard let listening = connection else {
                do {
                    let made = try pool.dedicatedConnection()
                    try made.run("LISTEN \(channel)")
                    connection = made
                    backoff = 0.5
                    if missedSome { deliver(.all) }
                } catch {
                    logger.warning("the cache's change listener cannot connect; retrying", metadata: ["error": "\(error)"])
                    missedSome = true
                    let until = Date(timeIntervalSinceNow: backoff)
                    while Date() < until, !state.stopped.load(ordering: .relaxed) { usleep(100_000) }
                    backoff = min(backoff * 2, 30)
                }
                continue
            }
            var descriptor = pollfd(fd: listening.socket, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptor, 1, 1000) >= 0 || errno == EINTR else {
                connection = nil
                missedSome = true
                continue
            }
            do {
                for notice in try listening.notifications() where notice.channel == channel {
                    if let change = change(notice.payload, ignoring: instance) { deliver(change) }
                }
            } catch {
                logger.warning("the cache's change listener lost its connection; reconnecting", metadata: ["error": "\(error)"])
                connection = nil
                missedSome = true
            }
        }
    }
}
