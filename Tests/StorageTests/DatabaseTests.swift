import Foundation
import Testing
import TestSupport
@testable import Storage

/// Connections, statements, transactions, files and their modes, damaged
/// files, and several processes on one database.
@Suite struct DatabaseTests {
    static let schema = [
        Migration(version: 1, name: "values", sql: "CREATE TABLE t(id INTEGER PRIMARY KEY, i INTEGER, r REAL, s TEXT, b BLOB, UNIQUE(s))")
    ]

    @Test func typedBindingsRoundTrip() throws {
        let directory = TemporaryDirectory()
        let database = try Database(path: directory.path("t.sqlite"), migrations: Self.schema)
        let blob = Data([0, 1, 2, 255])
        try database.write { (connection: Connection) throws(SQLiteError) in
            try connection.run("INSERT INTO t(i, r, s, b) VALUES (?, ?, ?, ?)", [.integer(Int64.max), .real(1.5), .text("héllo\u{0}x"), .blob(blob)])
            try connection.run("INSERT INTO t(i, r, s, b) VALUES (?, ?, ?, ?)", [.null, .null, .text("empty"), .blob(Data())])
        }
        let rows = try database.read { (connection: Connection) throws(SQLiteError) in
            try connection.query("SELECT i, r, s, b FROM t ORDER BY id") { row in
                [row.value(0), row.value(1), row.value(2), row.value(3)]
            }
        }
        #expect(rows[0] == [.integer(Int64.max), .real(1.5), .text("héllo\u{0}x"), .blob(blob)])
        #expect(rows[1] == [.null, .null, .text("empty"), .blob(Data())])
    }

    @Test("Text reads what was stored: nil for NULL, empty, a NUL inside, a value over several pages, numbers as SQLite spells them")
    func textReadsStoredBytes() throws {
        let directory = TemporaryDirectory()
        let database = try Database(path: directory.path("t.sqlite"), migrations: Self.schema)
        let long = String(repeating: "ä0123456789", count: 2_000)
        try database.write { (connection: Connection) throws(SQLiteError) in
            try connection.run("INSERT INTO t(i, r, s, b) VALUES (?, ?, ?, ?)", [.null, .null, .null, .null])
            try connection.run("INSERT INTO t(i, r, s, b) VALUES (?, ?, ?, ?)", [.integer(-42), .real(1.5), .text(""), .blob(Data("blob text".utf8))])
            try connection.run("INSERT INTO t(i, r, s, b) VALUES (?, ?, ?, ?)", [.integer(0), .real(0), .text("héllo\u{0}x"), .blob(Data())])
            try connection.run("INSERT INTO t(i, r, s, b) VALUES (?, ?, ?, ?)", [.integer(1), .real(2), .text(long), .null])
        }
        let rows = try database.read { (connection: Connection) throws(SQLiteError) in
            try connection.query("SELECT i, r, s, b FROM t ORDER BY id") { row in [row.text(0), row.text(1), row.text(2), row.text(3)] }
        }
        #expect(rows.count == 4)
        #expect(rows[0] == [nil, nil, nil, nil])
        #expect(rows[1] == ["-42", "1.5", "", "blob text"])
        #expect(rows[2] == ["0", "0.0", "héllo\u{0}x", ""])
        #expect(rows[3] == ["1", "2.0", long, nil])
    }

    @Test func errorsHideBoundValues() throws {
        let directory = TemporaryDirectory()
        let database = try Database(path: directory.path("t.sqlite"), migrations: Self.schema)
        let secret = "password=hunter2"
        try database.write { (connection: Connection) throws(SQLiteError) in try connection.run("INSERT INTO t(s) VALUES (?)", [.text(secret)]) }
        let error = #expect(throws: StorageError.self) {
            try database.write { (connection: Connection) throws(SQLiteError) in try connection.run("INSERT INTO t(s) VALUES (?)", [.text(secret)]) }
        }
        let text = error.map { "\($0)" } ?? ""
        #expect(error?.underlying?.extendedCode == 2067)  // SQLITE_CONSTRAINT_UNIQUE
        #expect(text.contains("INSERT INTO t(s) VALUES (?)"))
        #expect(!text.contains("hunter2"))
    }

    @Test func writeRollsBackWhenBodyThrows() throws {
        let directory = TemporaryDirectory()
        let database = try Database(path: directory.path("t.sqlite"), migrations: Self.schema)
        let error = #expect(throws: StorageError.self) {
            try database.write { (connection: Connection) throws(SQLiteError) in
                try connection.run("INSERT INTO t(s) VALUES (?)", [.text("a")])
                throw SQLiteError(extendedCode: 4, message: "abandoned on purpose")
            }
        }
        #expect(error?.underlying?.message == "abandoned on purpose" && error?.path == directory.path("t.sqlite"))
        #expect(try database.read { (connection: Connection) throws(SQLiteError) in try connection.scalarInt("SELECT count(*) FROM t") } == 0)
    }

    @Test func walAndPragmasAreOn() throws {
        let directory = TemporaryDirectory()
        let database = try Database(path: directory.path("t.sqlite"), migrations: Self.schema)
        let mode = try database.read { (connection: Connection) throws(SQLiteError) in try connection.query("PRAGMA journal_mode") { $0.text(0) } }
        #expect(mode == ["wal"])
        #expect(try database.read { (connection: Connection) throws(SQLiteError) in try connection.scalarInt("PRAGMA foreign_keys") } == 1)
        #expect(try database.read { (connection: Connection) throws(SQLiteError) in try connection.scalarInt("PRAGMA busy_timeout") } == 5000)
    }

    @Test func fileAndDirectoryModesAreHonoured() throws {
        let directory = TemporaryDirectory()
        let path = directory.url.appendingPathComponent("nested/store/t.sqlite").path
        var options = Database.Options()
        options.fileMode = 0o600
        options.directoryMode = 0o700
        let database = try Database(path: path, migrations: Self.schema, options: options)
        try database.write { (connection: Connection) throws(SQLiteError) in try connection.run("INSERT INTO t(s) VALUES ('x')") }
        func mode(_ path: String) throws -> Int {
            let attributes = try FileManager.default.attributesOfItem(atPath: path)
            return (attributes[.posixPermissions] as? Int ?? -1) & 0o777
        }
        #expect(try mode(path) == 0o600)
        #expect(try mode(path + "-wal") == 0o600)
        #expect(try mode((path as NSString).deletingLastPathComponent) == 0o700)
    }

    @Test func privateStoreRefusesFileReadableByOthers() throws {
        let directory = TemporaryDirectory()
        let path = directory.path("secret.sqlite")
        _ = try Database(path: path, migrations: Self.schema)  // created 0644
        var options = Database.Options()
        options.requirePrivateFile = true
        let error = #expect(throws: StorageError.self) {
            _ = try Database(path: path, migrations: Self.schema, options: options)
        }
        #expect(error?.kind == .fileAccessibleByOthers)
        #expect(error?.message.contains("644") == true)
    }

    @Test func busyDatabaseGivesBusyErrorAfterTimeout() throws {
        let directory = TemporaryDirectory()
        let path = directory.path("t.sqlite")
        let holder = try Connection(path: path, busyTimeout: .seconds(5))
        _ = try Database(path: path, migrations: Self.schema)
        try holder.execute("BEGIN IMMEDIATE")
        var options = Database.Options()
        options.busyTimeout = .milliseconds(50)
        let waiting = try Database(path: path, migrations: Self.schema, options: options)
        let error = #expect(throws: StorageError.self) {
            try waiting.write { (connection: Connection) throws(SQLiteError) in try connection.run("INSERT INTO t(s) VALUES ('x')") }
        }
        #expect(error?.isBusy == true)
        try holder.execute("ROLLBACK")
        try waiting.write { (connection: Connection) throws(SQLiteError) in try connection.run("INSERT INTO t(s) VALUES ('x')") }
    }

    // MARK: Damaged files

    /// A database whose first page (the schema) is overwritten with garbage.
    static func makeCorruptDatabase(at path: String) throws -> Data {
        do {
            let database = try Database(path: path, migrations: schema)
            try database.write { (connection: Connection) throws(SQLiteError) in try connection.run("INSERT INTO t(s) VALUES ('precious')") }
        }
        // Fold the WAL into the main file, then damage the schema page.
        let connection = try Connection(path: path, busyTimeout: .seconds(1))
        try connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: path))
        try handle.seek(toOffset: 100)
        try handle.write(contentsOf: Data(repeating: 0xA5, count: 3000))
        try handle.close()
        return try Data(contentsOf: URL(fileURLWithPath: path))
    }

    static let notADatabase = Data("this is a text file that somebody put where the store should be\n".utf8)

    @Test(arguments: ["corrupt", "not-a-database"])
    func damagedFileFailsWithCorruptWhenToldTo(kind: String) throws {
        let directory = TemporaryDirectory()
        let path = directory.path("t.sqlite")
        let original = kind == "corrupt" ? try Self.makeCorruptDatabase(at: path) : Self.notADatabase
        if kind != "corrupt" { try original.write(to: URL(fileURLWithPath: path)) }
        let error = #expect(throws: StorageError.self) {
            _ = try Database(path: path, migrations: Self.schema)
        }
        #expect(error?.kind == .corrupt)
        #expect(error?.underlying?.isCorruption == true)
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == original)
    }

    @Test(arguments: ["corrupt", "not-a-database"])
    func damagedCacheIsRecreatedEmpty(kind: String) throws {
        let directory = TemporaryDirectory()
        let path = directory.path("t.sqlite")
        if kind == "corrupt" { _ = try Self.makeCorruptDatabase(at: path) } else { try Self.notADatabase.write(to: URL(fileURLWithPath: path)) }
        var options = Database.Options()
        options.onCorruption = .recreate
        let database = try Database(path: path, migrations: Self.schema, options: options)
        #expect(database.openReport.recreated)
        #expect(database.openReport.migrated == Migrator.Outcome(from: 0, to: 1))
        #expect(try database.read { (connection: Connection) throws(SQLiteError) in try connection.scalarInt("SELECT count(*) FROM t") } == 0)
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory.url.path).filter { $0.contains("corrupt") }
        #expect(leftovers.isEmpty)
    }

    @Test(arguments: ["corrupt", "not-a-database"])
    func damagedStoreIsMovedAsideNotDropped(kind: String) throws {
        let directory = TemporaryDirectory()
        let path = directory.path("t.sqlite")
        let original = kind == "corrupt" ? try Self.makeCorruptDatabase(at: path) : Self.notADatabase
        if kind != "corrupt" { try original.write(to: URL(fileURLWithPath: path)) }
        var options = Database.Options()
        options.onCorruption = .moveAside
        let database = try Database(path: path, migrations: Self.schema, options: options)
        let aside = try #require(database.openReport.movedAsideTo)
        #expect(aside.hasPrefix(path + ".corrupt-"))
        #expect(try Data(contentsOf: URL(fileURLWithPath: aside)) == original)
        #expect(try database.read { (connection: Connection) throws(SQLiteError) in try connection.scalarInt("SELECT count(*) FROM t") } == 0)
    }

    // MARK: Several processes

    @Test func twoProcessesAndThisOneWriteAtOnce() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path("shared.sqlite")
        let count = 2000
        let children = try ["a", "b"].map { tag in
            try ChildProcess.start(ChildProcess.helper, ["storage-writer", path, tag, "\(count)"])
        }
        // This process writes too, through the same code path, meanwhile.
        let mine = Task.detached {
            let database = try Database(
                path: path, migrations: [Migration(version: 1, name: "helper_items", sql: "CREATE TABLE items(id INTEGER PRIMARY KEY, tag TEXT NOT NULL, n INTEGER NOT NULL)")])
            for n in 0..<count {
                try database.write { (connection: Connection) throws(SQLiteError) in try connection.run("INSERT INTO items(tag, n) VALUES (?, ?)", [.text("c"), .integer(Int64(n))]) }
            }
        }
        for child in children {
            let result = try await child.wait()
            #expect(result.status == 0, "child failed: \(result.standardError)")
            #expect(result.standardOutput == "wrote \(count)\n")
        }
        try await mine.value
        let connection = try Connection(path: path, busyTimeout: .seconds(5))
        let counts = try connection.query("SELECT tag, count(DISTINCT n) FROM items GROUP BY tag ORDER BY tag") { ($0.text(0) ?? "", $0.int(1)) }
        #expect(counts.map(\.0) == ["a", "b", "c"])
        #expect(counts.allSatisfy { $0.1 == count })
    }
}
