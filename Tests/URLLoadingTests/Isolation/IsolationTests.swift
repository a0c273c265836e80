import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
import Testing
import TestSupport
@testable import URLLoading

/// Ephemeral isolation, proven: an ephemeral session writes nothing to disk
/// (checked with strace, against a default-configuration control), shares
/// nothing with other sessions, keeps nothing after invalidation, and a
/// configuration is a value each session copies.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(3)))) struct IsolationTests {
    // MARK: The origin every test here uses

    static let large = TestOrigin.pattern(offset: 3, count: 300_000)

    /// Cacheable small and large bodies, cookies, Basic realms named after
    /// persistences, Digest, a download, an upload sink, a redirect and a
    /// slow resource. `/counter` answers a new number each time and may be
    /// cached, so whose cache answered shows.
    static func startOrigin() async throws -> TestOrigin {
        let origin = try await TestOrigin.start()
        let cacheable = [HeaderField("Cache-Control", "max-age=600")]
        origin.route("/small", response: ScriptedResponse(headers: cacheable, body: "small"))
        origin.route("/large", response: ScriptedResponse(headers: cacheable, body: Self.large))
        origin.route(
            "/set-cookie",
            response: ScriptedResponse(
                headers: [
                    HeaderField("Set-Cookie", "persistent=p1; Max-Age=3600; Path=/"), HeaderField("Set-Cookie", "transient=t1; Path=/"),
                    HeaderField("Cache-Control", "no-store"),
                ], body: "set"))
        origin.route("/echo-cookie") { request in
            ScriptedResponse(headers: [HeaderField("Cache-Control", "no-store")], body: request.header("Cookie") ?? "")
        }
        for realm in ["none", "session", "permanent"] {
            origin.route(
                "/basic/\(realm)",
                Routes.basicAuth(
                    realm: realm, user: "tenant", password: "s3cret-\(realm)",
                    then: ScriptedResponse(
                        headers: [HeaderField("Cache-Control", "no-store")], body: "hello \(realm)")))
        }
        origin.route(
            "/digest",
            Routes.digest(realm: "digest", user: "tenant", password: "s3cret-digest", nonce: "5f1d2a0b9c") { _ in
                ScriptedResponse(headers: [HeaderField("Cache-Control", "no-store")], body: "digest ok")
            })
        origin.route("/download", response: ScriptedResponse(body: TestOrigin.pattern(offset: 0, count: 200_000)))
        origin.route("/upload") { request in ScriptedResponse(status: 201, body: "stored \(request.body.count)") }
        origin.route("/redirect", Routes.redirect(to: "/small"))
        origin.route("/slow", response: ScriptedResponse(parts: [.pause(.seconds(7)), .bytes(Array("late".utf8))], framing: .closeDelimited))
        let counter = Lock(0)
        origin.route("/counter") { _ in
            let n = counter.withLock { value -> Int in
                value += 1
                return value
            }
            return ScriptedResponse(headers: [HeaderField("Cache-Control", "max-age=600")], body: "response \(n)")
        }
        origin.route("/tenant") { request in
            ScriptedResponse(headers: [HeaderField("Cache-Control", "no-store")], body: request.header("Cookie") ?? "")
        }
        return origin
    }

    // MARK: 1. Nothing on disk

    /// The paths a traced run created, opened for writing, renamed,
    /// removed or linked, from `strace -f` output.
    static func writtenPaths(_ trace: String) -> [String] {
        let always: Set<String> = [
            "creat", "rename", "renameat", "renameat2", "unlink", "unlinkat", "mkdir", "mkdirat",
            "rmdir", "link", "linkat", "symlink", "symlinkat", "truncate", "mknodat",
        ]
        var paths: [String] = []
        for line in trace.split(separator: "\n") {
            // "<pid> name(args) = result"; "<... name resumed>" lines carry no path.
            let text = line.drop { $0.isNumber || $0 == " " }
            guard let open = text.firstIndex(of: "(") else { continue }
            let name = String(text[..<open])
            let arguments = text[open...]
            let writes =
                (name == "open" || name == "openat" || name == "openat2")
                && ["O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "O_APPEND"].contains { arguments.contains($0) }
            guard writes || always.contains(name) else { continue }
            // Every quoted argument is a path (rename and link have two).
            let quoted = arguments.split(separator: "\"", omittingEmptySubsequences: false)
            paths += stride(from: 1, to: quoted.count, by: 2).map { String(quoted[$0]) }
        }
        return paths
    }

    /// Runs the helper's tour under strace; returns the written paths that
    /// are not the test's own downloads or the library's temporary
    /// download files (which the API hands to the caller).
    static func tracedRun(_ kind: String, origin: TestOrigin) async throws -> (violations: [String], all: [String]) {
        let work = TemporaryDirectory(kind)
        for folder in ["downloads", "tmp", "data", "cache", "home"] {
            try FileManager.default.createDirectory(at: work.url.appendingPathComponent(folder), withIntermediateDirectories: true)
        }
        try Data(TestOrigin.pattern(offset: 9, count: 100_000)).write(to: work.url.appendingPathComponent("upload-source"))
        var environment = ProcessInfo.processInfo.environment
        environment["TMPDIR"] = work.path("tmp")
        environment["XDG_DATA_HOME"] = work.path("data")
        environment["XDG_CACHE_HOME"] = work.path("cache")
        environment["HOME"] = work.path("home")
        let log = work.path("trace")
        let result = try await ChildProcess.run(
            URL(fileURLWithPath: "/usr/bin/strace"),
            [
                "-f", "-qq", "-s", "4096", "-o", log,
                "-e", "trace=open,openat,openat2,creat,rename,renameat,renameat2,unlink,unlinkat,mkdir,mkdirat,rmdir,link,linkat,symlink,symlinkat,truncate,mknodat",
                ChildProcess.helper.path, "isolation-run", kind, origin.baseURL.absoluteString, work.url.path,
            ], environment: environment)
        #expect(result.status == 0 && result.standardOutput.contains("ok"), "\(kind) run: \(result.standardError)")
        let written = writtenPaths(try String(contentsOfFile: log, encoding: .utf8))
        let allowed = [work.path("downloads"), work.path("tmp") + "/urlloading-downloads", "/dev/null"]
        // ThreadSanitizer's runtime maps a file of its own in the helper's
        // TMPDIR (`tsan.rodata.<pid>`): the sanitizer's, not the library's.
        let sanitizerFile = Sanitizer.active == "thread" ? work.path("tmp") + "/tsan.rodata." : nil
        let violations = written.filter { path in
            !allowed.contains { path == $0 || path.hasPrefix($0 + "/") }
                && !(sanitizerFile.map { path.hasPrefix($0) } ?? false)
        }
        print("isolation \(kind): \(written.count) writes traced, \(violations.count) outside the caller's downloads")
        // Every temporary download was handed over (moved) or deleted.
        let left = (try? FileManager.default.contentsOfDirectory(atPath: work.path("tmp") + "/urlloading-downloads")) ?? []
        #expect(left.isEmpty, "temporary downloads left behind: \(left)")
        return (violations, written)
    }

    @Test("An ephemeral session run through every feature under strace writes no file but the downloads the caller takes")
    func nothingOnDisk() async throws {
        let origin = try await Self.startOrigin()
        let (violations, written) = try await Self.tracedRun("ephemeral", origin: origin)
        #expect(violations == [], "written by an ephemeral session: \(violations)")
        // The check sees the files it allows: the trace is real.
        #expect(written.contains { $0.hasSuffix("/downloads/delegate") } && written.contains { $0.hasSuffix("/downloads/async") })
        // The control: the same tour with a default configuration writes its stores, and the check says so.
        let (control, _) = try await Self.tracedRun("default", origin: origin)
        for store in ["/data/isolation/Cookies.sqlite", "/data/isolation/Credentials.sqlite", "/cache/isolation/"] {
            #expect(control.contains { $0.contains(store) }, "the control run shows no write to \(store): \(control)")
        }
        try await origin.shutdown()
    }
}

extension IsolationTests {
    // MARK: 2. No sharing

    /// Sets a cookie naming `tenant`, stores `/counter` and a permanent
    /// credential for the origin's Basic realm, then reads them back.
    static func exercise(_ session: Session, _ origin: TestOrigin, tenant: String) async throws -> (counter: String, cookies: String) {
        let space = ProtectionSpace(host: "127.0.0.1", port: origin.port, protocol: "http", realm: "permanent", authenticationMethod: .httpBasic)
        session.credentialStore?.setDefaultCredential(Credential(user: "tenant", password: "s3cret-permanent", persistence: .permanent), for: space)
        session.credentialStore?.set(Credential(user: tenant, password: "pw-\(tenant)", persistence: .permanent), for: space)
        origin.route(
            "/set-\(tenant)",
            response: ScriptedResponse(
                headers: [
                    HeaderField("Set-Cookie", "who=\(tenant); Max-Age=3600; Path=/"), HeaderField("Cache-Control", "no-store"),
                ], body: ""))
        _ = try await session.data(from: origin.url("/set-\(tenant)"))
        let (counter, _) = try await session.data(from: origin.url("/counter"))
        let (cookies, _) = try await session.data(from: origin.url("/tenant"))
        let (_, response) = try await session.data(from: origin.url("/basic/permanent"))
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        return (String(decoding: counter, as: UTF8.self), String(decoding: cookies, as: UTF8.self))
    }

    @Test(
        "Sessions of two ephemeral configurations and a default one, same origin and URLs: each sees only its own cookies, cache and credentials; the default stores on disk hold nothing of the others"
    )
    func noSharing() async throws {
        let origin = try await Self.startOrigin()
        let application = "urlloading-isolation-\(UUID().uuidString)"
        let locations = StoreLocations(applicationIdentifier: application)
        defer {
            try? FileManager.default.removeItem(at: locations.cacheDirectory)
            try? FileManager.default.removeItem(at: locations.dataDirectory)
        }
        let defaults = SessionConfiguration.default
        defaults.applicationIdentifier = application
        // Two ephemeral configurations: each has stores of its own.
        let sessions = [
            ("a", Session(configuration: .ephemeral)), ("b", Session(configuration: .ephemeral)),
            ("d", Session(configuration: defaults)),
        ]
        var counters: [String: String] = [:]
        for (tenant, session) in sessions {
            let (counter, cookies) = try await Self.exercise(session, origin, tenant: tenant)
            #expect(cookies == "who=\(tenant)", "tenant \(tenant) sent \(cookies)")
            counters[tenant] = counter
        }
        // Three misses: nobody was answered from another's cache.
        #expect(Set(counters.values) == ["response 1", "response 2", "response 3"])
        for (tenant, session) in sessions {
            // Each reads its own stored response again, its own cookie, its own credentials.
            let (again, _) = try await session.data(from: origin.url("/counter"))
            #expect(String(decoding: again, as: UTF8.self) == counters[tenant])
            #expect(session.cookieStore?.allCookies.map(\.value) == [tenant])
            let users = Set((session.credentialStore?.allCredentials.values.flatMap(\.keys)) ?? [])
            #expect(users == ["tenant", tenant])
        }
        // The default stores on disk, read through the library afresh and through cachetool.
        await sessions[2].1.flush()
        let cookiesOnDisk = try CookieStore(directory: locations.dataDirectory, keepSessionCookies: true)
        #expect(cookiesOnDisk.allCookies.map(\.value) == ["d"])
        let credentialsOnDisk = try CredentialStore(directory: locations.dataDirectory)
        #expect(Set(credentialsOnDisk.allCredentials.values.flatMap(\.keys)) == ["tenant", "d"])
        let tool = ChildProcess.productsDirectory.appendingPathComponent("cachetool")
        let stores = ["--cache-dir", locations.cacheDirectory.path, "--data-dir", locations.dataDirectory.path]
        let cookieList = try await ChildProcess.run(tool, ["cookies", "list", "--json"] + stores)
        #expect(cookieList.status == 0, "\(cookieList.standardError)")
        let listed = try JSONSerialization.jsonObject(with: Data(cookieList.standardOutput.utf8)) as? [[String: Any]]
        #expect(listed?.map { $0["name"] as? String } == ["who"], "\(cookieList.standardOutput)")
        let credentialList = try await ChildProcess.run(tool, ["credentials", "list", "--json"] + stores)
        #expect(
            credentialList.status == 0 && credentialList.standardOutput.contains("\"d\"")
                && !credentialList.standardOutput.contains("\"a\"") && !credentialList.standardOutput.contains("\"b\""),
            "\(credentialList.standardOutput)\(credentialList.standardError)")
        let scratch = TemporaryDirectory()
        let body = scratch.url.appendingPathComponent("body")
        let show = try await ChildProcess.run(tool, ["show", origin.url("/counter").absoluteString, "--body", body.path] + stores)
        #expect(show.status == 0, "\(show.standardError)")
        #expect(try String(contentsOf: body, encoding: .utf8) == counters["d"])
        for (_, session) in sessions { session.finishTasksAndInvalidate() }
        try await origin.shutdown()
    }

    // MARK: 3. Gone after invalidation

    @Test(
        "After invalidateAndCancel or finishTasksAndInvalidate an ephemeral session's stores (its configuration's) are empty and released with the configuration; a new session starts empty",
        arguments: [true, false])
    func goneAfterInvalidation(cancel: Bool) async throws {
        let origin = try await Self.startOrigin()
        weak var weakSession: Session?
        weak var weakCache: ResponseCache?
        weak var weakCookies: CookieStore?
        weak var weakCredentials: CredentialStore?
        do {
            let configuration = SessionConfiguration.ephemeral
            let (invalidated, signal) = AsyncStream<Void>.makeStream()
            let session = Session(configuration: configuration, delegate: InvalidationDelegate { signal.yield() })
            _ = try await Self.exercise(session, origin, tenant: "gone")
            _ = try await session.data(from: origin.url("/large"))
            let cache = try #require(session.urlCache)
            let cookies = try #require(session.cookieStore)
            let credentials = try #require(session.credentialStore)
            #expect(cache.currentMemoryUsage > 0 && !cookies.allCookies.isEmpty && !credentials.allCredentials.isEmpty)
            if cancel { session.invalidateAndCancel() } else { session.finishTasksAndInvalidate() }
            for await _ in invalidated { break }
            #expect(cache.currentMemoryUsage == 0)
            #expect(cache.cachedResponse(for: URLRequest(url: origin.url("/counter"))) == nil)
            #expect(cookies.allCookies.isEmpty)
            #expect(credentials.allCredentials.isEmpty)
            // A new session from the same configuration value has its stores, emptied.
            let fresh = Session(configuration: configuration)
            #expect(fresh.cookieStore === cookies && fresh.urlCache === cache)
            let (seen, _) = try await fresh.data(from: origin.url("/tenant"))
            #expect(seen.isEmpty)
            fresh.finishTasksAndInvalidate()
            weakSession = session
            weakCache = cache
            weakCookies = cookies
            weakCredentials = credentials
        }
        // sessionDidBecomeInvalid runs inside the session's last delegate job,
        // which lets go of the session when the call returns, on its own
        // thread: no event marks that moment, so the wait is bounded (a leak
        // keeps the session alive through all of it and fails below).
        _ = await eventually { weakSession == nil && weakCache == nil }
        #expect(weakSession == nil, "the invalidated session is still alive")
        #expect(weakCache == nil && weakCookies == nil && weakCredentials == nil, "an invalidated session's store is still alive")
        // A session from a new configuration starts empty.
        let fresh = Session(configuration: .ephemeral)
        #expect(fresh.cookieStore?.allCookies.isEmpty == true)
        #expect(fresh.credentialStore?.allCredentials.isEmpty == true)
        #expect(fresh.urlCache?.currentMemoryUsage == 0)
        let (cookies, _) = try await fresh.data(from: origin.url("/tenant"))
        #expect(cookies.isEmpty)
        fresh.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    // MARK: 4. Deep copies

    @Test("A session keeps the configuration it was made from; sessions from one ephemeral value share its stores, another ephemeral value has others")
    func deepCopies() async throws {
        let origin = try await Self.startOrigin()
        origin.route("/headers") { request in ScriptedResponse(headers: [HeaderField("Cache-Control", "no-store")], body: request.header("X-Tenant") ?? "") }
        let configuration = SessionConfiguration.ephemeral
        configuration.httpAdditionalHeaders = ["X-Tenant": "first"]
        let first = Session(configuration: configuration)
        let second = Session(configuration: configuration)
        // Changing the value afterwards changes neither session.
        configuration.httpAdditionalHeaders = ["X-Tenant": "changed"]
        configuration.httpShouldSetCookies = false
        configuration.urlCache = nil
        configuration.httpCookieStorage = nil
        let (header, _) = try await first.data(from: origin.url("/headers"))
        #expect(String(decoding: header, as: UTF8.self) == "first")
        #expect(first.configuration.httpAdditionalHeaders == ["X-Tenant": "first"] && first.configuration.httpShouldSetCookies)
        #expect(first.urlCache != nil && first.cookieStore != nil)
        // One configuration value, two sessions: the configuration's stores, as Apple's.
        #expect(first.urlCache === second.urlCache)
        #expect(first.cookieStore === second.cookieStore)
        #expect(first.credentialStore === second.credentialStore)
        // Another ephemeral value: other stores, nothing crosses.
        let other = Session(configuration: .ephemeral)
        #expect(other.urlCache !== first.urlCache && other.cookieStore !== first.cookieStore && other.credentialStore !== first.credentialStore)
        let (firstSeen, _) = try await Self.exercise(first, origin, tenant: "first")
        let (otherSeen, otherCookies) = try await Self.exercise(other, origin, tenant: "other")
        #expect(firstSeen != otherSeen && otherCookies == "who=other")
        // A store the caller put in is shared, and outlives the sessions' invalidation.
        let shared = CookieStore()
        let explicit = SessionConfiguration.ephemeral
        explicit.httpCookieStorage = shared
        let third = Session(configuration: explicit)
        let fourth = Session(configuration: explicit)
        #expect(third.cookieStore === shared && fourth.cookieStore === shared)
        _ = try await Self.exercise(third, origin, tenant: "third")
        let (_, fourthCookies) = try await Self.exercise(fourth, origin, tenant: "fourth")
        // The fourth's cookie replaced the third's (same name, domain and path) in the one store.
        #expect(fourthCookies == "who=fourth")
        #expect(shared.allCookies.count == 1)
        let (invalidated, signal) = AsyncStream<Void>.makeStream()
        let fifth = Session(configuration: explicit, delegate: InvalidationDelegate { signal.yield() })
        fifth.invalidateAndCancel()
        for await _ in invalidated { break }
        #expect(shared.allCookies.count == 1, "an explicitly shared store is the caller's: invalidation leaves it alone")
        for session in [first, second, other, third, fourth] { session.finishTasksAndInvalidate() }
        try await origin.shutdown()
    }
}
