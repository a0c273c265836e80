import Foundation
import Storage
import Testing
import TestSupport
@_spi(Tools) @testable import URLLoading

/// Every `cachetool` subcommand run as a process against real stores: the
/// text and `--json` outputs, exit codes for missing, locked, damaged and
/// newer stores, a writer in another process, and no secret in any output.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(2)))) struct CacheToolCommandTests {
    static let cachetool = ChildProcess.productsDirectory.appendingPathComponent("cachetool")

    static func run(_ arguments: [String]) async throws -> ChildProcess.Result {
        try await ChildProcess.run(cachetool, arguments)
    }

    /// A cache with a fresh, a stale and a large entry on two hosts.
    static func makeCache(_ directory: URL) throws {
        let cache = try ResponseCache.open(memoryCapacity: 0, diskCapacity: 1 << 30, directory: directory)
        let old = Date().addingTimeInterval(-3 * 86_400)
        cache.store(
            url: URL(string: "https://a.test/fresh")!, status: 200,
            responseHeaders: [("Cache-Control", "max-age=3600"), ("Content-Type", "text/plain"), ("Set-Cookie", "sid=topsecret")],
            body: Data("fresh body".utf8), userInfo: ["origin": "test"])
        cache.store(
            url: URL(string: "https://a.test/stale")!, status: 200, responseHeaders: [("Cache-Control", "max-age=10")],
            body: Data("stale body".utf8), at: old)
        cache.store(
            url: URL(string: "https://b.test/big")!, status: 404, responseHeaders: [("Cache-Control", "max-age=600")],
            body: Data(repeating: 7, count: 300_000))
        cache.flush()
    }

    struct Entry: Decodable {
        var url: String
        var status: Int
        var bodySize: Int
        var isFresh: Bool
        var host: String
    }

    static func listed(_ directory: URL, _ extra: [String] = []) async throws -> [Entry] {
        let result = try await run(["list", "--cache-dir", directory.path, "--json"] + extra)
        #expect(result.status == 0, "\(result.standardError)")
        return try result.standardOutput.split(separator: "\n").map { try JSONDecoder().decode(Entry.self, from: Data($0.utf8)) }
    }

    @Test("list: filters, order, limit, JSON lines")
    func list() async throws {
        let directory = TemporaryDirectory()
        try Self.makeCache(directory.url)
        #expect(try await Self.listed(directory.url).count == 3)
        #expect(try await Self.listed(directory.url, ["--host", "a.test"]).map(\.url).sorted() == ["https://a.test/fresh", "https://a.test/stale"])
        #expect(try await Self.listed(directory.url, ["--stale"]).map(\.url) == ["https://a.test/stale"])
        #expect(try await Self.listed(directory.url, ["--status", "404"]).map(\.bodySize) == [300_000])
        #expect(try await Self.listed(directory.url, ["--url", "https://a.test/f*"]).map(\.url) == ["https://a.test/fresh"])
        #expect(try await Self.listed(directory.url, ["--sort", "size", "--limit", "1"]).map(\.url) == ["https://b.test/big"])
        let text = try await Self.run(["list", "--cache-dir", directory.url.path, "--sort", "url", "--ascending"])
        #expect(text.standardOutput.split(separator: "\n").dropFirst().first?.hasSuffix("https://a.test/fresh") == true)
    }

    @Test("show, explain and stats: redacted fields, freshness figures, counters")
    func showExplainStats() async throws {
        let directory = TemporaryDirectory()
        try Self.makeCache(directory.url)
        let body = directory.path("body.out")
        let show = try await Self.run(["show", "--cache-dir", directory.url.path, "https://a.test/fresh", "--body", body])
        #expect(show.status == 0, "\(show.standardError)")
        #expect(show.standardOutput.contains("Set-Cookie: <redacted>") && !show.standardOutput.contains("topsecret"))
        #expect(show.standardOutput.contains("userInfo keys: origin"))
        #expect(try Data(contentsOf: URL(fileURLWithPath: body)) == Data("fresh body".utf8))
        let explain = try await Self.run(["explain", "--cache-dir", directory.url.path, "https://a.test/stale", "--json"])
        struct Explanation: Decodable { var action: String; var freshnessLifetime: Double?; var currentAge: Double? }
        let explanation = try JSONDecoder().decode(Explanation.self, from: Data(explain.standardOutput.utf8))
        #expect(explanation.action == "revalidate with the origin" || explanation.action == "fetch from the origin")
        #expect(explanation.freshnessLifetime == 10 && (explanation.currentAge ?? 0) > 86_400)
        let fresh = try await Self.run(["explain", "--cache-dir", directory.url.path, "https://a.test/fresh"])
        #expect(fresh.standardOutput.contains("serve from cache") && fresh.standardOutput.contains("max-age"))
        let missing = try await Self.run(["show", "--cache-dir", directory.url.path, "https://a.test/none"])
        #expect(missing.status == 3)
        let stats = try await Self.run(["stats", "--cache-dir", directory.url.path, "--json"])
        struct Stats: Decodable { var entries: Int; var fileBodies: Int; var topHosts: [[String: AnyCodableValue]]; var ages: [[String: AnyCodableValue]] }
        let parsed = try JSONDecoder().decode(Stats.self, from: Data(stats.standardOutput.utf8))
        #expect(parsed.entries == 3 && parsed.fileBodies == 1 && parsed.topHosts.count == 2 && parsed.ages.count == 5)
    }

    @Test("remove, prune (older-than, to-size, host, stale), clear, vacuum, verify --repair")
    func maintenance() async throws {
        let directory = TemporaryDirectory()
        let path = directory.url.path
        try Self.makeCache(directory.url)
        #expect(try await Self.run(["prune", "--cache-dir", path, "--older-than", "1d"]).status == 0)
        #expect(try await Self.listed(directory.url).map(\.url).sorted() == ["https://a.test/fresh", "https://b.test/big"])
        try Self.makeCache(directory.url)
        #expect(try await Self.run(["prune", "--cache-dir", path, "--stale"]).status == 0)
        #expect(try await Self.listed(directory.url).count == 2)
        #expect(try await Self.run(["prune", "--cache-dir", path, "--host", "b.test"]).status == 0)
        #expect(try await Self.listed(directory.url).map(\.host) == ["a.test"])
        try Self.makeCache(directory.url)
        let toSize = try await Self.run(["prune", "--cache-dir", path, "--to-size", "1K", "--json"])
        #expect(toSize.standardOutput.contains("\"bytes\""))
        #expect(try await Self.listed(directory.url).count <= 2)
        try Self.makeCache(directory.url)
        #expect(try await Self.run(["remove", "--cache-dir", path, "https://a.test/fresh"]).status == 0)
        #expect(try await Self.run(["remove", "--cache-dir", path, "https://a.test/fresh"]).status == 3)
        try Self.makeCache(directory.url)
        // A body file deleted behind the cache's back, and a stray file.
        let bodies = directory.url.appendingPathComponent("Bodies")
        for name in try FileManager.default.contentsOfDirectory(atPath: bodies.path) { try FileManager.default.removeItem(at: bodies.appendingPathComponent(name)) }
        try Data("stray".utf8).write(to: bodies.appendingPathComponent("stray-file"))
        let broken = try await Self.run(["verify", "--cache-dir", path, "--json"])
        #expect(broken.status == 1)
        #expect(broken.standardOutput.contains("stray-file") && broken.standardOutput.contains("https://b.test/big"))
        #expect(try await Self.run(["verify", "--cache-dir", path, "--repair"]).status == 0)
        #expect(try await Self.run(["verify", "--cache-dir", path]).status == 0)
        #expect(try await Self.run(["clear", "--cache-dir", path]).status == 0)
        #expect(try await Self.listed(directory.url).isEmpty)
        #expect(try await Self.run(["vacuum", "--cache-dir", path]).status == 0)
    }

    @Test("A writer in another process keeps storing while list, stats, verify and prune run: no error, no lost entry")
    func concurrentWriter() async throws {
        let directory = TemporaryDirectory()
        let path = directory.url.path
        _ = try await Self.run(["create", "--cache-dir", path])
        // Round 1,000 keys: however long the commands take (minutes under a
        // sanitizer), the writer never fills the cache, whose eviction would
        // take the first entries away.
        let writer = try ChildProcess.startWithOutputLines(ChildProcess.helper, ["cache-store-loop", path, "0", "1000"])
        var stored = 0
        while stored < 50, let line = await writer.nextLine() { if line.hasPrefix("stored") { stored += 1 } }
        for arguments in [["list", "--json"], ["stats"], ["verify"], ["prune", "--older-than", "1d"], ["info", "--json"]] {
            let result = try await Self.run([arguments[0], "--cache-dir", path] + arguments.dropFirst())
            #expect(result.status == 0, "\(arguments): \(result.standardError)")
        }
        while stored < 100, let line = await writer.nextLine() { if line.hasPrefix("stored") { stored += 1 } }
        // The writer said it stored 100 while the commands ran (a writer that
        // died at once would have said nothing), and every one is there.
        #expect(stored == 100, "the writer stopped after \(stored) entries")
        writer.kill(SIGKILL)
        _ = try? await writer.wait()
        let entries = try await Self.listed(directory.url)
        #expect(entries.count >= 100)
        #expect(Set(entries.map(\.url)).isSuperset(of: (0..<100).map { "https://fixture.test/loop/\($0)" }))
    }

    @Test("Missing, locked, damaged and newer stores: the documented exit code and a message naming the file")
    func brokenStores() async throws {
        let directory = TemporaryDirectory()
        let path = directory.url.path
        for command in [["list"], ["stats"], ["explain", "https://a.test/"], ["prune", "--stale"], ["cookies", "list"]] {
            let result = try await Self.run(command + ["--cache-dir", path, "--data-dir", path])
            #expect(result.status == 3, "\(command)")
            #expect(result.standardError.contains(path))
        }
        try Self.makeCache(directory.url)
        let database = directory.path("Cache.sqlite")
        let holder = try ChildProcess.startWithOutputLines(ChildProcess.helper, ["hold-lock", database])
        #expect(await holder.nextLine() == "locked")
        // Readers are not blocked in WAL mode; a write waits out the busy timeout (5 s), then says so.
        let locked = try await Self.run(["clear", "--cache-dir", path])
        #expect(locked.status == 4, "\(locked.standardError)")
        #expect(locked.standardError.contains("Cache.sqlite") && locked.standardError.contains("retry"))
        holder.kill(SIGKILL)
        _ = try? await holder.wait()
        let connection = try Connection(path: database, busyTimeout: .seconds(5))
        try connection.execute("PRAGMA user_version = 99")
        let newer = try await Self.run(["list", "--cache-dir", path])
        #expect(newer.status == 5 && newer.standardError.contains("Cache.sqlite"))
        try Data("garbage, not a database".utf8).write(to: URL(fileURLWithPath: database))
        chmod(database, 0o600)  // damaged, but private (one others can read is refused before)
        let damaged = try await Self.run(["stats", "--cache-dir", path])
        #expect(damaged.status == 5 && damaged.standardError.contains("Cache.sqlite"))
    }

    @Test("cookies list/remove/clear/import/export and credentials list/remove; no value or password in any output")
    func cookiesAndCredentials() async throws {
        let directory = TemporaryDirectory()
        let path = directory.url.path
        let cookies = try CookieStore(directory: directory.url)
        cookies.setCookies(["sid=cookie-secret-value; Max-Age=3600; HttpOnly", "theme=dark; Max-Age=3600"], for: URL(string: "https://a.test/")!)
        cookies.setCookies(["other=x; Max-Age=3600"], for: URL(string: "https://b.test/")!)
        let credentials = try CredentialStore(directory: directory.url)
        credentials.set(
            Credential(user: "ann", password: "S3cretPassw0rd", persistence: .permanent),
            for: ProtectionSpace(host: "a.test", port: 443, protocol: "https", realm: "api", authenticationMethod: .httpBasic))
        var outputs: [String] = []
        func run(_ arguments: [String]) async throws -> ChildProcess.Result {
            let result = try await Self.run(arguments + ["--data-dir", path])
            outputs.append(result.standardOutput + result.standardError)
            return result
        }
        let list = try await run(["cookies", "list", "--json"])
        #expect(list.status == 0 && list.standardOutput.contains("\"sid\"") && list.standardOutput.contains("\"theme\""))
        let credentialList = try await run(["credentials", "list"])
        #expect(credentialList.standardOutput.contains("https://a.test:443 realm=\"api\" basic: ann [file, plain text]"), "\(credentialList.standardOutput)")
        let listed = try await run(["credentials", "list", "--json"])
        let rows = try JSONSerialization.jsonObject(with: Data(listed.standardOutput.utf8)) as? [[String: Any]]
        #expect(rows?.first?["backend"] as? String == "file" && rows?.first?["plainText"] as? Bool == true, "\(listed.standardOutput)")
        let exported = directory.path("cookies.txt")
        #expect(try await run(["cookies", "export", exported]).status == 0)
        #expect(try String(contentsOfFile: exported, encoding: .utf8).contains("cookie-secret-value"))
        #expect((try FileManager.default.attributesOfItem(atPath: exported)[.posixPermissions] as? Int) == 0o600)
        #expect(try await run(["cookies", "remove", "--domain", "b.test"]).status == 0)
        #expect(try await run(["cookies", "list"]).standardOutput.split(separator: "\n").count == 2)
        #expect(try await run(["cookies", "clear"]).status == 0)
        #expect(try await run(["cookies", "import", exported]).standardOutput.contains("imported 3"))
        #expect(try await run(["credentials", "remove", "--host", "a.test", "--user", "ann"]).status == 0)
        // The removed user is gone from the parsed listing, whatever else it holds.
        let remaining = try await run(["credentials", "list", "--json"])
        let spaces = try JSONSerialization.jsonObject(with: Data(remaining.standardOutput.utf8)) as? [[String: Any]]
        #expect(spaces != nil, "not a JSON array: \(remaining.standardOutput)")
        #expect(!(spaces ?? []).contains { ($0["users"] as? [String] ?? []).contains("ann") }, "\(remaining.standardOutput)")
        for output in outputs {
            #expect(!output.contains("S3cretPassw0rd") && !output.contains("cookie-secret-value"))
        }
    }
}

/// Any JSON value, for shapes a test only counts.
enum AnyCodableValue: Decodable {
    case string(String), number(Double), other
    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let string = try? container.decode(String.self) { self = .string(string) } else if let number = try? container.decode(Double.self) { self = .number(number) } else { self = .other }
    }
}

extension CacheToolCommandTests {
    @Test("fetch: a caching curl; the second fetch is a hit; -o writes the body; --json")
    func fetch() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/page", response: ScriptedResponse(headers: [HeaderField("Cache-Control", "max-age=600")], body: "page body"))
        let directory = TemporaryDirectory()
        let arguments = ["--cache-dir", directory.path("cache"), "--data-dir", directory.path("data")]
        let first = try await Self.run(["fetch", origin.url("/page").absoluteString] + arguments)
        #expect(first.status == 0, "\(first.standardError)")
        #expect(first.standardOutput.contains("200") && first.standardOutput.contains("fwd=uri-miss"))
        let output = directory.path("out")
        let second = try await Self.run(["fetch", origin.url("/page").absoluteString, "-o", output, "--json"] + arguments)
        struct Report: Decodable { var status: Int; var cacheStatus: String?; var bytes: Int }
        let report = try JSONDecoder().decode(Report.self, from: Data(second.standardOutput.utf8))
        #expect(report.status == 200 && report.cacheStatus == "URLLoading; hit" && report.bytes == 9)
        #expect(try String(contentsOfFile: output, encoding: .utf8) == "page body")
        #expect(origin.requests.count == 1)
        let stats = try await Self.run(["stats", "--cache-dir", directory.path("cache"), "--json"])
        #expect(stats.standardOutput.contains("\"hits\" : 1"))
        let failed = try await Self.run(["fetch", "http://127.0.0.1:1/refused"] + arguments)
        #expect(failed.status == 1 && failed.standardError.contains("connect"))
        try await origin.shutdown()
    }
}
