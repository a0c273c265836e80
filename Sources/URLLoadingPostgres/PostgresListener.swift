import Foundation
import Locking
import Logging
import Postgres
import Synchronization
import URLLoading

/// What the other workers of a fleet changed: a worker that
/// changes a store says so with `NOTIFY` on the store's channel in the same
/// transaction, and every other worker's listener hears it when the
/// transaction commits. A thread of its own waits on a dedicated connection
/// (`LISTEN`); when the connection breaks it reconnects (0.5 s doubling to
/// 30 s) and says it may have missed changes (`nil`).
final class PostgresListener: Sendable {
    /// The channel of cache changes.
    static let cacheChannel = "urlloading_cache"
    /// The channel of cookie changes.
    static let cookieChannel = "urlloading_cookies"
    /// Payloads are limited to 8000 bytes.
    static let longestPayload = 7900

    /// The channel listened to.
    let channel: String
    /// This process's storage, so that its own changes are not undone here.
    let instance = String(UUID().uuidString.prefix(13)).lowercased()
    private let state: Shared

    private final class Shared: Sendable {
        let stopped = Atomic<Bool>(false)
        let heard = Atomic<Int>(0)
        let handler = Lock<(@Sendable (String?) -> Void)?>(nil)
    }

    /// Listens from now on: the first `LISTEN` is done before this returns,
    /// so no change made after the cache opened is missed.
    init(pool: PostgresPool, channel: String) throws(PostgresError) {
        let state = Shared()
        self.state = state
        self.channel = channel
        let instance = self.instance
        let first = try pool.dedicatedConnection()
        try first.run("LISTEN \(channel)")
        let thread = Thread {
            // Named from the thread itself: on Linux a name given before `start()` is not the system's.
            Thread.current.name = "urlloading-cache-listener"
            Self.listen(pool: pool, channel: channel, connection: first, instance: instance, state: state)
        }
        thread.start()
    }

    deinit { stop() }

    /// Where other processes' payloads go (without the sender), on the
    /// listener's thread; nil when changes may have been missed.
    func observe(_ handler: @escaping @Sendable (String?) -> Void) {
        state.handler.withLock { $0 = handler }
    }

    /// Sends `payload` to the other workers when `connection`'s transaction commits.
    func announce(_ payload: String, on connection: PostgresConnection) throws(PostgresError) {
        try connection.run("SELECT pg_notify($1, $2)", [.text(channel), .text("\(instance) \(payload)")])
    }

    /// The payload of another process's notice; nil for this process's own.
    static func payload(_ text: String, ignoring instance: String) -> String? {
        guard let space = text.firstIndex(of: " "), text[..<space] != instance else { return nil }
        return String(text[text.index(after: space)...])
    }

    /// How many changes of other processes this listener has passed on.
    var changesHeard: Int { state.heard.load(ordering: .relaxed) }

    /// Ends the thread (within a second) and closes its connection.
    func stop() {
        state.stopped.store(true, ordering: .relaxed)
    }

    private static func listen(pool: PostgresPool, channel: String, connection first: PostgresConnection, instance: String, state: Shared) {
        let logger = Logger(label: "urlloading.cache")
        var connection: PostgresConnection? = first
        var backoff = 0.5
        var missedSome = false
        func deliver(_ change: String?) {
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
                    if missedSome { deliver(nil) }
                } catch {
                    logger.warning("the fleet's change listener cannot connect; retrying", metadata: ["channel": "\(channel)", "error": "\(error)"])
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
                    if let payload = payload(notice.payload, ignoring: instance) { deliver(payload) }
                }
            } catch {
                logger.warning("the fleet's change listener lost its connection; reconnecting", metadata: ["channel": "\(channel)", "error": "\(error)"])
                connection = nil
                missedSome = true
            }
        }
    }
}
