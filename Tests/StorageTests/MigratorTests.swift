import Foundation
import Testing
import TestSupport
@testable import Storage

/// The migrator: fresh install, upgrade with data kept, refusal of newer and
/// foreign schemas, atomicity of each step.
@Suite struct MigratorTests {
    static let v1 = Migration(version: 1, name: "items", sql: "CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT NOT NULL)")
    static let v2 = Migration(version: 2, name: "items_size", sql: "ALTER TABLE items ADD COLUMN size INTEGER NOT NULL DEFAULT 0; CREATE INDEX items_by_size ON items(size)")

    @Test func freshInstallAppliesEveryVersion() throws {
        let directory = TemporaryDirectory()
        let database = try Database(path: directory.path("a.sqlite"), migrations: [Self.v1, Self.v2])
        #expect(database.openReport.created)
        #expect(database.openReport.migrated == Migrator.Outcome(from: 0, to: 2))
        let names = try database.read { (connection: Connection) throws(SQLiteError) in try connection.query("SELECT name FROM schema_migrations ORDER BY version") { $0.text(0) ?? "" } }
        #expect(names == ["items", "items_size"])
        try database.write { (connection: Connection) throws(SQLiteError) in try connection.run("INSERT INTO items(name, size) VALUES (?, ?)", [.text("x"), .integer(3)]) }
        #expect(try database.read { (connection: Connection) throws(SQLiteError) in try connection.scalarInt("PRAGMA user_version") } == 2)
    }

    @Test func upgradeFromPreviousVersionKeepsData() throws {
        let directory = TemporaryDirectory()
        let path = directory.path("a.sqlite")
        do {
            let old = try Database(path: path, migrations: [Self.v1])
            try old.write { (connection: Connection) throws(SQLiteError) in try connection.run("INSERT INTO items(name) VALUES (?)", [.text("kept")]) }
        }
        let new = try Database(path: path, migrations: [Self.v1, Self.v2])
        #expect(!new.openReport.created)
        #expect(new.openReport.migrated == Migrator.Outcome(from: 1, to: 2))
        let rows = try new.read { (connection: Connection) throws(SQLiteError) in try connection.query("SELECT name, size FROM items") { ($0.text(0) ?? "", $0.int(1)) } }
        #expect(rows.count == 1)
        #expect(rows.first?.0 == "kept")
        #expect(rows.first?.1 == 0)
    }

    @Test func reopeningAtLatestVersionChangesNothing() throws {
        let directory = TemporaryDirectory()
        let path = directory.path("a.sqlite")
        _ = try Database(path: path, migrations: [Self.v1, Self.v2])
        let again = try Database(path: path, migrations: [Self.v1, Self.v2])
        #expect(again.openReport.migrated == Migrator.Outcome(from: 2, to: 2))
    }

    @Test func newerSchemaIsRefusedAndLeftAlone() throws {
        let directory = TemporaryDirectory()
        let path = directory.path("a.sqlite")
        _ = try Database(path: path, migrations: [Self.v1, Self.v2])
        let error = #expect(throws: StorageError.self) {
            _ = try Database(
                path: path, migrations: [Self.v1],
                options: {
                    var o = Database.Options(); o.onCorruption = .recreate; return o
                }())
        }
        #expect(error?.kind == .newerSchema)
        #expect(error?.description.contains("version 2") == true)
        // Still version 2: refusing never rewrites the file.
        let reopened = try Database(path: path, migrations: [Self.v1, Self.v2])
        #expect(reopened.openReport.migrated.from == 2)
    }

    @Test func databaseOfAnotherStoreIsRefused() throws {
        let directory = TemporaryDirectory()
        let path = directory.path("a.sqlite")
        let other = Migration(version: 1, name: "cookies", sql: "CREATE TABLE cookies(id INTEGER PRIMARY KEY)")
        _ = try Database(path: path, migrations: [other])
        let error = #expect(throws: StorageError.self) {
            _ = try Database(path: path, migrations: [Self.v1])
        }
        #expect(error?.kind == .unknownMigration)
    }

    @Test func failingMigrationIsNotHalfApplied() throws {
        let directory = TemporaryDirectory()
        let path = directory.path("a.sqlite")
        _ = try Database(path: path, migrations: [Self.v1])
        let broken = Migration(version: 2, name: "broken", sql: "CREATE TABLE extra(id INTEGER); INSERT INTO no_such_table VALUES (1)")
        #expect(throws: StorageError.self) {
            _ = try Database(path: path, migrations: [Self.v1, broken])
        }
        let database = try Database(path: path, migrations: [Self.v1])
        #expect(database.openReport.migrated == Migrator.Outcome(from: 1, to: 1))
        let tables = try database.read { (connection: Connection) throws(SQLiteError) in try connection.query("SELECT name FROM sqlite_master WHERE name = 'extra'") { $0.text(0) } }
        #expect(tables.isEmpty)
    }

    @Test func migrationsMustBeNumberedInOrder() {
        let error = #expect(throws: StorageError.self) {
            _ = try Migrator([Self.v2])
        }
        #expect(error?.kind == .invalidMigrations)
    }
}
