import CPostgresBench
import Foundation

/// Part of `cache-postgres`: where a large body belongs in
/// PostgreSQL — inline `bytea` (what the cache stores) or a large object —
/// measured with raw libpq, a write and a read of each size, in turns.
enum LargeBodyBenchmark {
    static let sizes = [64 << 10, 1 << 20, 8 << 20]
    static let rounds = 5

    static func run(_ conninfo: String) -> [String] {
        guard let connection = PQconnectdb(conninfo), PQstatus(connection) == CONNECTION_OK else { fail("large bodies: cannot connect") }
        defer { PQfinish(connection) }
        func exec(_ sql: String) {
            guard let result = PQexec(connection, sql) else { fail("large bodies: \(sql)") }
            let status = PQresultStatus(result)
            if status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK { fail("large bodies: \(sql): \(String(cString: PQresultErrorMessage(result)))") }
            PQclear(result)
        }
        exec("CREATE TABLE IF NOT EXISTS bench_bodies(id BIGSERIAL PRIMARY KEY, body BYTEA)")
        exec("ALTER TABLE bench_bodies ALTER COLUMN body SET STORAGE EXTERNAL")
        exec("CREATE TABLE IF NOT EXISTS bench_objects(id BIGSERIAL PRIMARY KEY, body OID)")
        var lines: [String] = []
        for size in sizes {
            let body = [UInt8]((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7) })
            var bytea = (write: Double.infinity, read: Double.infinity)
            var object = (write: Double.infinity, read: Double.infinity)
            for _ in 0..<rounds {
                // bytea: one INSERT with a binary parameter, one SELECT with a binary result.
                var start = now()
                let id: String = body.withUnsafeBytes { raw in
                    var value: UnsafePointer<CChar>? = raw.baseAddress?.assumingMemoryBound(to: CChar.self)
                    var length = Int32(size)
                    var format: Int32 = 1
                    var type: UInt32 = 17
                    guard let result = PQexecParams(connection, "INSERT INTO bench_bodies(body) VALUES ($1) RETURNING id", 1, &type, &value, &length, &format, 0)
                    else { fail("bytea insert") }
                    defer { PQclear(result) }
                    return String(cString: PQgetvalue(result, 0, 0))
                }
                bytea.write = min(bytea.write, Double(now() - start) / 1000)
                start = now()
                guard let read = PQexecParams(connection, "SELECT body FROM bench_bodies WHERE id = \(id)", 0, nil, nil, nil, nil, 1),
                    PQgetlength(read, 0, 0) == Int32(size)
                else { fail("bytea read") }
                PQclear(read)
                bytea.read = min(bytea.read, Double(now() - start) / 1000)

                // A large object: created, written and its OID stored in one transaction; read back in one.
                start = now()
                exec("BEGIN")
                let oid = lo_creat(connection, 0x0002_0000 | 0x0004_0000)
                let descriptor = lo_open(connection, oid, 0x0002_0000)
                let written = body.withUnsafeBytes { raw in lo_write(connection, descriptor, raw.baseAddress?.assumingMemoryBound(to: CChar.self), size) }
                if written != size { fail("lo_write wrote \(written)") }
                lo_close(connection, descriptor)
                exec("INSERT INTO bench_objects(body) VALUES (\(oid))")
                exec("COMMIT")
                object.write = min(object.write, Double(now() - start) / 1000)
                start = now()
                exec("BEGIN")
                let reader = lo_open(connection, oid, 0x0004_0000)
                var buffer = [CChar](repeating: 0, count: size)
                var total = 0
                while total < size {
                    let got = buffer.withUnsafeMutableBufferPointer { lo_read(connection, reader, $0.baseAddress?.advanced(by: total), size - total) }
                    if got <= 0 { break }
                    total += Int(got)
                }
                lo_close(connection, reader)
                exec("COMMIT")
                if total != size { fail("lo_read read \(total)") }
                object.read = min(object.read, Double(now() - start) / 1000)
            }
            lines.append(
                "\(size >> 10) KiB: bytea write \(formatted(bytea.write)) µs, read \(formatted(bytea.read)) µs; large object write \(formatted(object.write)) µs, read \(formatted(object.read)) µs"
            )
        }
        return lines
    }
}
