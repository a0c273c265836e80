import Foundation
import Storage
import Testing
import TestSupport
@_spi(Tools) @testable import URLLoading

/// A cache database crafted by somebody else: names read from it
/// never become paths outside the cache's folder.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(2)))) struct HostileStoreTests {
    /// The test cache in `root/cache`, and a connection to its database to craft rows with.
    static func craftable(_ root: TemporaryDirectory) throws -> (URL, Connection) {
        let cacheDirectory = root.url.appendingPathComponent("cache", isDirectory: true)
        try CacheToolCommandTests.makeCache(cacheDirectory)
        return (cacheDirectory, try Connection(path: cacheDirectory.appendingPathComponent("Cache.sqlite").path, busyTimeout: .seconds(5)))
    }

    @Test("Body file names from the database that are not the library's own touch nothing outside the folder; verify reports them")
    func craftedNamesTouchNothing() async throws {
        let root = TemporaryDirectory()
        let (cacheDirectory, connection) = try Self.craftable(root)
        let victims = ["victim1.txt", "victim2.txt", "victim3.txt"].map { root.url.appendingPathComponent($0) }
        for victim in victims { try Data("keep me".utf8).write(to: victim) }
        try connection.execute("INSERT INTO pending_files(name, created) VALUES ('../../victim1.txt', 0)")
        try connection.execute("INSERT INTO pending_files(name, created) VALUES ('../../victim2.txt', 0)")
        try connection.execute("UPDATE entries SET body_file = '../../victim3.txt', body_size = 7 WHERE url = 'https://a.test/fresh'")
        for arguments in [["info"], ["verify"], ["verify", "--repair"], ["show", "https://a.test/fresh"], ["prune", "--to-size", "0"]] {
            let result = try await ChildProcess.run(CacheToolCommandTests.cachetool, arguments + ["--cache-dir", cacheDirectory.path])
            for victim in victims {
                #expect(FileManager.default.fileExists(atPath: victim.path), "\(arguments) removed \(victim.lastPathComponent): \(result.standardError)")
            }
        }
        // The library itself, opening the store and reading the entry.
        let cache = try ResponseCache.open(memoryCapacity: 0, diskCapacity: 1 << 30, directory: cacheDirectory)
        _ = cache.lookup(key: "https://a.test/fresh", requestHeaders: [])
        cache.flush()
        for victim in victims {
            #expect(try Data(contentsOf: victim) == Data("keep me".utf8), "the library touched \(victim.lastPathComponent)")
        }
    }

    @Test("Crafted rows (a counter name twice, huge numbers) are shown, never trapped on")
    func craftedRows() async throws {
        let root = TemporaryDirectory()
        let (cacheDirectory, connection) = try Self.craftable(root)
        try connection.execute(
            """
            DROP TABLE counters; CREATE TABLE counters(name TEXT, value INTEGER);
            INSERT INTO counters VALUES ('hits', 9223372036854775807), ('hits', 9223372036854775807), (NULL, 1), (NULL, 2);
            UPDATE entries SET stored_at = 1e300, last_used = -1e300 WHERE url = 'https://a.test/fresh';
            """)
        for arguments in [["stats"], ["stats", "--json"], ["list"], ["list", "--json"], ["show", "https://a.test/fresh"]] {
            let result = try await ChildProcess.run(CacheToolCommandTests.cachetool, arguments + ["--cache-dir", cacheDirectory.path])
            #expect(result.status == 0 || result.status == 5, "\(arguments): status \(result.status) \(result.standardError)")
            #expect(!result.signalled, "\(arguments) died: \(result.standardError)")
        }
    }

    @Test("verify reports a body file name that is not one the library writes as damage")
    func verifyReportsCraftedNames() async throws {
        let root = TemporaryDirectory()
        let (cacheDirectory, connection) = try Self.craftable(root)
        try connection.execute("UPDATE entries SET body_file = '../elsewhere' WHERE url = 'https://a.test/fresh'")
        let result = try await ChildProcess.run(CacheToolCommandTests.cachetool, ["verify", "--cache-dir", cacheDirectory.path, "--json"])
        #expect(result.status == 5, "a damaged store: \(result.standardOutput) \(result.standardError)")
        #expect(result.standardOutput.contains("not a name this library writes"), "\(result.standardOutput)")
    }
}

/// Secrets in stored URLs never reach cachetool's output.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(2)))) struct CacheToolSecretTests {
    static let secrets = ["s3cretpw", "tok3nvalue", "k3yvalue", "s1gvalue", "sessval"]

    @Test("No command prints a password or a secret query value; URLs are stored without the password")
    func noSecretsInOutput() async throws {
        let directory = TemporaryDirectory()
        let cache = try ResponseCache.open(memoryCapacity: 0, diskCapacity: 1 << 30, directory: directory.url)
        let planted = [
            "http://alice:s3cretpw@a.test/p?token=tok3nvalue&page=2",
            "https://b.test/q?api_key=k3yvalue&X-Amz-Signature=s1gvalue&session_id=sessval&plain=visible",
        ]
        for url in planted {
            cache.store(url: URL(string: url)!, status: 200, responseHeaders: [("Cache-Control", "max-age=600")], body: Data("b".utf8))
        }
        cache.flush()
        let path = directory.url.path
        var outputs: [String] = []
        for arguments in [
            ["list"], ["list", "--json"], ["stats"], ["stats", "--json"], ["info"], ["verify"], ["verify", "--json"],
            ["show", planted[0]], ["show", planted[0], "--json"], ["show", planted[1]], ["explain", planted[1]],
            ["explain", planted[1], "--json"], ["show", "https://b.test/none?token=tok3nvalue"],
        ] {
            let result = try await ChildProcess.run(CacheToolCommandTests.cachetool, arguments + ["--cache-dir", path])
            outputs.append(result.standardOutput + result.standardError)
            for secret in Self.secrets {
                #expect(!(result.standardOutput + result.standardError).contains(secret), "\(arguments) printed \(secret)")
            }
        }
        let all = outputs.joined()
        #expect(all.contains("a.test/p?token=…&page=2") && all.contains("plain=visible"), "\(outputs[0])")
        // The database itself holds no password.
        let database = try Data(contentsOf: directory.url.appendingPathComponent("Cache.sqlite"))
        #expect(database.range(of: Data("s3cretpw".utf8)) == nil)
    }
}

/// Numbers from the command line and from files are checked before
/// arithmetic or conversion: a usage error or a clamp, never a trap.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(2)))) struct CacheToolNumberTests {
    @Test("Huge sizes and ages on the command line are usage errors (exit 2)")
    func hugeArguments() async throws {
        let directory = TemporaryDirectory()
        try CacheToolCommandTests.makeCache(directory.url)
        for arguments in [
            ["prune", "--to-size", "1e30K"], ["prune", "--to-size", "infK"], ["prune", "--older-than", "1e300d"],
            ["prune", "--older-than", "nanw"],
        ] {
            let result = try await ChildProcess.run(CacheToolCommandTests.cachetool, arguments + ["--cache-dir", directory.url.path])
            #expect(result.status == 2, "\(arguments): \(result.status) \(result.standardError)")
        }
    }

    @Test("A cookies.txt line with an expiry of 2^63-1 is imported with at most 400 days, and listed")
    func hugeCookieExpiry() async throws {
        let directory = TemporaryDirectory()
        let file = directory.url.appendingPathComponent("cookies.txt")
        try Data("# Netscape HTTP Cookie File\n.example.test\tTRUE\t/\tFALSE\t9223372036854775807\tlong\tv\n".utf8).write(to: file)
        let data = directory.url.appendingPathComponent("data").path
        // Whole seconds around the import: the listing prints no fraction.
        let before = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))
        let imported = try await ChildProcess.run(CacheToolCommandTests.cachetool, ["cookies", "import", file.path, "--data-dir", data])
        let after = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.up))
        #expect(imported.status == 0, "\(imported.standardError)")
        let listed = try await ChildProcess.run(CacheToolCommandTests.cachetool, ["cookies", "list", "--data-dir", data, "--json"])
        #expect(listed.status == 0, "\(listed.standardError)")
        let cookies = try #require(try JSONSerialization.jsonObject(with: Data(listed.standardOutput.utf8)) as? [[String: Any]], "\(listed.standardOutput)")
        let expires = try #require(cookies.first { $0["name"] as? String == "long" }?["expires"] as? String, "\(listed.standardOutput)")
        let date = try #require(ISO8601DateFormatter().date(from: expires), "\(expires)")
        // 400 days from the import, which happened between the two readings.
        let days400: TimeInterval = 400 * 86_400
        #expect(date >= before + days400 && date <= after + days400, "\(expires), imported between \(before) and \(after)")
    }
}

/// Files holding secrets or cached bodies are created 0600 with O_EXCL from
/// their first byte, seen in the system calls themselves.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(2)))) struct PrivateFileModeTests {
    /// The `open`/`openat` calls `arguments` made under strace.
    static func opens(_ arguments: [String]) async throws -> (ChildProcess.Result, [String]) {
        let log = TemporaryDirectory()
        let trace = log.path("trace")
        let result = try await ChildProcess.run(
            URL(fileURLWithPath: "/usr/bin/strace"), ["-f", "-qq", "-e", "trace=open,openat,creat", "-o", trace, CacheToolCommandTests.cachetool.path] + arguments)
        let lines = (try String(contentsOfFile: trace, encoding: .utf8)).split(separator: "\n").map(String.init)
        return (result, lines)
    }

    @Test("cookies export and cached bodies over the inline size are created O_EXCL with mode 0600")
    func createdPrivate() async throws {
        let directory = TemporaryDirectory()
        let data = directory.path("data")
        let cookies = directory.url.appendingPathComponent("in.txt")
        try Data(".example.test\tTRUE\t/\tFALSE\t0\tsid\tsecret-value\n".utf8).write(to: cookies)
        _ = try await ChildProcess.run(CacheToolCommandTests.cachetool, ["cookies", "import", cookies.path, "--data-dir", data])
        let exported = directory.path("out.txt")
        let (export, exportOpens) = try await Self.opens(["cookies", "export", exported, "--data-dir", data])
        #expect(export.status == 0, "\(export.standardError)")
        let writes = exportOpens.filter { $0.contains(exported) && $0.contains("O_CREAT") }
        #expect(!writes.isEmpty && writes.allSatisfy { $0.contains("O_EXCL") && $0.contains("0600") }, "\(writes)")

        let origin = try await TestOrigin.start()
        defer { Task { try await origin.shutdown() } }
        origin.route(
            "/big",
            response: ScriptedResponse(
                headers: [HeaderField("Cache-Control", "max-age=600")], body: Array(repeating: 7, count: 300_000)))
        let cache = directory.path("cache")
        let (fetch, fetchOpens) = try await Self.opens(["fetch", origin.url("/big").absoluteString, "--cache-dir", cache, "--data-dir", data])
        #expect(fetch.status == 0, "\(fetch.standardError)")
        let bodies = fetchOpens.filter { $0.contains("/Bodies/") && $0.contains("O_CREAT") }
        #expect(!bodies.isEmpty && bodies.allSatisfy { $0.contains("O_EXCL") && $0.contains("0600") }, "\(bodies)")
    }
}
