/// A failure of a PostgreSQL call: connecting, a statement, a schema check.
///
/// Never carries the connection string (it may hold a password) nor a
/// statement's parameters; the server's message and its SQLSTATE only.
package struct PostgresError: Error, CustomStringConvertible, Sendable {
    package enum Kind: Sendable, Equatable {
        /// The server could not be reached, refused the connection, or the
        /// connection broke.
        case connection
        /// A statement failed; `sqlState` says why.
        case statement
        /// The database's schema was written by a newer version of URLLoading.
        case newerSchema
        /// The database records a migration this code does not know.
        case unknownMigration
        /// Every connection of the pool stayed busy for longer than the bound.
        case poolExhausted
        /// The server's answer was not what the statement promises (a
        /// column's type, a count): a damaged or foreign table.
        case unexpectedAnswer
    }

    package let kind: Kind
    /// A sentence a person can act on.
    package let message: String
    /// The server's SQLSTATE code (for example "40P01" for a deadlock), if any.
    package let sqlState: String?

    package init(_ kind: Kind, _ message: String, sqlState: String? = nil) {
        self.kind = kind
        self.message = message
        self.sqlState = sqlState
    }

    /// A serialization failure or deadlock: the transaction may be retried.
    package var isRetryable: Bool { sqlState == "40001" || sqlState == "40P01" }
    /// The disk of the server is full.
    package var isDiskFull: Bool { sqlState == "53100" }
    /// A lock or statement timeout ended the statement.
    package var isTimeout: Bool { sqlState == "55P03" || sqlState == "57014" }

    package var description: String {
        sqlState.map { "\(message) (SQLSTATE \($0))" } ?? message
    }
}
