import CSQLite

/// An error reported by SQLite: the extended result code, SQLite's message,
/// and the SQL that failed.
///
/// Bound values are never kept, so URLs, cookie values or credentials that
/// were bound to a statement cannot leak through `description`.
package struct SQLiteError: Error, CustomStringConvertible, Sendable, Equatable {
    /// The extended result code (`sqlite3_extended_errcode`).
    package let extendedCode: Int32
    /// SQLite's message (`sqlite3_errmsg`), which never contains bound values.
    package let message: String
    /// The statement text, with `?` placeholders in place of values.
    package let sql: String?
    /// The database file, when known.
    package let path: String?

    package init(extendedCode: Int32, message: String, sql: String? = nil, path: String? = nil) {
        self.extendedCode = extendedCode
        self.message = message
        self.sql = sql
        self.path = path
    }

    /// The primary result code (the low byte of the extended code).
    package var code: Int32 { extendedCode & 0xFF }

    /// The database file is damaged or is not a database at all.
    package var isCorruption: Bool { code == SQLITE_CORRUPT || code == SQLITE_NOTADB }
    /// Another connection holds a lock for longer than the busy timeout.
    package var isBusy: Bool { code == SQLITE_BUSY || code == SQLITE_LOCKED }
    /// The disk or the database's size limit is full.
    package var isFull: Bool { code == SQLITE_FULL }
    /// The file cannot be opened (missing directory, permissions).
    package var isCannotOpen: Bool { code == SQLITE_CANTOPEN }
    /// The database or its directory is read-only.
    package var isReadOnly: Bool { code == SQLITE_READONLY }

    package var description: String {
        let name = String(cString: sqlite3_errstr(extendedCode))
        var text = "SQLite error \(extendedCode) (\(name)): \(message)"
        if let path { text += " [\(path)]" }
        if let sql { text += " while executing `\(sql)`" }
        return text
    }
}
