import Dispatch
import Foundation
import Locking
package import Storage
import Synchronization

/// What a persistent tier gathers between writes (both storages keep one):
/// LRU touches, written in batches, and counter increments for `cachetool
/// stats`. A hit then costs a read, not a write transaction.
///
/// What is gathered reaches the store without the owner calling `flush()`:
/// a full batch at once (on a queue of its own: the lookup that filled it
/// does not wait for the write), anything else within `writeDelay` of its first
/// item, and whatever is left when the process exits normally (`exit` or a
/// return from `main`), so a short-lived program's uses are counted too.
/// Those first two never wait for another process's lock (the store's
/// connection, and every lookup, would wait with them): they put what they
/// took back and try again later. `flush()` and the write at exit wait.
package final class CacheLedger: Sendable {
    /// Touches gathered before one write.
    package static let touchBatch = 256
    /// An entry used less than this long ago is not touched again: the LRU
    /// order is kept to the minute, which eviction needs, and a hot entry
    /// costs no write per hit.
    package static let touchResolution: Double = 60

    /// The rows used, by id, and when each was last used. Not a
    /// `Dictionary`: see `KeyedTable` (this one fills on a store's first lookup).
    package typealias Touches = KeyedTable<Int64, Double>
    /// Counter increments by name: a handful of names, searched in order.
    package typealias Counts = [(name: String, delta: Int)]

    private struct State {
        var touches = Touches()
        var counters: Counts = []

        mutating func add(_ delta: Int, to counter: String) {
            if let index = counters.firstIndex(where: { $0.name == counter }) {
                counters[index].delta &+= delta
            } else {
                counters.append((counter, delta))
            }
        }
    }

    /// How long gathered items may wait for a write when no batch fills:
    /// one write per this much time at most, for a cache used now and then.
    package static let writeDelaySeconds = 30
    private let writeDelay: DispatchTimeInterval

    private let state = Lock(State())
    /// Whether a delayed write is scheduled; set by the first item gathered
    /// after a write, so a busy cache schedules one write per delay.
    private let scheduled = Atomic<Bool>(false)
    /// The owner's write, set once the owner is whole.
    private let writer = Lock<(@Sendable (_ waitsForLocks: Bool) -> Void)?>(nil)
    /// Whether a full batch's write is queued or running (`writeSoon`).
    private let writingBatch = Atomic<Bool>(false)
    /// Held while the owner's write runs.
    private let writing = Lock(())
    /// No full batch is tried before this uptime (nanoseconds): set when
    /// another process held the lock (`putBack`).
    private let retryAfter = Atomic<UInt64>(0)
    private static let retryPause: UInt64 = 1_000_000_000
    /// The counters of every lookup, kept without the lock: a memory hit
    /// of a cache with a disk tier took 0.33–0.52 µs with a lock and a
    /// dictionary update for its count, 0.29–0.34 µs without.
    private let hits = Atomic<Int>(0)
    private let misses = Atomic<Int>(0)

    /// - Parameter writeDelay: How long gathered items may wait for a write
    ///   when no batch fills (`writeDelaySeconds`; tests make it short).
    package init(writeDelay: Duration = .seconds(writeDelaySeconds)) {
        let (seconds, attoseconds) = writeDelay.components
        self.writeDelay = .nanoseconds(Int(clamping: seconds * 1_000_000_000 + attoseconds / 1_000_000_000))
    }

    /// Names the owner's write, used for full batches, delayed writes and at
    /// exit; told whether it may wait for another process's lock (a full
    /// batch's may not: see `writeSoon`). The closure holds its owner
    /// weakly: the ledger never keeps a store open.
    package func writes(with write: @escaping @Sendable (_ waitsForLocks: Bool) -> Void) {
        writer.withLock { $0 = write }
        Self.live.withLock { live in
            live.removeAll { $0.ledger == nil }
            live.append(WeakLedger(ledger: self))
        }
        _ = Self.exitHook
    }

    /// Something was gathered: the first item after a write schedules one.
    private func gathered() {
        guard !scheduled.load(ordering: .relaxed),
            scheduled.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
        else { return }
        DispatchQueue.global(qos: .utility).asyncAfter(deadline: .now() + writeDelay) { [weak self] in
            guard let self else { return }
            self.scheduled.store(false, ordering: .releasing)
            self.writeNow(waitsForLocks: false)
        }
    }

    /// Runs the owner's write now (nothing when it has none or is gone),
    /// one at a time: the write at exit waits for a batch's write under way.
    private func writeNow(waitsForLocks: Bool) {
        let write = writer.withLock { $0 }
        writing.withLock { _ in write?(waitsForLocks) }
    }

    // MARK: At exit

    private struct WeakLedger: Sendable {
        weak var ledger: CacheLedger?
    }

    /// The ledgers of live stores, for the write at exit.
    private static let live = Lock<[WeakLedger]>([])

    /// Registers the write at exit, once per process.
    private static let exitHook: Void = {
        atexit { CacheLedger.writeAllAtExit() }
    }()

    /// Writes what every live ledger gathered. Each write is bounded by its
    /// store's busy timeout, as any write is.
    private static func writeAllAtExit() {
        let ledgers = live.withLock { live in live.compactMap(\.ledger) }
        for ledger in ledgers { ledger.writeNow(waitsForLocks: true) }
    }
    /// Notes the rows used at `now`. A full batch is written on a queue of
    /// its own (`writeSoon`), never by the lookup that filled it.
    package func touch(_ ids: [Int64], at now: Double) {
        let full = state.withLock { state in
            for id in ids { state.touches.set(now, for: id) }
            return state.touches.count >= Self.touchBatch
        }
        if full { writeSoon() } else { gathered() }
    }

    /// Writes what was gathered now, on a utility queue: a batch's write
    /// moves hundreds of rows (milliseconds), which the lookup that filled
    /// it does not wait for. One at a time: uses gathered meanwhile fill the
    /// next batch. The write does not wait for another process's lock (it
    /// would hold the store's connection, and every lookup with it, for as
    /// long): when the lock is taken, the batch is put back (`putBack`) and
    /// tried again a second later, or by the delayed write.
    private func writeSoon() {
        guard DispatchTime.now().uptimeNanoseconds >= retryAfter.load(ordering: .relaxed),
            !writingBatch.load(ordering: .relaxed),
            writingBatch.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
        else { return }
        DispatchQueue.global(qos: .utility).async { [weak self] in
            guard let self else { return }
            self.writeNow(waitsForLocks: false)
            self.writingBatch.store(false, ordering: .releasing)
        }
    }

    /// Returns what a write took and could not write because another
    /// process held the lock: merged with what was gathered since (the
    /// later use of a row wins; counts add up), written by the next batch
    /// a second from now at the earliest, or by the next delayed write.
    package func putBack(touches: Touches, counters: Counts) {
        retryAfter.store(DispatchTime.now().uptimeNanoseconds + Self.retryPause, ordering: .relaxed)
        state.withLock { state in
            for (id, time) in touches { state.touches.merge(id) { max($0 ?? time, time) } }
            for (name, delta) in counters { state.add(delta, to: name) }
        }
        gathered()
    }

    /// The touches gathered, now taken.
    package func takeTouches() -> Touches {
        state.withLock { state in
            defer { state.touches.removeAll() }
            return state.touches
        }
    }

    /// Counts an event.
    package func count(_ counter: String) {
        switch counter {
        case "hits": hits.add(1, ordering: .relaxed)
        case "misses": misses.add(1, ordering: .relaxed)
        default: state.withLock { $0.add(1, to: counter) }
        }
        gathered()
    }

    /// The counter increments gathered, now taken.
    package func takeCounters() -> Counts {
        let hits = hits.exchange(0, ordering: .relaxed)
        let misses = misses.exchange(0, ordering: .relaxed)
        return state.withLock { state in
            defer { state.counters = [] }
            if hits > 0 { state.add(hits, to: "hits") }
            if misses > 0 { state.add(misses, to: "misses") }
            return state.counters
        }
    }
}
