import CPostgres
import Foundation

/// One connection to a PostgreSQL server through libpq, used by one thread at
/// a time (a `PostgresPool` hands it out). Statements go with binary
/// parameters and come back in binary format; the connection string is
/// never kept in an error or a description (it may hold a password).
package final class PostgresConnection: @unchecked Sendable {
    // @unchecked: libpq's PGconn, and `prepared` beside it, are used by one
    // thread at a time: the pool gives a connection to one borrower at a
    // time, and a listener's or a held lock's connection has one owner.
    private let connection: OpaquePointer
    /// Statements prepared on this connection, by their text: a statement
    /// run again skips the server's parse and plan (half of a small query's time).
    private var prepared: [String: String] = [:]
    /// Prepared statements kept per connection; past it, statements run unnamed.
    static let preparedLimit = 64

    /// Seconds a statement may run before the server ends it.
    package static let defaultStatementTimeout = 30

    /// Connects (a libpq connection string or a `postgresql://` URL).
    ///
    /// - Throws: `PostgresError` of kind `.connection`, with libpq's message.
    package init(_ conninfo: String, applicationName: String = "urlloading", statementTimeout: Int = defaultStatementTimeout) throws(PostgresError) {
        // Defaults first: what the connection string says wins (libpq takes
        // the later of a keyword given twice, and expands `dbname` in place).
        let keywords = ["connect_timeout", "application_name", "options", "dbname"]
        let values = ["10", applicationName, "-c statement_timeout=\(max(1, statementTimeout) * 1000)", conninfo]
        let made: OpaquePointer? = withCStrings(keywords) { keywordPointers in
            withCStrings(values) { valuePointers in PQconnectdbParams(keywordPointers, valuePointers, 1) }
        }
        guard let made else { throw PostgresError(.connection, "libpq could not allocate a connection") }
        guard PQstatus(made) == CONNECTION_OK else {
            let message = Self.message(PQerrorMessage(made))
            PQfinish(made)
            throw PostgresError(.connection, "cannot connect to PostgreSQL: \(message)")
        }
        // The server's notices ("already exists, skipping") are not the caller's output.
        PQsetNoticeProcessor(made, { _, _ in }, nil)
        connection = made
    }

    deinit { PQfinish(connection) }

    /// Whether the connection still works (a broken one is dropped by the pool).
    package var isHealthy: Bool { PQstatus(connection) == CONNECTION_OK }

    /// The server's version as a number (for example 150018).
    package var serverVersion: Int { Int(PQserverVersion(connection)) }

    /// The socket, for waiting on notifications.
    package var socket: Int32 { PQsocket(connection) }

    /// Runs one statement with parameters; its rows read by `row`.
    @discardableResult
    package func query<T>(_ sql: String, _ parameters: [PostgresValue] = [], _ row: (PostgresRow) throws -> T) throws(PostgresError) -> [T] {
        let result = try execute(sql, parameters)
        defer { PQclear(result) }
        let count = PQntuples(result)
        var rows: [T] = []
        rows.reserveCapacity(Int(count))
        for index in 0..<count {
            do {
                rows.append(try row(PostgresRow(result: result, row: index)))
            } catch let error as PostgresError {
                throw error
            } catch {
                throw PostgresError(.unexpectedAnswer, "a row could not be read: \(error)")
            }
        }
        return rows
    }

    /// Runs one statement; returns the number of rows it changed.
    @discardableResult
    package func run(_ sql: String, _ parameters: [PostgresValue] = []) throws(PostgresError) -> Int {
        let result = try execute(sql, parameters)
        defer { PQclear(result) }
        guard let tuples = PQcmdTuples(result) else { return 0 }
        return Int(String(cString: tuples)) ?? 0
    }

    /// The first column of the first row as an integer, or nil.
    package func scalarInt(_ sql: String, _ parameters: [PostgresValue] = []) throws(PostgresError) -> Int64? {
        try query(sql, parameters) { $0.int64(0) }.first ?? nil
    }

    /// Runs a script of several statements without parameters (migrations).
    package func runScript(_ sql: String) throws(PostgresError) {
        guard let result = PQexec(connection, sql) else { throw PostgresError(.connection, Self.message(PQerrorMessage(connection))) }
        defer { PQclear(result) }
        try check(result)
    }

    /// Runs `body` in a transaction: committed when it returns, rolled back
    /// when it throws. A serialization failure or deadlock is retried (three times).
    package func transaction<T>(_ body: (PostgresConnection) throws(PostgresError) -> T) throws(PostgresError) -> T {
        var attempt = 0
        while true {
            attempt += 1
            try run("BEGIN")
            do throws(PostgresError) {
                let value = try body(self)
                try run("COMMIT")
                return value
            } catch {
                _ = try? run("ROLLBACK")
                if error.isRetryable && attempt < 3 { continue }
                throw error
            }
        }
    }

    /// Notifications received so far (after `LISTEN`): channel and payload.
    /// Reads what the socket holds without waiting.
    package func notifications() throws(PostgresError) -> [(channel: String, payload: String)] {
        guard PQconsumeInput(connection) == 1 else {
            throw PostgresError(.connection, "the notification connection broke: \(Self.message(PQerrorMessage(connection)))")
        }
        var received: [(String, String)] = []
        while let notice = PQnotifies(connection) {
            received.append((String(cString: notice.pointee.relname), String(cString: notice.pointee.extra)))
            PQfreemem(notice)
        }
        return received
    }

    private func execute(_ sql: String, _ parameters: [PostgresValue]) throws(PostgresError) -> OpaquePointer {
        let types = parameters.map(\.typeID)
        let encoded = parameters.map(\.encoded)
        let lengths = encoded.map { Int32($0?.count ?? 0) }
        let formats = [Int32](repeating: 1, count: parameters.count)
        let name = try preparedName(sql, types: types)
        let result: OpaquePointer? = withByteArrays(encoded) { values in
            if let name { return PQexecPrepared(connection, name, Int32(parameters.count), values, lengths, formats, 1) }
            return PQexecParams(connection, sql, Int32(parameters.count), types, values, lengths, formats, 1)
        }
        guard let result else { throw PostgresError(.connection, Self.message(PQerrorMessage(connection))) }
        do throws(PostgresError) {
            try check(result)
        } catch {
            PQclear(result)
            throw error
        }
        return result
    }

    /// The name of `sql` prepared on this connection (prepared now if need
    /// be); nil for what the server cannot prepare (BEGIN, SET, LISTEN) or
    /// past the limit.
    private func preparedName(_ sql: String, types: [UInt32]) throws(PostgresError) -> String? {
        if let name = prepared[sql] { return name }
        guard prepared.count < Self.preparedLimit,
            let verb = sql.drop(while: { $0 == " " || $0 == "\n" }).prefix(6).uppercased() as String?,
            ["SELECT", "INSERT", "UPDATE", "DELETE"].contains(verb)
        else { return nil }
        let name = "urlloading_\(prepared.count)"
        guard let result = PQprepare(connection, name, sql, Int32(types.count), types) else {
            throw PostgresError(.connection, Self.message(PQerrorMessage(connection)))
        }
        defer { PQclear(result) }
        try check(result)
        prepared[sql] = name
        return name
    }

    private func check(_ result: OpaquePointer) throws(PostgresError) {
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY:
            return
        default:
            let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) }
            let message = Self.message(PQresultErrorMessage(result))
            throw PostgresError(isHealthy ? .statement : .connection, message.isEmpty ? "the statement failed" : message, sqlState: state)
        }
    }

    private static func message(_ text: UnsafePointer<CChar>?) -> String {
        text.map { String(cString: $0).trimmingCharacters(in: .whitespacesAndNewlines) } ?? ""
    }
}

/// Calls `body` with C strings for `strings`, valid for the call.
private func withCStrings<T>(_ strings: [String], _ body: ([UnsafePointer<CChar>?]) -> T) -> T {
    let copies = strings.map { strdup($0) }
    defer { copies.forEach { free($0) } }
    return body(copies.map { $0.map { UnsafePointer($0) } } + [nil])
}

/// Calls `body` with pointers to each byte array (nil for a null), valid for the call.
private func withByteArrays<T>(_ arrays: [[UInt8]?], _ body: ([UnsafePointer<CChar>?]) -> T) -> T {
    var pointers: [UnsafeMutablePointer<CChar>?] = []
    pointers.reserveCapacity(arrays.count)
    defer { pointers.forEach { $0?.deallocate() } }
    for array in arrays {
        guard let array else {
            pointers.append(nil)
            continue
        }
        let copy = UnsafeMutablePointer<CChar>.allocate(capacity: max(1, array.count))
        array.withUnsafeBytes { bytes in
            if let base = bytes.baseAddress { UnsafeMutableRawPointer(copy).copyMemory(from: base, byteCount: array.count) }
        }
        pointers.append(copy)
    }
    return body(pointers.map { $0.map { UnsafePointer($0) } })
}
