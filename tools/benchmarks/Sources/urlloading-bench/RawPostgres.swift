import CPostgresBench
import Foundation

/// The raw-libpq reference: prepared statements with binary values on the
/// same tables our PostgreSQL cache uses (made by our migrator), doing the
/// same statements a store and a hit do — nothing else.
final class RawPostgres {
    private let connection: OpaquePointer

    init(_ conninfo: String) {
        guard let made = PQconnectdb(conninfo), PQstatus(made) == CONNECTION_OK else { fail("raw libpq: cannot connect") }
        connection = made
        prepare(
            "store_delete", "DELETE FROM urlloading_cache_entries WHERE key = $1 AND variant = $2", [25, 25])
        prepare(
            "store_insert",
            """
            INSERT INTO urlloading_cache_entries(key, variant, url, host, status, response_headers, request_headers, body, body_size, cost,
                request_time, response_time, stored_at, last_used, storage_policy, user_info)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16) RETURNING id
            """, [25, 25, 25, 25, 20, 17, 17, 17, 20, 20, 701, 701, 701, 701, 20, 17])
        prepare("store_usage", "SELECT bytes FROM urlloading_cache_usage WHERE id = 1 FOR UPDATE", [])
        prepare("store_notify", "SELECT pg_notify($1, $2)", [25, 25])
        prepare(
            "hit",
            """
            SELECT id, url, variant, status, response_headers, request_headers, body, request_time, response_time, stored_at,
                storage_policy, user_info, last_used FROM urlloading_cache_entries WHERE key = $1 ORDER BY id
            """, [25])
    }

    deinit { PQfinish(connection) }

    private func prepare(_ name: String, _ sql: String, _ types: [UInt32]) {
        guard let result = PQprepare(connection, name, sql, Int32(types.count), types) else { fail("raw libpq: prepare \(name)") }
        defer { PQclear(result) }
        if PQresultStatus(result) != PGRES_COMMAND_OK { fail("raw libpq: prepare \(name): \(String(cString: PQresultErrorMessage(result)))") }
    }

    private func exec(_ sql: String) {
        guard let result = PQexec(connection, sql) else { fail("raw libpq: \(sql)") }
        PQclear(result)
    }

    /// Runs a prepared statement with binary values; returns the first
    /// row's column 6 length (a hit's body) or 0.
    @discardableResult
    private func run(_ name: String, _ values: [[UInt8]]) -> Int {
        let pointers = values.map { bytes -> UnsafeMutablePointer<CChar> in
            let copy = UnsafeMutablePointer<CChar>.allocate(capacity: max(1, bytes.count))
            bytes.withUnsafeBytes { raw in
                if let base = raw.baseAddress { UnsafeMutableRawPointer(copy).copyMemory(from: base, byteCount: bytes.count) }
            }
            return copy
        }
        defer { pointers.forEach { $0.deallocate() } }
        let lengths = values.map { Int32($0.count) }
        let formats = [Int32](repeating: 1, count: values.count)
        let constants: [UnsafePointer<CChar>?] = pointers.map { UnsafePointer($0) }
        guard let result = PQexecPrepared(connection, name, Int32(values.count), constants, lengths, formats, 1) else { fail("raw libpq: \(name)") }
        defer { PQclear(result) }
        let status = PQresultStatus(result)
        guard status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK else {
            fail("raw libpq: \(name): \(String(cString: PQresultErrorMessage(result)))")
        }
        return PQntuples(result) > 0 && PQnfields(result) > 6 ? Int(PQgetlength(result, 0, 6)) : 0
    }

    private static func text(_ string: String) -> [UInt8] { Array(string.utf8) }
    private static func int(_ value: Int64) -> [UInt8] { withUnsafeBytes(of: value.bigEndian) { Array($0) } }
    private static func double(_ value: Double) -> [UInt8] { withUnsafeBytes(of: value.bitPattern.bigEndian) { Array($0) } }

    /// What a store does: one transaction of four statements.
    func store(_ index: Int) {
        let key = Fixture.url(index).absoluteString
        let now = Date().timeIntervalSince1970
        exec("BEGIN")
        run("store_delete", [Self.text(key), []])
        run(
            "store_insert",
            [
                Self.text(key), [], Self.text(key), Self.text("example.com"), Self.int(200), Array(Fixture.headerBlob(index)), [],
                Array(Fixture.body), Self.int(Int64(Fixture.body.count)), Self.int(1400), Self.double(now), Self.double(now),
                Self.double(now), Self.double(now), Self.int(0), [],
            ])
        run("store_usage", [])
        run("store_notify", [Self.text("urlloading_cache"), Self.text("raw k \(key)")])
        exec("COMMIT")
    }

    /// What a hit does: one statement.
    func lookup(_ index: Int) -> Int {
        run("hit", [Self.text(Fixture.url(index).absoluteString)])
    }
}
