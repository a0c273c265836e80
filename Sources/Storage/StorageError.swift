/// An error of the storage layer that is not a single SQLite call's failure:
/// schema versions, file permissions, recovery from damaged files.
///
/// A struct around a private code, so that new cases never break a caller's
/// `switch`; test with `==` against the static members' `kind`s or with the
/// `is...` properties.
package struct StorageError: Error, CustomStringConvertible, Sendable {
    package enum Kind: Sendable, Equatable {
        /// The database was written by a newer version of this library.
        case newerSchema
        /// The database records a migration this code does not know.
        case unknownMigration
        /// The database file is damaged or not a database.
        case corrupt
        /// A private store's file is readable or writable by other users.
        case fileAccessibleByOthers
        /// A file system operation failed.
        case fileSystem
        /// The migration list itself is malformed (a programming error).
        case invalidMigrations
        /// An SQLite operation failed (locked past the busy timeout, disk
        /// full, I/O): `underlying` says which.
        case sqlite
    }

    /// What went wrong.
    package let kind: Kind
    /// A sentence a person can act on.
    package let message: String
    /// The database file concerned.
    package let path: String?
    /// The SQLite error underneath, if any.
    package let underlying: SQLiteError?

    package var description: String {
        var text = message
        if let path { text += " [\(path)]" }
        if let underlying { text += " (\(underlying))" }
        return text
    }

    static func newerSchema(found: Int, supported: Int, path: String) -> StorageError {
        StorageError(
            kind: .newerSchema,
            message:
                "the database has schema version \(found) but this program knows versions up to \(supported); it was written by a newer version of URLLoading — upgrade this program or use another store directory",
            path: path, underlying: nil)
    }

    static func unknownMigration(version: Int, recorded: String, expected: String, path: String) -> StorageError {
        StorageError(
            kind: .unknownMigration,
            message: "schema version \(version) of the database is \"\(recorded)\" but this program's version \(version) is \"\(expected)\"; the file belongs to another program or another store",
            path: path, underlying: nil)
    }

    static func corrupt(_ error: SQLiteError, path: String) -> StorageError {
        StorageError(
            kind: .corrupt,
            message: "the file is damaged or is not an SQLite database",
            path: path, underlying: error)
    }

    static func accessibleByOthers(mode: UInt32, path: String) -> StorageError {
        StorageError(
            kind: .fileAccessibleByOthers,
            message: "the file has mode \(String(mode & 0o777, radix: 8)) and can be read by other users; run `chmod 600` on it, or move it away, before opening it again",
            path: path, underlying: nil)
    }

    package static func fileSystem(_ what: String, errno code: Int32, path: String) -> StorageError {
        StorageError(
            kind: .fileSystem,
            message: "\(what): \(String(cString: strerror(code)))",
            path: path, underlying: nil)
    }

    /// An SQLite failure, with its own message and the file.
    package static func sqlite(_ error: SQLiteError, path: String?) -> StorageError {
        if error.isCorruption { return corrupt(error, path: path ?? error.path ?? "") }
        return StorageError(kind: .sqlite, message: error.message, path: path ?? error.path, underlying: error)
    }

    /// Another process held the lock past the busy timeout.
    package var isBusy: Bool { underlying?.isBusy ?? false }
    /// The disk is full.
    package var isFull: Bool { underlying?.isFull ?? false }

    static func invalidMigrations(_ what: String) -> StorageError {
        StorageError(kind: .invalidMigrations, message: what, path: nil, underlying: nil)
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
