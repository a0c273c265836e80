import Foundation
import Testing
import TestSupport
@_spi(Tools) @testable import URLLoading

/// What `cachetool` says to a person: its defaults in `--help`, a damaged
/// store named once with the next step, counts in words, and a bad option
/// value answered with that subcommand's usage.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(2)))) struct CacheToolMessageTests {
    static func run(_ arguments: [String], environment: [String: String]? = nil) async throws -> ChildProcess.Result {
        try await ChildProcess.run(CacheToolCommandTests.cachetool, arguments, environment: environment)
    }

    @Test("--help names the default application identifier and where its stores are")
    func helpNamesTheDefaults() async throws {
        let directory = TemporaryDirectory()
        var environment = ProcessInfo.processInfo.environment
        environment["XDG_CACHE_HOME"] = directory.path("cache")
        environment["XDG_DATA_HOME"] = directory.path("data")
        let help = try await Self.run(["--help"], environment: environment)
        #expect(help.status == 0)
        let text = help.standardOutput.replacingOccurrences(of: "\n", with: " ").replacingOccurrences(of: "  ", with: " ")
        #expect(text.contains("Without --app the identifier is \"cachetool\""), "\(help.standardOutput)")
        #expect(text.contains(directory.path("cache") + "/cachetool/"), "\(help.standardOutput)")
        #expect(text.contains(directory.path("data") + "/cachetool/"), "\(help.standardOutput)")
    }

    @Test("A foreign or a damaged cache file: said once, what it is and what to do, without SQLite's internals; exit 5; the file left alone")
    func damagedStoreSaysWhatToDo() async throws {
        let directory = TemporaryDirectory()
        let file = directory.url.appendingPathComponent("Cache.sqlite")
        let garbage = Data("somebody's notes, not a database\n".utf8)
        try garbage.write(to: file)
        chmod(file.path, 0o600)
        func message(_ command: [String]) async throws -> String {
            let result = try await Self.run(command + ["--cache-dir", directory.url.path])
            #expect(result.status == 5, "\(command): \(result.standardError)")
            let message = result.standardError
            #expect(message.components(separatedBy: file.path).count - 1 == 1, "the path once: \(message)")
            #expect(!message.contains("SQLite error") && !message.contains("PRAGMA"), "\(message)")
            return message
        }
        let foreign = try await message(["info"])
        #expect(foreign.contains("is not a store of URLLoading") && foreign.contains("left alone"), "\(foreign)")
        #expect(try Data(contentsOf: file) == garbage)
        // A store whose pages were overwritten: damaged, and what starting empty takes.
        try FileManager.default.removeItem(at: file)
        #expect(try await Self.run(["create", "--cache-dir", directory.url.path]).status == 0)
        var bytes = try Data(contentsOf: file)
        bytes.replaceSubrange(100..<min(4096, bytes.count), with: Data(repeating: 0xAB, count: min(4096, bytes.count) - 100))
        try bytes.write(to: file)
        for command in [["info"], ["verify", "--repair"], ["clear"]] {
            let damaged = try await message(command)
            #expect(damaged.contains("is a damaged cache store") && damaged.contains("remove it and the Bodies folder"), "\(damaged)")
            #expect(!damaged.contains("cachetool verify") && !damaged.contains("cachetool clear"), "no advice that cannot work: \(damaged)")
        }
        #expect(try Data(contentsOf: file) == bytes)
    }

    @Test("Counts in words: removed 1 entry, removed 2 entries, removed 1 cookie")
    func countsInWords() async throws {
        let directory = TemporaryDirectory()
        let cache = try ResponseCache.open(memoryCapacity: 0, diskCapacity: 1 << 20, directory: directory.url)
        for path in ["/one", "/two", "/three"] {
            cache.store(url: URL(string: "https://a.test" + path)!, status: 200, responseHeaders: [("Cache-Control", "max-age=600")], body: Data("x".utf8))
        }
        cache.flush()
        let one = try await Self.run(["remove", "https://a.test/one", "--cache-dir", directory.url.path])
        #expect(one.standardOutput.hasPrefix("removed 1 entry\n") || one.standardOutput == "removed 1 entry", "\(one.standardOutput)")
        let rest = try await Self.run(["clear", "--cache-dir", directory.url.path])
        #expect(rest.standardOutput.contains("removed 2 entries"), "\(rest.standardOutput)")
        let cookies = try CookieStore(directory: directory.url)
        cookies.setCookies(["sid=secret; Max-Age=600"], for: URL(string: "https://a.test/")!)
        let cookie = try await Self.run(["cookies", "clear", "--data-dir", directory.url.path])
        #expect(cookie.standardOutput.contains("removed 1 cookie") && !cookie.standardOutput.contains("1 cookies"), "\(cookie.standardOutput)")
    }

    @Test("A bad option value prints that subcommand's usage, exit 2")
    func badValueShowsTheSubcommandsUsage() async throws {
        let result = try await Self.run(["prune", "--older-than", "3x", "--cache-dir", "/nonexistent"])
        #expect(result.status == 2)
        #expect(result.standardError.contains("a duration looks like"), "\(result.standardError)")
        #expect(result.standardError.contains("cachetool prune"), "\(result.standardError)")
        #expect(!result.standardError.contains("Usage: cachetool <subcommand>"), "\(result.standardError)")
    }
}
