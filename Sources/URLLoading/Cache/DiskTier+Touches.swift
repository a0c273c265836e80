import Logging
import Storage

/// The LRU order's bookkeeping: uses and `cachetool stats` counters are
/// gathered by the ledger and written in batches, off the lookups.
extension DiskTier {
    /// Counts an event for `cachetool stats` (written with the next flush).
    func count(_ counter: String) {
        ledger.count(counter)
    }

    /// Writes the gathered LRU updates and counter increments in one transaction.
    func flushTouches() {
        writeGathered(waitsForLocks: true)
    }

    /// `flushTouches`, or, when it may not wait for another process's lock
    /// and finds it taken, what it took goes back to the ledger.
    func writeGathered(waitsForLocks: Bool) {
        let touches = ledger.takeTouches()
        let counters = ledger.takeCounters()
        guard !touches.isEmpty || !counters.isEmpty else { return }
        if !Self.write(touches: touches, counters: counters, to: database, waitsForLocks: waitsForLocks, forgetting: pastRows, logger: logger) {
            ledger.putBack(touches: touches, counters: counters)
        }
    }

    /// Writes gathered touches and counter increments in one transaction.
    /// Returns false, having written nothing, when it may not wait and
    /// another process holds the lock; any other failure is logged (what
    /// it held is lost: a later use records it again).
    @discardableResult
    static func write(
        touches: CacheLedger.Touches, counters: CacheLedger.Counts, to database: Database, waitsForLocks: Bool = true,
        forgetting pastRows: CacheUsage.Memo? = nil, logger: Logger
    ) -> Bool {
        do throws(StorageError) {
            try database.write(waitsForLocks: waitsForLocks) { (connection: Connection) throws(SQLiteError) in
                // Touched rows move past the usage row's count.
                _ = pastRows?.take()
                try applyTouches(touches, connection)
                for (name, delta) in counters {
                    try connection.run(
                        "INSERT INTO counters(name, value) VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET value = value + excluded.value",
                        [.text(name), .integer(Int64(delta))])
                }
            }
        } catch  where !waitsForLocks && error.isBusy {
            return false
        } catch {
            logger.warning("cache LRU update failed", metadata: ["error": "\(StoreError(error, path: database.path))"])
        }
        return true
    }

    /// Moves each touched row to the next id, in the order of use, and
    /// notes when it was used: the id order stays the LRU order.
    static func applyTouches(_ touches: CacheLedger.Touches, _ connection: Connection) throws(SQLiteError) {
        for (id, time) in touches.sorted(by: { ($0.value, $0.key) < ($1.value, $1.key) }) {
            try connection.run(
                "UPDATE entries SET id = (SELECT max(id) FROM entries) + 1, last_used = max(last_used, ?) WHERE id = ?",
                [.real(time), .integer(id)])
        }
    }
}
