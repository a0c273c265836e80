import Locking

/// Items that many threads hand over at once, written in batches: the
/// thread that finds no write under way writes what is waiting, and goes
/// on writing what arrived meanwhile; the others return at once instead of
/// queueing for the writer's lock. Each item is in exactly one batch, and
/// batches are written one at a time, in the order their items came.
final class WriteCombiner<Item: Sendable>: Sendable {
    private let state = Lock<(waiting: [Item], writing: Bool)>(([], false))

    init() {}

    /// Hands `item` over: written now by this thread with `write` (with
    /// whatever else waits), or soon by the thread writing now (callers
    /// pass the same `write`).
    func add(_ item: Item, write: ([Item]) -> Void) {
        let writes = state.withLock { state -> Bool in
            state.waiting.append(item)
            guard !state.writing else { return false }
            state.writing = true
            return true
        }
        guard writes else { return }
        while true {
            let batch = state.withLock { state -> [Item] in
                defer { state.waiting = [] }
                if state.waiting.isEmpty { state.writing = false }
                return state.waiting
            }
            if batch.isEmpty { return }
            write(batch)
        }
    }
}
