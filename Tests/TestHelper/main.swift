// A child process for tests that need more than one process on the same
// files (SQLite locking, crash safety). Each mode is one command line:
//
//   urlloading-test-helper storage-writer <db-path> <tag> <count>
//       Opens <db-path> with the helper schema and inserts <count> rows
//       tagged <tag>, one immediate transaction each; prints "wrote <count>".
import Foundation
import Storage

let helperSchema = [
    Migration(version: 1, name: "helper_items", sql: "CREATE TABLE items(id INTEGER PRIMARY KEY, tag TEXT NOT NULL, n INTEGER NOT NULL)"),
]

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("urlloading-test-helper: \(message)\n".utf8))
    exit(1)
}

let arguments = CommandLine.arguments.dropFirst()
switch arguments.first {
case "storage-writer":
    let rest = Array(arguments.dropFirst())
    guard rest.count == 3, let count = Int(rest[2]) else { fail("usage: storage-writer <db-path> <tag> <count>") }
    do {
        let database = try Database(path: rest[0], migrations: helperSchema)
        for n in 0..<count {
            try database.write { connection in
                try connection.run("INSERT INTO items(tag, n) VALUES (?, ?)", [.text(rest[1]), .integer(Int64(n))])
            }
        }
        print("wrote \(count)")
    } catch {
        fail("\(error)")
    }
default:
    fail("unknown mode \(arguments.first ?? "(none)")")
}
