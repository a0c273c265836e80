import Locking
import Storage

/// How much a disk tier holds, exact in every process that shares its file.
///
/// The usage row counts the rows whose id is at most its `counted_through`,
/// and the schema's triggers keep it so for those rows; the rows past it
/// (the newest stores: a new row takes the next id) are counted when
/// usage is read, and folded into the row once there are
/// `foldThreshold` of them. A store's transaction then writes the row's
/// page once in that many stores instead of every time (see the schema's
/// third migration). Everything here runs inside a transaction of the
/// caller's.
struct CacheUsage: Equatable {
    var entries: Int
    var bytes: Int
    /// How many of the entries are past `counted_through`.
    var uncounted: Int

    /// Rows past `counted_through` that a store folds into the usage row.
    static let foldThreshold = 32

    /// Usage as `connection`'s transaction sees it, reading the rows past
    /// `counted_through`.
    static func read(_ connection: Connection) throws(SQLiteError) -> CacheUsage {
        try read(connection, past: PastRows.current(connection, known: nil))
    }

    /// Usage in a store's transaction: the usage row's figures and what
    /// `past` knows of the rows past it, so that a store reads no rows.
    static func read(_ connection: Connection, past: PastRows) throws(SQLiteError) -> CacheUsage {
        let rows = try connection.query("SELECT entries, bytes FROM usage WHERE id = 1") { ($0.int(0), $0.int(1)) }
        let (entries, bytes) = rows.first ?? (0, 0)
        return CacheUsage(entries: entries &+ past.rows, bytes: bytes &+ past.bytes, uncounted: past.rows)
    }

    /// Counts the rows past `counted_through` in the usage row; returns
    /// what is then known of the rows past it (none).
    static func fold(_ connection: Connection, version: Int64) throws(SQLiteError) -> PastRows {
        let through = try connection.query(
            """
            UPDATE usage SET
                entries = entries + (SELECT count(*) FROM entries WHERE id > counted_through),
                bytes = bytes + (SELECT coalesce(sum(cost), 0) FROM entries WHERE id > counted_through),
                counted_through = max(counted_through, (SELECT coalesce(max(id), 0) FROM entries))
            WHERE id = 1 RETURNING counted_through
            """
        ) { $0.int64(0) }
        return PastRows(version: version, countedThrough: through.first ?? 0, rows: 0, bytes: 0)
    }

    /// The rows past the usage row's `counted_through`, as one connection
    /// last saw them: valid while no other connection has written since
    /// (`PRAGMA data_version` unchanged), and kept up to date by the
    /// store that changes them.
    struct PastRows: Sendable, Equatable {
        /// `PRAGMA data_version` when they were read.
        var version: Int64
        var countedThrough: Int64
        var rows: Int
        var bytes: Int

        /// What `connection`'s transaction sees: `known`, if no other
        /// connection wrote since, else read again.
        static func current(_ connection: Connection, known: PastRows?) throws(SQLiteError) -> PastRows {
            let version = try connection.scalarInt("PRAGMA data_version") ?? -1
            if let known, known.version == version { return known }
            let rows = try connection.query(
                """
                SELECT counted_through,
                    (SELECT count(*) FROM entries WHERE id > usage.counted_through),
                    (SELECT coalesce(sum(cost), 0) FROM entries WHERE id > usage.counted_through)
                FROM usage WHERE id = 1
                """
            ) { PastRows(version: version, countedThrough: $0.int64(0), rows: $0.int(1), bytes: $0.int(2)) }
            return rows.first ?? PastRows(version: version, countedThrough: 0, rows: 0, bytes: 0)
        }

        /// A row was added with this id and cost.
        mutating func added(id: Int64, cost: Int) {
            guard id > countedThrough else { return }
            rows += 1
            bytes = bytes &+ cost
        }

        /// A row with this id and cost was deleted.
        mutating func removed(id: Int64, cost: Int) {
            guard id > countedThrough else { return }
            rows -= 1
            bytes = bytes &- cost
        }
    }

    /// This process's `PastRows` for one writing connection, between its
    /// transactions. Taken (and forgotten) at the start of each write
    /// transaction, under the connection's lock; a store puts back what it
    /// leaves after its commit, unless another write began since
    /// (`generation`). Any other write leaves nothing: the next store
    /// reads the rows again.
    final class Memo: Sendable {
        private struct State {
            var generation: UInt64 = 0
            var known: PastRows?
        }

        private let state = Lock(State())

        init() {}

        /// At the start of a write transaction: what is known, and the
        /// generation to put it back with.
        func take() -> (known: PastRows?, generation: UInt64) {
            state.withLock { state in
                state.generation &+= 1
                defer { state.known = nil }
                return (state.known, state.generation)
            }
        }

        /// After a store's commit.
        func putBack(_ known: PastRows?, generation: UInt64) {
            state.withLock { state in
                if state.generation == generation { state.known = known }
            }
        }
    }
}
