public import URLLoading
package import Postgres
import Foundation
import Storage

/// A PostgreSQL database that a fleet of workers shares for its stores:
/// the HTTP cache's persistent tier, cookies and credentials.
/// Opened once per process; its connections are pooled, its schema brought
/// up to date by migrations (a database written by a newer version is
/// refused).
///
/// The connection string (a libpq `key=value` string or a
/// `postgresql://` URL) may hold a password: it is kept only to connect,
/// and never appears in an error, a log line or a `description`.
public final class PostgresDatabase: Sendable, CustomStringConvertible {
    package let pool: PostgresPool
    /// What `description` shows: the database's name and host, never the password.
    private let display: String

    /// Connects to the database and checks that it answers.
    ///
    /// - Parameters:
    ///   - url: A libpq connection string or `postgresql://` URL.
    ///   - maximumConnections: Connections this process may hold at once.
    /// - Throws: `StoreError` (`.ioError` when the server cannot be reached).
    public init(url: String, maximumConnections: Int = 8) throws(StoreError) {
        do throws(PostgresError) {
            pool = try PostgresPool(url, maximum: maximumConnections)
            display = try pool.withConnection { (connection) throws(PostgresError) in
                let names = try connection.query("SELECT current_database()::text, coalesce(inet_server_addr()::text, 'local socket')") {
                    "\($0.text(0) ?? "?") at \($0.text(1) ?? "?")"
                }
                return names.first ?? "?"
            }
        } catch {
            throw Self.storeError(error)
        }
    }

    /// The database's name and server, never a password.
    public var description: String { "PostgresDatabase(\(display))" }

    /// A failure of PostgreSQL in the stores' public shape.
    package static func storeError(_ error: PostgresError) -> StoreError {
        switch error.kind {
        case .newerSchema: return StoreError(kind: .newerSchema, message: error.description, path: nil)
        case .unknownMigration, .unexpectedAnswer: return StoreError(kind: .corrupt, message: error.description, path: nil)
        case .poolExhausted: return StoreError(kind: .locked, message: error.description, path: nil)
        case .statement where error.isTimeout: return StoreError(kind: .locked, message: error.description, path: nil)
        case .statement where error.isDiskFull: return StoreError(kind: .diskFull, message: error.description, path: nil)
        default: return StoreError(kind: .ioError, message: "PostgreSQL: \(error.description)", path: nil)
        }
    }

    /// Brings a store's tables up to date and listens to its channel (from
    /// before this returns, so that no change made after it is missed).
    func openStore(_ store: String, migrations: [Migration], channel: String) throws(StoreError) -> PostgresListener {
        do throws(PostgresError) {
            try pool.withConnection { (connection) throws(PostgresError) in
                try PostgresMigrator.migrate(connection, store: store, migrations: migrations)
            }
            return try PostgresListener(pool: pool, channel: channel)
        } catch {
            throw Self.storeError(error)
        }
    }

    /// Runs `body` with a pooled connection, its failures as `StoreError`s.
    package func withConnection<T>(_ body: (PostgresConnection) throws(PostgresError) -> T) throws(StoreError) -> T {
        do throws(PostgresError) {
            return try pool.withConnection(body)
        } catch {
            throw Self.storeError(error)
        }
    }
}
