package import Foundation

/// Connections to one database, handed to one borrower at a time: at most
/// `maximum` open, idle ones reused, broken ones dropped. A borrower waits
/// for a free connection at most `waitBound` seconds.
package final class PostgresPool: @unchecked Sendable {
    // @unchecked: every field is guarded by `condition`.
    private let conninfo: String
    private let applicationName: String
    private let maximum: Int
    private let waitBound: TimeInterval
    private let condition = NSCondition()
    private var idle: [PostgresConnection] = []
    private var open = 0

    /// A pool; the first connection is made (and checked) now.
    ///
    /// - Throws: `PostgresError` when the server cannot be reached.
    package init(_ conninfo: String, maximum: Int = 8, waitBound: TimeInterval = 30, applicationName: String = "urlloading") throws(PostgresError) {
        self.conninfo = conninfo
        self.applicationName = applicationName
        self.maximum = max(1, maximum)
        self.waitBound = waitBound
        let first = try PostgresConnection(conninfo, applicationName: applicationName)
        idle = [first]
        open = 1
    }

    /// A new connection outside the pool (a listener keeps one for itself).
    package func dedicatedConnection() throws(PostgresError) -> PostgresConnection {
        try PostgresConnection(conninfo, applicationName: applicationName)
    }

    /// Another pool on the same database (locks held for a fetch's length
    /// must never take the connections the stores need).
    package func sibling(maximum: Int, applicationName: String) throws(PostgresError) -> PostgresPool {
        try PostgresPool(conninfo, maximum: maximum, waitBound: waitBound, applicationName: applicationName)
    }

    /// Runs `body` with a connection of the pool.
    package func withConnection<T>(_ body: (PostgresConnection) throws(PostgresError) -> T) throws(PostgresError) -> T {
        let connection = try borrow()
        do throws(PostgresError) {
            let value = try body(connection)
            giveBack(connection)
            return value
        } catch {
            giveBack(connection)
            throw error
        }
    }

    /// Takes a connection for longer than one call (a held advisory lock);
    /// give it back with `giveBack`.
    package func borrow() throws(PostgresError) -> PostgresConnection {
        let deadline = Date(timeIntervalSinceNow: waitBound)
        condition.lock()
        while true {
            if let connection = idle.popLast() {
                condition.unlock()
                return connection
            }
            if open < maximum {
                open += 1
                condition.unlock()
                do throws(PostgresError) {
                    return try PostgresConnection(conninfo, applicationName: applicationName)
                } catch {
                    condition.lock()
                    open -= 1
                    condition.signal()
                    condition.unlock()
                    throw error
                }
            }
            if !condition.wait(until: deadline) {
                condition.unlock()
                throw PostgresError(.poolExhausted, "all \(maximum) PostgreSQL connections stayed busy for \(Int(waitBound)) s")
            }
        }
    }

    /// Returns a borrowed connection (a broken one is closed).
    package func giveBack(_ connection: PostgresConnection) {
        condition.lock()
        if connection.isHealthy {
            idle.append(connection)
        } else {
            open -= 1
        }
        condition.signal()
        condition.unlock()
    }
}
