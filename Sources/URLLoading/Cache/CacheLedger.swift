import Locking

/// What a persistent tier gathers between writes (both storages keep one):
/// LRU touches, written in batches, and counter increments for `cachetool
/// stats`. A hit then costs a read, not a write transaction.
package final class CacheLedger: Sendable {
    /// Touches gathered before one write.
    package static let touchBatch = 256
    /// An entry used less than this long ago is not touched again: the LRU
    /// order is kept to the minute, which eviction needs, and a hot entry
    /// costs no write per hit.
    package static let touchResolution: Double = 60

    private struct State {
        var touches: [Int64: Double] = [:]
        var counters: [String: Int] = [:]
    }

    private let state = Lock(State())

    package init() {}

    /// Notes the rows used at `now`; true when a batch is full and should be written.
    package func touch(_ ids: [Int64], at now: Double) -> Bool {
        state.withLock { state in
            for id in ids { state.touches[id] = now }
            return state.touches.count >= Self.touchBatch
        }
    }

    /// The touches gathered, now taken.
    package func takeTouches() -> [Int64: Double] {
        state.withLock { state in
            defer { state.touches.removeAll() }
            return state.touches
        }
    }

    /// Counts an event.
    package func count(_ counter: String) {
        state.withLock { $0.counters[counter, default: 0] += 1 }
    }

    /// The counter increments gathered, now taken.
    package func takeCounters() -> [String: Int] {
        state.withLock { state in
            defer { state.counters = [:] }
            return state.counters
        }
    }
}
