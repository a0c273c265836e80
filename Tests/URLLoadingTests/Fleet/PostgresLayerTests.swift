import Foundation
import Postgres
import Storage
import Testing
import TestSupport
@_spi(Tools) @testable import URLLoading
import URLLoadingPostgres

/// The libpq layer under the fleet's stores against the run's
/// PostgreSQL server: values both ways in binary, the migrator's rules, and
/// no password in any error or description.
@Suite struct PostgresLayerTests {
    @Test("Values go and come back in binary: integers, doubles, text, bytes with zeros, nulls, int8 arrays")
    func values() throws {
        let database = try TestPostgres.database()
        defer { database.drop() }
        let connection = try PostgresConnection(database.url)
        let bytes = Data([0, 1, 2, 0, 255, 0])
        let rows = try connection.query(
            "SELECT $1::int8, $2::float8, $3::text, $4::bytea, $5::text IS NULL, 7::int4, 3::int2, cardinality($6::int8[]), true",
            [.int(-9_000_000_000), .double(0.25), .text("héllo ✓"), .bytes(bytes), .null, .intArray([5, 6, 7])]
        ) { row in
            (row.int64(0), row.double(1), row.text(2), row.data(3), row.bool(4), row.int(5), row.int(6), row.int(7), row.bool(8))
        }
        let row = try #require(rows.first)
        #expect(row.0 == -9_000_000_000 && row.1 == 0.25 && row.2 == "héllo ✓" && row.3 == bytes)
        #expect(row.4 == true && row.5 == 7 && row.6 == 3 && row.7 == 3 && row.8 == true)
        // A column read as another type is nil, never a trap.
        let mismatched = try connection.query("SELECT 'text'::text, 5::int8") { ($0.int64(0), $0.data(1), $0.text(1)) }
        #expect(mismatched.first?.0 == nil && mismatched.first?.1 == nil && mismatched.first?.2 == nil)
        #expect(try connection.run("SELECT 1 WHERE false") == 0)
    }

    @Test("The migrator applies each migration once, workers racing included, and refuses a newer version or another store's name")
    func migrator() async throws {
        let database = try TestPostgres.database()
        defer { database.drop() }
        let migrations = [
            Migration(version: 1, name: "one", sql: "CREATE TABLE m_one(x int); INSERT INTO m_one VALUES (1);"),
            Migration(version: 2, name: "two", sql: "INSERT INTO m_one VALUES (2);"),
        ]
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<4 {
                group.addTask {
                    let connection = try PostgresConnection(database.url)
                    try PostgresMigrator.migrate(connection, store: "test", migrations: migrations)
                }
            }
            try await group.waitForAll()
        }
        let connection = try PostgresConnection(database.url)
        #expect(try connection.scalarInt("SELECT count(*) FROM m_one") == 2)
        try connection.run(
            "INSERT INTO urlloading_migrations(store, version, name, applied) VALUES ('test', 3, 'three', 0)")
        #expect {
            try PostgresMigrator.migrate(connection, store: "test", migrations: migrations)
        } throws: { error in
            (error as? PostgresError)?.kind == .newerSchema && "\(error)".contains("schema version 3")
        }
        try connection.run("DELETE FROM urlloading_migrations WHERE version = 3")
        try connection.run("UPDATE urlloading_migrations SET name = 'other' WHERE version = 2")
        #expect {
            try PostgresMigrator.migrate(connection, store: "test", migrations: migrations)
        } throws: { error in
            (error as? PostgresError)?.kind == .unknownMigration
        }
        // A cache over a database whose cache schema is newer: a clear StoreError.
        try connection.run("CREATE TABLE IF NOT EXISTS urlloading_migrations(store TEXT, version INTEGER, name TEXT, applied DOUBLE PRECISION)")
        try connection.run("INSERT INTO urlloading_migrations(store, version, name, applied) VALUES ('cache', 99, 'future', 0)")
        #expect {
            _ = try ResponseCache(memoryCapacity: 0, diskCapacity: 1 << 20, database: PostgresDatabase(url: database.url))
        } throws: { error in
            (error as? StoreError)?.kind == .newerSchema
        }
    }

    @Test("A password in the connection string appears in no error and no description")
    func noPasswordShown() throws {
        let server = try #require(TestPostgres.server, Comment(rawValue: TestPostgres.missing))
        #expect {
            _ = try PostgresDatabase(url: "host=/nonexistent/socket user=u password=hunter2-secret dbname=x")
        } throws: { error in
            !"\(error)".contains("hunter2") && (error as? StoreError)?.kind == .ioError
        }
        #expect {
            _ = try PostgresDatabase(url: "postgresql://u:hunter2-secret@localhost:1/x?connect_timeout=2")
        } throws: { error in
            !"\(error)".contains("hunter2")
        }
        let database = try TestPostgres.database()
        defer { database.drop() }
        let opened = try PostgresDatabase(url: "\(database.url) password=hunter2-secret")
        #expect("\(opened)" == "PostgresDatabase(\(database.name) at local socket)")
        let cache = try ResponseCache(memoryCapacity: 0, diskCapacity: 1 << 20, database: opened)
        #expect(!"\(cache)".contains("hunter2") && "\(cache)".contains(database.name))
        _ = server
    }
}
