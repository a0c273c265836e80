import Foundation
import Locking
#if canImport(Glibc)
import Glibc
#endif
import Testing
import TestSupport
import TransferDaemon
import URLLoading

/// Background sessions, step 2: uploads past both processes'
/// deaths, busy servers, delayed begins. Real processes, as the suite's
/// other tests.
extension BackgroundSessionProcessTests {
    @Test("A request whose timeout is infinite, not a number or beyond a year downloads without a limit, as in the foreground, instead of never completing")
    func unboundedTimeouts() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/small", response: ScriptedResponse(body: "hello"))
        let world = World()
        for value in ["inf", "-inf", "nan", "1e300"] {
            let lines = try await world.run(["timeout\(value)", "--timeout", value, "download", origin.url("/small").absoluteString])
            #expect(lines.contains("complete 1 nil status 200"), "timeout \(value): \(lines)\n\(world.log)")
        }
        try await origin.shutdown()
    }

    @Test("A request beyond what transferd takes (a header field of 70,000 bytes) fails with bad URL instead of never completing; the session goes on")
    func refusedRequest() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/small", response: ScriptedResponse(body: "hello"))
        let world = World()
        let lines = try await world.run(["refused", "--header", "X-Big:" + String(repeating: "a", count: 70_000), "download", origin.url("/small").absoluteString])
        #expect(lines.contains("complete 1 bad-URL status 0"), "\(lines)\n\(world.log)")
        #expect(origin.requests(to: "/small").isEmpty)
        let next = try await world.run(["refused", "download", origin.url("/small").absoluteString])
        #expect(next.contains { $0.hasPrefix("complete ") && $0.hasSuffix(" nil status 200") }, "\(next)\n\(world.log)")
        try await origin.shutdown()
    }

    @Test("A session transferd cannot attach (an identifier of 2,000 bytes, or with a tab) fails its task saying why, without a transferd")
    func refusedIdentifier() async throws {
        let world = World()
        for (identifier, why) in [(String(repeating: "a", count: 2_000), "a session identifier of 2000 bytes"), ("a\tb", "control character")] {
            let lines = try await world.run([identifier, "download", "http://127.0.0.1:1/never"])
            #expect(lines.contains("complete 1 background-session-was-disconnected status 0"), "\(lines)")
            #expect(lines.contains { $0.hasPrefix("why 1 ") && $0.contains(why) }, "\(lines)")
        }
        #expect(!FileManager.default.fileExists(atPath: world.paths.journal), "no transferd was started")
    }

    @Test(
        "A delegate's answer transferd cannot take (a new request past its bounds or not http, a password of 5,000 bytes) fails the task saying so, sends nothing more, and the session goes on"
    )
    func refusedAnswers() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/small", response: ScriptedResponse(body: "hello"))
        let password = String(repeating: "p", count: 5_000)
        let expected = "Basic " + Data("alice:\(password)".utf8).base64EncodedString()
        origin.route("/guarded") { request in
            if request.header("Authorization") == expected { return ScriptedResponse(body: "in") }
            return ScriptedResponse(status: 401, headers: [HeaderField("WWW-Authenticate", "Basic realm=\"vault\"")], body: "who?")
        }
        let world = World()
        let long = origin.url("/small").absoluteString + "?" + String(repeating: "a", count: 70_000)
        let tooLong = try await world.run(["refused", "--begin-after", "0.2", "--begin-answer", "new:" + long, "download", origin.url("/small").absoluteString])
        #expect(tooLong.contains("complete 1 bad-URL status 0"), "\(tooLong)\n\(world.log)")
        let ftp = try await world.run(["refused", "--begin-after", "0.2", "--begin-answer", "new:ftp://127.0.0.1/x", "download", origin.url("/small").absoluteString])
        #expect(ftp.contains("complete 2 unsupported-URL status 0"), "\(ftp)\n\(world.log)")
        #expect(origin.requests(to: "/small").isEmpty, "neither the original nor the new request went")
        let challenged = try await world.run(["refused", "--challenge-answer", "alice:" + password, "download", origin.url("/guarded").absoluteString])
        #expect(challenged.contains("challenge 3 vault 0"), "\(challenged)")
        #expect(challenged.contains("complete 3 user-authentication-required status 0"), "\(challenged)\n\(world.log)")
        // transferd's own first try hands a 401 to a task of its session, which sends the request once more, then asks.
        let guarded = origin.requests(to: "/guarded")
        #expect(guarded.count <= 2 && guarded.allSatisfy { $0.header("Authorization") == nil }, "not sent again, with or without the credential: \(guarded.count)")
        let next = try await world.run(["refused", "download", origin.url("/small").absoluteString])
        #expect(next.contains("complete 4 nil status 200"), "\(next)\n\(world.log)")
        #expect(!world.log.contains(password), "the password stays out of transferd's log")
        try await origin.shutdown()
    }

    @Test("An upload survives the app's SIGKILL and transferd's: restarted from zero, the origin gets the whole body; a new app gets the response once")
    func uploadSurvivesBoth() async throws {
        let origin = try await TestOrigin.start()
        let world = World()
        let received = world.directory.url.appendingPathComponent("received")
        try FileManager.default.createDirectory(at: received, withIntermediateDirectories: true)
        origin.storeBodies(of: "/upload", in: received)
        let gate = OriginGate()
        defer { gate.open() }
        let answers = Counter()
        // The first answer is held until the test lets go: transferd dies waiting for it.
        origin.route("/upload") { request in
            var response = ScriptedResponse(status: 201, body: "got \(request.bodyLength)")
            if answers.next() == 1 { response.parts.insert(.waitFor(gate), at: 0) }
            return response
        }
        let body = TestOrigin.pattern(offset: 11, count: 3 << 20)
        let file = world.directory.url.appendingPathComponent("body")
        try Data(body).write(to: file)
        let app = try world.app(["uploadSurvivesBoth", "upload", origin.url("/upload").absoluteString, file.path])
        _ = await world.lines(of: app, until: "resumed")
        app.kill(SIGKILL)
        _ = try await app.wait()
        try FileManager.default.removeItem(at: file)
        #expect(
            await eventually { origin.requests(to: "/upload").count == 1 },
            "the first upload reached the origin: \(origin.requests(to: "/upload").count) \((try? String(contentsOfFile: world.paths.log, encoding: .utf8)) ?? "")")
        let killed = try #require(world.transferdPID)
        kill(killed, SIGKILL)
        #expect(await eventually { Self.isGone(killed) })
        gate.open()
        // The next app starts transferd, which sends the body again from its own copy.
        let lines = try await world.run(["uploadSurvivesBoth", "attach"])
        #expect(lines.contains("body got \(body.count)"), "\(lines) \((try? String(contentsOfFile: world.paths.log, encoding: .utf8)) ?? "")")
        #expect(lines.filter { $0.hasPrefix("complete ") } == ["complete 1 nil status 201"], "\(lines)")
        let requests = origin.requests(to: "/upload")
        #expect(requests.count == 2, "sent again from zero after transferd's death")
        let stored = try #require(requests.last?.bodyFile)
        #expect(SHA256.hash(Array(try Data(contentsOf: stored))) == SHA256.hash(body))
        let again = try await world.run(["uploadSurvivesBoth", "attach"])
        #expect(!again.contains { $0.hasPrefix("complete ") }, "delivered once: \(again)")
        try await origin.shutdown()
    }

    @Test("A small download's progress: the delegate hears the whole length once, before the file (however transferd sends it)")
    func smallDownloadProgress() async throws {
        let origin = try await TestOrigin.start()
        let body = TestOrigin.pattern(offset: 3, count: 1024)
        origin.route("/tiny") { _ in ScriptedResponse(body: body) }
        let world = World()
        let lines = try await world.run(["tiny", "download", origin.url("/tiny").absoluteString])
        let writes = lines.filter { $0.hasPrefix("write ") }
        let finished = lines.firstIndex { $0.hasPrefix("finished 1 1024 ") }
        #expect(writes == ["write 1024 1024"], "\(lines)")
        #expect(finished != nil && lines.firstIndex(of: "write 1024 1024").map { $0 < (finished ?? 0) } == true, "\(lines)")
        #expect(origin.requests(to: "/tiny").count == 1)
        try await origin.shutdown()
    }

    @Test("A 503 with Retry-After: 2 is retried after 2 s, not before; a server busy at every try fails the task after the last retry")
    func busyServer() async throws {
        let origin = try await TestOrigin.start()
        let arrivals = Lock<[ContinuousClock.Instant]>([])
        let whole = Self.slowBody(slice: Self.size, pause: .zero)
        origin.route("/busy") { request in
            let count = arrivals.withLock { arrivals in
                arrivals.append(.now)
                return arrivals.count
            }
            guard count > 1 else { return ScriptedResponse(status: 503, headers: [HeaderField("Retry-After", "2")], body: "busy") }
            return whole(request)
        }
        // Retry-After: 0 is taken as the least wait, 1 s.
        origin.route("/always") { _ in ScriptedResponse(status: 503, headers: [HeaderField("Retry-After", "0")], body: "busy") }
        let world = World()
        let lines = try await world.run(["busy", "download", origin.url("/busy").absoluteString])
        #expect(lines.contains("finished 1 \(Self.size) \(Self.wholeDigest)"), "\(lines)")
        let times = arrivals.withLock { $0 }
        #expect(times.count == 2)
        if times.count == 2 { #expect(times[1] - times[0] >= .seconds(2), "retried \(times[1] - times[0]) after the 503") }
        let failing = try await world.run(["always", "download", origin.url("/always").absoluteString])
        #expect(failing.contains("complete 1 resource-unavailable status 503"), "\(failing)")
        #expect(origin.requests(to: "/always").count == BackgroundTransferMachine.maximumRetries + 1)
        try await origin.shutdown()
    }

    @Test("earliestBeginDate 2 s ahead: the task begins then, after willBeginDelayedRequest; another request goes in its place; the cancel answer ends it with cancelled and sends nothing")
    func delayedBegin() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/later", Self.slowBody(slice: Self.size, pause: .zero))
        let world = World()
        let lines = try await world.run(["delayed", "--begin-after", "2", "download", origin.url("/later").absoluteString])
        let asked = try #require(lines.first { $0.hasPrefix("asked-begin 1 ") }, "\(lines)")
        let waited = Double(asked.split(separator: " ").last ?? "") ?? 0
        #expect(waited >= 1.9, "asked \(waited) s after resume")
        #expect(lines.contains("finished 1 \(Self.size) \(Self.wholeDigest)"), "\(lines)")
        #expect(origin.requests(to: "/later").count == 1)
        let cancelled = try await world.run(["delayed", "--begin-after", "1", "--begin-answer", "cancel", "download", origin.url("/later").absoluteString])
        #expect(cancelled.contains { $0.hasPrefix("asked-begin 2 ") }, "\(cancelled)")
        #expect(cancelled.contains("complete 2 cancelled status 0"), "\(cancelled)")
        #expect(origin.requests(to: "/later").count == 1, "a cancelled delayed task sends nothing")
        origin.route("/instead", Self.slowBody(slice: Self.size, pause: .zero))
        let replaced = try await world.run([
            "delayed", "--begin-after", "1", "--begin-answer", "new:" + origin.url("/instead").absoluteString, "download", origin.url("/later").absoluteString,
        ])
        #expect(replaced.contains("finished 3 \(Self.size) \(Self.wholeDigest)"), "\(replaced)")
        #expect(origin.requests(to: "/instead").count == 1 && origin.requests(to: "/later").count == 1, "the delegate's request went instead")
        try await origin.shutdown()
    }

    @Test("A new request from willBeginDelayedRequest goes with the app's cookies and the task's trace context, as the original would have")
    func delayedReplacementCarriesCookiesAndTrace() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/set", response: ScriptedResponse(headers: [HeaderField("Set-Cookie", "sid=s1; Path=/; Max-Age=3600")], body: "set"))
        origin.route("/later", response: ScriptedResponse(body: "later"))
        origin.route("/instead", response: ScriptedResponse(body: "instead"))
        let world = World()
        // Kept on disk (a session cookie would stay in the first app's memory).
        let set = try await world.run(["replaced", "download", origin.url("/set").absoluteString])
        #expect(set.contains("complete 1 nil status 200"), "\(set)\n\(world.log)")
        let replaced = try await world.run([
            "replaced", "--trace", "--begin-after", "0.2", "--begin-answer", "new:" + origin.url("/instead").absoluteString, "download",
            origin.url("/later").absoluteString,
        ])
        #expect(replaced.contains("complete 2 nil status 200"), "\(replaced)\n\(world.log)")
        let span = replaced.first { $0.hasPrefix("span ") }?.split(separator: " ").last.map(String.init)
        let sent = origin.requests(to: "/instead")
        #expect(sent.count == 1 && origin.requests(to: "/later").isEmpty)
        #expect(sent.first?.header("Cookie") == "sid=s1")
        #expect(span != nil && sent.first?.headerValues("traceparent") == [span ?? ""], "\(replaced)")
        try await origin.shutdown()
    }

    /// An app started with `arguments` downloads a gated body and is
    /// SIGKILLed once it wrote; then the body flows, so the task finishes in
    /// transferd with no app attached and its events wait (launches 0.3 s apart).
    static func killedMidDownload(_ world: World, _ arguments: [String]) async throws -> TestOrigin {
        let origin = try await TestOrigin.start()
        let gate = OriginGate()
        defer { gate.open() }
        origin.route("/big", Self.slowBody(gate: gate))
        world.extraEnvironment["URLLOADING_TRANSFERD_LAUNCH_DELAY"] = "0.3"
        let app = try world.app(arguments + ["download", origin.url("/big").absoluteString])
        _ = await world.lines(of: app, until: "write")
        app.kill(SIGKILL)
        _ = try await app.wait()
        return origin
    }

    @Test("A launch command that exits without attaching is run no more than the bound, each launch in the journal; the app's attach resets the count")
    func launchBound() async throws {
        let world = World()
        let output = world.directory.path("launches.out")
        let origin = try await Self.killedMidDownload(world, ["launchBound", "--launch-exit", output])
        let log = { (try? String(contentsOfFile: world.paths.log, encoding: .utf8)) ?? "" }
        #expect(await eventually(within: .seconds(60)) { log().contains("never attached: not launched again") }, "\(log())")
        #expect(log().components(separatedBy: "launched the app of launchBound").count - 1 == TransferDaemon.Daemon.maximumLaunches, "\(log())")
        let ran = { ((try? String(contentsOfFile: output, encoding: .utf8)) ?? "").split(separator: "\n").count }
        #expect(await eventually { ran() == TransferDaemon.Daemon.maximumLaunches }, "ran \(ran()) times")
        let journal = try Journal(path: world.paths.journal, writer: false)
        #expect(try journal.launchState(session: "launchBound").launches == TransferDaemon.Daemon.maximumLaunches)
        let lines = try await world.run(["launchBound", "attach"])
        #expect(lines.contains("complete 1 nil status 200"), "\(lines)")
        #expect(try journal.launchState(session: "launchBound").launches == 0, "an attach forgets the launches")
        #expect(ran() == TransferDaemon.Daemon.maximumLaunches)
        try await origin.shutdown()
    }

    @Test("An app that asks for launch events but names no launch command is not run again when its events wait; they wait for its next attach")
    func noLaunchCommandLaunchesNothing() async throws {
        let world = World()
        let origin = try await Self.killedMidDownload(world, ["noLaunch", "--launch-events"])
        let log = { (try? String(contentsOfFile: world.paths.log, encoding: .utf8)) ?? "" }
        #expect(await eventually(within: .seconds(60)) { log().contains("events of noLaunch wait for its app, which named no launch command") }, "\(log())")
        #expect(!log().contains("launched the app of noLaunch"), "\(log())")
        let journal = try Journal(path: world.paths.journal, writer: false)
        #expect(try journal.launchState(session: "noLaunch").launches == 0)
        let lines = try await world.run(["noLaunch", "attach"])
        #expect(lines.contains("complete 1 nil status 200"), "\(lines)")
        try await origin.shutdown()
    }

    @Test("A Basic challenge in a background download: the attached delegate answers; with no app attached the session's stored credential does; with none, the task ends")
    func challenges() async throws {
        let origin = try await TestOrigin.start()
        let whole = Self.slowBody(slice: Self.size, pause: .zero)
        let expected = "Basic " + Data("alice:wonder".utf8).base64EncodedString()
        func guarded(_ realm: String) -> TestOrigin.Handler {
            { request in
                if request.header("Authorization") == expected { return whole(request) }
                return ScriptedResponse(status: 401, headers: [HeaderField("WWW-Authenticate", "Basic realm=\"\(realm)\"")], body: "who?")
            }
        }
        origin.route("/attached", guarded("vault"))
        origin.route("/stored", guarded("vault"))
        origin.route("/none", guarded("other"))
        let world = World()
        world.extraEnvironment["URLLOADING_TRANSFERD_CHALLENGE_WAIT"] = "0.5"
        let lines = try await world.run(["challenges", "--challenge-answer", "alice:wonder", "download", origin.url("/attached").absoluteString])
        #expect(lines.contains("challenge 1 vault 0"), "\(lines)")
        #expect(lines.contains("finished 1 \(Self.size) \(Self.wholeDigest)"), "\(lines)")
        // The app's own store (the helper's shared one under the test's XDG_DATA_HOME) holds a default credential for "vault".
        let store = try CredentialStore(directory: URL(fileURLWithPath: world.directory.path("data")).appendingPathComponent("urlloading-test-helper"))
        store.setDefaultCredential(
            Credential(user: "alice", password: "wonder", persistence: .permanent),
            for: ProtectionSpace(host: "127.0.0.1", port: origin.port, protocol: "http", realm: "vault", authenticationMethod: .httpBasic))
        // Delayed tasks, so that the app is gone when the challenges come.
        for path in ["/stored", "/none"] {
            let app = try world.app(["challenges", "--begin-after", "1", "download", origin.url(path).absoluteString])
            _ = await world.lines(of: app, until: "resumed")
            app.kill(SIGKILL)
            _ = try await app.wait()
        }
        #expect(await eventually { world.records().filter { $0.phaseName == "finished" }.count == 2 }, "\(world.records().map(\.phaseName))")
        let attached = try await world.run(["challenges", "attach"])
        #expect(attached.contains("finished 2 \(Self.size) \(Self.wholeDigest)"), "\(attached)")
        #expect(attached.contains("complete 2 nil status 200"), "\(attached)")
        #expect(attached.contains { $0.hasPrefix("complete 3 ") && !$0.hasPrefix("complete 3 nil") }, "no credential for the realm: \(attached)")
        #expect(origin.requests(to: "/stored").last?.header("Authorization") == expected)
        #expect(origin.requests(to: "/none").allSatisfy { $0.header("Authorization") == nil })
        // The password reached neither the journal nor the log.
        for file in [world.paths.journal, world.paths.journal + "-wal"] {
            let bytes = (try? Data(contentsOf: URL(fileURLWithPath: file))) ?? Data()
            #expect(bytes.range(of: Data("wonder".utf8)) == nil, "\(file)")
        }
        #expect(!((try? String(contentsOfFile: world.paths.log, encoding: .utf8)) ?? "").contains("wonder"))
        try await origin.shutdown()
    }
}
