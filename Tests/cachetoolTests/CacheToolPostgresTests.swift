import Foundation
import Testing
import TestSupport
@_spi(Tools) import URLLoading
import Postgres
import URLLoadingPostgres

/// `cachetool --postgres`: the commands that work on a fleet's
/// database, with the same text and JSON as on a folder, and no password
/// from the connection string in any output.
@Suite struct CacheToolPostgresTests {
    static let cachetool = ChildProcess.productsDirectory.appendingPathComponent("cachetool")

    @Test("Every cache command, cookies and credentials on PostgreSQL; verify finds a wrong usage row and repairs it; no password printed")
    func fleetStore() async throws {
        let database = try TestPostgres.database()
        defer { database.drop() }
        let url = "\(database.url) password=hunter2-secret"
        let cache = try ResponseCache(memoryCapacity: 0, diskCapacity: 1 << 24, database: PostgresDatabase(url: url))
        for (index, host) in ["a.example", "a.example", "b.example"].enumerated() {
            cache.store(
                url: try #require(URL(string: "https://\(host)/item/\(index)")), status: 200,
                responseHeaders: [("Cache-Control", "max-age=600"), ("Content-Type", "text/plain")], body: Data("body \(index)".utf8))
        }
        let cookies = try CookieStore(database: PostgresDatabase(url: url))
        cookies.setCookies(["sid=cookie-value-secret; Max-Age=600"], for: try #require(URL(string: "https://a.example/")))
        let credentials = try CredentialStore(database: PostgresDatabase(url: url))
        credentials.set(
            Credential(user: "ann", password: "credential-secret", persistence: .permanent),
            for: ProtectionSpace(host: "a.example", port: 443, protocol: "https", realm: "api", authenticationMethod: .httpBasic))

        var outputs: [String] = []
        func run(_ arguments: [String], environment: [String: String]? = nil) async throws -> ChildProcess.Result {
            let result = try await ChildProcess.run(Self.cachetool, arguments, environment: environment)
            outputs.append(result.standardOutput + result.standardError)
            return result
        }
        let info = try await run(["info", "--postgres", url, "--json"])
        #expect(info.status == 0 && info.standardOutput.contains("\"entries\" : 3"), "\(info.standardOutput)\(info.standardError)")
        let list = try await run(["list", "--postgres", url, "--json", "--host", "a.example"])
        #expect(list.standardOutput.split(separator: "\n").count == 2, "\(list.standardOutput)")
        #expect(list.standardOutput.contains("https://a.example/item/0") && list.standardOutput.contains("\"isFresh\":true"))
        let stats = try await run(["stats", "--postgres", url, "--json"])
        #expect(stats.status == 0 && stats.standardOutput.contains("\"host\" : \"a.example\""), "\(stats.standardOutput)")
        let shown = try await run(["show", "https://a.example/item/0", "--postgres", url])
        #expect(shown.status == 0 && shown.standardOutput.contains("Content-Type: text/plain"), "\(shown.standardOutput)\(shown.standardError)")
        let explained = try await run(["explain", "https://a.example/item/1", "--postgres", url, "--json"])
        #expect(explained.standardOutput.contains("\"action\" : \"serve from cache\""), "\(explained.standardOutput)\(explained.standardError)")
        let verified = try await run(["verify", "--postgres", url])
        #expect(verified.status == 0 && verified.standardOutput.hasPrefix("ok: "), "\(verified.standardOutput)\(verified.standardError)")
        let vacuumed = try await run(["vacuum", "--postgres", url])
        #expect(vacuumed.status == 0, "\(vacuumed.standardError)")

        var environment = ProcessInfo.processInfo.environment
        environment["URLLOADING_POSTGRES"] = url
        let removed = try await run(["remove", "https://b.example/item/2"], environment: environment)
        #expect(removed.status == 0 && removed.standardOutput.contains("removed 1"), "\(removed.standardOutput)\(removed.standardError)")
        let pruned = try await run(["prune", "--host", "a.example", "--postgres", url, "--json"])
        #expect(pruned.standardOutput.contains("\"removed\" : 2") && pruned.standardOutput.contains("\"entries\" : 0"), "\(pruned.standardOutput)")
        // fetch: a caching curl on the fleet's stores; the second is served from the database.
        let origin = try await TestOrigin.start()
        defer { Task { try? await origin.shutdown() } }
        origin.route("/fetched", response: ScriptedResponse(headers: [HeaderField("Cache-Control", "max-age=600")], body: "fetched body"))
        let fetchURL = origin.baseURL.appendingPathComponent("fetched").absoluteString
        let firstFetch = try await run(["fetch", fetchURL, "--postgres", url, "--json"])
        let secondFetch = try await run(["fetch", fetchURL, "--postgres", url, "--json"])
        #expect(firstFetch.status == 0 && secondFetch.standardOutput.contains("hit"), "\(firstFetch.standardError)\(secondFetch.standardOutput)")
        #expect(origin.requests.count == 1)

        let cookieList = try await run(["cookies", "list", "--postgres", url])
        #expect(cookieList.status == 0 && cookieList.standardOutput.contains("sid"), "\(cookieList.standardOutput)\(cookieList.standardError)")
        let credentialList = try await run(["credentials", "list", "--postgres", url])
        #expect(credentialList.standardOutput.contains("https://a.example:443 realm=\"api\" basic: ann [database, plain text]"), "\(credentialList.standardOutput)")
        let credentialRemove = try await run(["credentials", "remove", "--host", "a.example", "--postgres", url])
        #expect(credentialRemove.standardOutput.contains("removed 1 credential\n"))
        let cleared = try await run(["cookies", "clear", "--postgres", url])
        #expect(cleared.status == 0, "\(cleared.standardError)")

        let empty = try TestPostgres.database()
        defer { empty.drop() }
        let missing = try await run(["list", "--postgres", empty.url])
        #expect(missing.status == 3 && missing.standardError.contains("no cache tables"), "\(missing.standardError)")
        let created = try await run(["create", "--postgres", empty.url, "--json"])
        #expect(created.status == 0 && created.standardOutput.contains("\"schemaVersion\" : 1"), "\(created.standardOutput)\(created.standardError)")
        // A usage row set wrong behind the cache's back: verify says so, --repair sets it right.
        let connection = try PostgresConnection(empty.url)
        try connection.run("UPDATE urlloading_cache_usage SET bytes = 999 WHERE id = 1")
        let wrong = try await run(["verify", "--postgres", empty.url])
        #expect(wrong.status != 0 && (wrong.standardOutput + wrong.standardError).contains("usage says 0 entries and 999 bytes"), "\(wrong.standardOutput)\(wrong.standardError)")
        let repaired = try await run(["verify", "--repair", "--postgres", empty.url])
        #expect(repaired.status == 0, "\(repaired.standardOutput)\(repaired.standardError)")
        #expect(try connection.scalarInt("SELECT bytes FROM urlloading_cache_usage") == 0)
        for output in outputs {
            #expect(!output.contains("hunter2") && !output.contains("cookie-value-secret") && !output.contains("credential-secret"), "\(output)")
        }
    }
}
