import Foundation
import Testing
import TestSupport

/// `cachetool` run as a user runs it: the built binary as a child process.
@Suite struct CacheToolProcessTests {
    static var cachetool: URL { ChildProcess.productsDirectory.appendingPathComponent("cachetool") }

    static func scratchDirectory() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("cachetool-\(UUID().uuidString.prefix(8))", isDirectory: true)
    }

    static func run(_ arguments: [String]) async throws -> ChildProcess.Result {
        try await ChildProcess.run(cachetool, arguments)
    }

    struct Summary: Decodable {
        var path: String
        var schemaVersion: Int
        var entries: Int
        var bytes: Int
    }

    @Test func createThenInfoAndVerify() async throws {
        let directory = Self.scratchDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let created = try await Self.run(["create", "--cache-dir", directory.path])
        #expect(created.status == 0, "\(created.standardError)")
        #expect(created.standardOutput.contains("schema:   version 3"))

        let info = try await Self.run(["info", "--cache-dir", directory.path, "--json"])
        #expect(info.status == 0, "\(info.standardError)")
        let summary = try JSONDecoder().decode(Summary.self, from: Data(info.standardOutput.utf8))
        #expect(summary.path == directory.appendingPathComponent("Cache.sqlite").path)
        #expect(summary.schemaVersion == 3)
        #expect(summary.entries == 0)

        let verify = try await Self.run(["verify", "--cache-dir", directory.path])
        #expect(verify.status == 0)
        #expect(verify.standardOutput.hasPrefix("ok: "))
    }

    @Test func missingStoreExits3() async throws {
        let directory = Self.scratchDirectory()
        let result = try await Self.run(["info", "--cache-dir", directory.path])
        #expect(result.status == 3)
        #expect(result.standardError.contains("no cache store here"))
        #expect(result.standardError.contains(directory.path))
        // Looking never creates a store.
        #expect(!FileManager.default.fileExists(atPath: directory.path))
    }

    @Test func damagedStoreExits5AndIsLeftAlone() async throws {
        let directory = Self.scratchDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let file = directory.appendingPathComponent("Cache.sqlite")
        let garbage = Data("not a database, but somebody's file\n".utf8)
        try garbage.write(to: file)
        // Readable by others: refused before anything is read, and left alone.
        let open = try await Self.run(["info", "--cache-dir", directory.path])
        #expect(open.status == 1 && open.standardError.contains("can be read by other users"), "\(open.standardError)")
        chmod(file.path, 0o600)
        for command in ["info", "verify"] {
            let result = try await Self.run([command, "--cache-dir", directory.path])
            #expect(result.status == 5, "\(command): \(result.standardError)")
            #expect(result.standardError.contains("is not a store of URLLoading"), "\(result.standardError)")
        }
        #expect(try Data(contentsOf: file) == garbage)
    }

    @Test func usageErrorExits2() async throws {
        let result = try await Self.run(["info", "--no-such-flag"])
        #expect(result.status == 2)
        #expect(result.standardError.contains("--no-such-flag"))
    }
}
