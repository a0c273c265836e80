import CSQLite
package import Foundation

/// A value bound to, or read from, an SQLite statement.
package enum SQLiteValue: Sendable, Equatable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob(Data)
}

/// A prepared statement. Owns its `sqlite3_stmt` and finalizes it in `deinit`.
///
/// Bound to the connection that prepared it: use it only inside that
/// connection's `read` or `write` scope.
package final class Statement {
    let handle: OpaquePointer
    /// The statement's text, kept for error messages (never with values).
    package let sql: String
    private unowned let connection: Connection

    init(connection: Connection, sql: String) throws(SQLiteError) {
        var stmt: OpaquePointer?
        let rc = sqlite3_prepare_v3(connection.handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &stmt, nil)
        guard rc == SQLITE_OK, let stmt else {
            throw connection.error(rc, sql: sql)
        }
        self.handle = stmt
        self.sql = sql
        self.connection = connection
    }

    deinit {
        sqlite3_finalize(handle)
    }

    /// Resets the statement and clears its bindings, ready for new values.
    package func reset() {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
    }

    // MARK: Binding (1-based indexes, as SQLite counts)

    package func bind(_ value: Int64, at index: Int32) throws(SQLiteError) {
        try check(sqlite3_bind_int64(handle, index, value))
    }

    package func bind(_ value: Int, at index: Int32) throws(SQLiteError) {
        try check(sqlite3_bind_int64(handle, index, Int64(value)))
    }

    package func bind(_ value: Double, at index: Int32) throws(SQLiteError) {
        try check(sqlite3_bind_double(handle, index, value))
    }

    package func bind(_ value: String, at index: Int32) throws(SQLiteError) {
        // With the byte count, so a NUL inside the string does not end it.
        var value = value
        let rc = value.withUTF8 { bytes -> Int32 in
            guard let base = bytes.baseAddress else {
                return sqlite3_bind_text(handle, index, "", 0, urlloading_sqlite_transient())
            }
            return sqlite3_bind_text64(
                handle, index, UnsafeRawPointer(base).assumingMemoryBound(to: CChar.self),
                sqlite3_uint64(bytes.count), urlloading_sqlite_transient(), UInt8(SQLITE_UTF8))
        }
        try check(rc)
    }

    package func bind(_ value: Data, at index: Int32) throws(SQLiteError) {
        let rc = value.withUnsafeBytes { raw -> Int32 in
            // A zero-length blob must still be a blob, not NULL.
            guard let base = raw.baseAddress, raw.count > 0 else {
                return sqlite3_bind_zeroblob(handle, index, 0)
            }
            return sqlite3_bind_blob64(handle, index, base, sqlite3_uint64(raw.count), urlloading_sqlite_transient())
        }
        try check(rc)
    }

    package func bindNull(at index: Int32) throws(SQLiteError) {
        try check(sqlite3_bind_null(handle, index))
    }

    package func bind(_ value: SQLiteValue, at index: Int32) throws(SQLiteError) {
        switch value {
        case .null: try bindNull(at: index)
        case .integer(let v): try bind(v, at: index)
        case .real(let v): try bind(v, at: index)
        case .text(let v): try bind(v, at: index)
        case .blob(let v): try bind(v, at: index)
        }
    }

    /// Binds `values` to parameters 1...n.
    package func bind(_ values: [SQLiteValue]) throws(SQLiteError) {
        for (offset, value) in values.enumerated() {
            try bind(value, at: Int32(offset + 1))
        }
    }

    // MARK: Stepping

    /// Advances the statement. Returns `true` when a row is available.
    @discardableResult
    package func step() throws(SQLiteError) -> Bool {
        let rc = sqlite3_step(handle)
        switch rc {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default:
            let error = connection.error(rc, sql: sql)
            sqlite3_reset(handle)
            throw error
        }
    }

    /// Runs the statement to completion, discarding rows.
    package func run() throws(SQLiteError) {
        while try step() {}
    }

    // MARK: Columns of the current row (0-based, as SQLite counts)

    package var columnCount: Int32 { sqlite3_column_count(handle) }

    package func isNull(_ column: Int32) -> Bool {
        sqlite3_column_type(handle, column) == SQLITE_NULL
    }

    package func int64(_ column: Int32) -> Int64 {
        sqlite3_column_int64(handle, column)
    }

    package func int(_ column: Int32) -> Int {
        Int(sqlite3_column_int64(handle, column))
    }

    package func double(_ column: Int32) -> Double {
        sqlite3_column_double(handle, column)
    }

    package func text(_ column: Int32) -> String? {
        guard let bytes = sqlite3_column_text(handle, column) else { return nil }
        let count = Int(sqlite3_column_bytes(handle, column))
        return String(decoding: UnsafeBufferPointer(start: bytes, count: count), as: UTF8.self)
    }

    package func data(_ column: Int32) -> Data? {
        if sqlite3_column_type(handle, column) == SQLITE_NULL { return nil }
        let count = Int(sqlite3_column_bytes(handle, column))
        guard count > 0, let base = sqlite3_column_blob(handle, column) else { return Data() }
        return Data(bytes: base, count: count)
    }

    /// Runs `body` on the column's bytes where SQLite holds them (valid
    /// only inside `body`), without copying them; empty for NULL.
    package func withBytes<T>(_ column: Int32, _ body: (UnsafeRawBufferPointer) -> T) -> T {
        // The pointer first, then its length, as SQLite's documentation asks.
        guard let base = sqlite3_column_blob(handle, column) else { return body(UnsafeRawBufferPointer(start: nil, count: 0)) }
        return body(UnsafeRawBufferPointer(start: base, count: Int(sqlite3_column_bytes(handle, column))))
    }

    package func value(_ column: Int32) -> SQLiteValue {
        switch sqlite3_column_type(handle, column) {
        case SQLITE_INTEGER: return .integer(int64(column))
        case SQLITE_FLOAT: return .real(double(column))
        case SQLITE_TEXT: return .text(text(column) ?? "")
        case SQLITE_BLOB: return .blob(data(column) ?? Data())
        default: return .null
        }
    }

    package func columnName(_ column: Int32) -> String {
        sqlite3_column_name(handle, column).map { String(cString: $0) } ?? ""
    }

    private func check(_ rc: Int32) throws(SQLiteError) {
        if rc != SQLITE_OK { throw connection.error(rc, sql: sql) }
    }
}

@available(*, unavailable)
extension Statement: Sendable {}
