import Foundation
import Locking
import Testing
import TestSupport
@testable import Storage

/// Reads beside a write in the same process: with `Options.readers`, a read
/// that finds the writer's connection busy runs on a read-only connection
/// (WAL lets it read the last commit while the write goes on).
@Suite struct ReadersTests {
    static let schema = DatabaseTests.schema

    /// A write transaction held open on a thread of its own until `release`.
    final class HeldWrite: Sendable {
        let inside = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let ended = DispatchSemaphore(value: 0)

        init(_ database: Database, inserting text: String) {
            Thread.detachNewThread { [self] in
                _ = try? database.write { (connection: Connection) throws(SQLiteError) in
                    try connection.run("INSERT INTO t(s) VALUES (?)", [.text(text)])
                    inside.signal()
                    // Bounded: a test that failed to release lets go after a minute.
                    _ = release.wait(timeout: .now() + 60)
                }
                ended.signal()
            }
        }
    }

    static func count(_ database: Database) throws -> Int64? {
        try database.read { (connection: Connection) throws(SQLiteError) in try connection.scalarInt("SELECT count(*) FROM t") }
    }

    /// Opens a database with `readers`, commits one row, holds a write
    /// transaction that inserts another, and runs `reads` reads at once,
    /// each on a thread of its own (a read that waited for the writer fails
    /// the test instead of hanging it). Returns how many answered while the
    /// write was open, the counts they saw, and the count after the commit.
    static func readsWhileWriting(readers: Int, reads: Int) throws -> (whileWriting: Int, counts: [Int64], after: Int64?) {
        let directory = TemporaryDirectory()
        var options = Database.Options()
        options.readers = readers
        let database = try Database(path: directory.path("t.sqlite"), migrations: Self.schema, options: options)
        try database.write { (connection: Connection) throws(SQLiteError) in try connection.run("INSERT INTO t(s) VALUES ('committed')") }
        let held = HeldWrite(database, inserting: "pending")
        #expect(held.inside.wait(timeout: .now() + 30) == .success)
        let answered = DispatchSemaphore(value: 0)
        let counts = Lock<[Int64]>([])
        for _ in 0..<reads {
            Thread.detachNewThread {
                let count = (try? Self.count(database)) ?? -1
                counts.withLock { $0.append(count) }
                answered.signal()
            }
        }
        let deadline = DispatchTime.now() + 20
        var whileWriting = 0
        for _ in 0..<reads where answered.wait(timeout: deadline) == .success { whileWriting += 1 }
        let seen = counts.withLock { $0 }
        held.release.signal()
        #expect(held.ended.wait(timeout: .now() + 60) == .success)
        for _ in whileWriting..<reads { _ = answered.wait(timeout: .now() + 30) }
        return (whileWriting, seen, try Self.count(database))
    }

    @Test("A read while this process's write transaction is open answers from a read-only connection, with the last commit; after the commit it sees the new row")
    func readDoesNotWaitForTheWriter() throws {
        let result = try Self.readsWhileWriting(readers: 2, reads: 1)
        #expect(result.whileWriting == 1, "the read waited for the write transaction")
        #expect(result.counts == [1], "the read saw \(result.counts) rows, not the last commit's one")
        #expect(result.after == 2)
    }

    @Test("Several reads at once while the writer is busy: each answers with the last commit, taking turns on the one read-only connection the options allow")
    func readsBeyondTheReadersTakeTurns() throws {
        let result = try Self.readsWhileWriting(readers: 1, reads: 8)
        #expect(result.whileWriting == 8, "\(result.whileWriting) of 8 reads answered while the write was open")
        #expect(result.counts == Array(repeating: 1, count: 8))
        #expect(result.after == 2)
    }

    @Test("A read-only connection refuses writes: a statement that writes goes through `withoutTransaction` on the writer's connection")
    func vacuumRunsOnTheWriter() throws {
        let directory = TemporaryDirectory()
        var options = Database.Options()
        options.readers = 1
        let database = try Database(path: directory.path("t.sqlite"), migrations: Self.schema, options: options)
        try database.write { (connection: Connection) throws(SQLiteError) in try connection.run("INSERT INTO t(s) VALUES ('a')") }
        let reader = try Connection(path: directory.path("t.sqlite"), busyTimeout: .seconds(1), readOnly: true)
        let refused = #expect(throws: SQLiteError.self) { try reader.execute("VACUUM") }
        #expect(refused?.extendedCode == 8 || (refused?.extendedCode ?? 0) & 0xff == 8, "\(String(describing: refused))")  // SQLITE_READONLY
        try database.withoutTransaction { (connection: Connection) throws(SQLiteError) in try connection.execute("VACUUM") }
        #expect(try Self.count(database) == 1)
    }
}
