import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif
import Testing
import TestSupport
import TransferDaemon
import URLLoading

/// Background sessions with real processes: the test helper as
/// the app, the built transferd (started by the app), the loopback origin.
/// Each test has its own runtime and state folders, so its own transferd,
/// which it stops at the end.
@Suite("Background sessions across processes", .serialized, .timeLimit(.minutes(Sanitizer.minutes(3))))
struct BackgroundSessionProcessTests {
    /// A body served in slices with pauses between them, honouring Range
    /// and If-Range against its ETag.
    static let size = 6 << 20
    static let etag = "\"v1\""

    /// With `gate`, every response holds after its first slice until the gate opens.
    static func slowBody(
        slice: Int = 512 << 10, pause: Duration = .milliseconds(150), etag: @escaping @Sendable () -> String = { etag },
        gate: OriginGate? = nil
    ) -> TestOrigin.Handler {
        { request in
            let etag = etag()
            var start = 0
            if let range = request.header("Range"), request.header("If-Range") == etag, range.hasPrefix("bytes="),
                let first = Int(range.dropFirst(6).prefix { $0 != "-" }), first < size
            {
                start = first
            }
            var parts: [ScriptedResponse.Part] = []
            var offset = start
            while offset < size {
                let count = min(slice, size - offset)
                parts.append(.pattern(offset: offset, count: count))
                if let gate, offset == start { parts.append(.waitFor(gate)) }
                parts.append(.pause(pause))
                offset += count
            }
            var headers = [HeaderField("ETag", etag)]
            if start > 0 { headers.append(HeaderField("Content-Range", "bytes \(start)-\(size - 1)/\(size)")) }
            return ScriptedResponse(status: start > 0 ? 206 : 200, headers: headers, parts: parts)
        }
    }

    static let wholeDigest = SHA256.hash(TestOrigin.pattern(offset: 0, count: size)).map { String(format: "%02x", $0) }.joined()

    /// The folders and environment of one test's transferd and apps.
    final class World {
        let directory = TemporaryDirectory("background")
        /// Set by a test before its first app starts.
        var extraEnvironment: [String: String] = [:]
        var environment: [String: String] {
            var environment = ProcessInfo.processInfo.environment
            environment["XDG_RUNTIME_DIR"] = directory.path("run")
            environment["XDG_STATE_HOME"] = directory.path("state")
            environment["XDG_DATA_HOME"] = directory.path("data")
            environment["URLLOADING_TRANSFERD"] = ChildProcess.productsDirectory.appendingPathComponent("transferd").path
            environment["URLLOADING_TRANSFERD_RETRY_DELAY"] = "0.05"
            environment.merge(extraEnvironment) { $1 }
            return environment
        }
        var paths: BackgroundPaths { BackgroundPaths(environment: environment) }

        /// The running transferd's process id (it writes it in its lock file).
        var transferdPID: pid_t? {
            (try? String(contentsOfFile: paths.lockFile, encoding: .utf8)).flatMap { pid_t($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
        }

        /// transferd's log, for a failure's message.
        var log: String { (try? String(contentsOfFile: paths.log, encoding: .utf8)) ?? "(no log at \(paths.log))" }

        func records() -> [TransferRecord] {
            (try? Journal(path: paths.journal, writer: false).records(delivered: true)) ?? []
        }

        func app(_ arguments: [String]) throws -> ChildProcess.Running {
            try ChildProcess.startWithOutputLines(ChildProcess.helper, ["background-app"] + arguments, environment: environment)
        }

        func run(_ arguments: [String]) async throws -> [String] {
            let result = try await ChildProcess.run(ChildProcess.helper, ["background-app"] + arguments, environment: environment)
            #expect(result.status == 0, "\(result.standardError)")
            return result.standardOutput.split(separator: "\n").map(String.init)
        }

        /// Lines until one starts with `prefix` (inclusive), or the end.
        func lines(of app: ChildProcess.Running, until prefix: String) async -> [String] {
            var seen: [String] = []
            while let line = await app.nextLine() {
                seen.append(line)
                if line.hasPrefix(prefix) { break }
            }
            return seen
        }

        deinit {
            if let pid = transferdPID, pid > 0 { kill(pid, SIGKILL) }
        }
    }

    @Test("The app is killed mid-download: transferd finishes it; the next app gets its events once, then urlSessionDidFinishEvents; a third gets nothing")
    func appKilled() async throws {
        let origin = try await TestOrigin.start()
        let gate = OriginGate()
        origin.route("/big", Self.slowBody(gate: gate))
        let world = World()
        let app = try world.app(["appKilled", "download", origin.url("/big").absoluteString])
        let before = await world.lines(of: app, until: "write")
        #expect(before.contains("created 1"), "\(before)")
        app.kill(SIGKILL)
        _ = try await app.wait()
        // The body goes on only now: the app is certainly gone before it ends.
        gate.open()
        #expect(await eventually { world.records().first?.phaseName == "finished" }, "\(world.records())")

        let second = try await world.run(["appKilled", "attach"])
        #expect(second.first == "attached tasks 1 pending 1", "\(second)")
        let finished = second.firstIndex(of: "finished 1 \(Self.size) \(Self.wholeDigest)")
        let complete = second.firstIndex(of: "complete 1 nil status 200")
        let done = second.firstIndex(of: "events-done")
        #expect(finished != nil && complete != nil && done != nil, "\(second)")
        if let finished, let complete, let done { #expect(finished < complete && complete < done) }
        #expect(second.contains("file-gone true"), "the file is gone once didFinishDownloadingTo returned")

        let third = try await world.run(["appKilled", "attach"])
        #expect(third == ["attached tasks 0 pending 0", "bye"], "\(third)")
        // The acknowledgement was sent before the app said "bye"; transferd journals it on its own time.
        #expect(await eventually { world.records().first?.phaseName == "delivered" })
        try await origin.shutdown()
    }

    @Test("transferd is killed mid-download at three offsets: restarted by the app, it resumes at the bytes on disk with If-Range, or from zero once the ETag changed")
    func transferdKilled() async throws {
        let origin = try await TestOrigin.start()
        let tag = Mutex(Self.etag)
        // Each attempt holds after its first slice, so the test finds every
        // attempt mid-download however slow the machine is.
        let gate = OriginGate()
        origin.route("/big", Self.slowBody(etag: { tag.withLock { $0 } }, gate: gate))
        let world = World()
        let app = try world.app(["transferdKilled", "download", origin.url("/big").absoluteString])
        _ = await world.lines(of: app, until: "write")
        let partial = world.paths.files + "/partial-1"
        var resumedAt: [Int] = []
        for round in 0..<3 {
            // Past the last restart's offset, so that each kill is at a new
            // one, and with the head's validator in the journal: a first try
            // writes its body while its head is journaled, and bytes without
            // a validator start over from zero.
            let floor = (resumedAt.last ?? 0) + 256 << 10
            #expect(
                await eventually { (Self.fileSize(partial) ?? 0) > floor && world.records().first?.machine.validator == Self.etag },
                "round \(round): the download went on\n\(world.log)")
            let killed = try #require(world.transferdPID)
            // The app is stopped so that nothing restarts transferd while the test reads the file.
            app.kill(SIGSTOP)
            kill(killed, SIGKILL)
            #expect(await eventually { Self.isGone(killed) })
            let onDisk = try #require(Self.fileSize(partial))
            #expect(onDisk > 0 && onDisk < Self.size, "killed mid-download at \(onDisk)")
            resumedAt.append(onDisk)
            // Before the last restart the resource changes: its validator no longer matches.
            if round == 2 { tag.withLock { $0 = "\"v2\"" } }
            app.kill(SIGCONT)
            #expect(
                await eventually { world.transferdPID.map { $0 != killed && kill($0, 0) == 0 } ?? false },
                "round \(round): transferd was started again\n\(world.log)")
        }
        gate.open()
        let seen = await world.lines(of: app, until: "bye")
        #expect(seen.contains("finished 1 \(Self.size) \(Self.wholeDigest)"), "\(seen)\n\(world.log)")
        #expect(seen.contains("complete 1 nil status 200"), "the last attempt got the whole new version: \(seen)")
        let requests = origin.requests(to: "/big")
        #expect(requests.count == 4, "\(requests.map(\.headers))")
        #expect(requests.first?.header("Range") == nil)
        for (request, offset) in zip(requests.dropFirst(), resumedAt) {
            #expect(request.header("Range") == "bytes=\(offset)-", "resumed at the byte on disk")
            #expect(request.header("If-Range") == Self.etag)
        }
        try await origin.shutdown()
    }

    static func fileSize(_ path: String) -> Int? {
        (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? nil
    }

    /// Dead: gone, or a zombie its stopped parent has not reaped yet. Every
    /// thread, not only the first: the first can be a zombie while another
    /// still ends a write (and holds the process's descriptors).
    static func isGone(_ pid: pid_t) -> Bool {
        guard let threads = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task") else { return true }
        return threads.allSatisfy { thread in
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/task/\(thread)/stat", encoding: .utf8) else { return true }
            // The state follows the command's closing parenthesis.
            guard let close = stat.lastIndex(of: ")") else { return true }
            return stat[close...].dropFirst(2).first == "Z"
        }
    }

    @Test("The origin drops the connection three times: the task retries (from its bytes) and finishes")
    func retries() async throws {
        let origin = try await TestOrigin.start()
        let attempts = Counter()
        let whole = Self.slowBody(slice: Self.size, pause: .zero)
        origin.route("/flaky") { request in
            if attempts.next() <= 3 {
                return ScriptedResponse(
                    status: 200, headers: [HeaderField("ETag", Self.etag)], parts: [.pattern(offset: 0, count: 1000), .closeConnection],
                    framing: .declaredLength(Self.size))
            }
            return whole(request)
        }
        let world = World()
        let lines = try await world.run(["retries", "download", origin.url("/flaky").absoluteString])
        #expect(lines.contains("finished 1 \(Self.size) \(Self.wholeDigest)"), "\(lines)")
        #expect(origin.requests(to: "/flaky").count == 4)
        #expect(origin.requests(to: "/flaky").last?.header("Range") == "bytes=1000-", "the last attempt resumed after the kept bytes")
        #expect(world.records().first?.machine.attempts == 4)
        try await origin.shutdown()
    }

    @Test("An upload from a file survives the app's death; its response body, its head as sent and completion reach the next app")
    func uploadSurvives() async throws {
        let origin = try await TestOrigin.start()
        let world = World()
        let received = world.directory.url.appendingPathComponent("received")
        try FileManager.default.createDirectory(at: received, withIntermediateDirectories: true)
        origin.storeBodies(of: "/upload", in: received)
        // A slow answer: the app is gone before it comes.
        origin.route("/upload") { request in
            var response = ScriptedResponse(
                status: 201, reason: "Stored Safely", headers: [HeaderField("Set-Cookie", "a=1"), HeaderField("Set-Cookie", "b=2")],
                parts: [.bytes(Array("got \(request.bodyLength)".utf8))])
            response.delayBeforeHead = .seconds(3)
            return response
        }
        let body = TestOrigin.pattern(offset: 7, count: 3 << 20)
        let file = world.directory.url.appendingPathComponent("body")
        try Data(body).write(to: file)
        let app = try world.app(["uploadSurvives", "--resume-on-signal", "upload", origin.url("/upload").absoluteString, file.path])
        _ = await world.lines(of: app, until: "created")
        // transferd reads the task only after the app is gone and its file deleted.
        let transferd = try #require(world.transferdPID)
        kill(transferd, SIGSTOP)
        app.kill(SIGUSR1)
        _ = await world.lines(of: app, until: "resumed")
        app.kill(SIGKILL)
        _ = try await app.wait()
        // The app's file may go once resume() returned: transferd sends its own copy.
        try FileManager.default.removeItem(at: file)
        kill(transferd, SIGCONT)
        #expect(await eventually { world.records().first?.phaseName == "finished" }, "\(world.records())\n\(world.log)")
        let lines = try await world.run(["uploadSurvives", "attach"])
        #expect(
            lines.contains("body got \(body.count)") && lines.contains("complete 1 nil status 201") && lines.contains("events-done"),
            "\(lines)\n\(world.log)")
        // transferd's journal kept the head as it arrived.
        #expect(lines.contains("head Stored Safely a=1;b=2"), "\(lines)")
        let stored = try #require(origin.requests(to: "/upload").last?.bodyFile)
        #expect(try Data(contentsOf: stored) == Data(body))
        // Acknowledged: transferd's copy of the body is gone.
        #expect(await eventually { (try? FileManager.default.contentsOfDirectory(atPath: world.paths.files))?.isEmpty ?? true }, "\(world.log)")
        try await origin.shutdown()
    }

    @Test("Launch events: with the app gone, transferd runs its registered command once when the events are ready; it receives them")
    func launchEvents() async throws {
        let origin = try await TestOrigin.start()
        let gate = OriginGate()
        origin.route("/big", Self.slowBody(gate: gate))
        let world = World()
        let output = world.directory.path("launched.out")
        let app = try world.app(["launchEvents", "--launch-to", output, "download", origin.url("/big").absoluteString])
        _ = await world.lines(of: app, until: "write")
        app.kill(SIGKILL)
        _ = try await app.wait()
        gate.open()
        let read = { (try? String(contentsOfFile: output, encoding: .utf8)) ?? "" }
        #expect(await eventually(within: .seconds(60)) { read().hasSuffix("bye\n") }, "\(read())")
        let lines = read().split(separator: "\n").map(String.init)
        #expect(
            lines == [
                "launched-for launchEvents", "attached tasks 1 pending 1", "finished 1 \(Self.size) \(Self.wholeDigest)", "file-gone true",
                "complete 1 nil status 200", "events-done", "bye",
            ], "\(lines)")
        let log = (try? String(contentsOfFile: world.paths.log, encoding: .utf8)) ?? ""
        #expect(log.components(separatedBy: "launched the app of launchEvents").count == 2, "launched once: \(log)")
        // The acknowledgement was sent before the app said "bye"; transferd journals it on its own time.
        #expect(await eventually { world.records().first?.phaseName == "delivered" })
        try await origin.shutdown()
    }

    @Test("A second live session with the same identifier is refused; data tasks fail with a clear error")
    func refusals() async throws {
        let origin = try await TestOrigin.start()
        let gate = OriginGate()
        defer { gate.open() }
        origin.route("/big", Self.slowBody(gate: gate))
        origin.route("/small", response: ScriptedResponse(body: "hello"))
        let world = World()
        let first = try world.app(["refusals", "download", origin.url("/big").absoluteString])
        _ = await world.lines(of: first, until: "created")
        let second = try await world.run(["refusals", "data", origin.url("/small").absoluteString])
        #expect(second.contains("startup-error background-session-in-use-by-another-process"), "\(second)")
        first.kill(SIGKILL)
        _ = try await first.wait()
        let data = try await world.run(["other", "data", origin.url("/small").absoluteString])
        #expect(data.contains("complete 1 not-supported-in-a-background-session status 0"), "\(data)")
        #expect(origin.requests(to: "/small").isEmpty)
        gate.open()
        try await origin.shutdown()
    }
}

extension BackgroundSessionProcessTests {
    @Test("A re-attached session lists the identifier's live task in getAllTasks; cancel() on it reaches transferd and completes it once")
    func cancelAdopted() async throws {
        let origin = try await TestOrigin.start()
        let gate = OriginGate()
        defer { gate.open() }
        origin.route("/big", Self.slowBody(gate: gate))
        let world = World()
        let app = try world.app(["cancelAdopted", "download", origin.url("/big").absoluteString])
        _ = await world.lines(of: app, until: "write")
        app.kill(SIGKILL)
        _ = try await app.wait()
        let lines = try await world.run(["cancelAdopted", "cancel-all"])
        #expect(lines.contains("listed 1:running"), "\(lines)")
        #expect(lines.contains("complete 1 cancelled status 200"), "\(lines)")
        #expect(await eventually { world.records().first?.phaseName == "delivered" })
        // Delivered: its partial file is removed.
        #expect(
            await eventually { (try? FileManager.default.contentsOfDirectory(atPath: world.paths.files))?.isEmpty ?? true },
            "\((try? FileManager.default.contentsOfDirectory(atPath: world.paths.files)) ?? [])")
        // The cancelled download's partial file is closed, not held open
        // (deleted) by transferd for as long as it runs.
        let transferd = try #require(world.transferdPID)
        #expect(await eventually(within: .seconds(20)) { !Self.openFiles(of: transferd).contains { $0.contains("/partial-") } })
        let again = try await world.run(["cancelAdopted", "attach"])
        #expect(again == ["attached tasks 0 pending 0", "bye"], "\(again)")
        gate.open()
        try await origin.shutdown()
    }

    /// What a process's descriptors name (/proc/PID/fd).
    static func openFiles(of pid: pid_t) -> [String] {
        let folder = "/proc/\(pid)/fd"
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
        return names.compactMap { try? FileManager.default.destinationOfSymbolicLink(atPath: "\(folder)/\($0)") }
    }

    @Test("A second transferd for the same user exits at once; an app whose transferd cannot start gets a clear error, not a hang")
    func singleInstanceAndStartFailure() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/small", response: ScriptedResponse(body: "hello"))
        let world = World()
        _ = try await world.run(["single", "download", origin.url("/small").absoluteString])
        let first = try #require(world.transferdPID)
        let transferd = ChildProcess.productsDirectory.appendingPathComponent("transferd")
        let second = try await ChildProcess.run(transferd, ["serve"], environment: world.environment)
        #expect(second.status == 0 && world.transferdPID == first && kill(first, 0) == 0, "\(second.standardError)")

        let broken = World()
        var environment = broken.environment
        environment["URLLOADING_TRANSFERD"] = "/bin/false"
        let result = try await ChildProcess.run(
            ChildProcess.helper, ["background-app", "broken", "download", origin.url("/small").absoluteString], environment: environment)
        let lines = result.standardOutput.split(separator: "\n").map(String.init)
        #expect(lines.first == "startup-error background-session-was-disconnected", "\(lines)")
        #expect(lines.contains("complete 1 background-session-was-disconnected status 0"), "\(lines)")
        try await origin.shutdown()
    }

    @Test("Garbage, another format version and a huge length on the socket close that connection only (a whole message before them is still answered); transferd serves the next app")
    func garbage() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/small", response: ScriptedResponse(body: "hello"))
        let world = World()
        let first = try await world.run(["garbage", "download", origin.url("/small").absoluteString])
        #expect(first.contains("complete 1 nil status 200"), "\(first)")
        let daemon = try #require(world.transferdPID)
        let attempts: [Data] = [
            Data("GET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8), Data([0x55, 9, 0, 0, 0, 2]) + Data("{}".utf8),
            Data([0x55, 1, 0x7F, 0xFF, 0xFF, 0xFF]), Data([0x55, 1, 0, 0, 0, 8]) + Data("not json".utf8),
        ]
        for bytes in attempts {
            let socket = try UnixSocket.connect(path: world.paths.socket)
            _ = bytes.withUnsafeBytes { send(socket.descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            #expect(socket.waitReadable(seconds: 10), "transferd closes the connection")
            var framing = BackgroundFraming()
            #expect((try? socket.receive(&framing)) == nil, "no answer to \(bytes.prefix(8).map { $0 })")
            socket.close()
        }
        // A whole message before the garbage, in the same write, is still answered.
        let socket = try UnixSocket.connect(path: world.paths.socket)
        let mixed =
            try BackgroundFraming.encode(.attach(Attachment(identifier: "garbage-after", processID: getpid(), launchCommand: nil)))
            + Data("GET / HTTP/1.1\r\n\r\n".utf8)
        _ = mixed.withUnsafeBytes { send(socket.descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        #expect(socket.waitReadable(seconds: 10))
        var framing = BackgroundFraming()
        let answer = try? socket.receive(&framing)
        if case .attached? = answer {} else { Issue.record("the attach before the garbage got \(String(describing: answer))") }
        socket.close()
        let second = try await world.run(["garbage", "download", origin.url("/small").absoluteString])
        #expect(second.contains("complete 2 nil status 200"), "\(second)")
        #expect(world.transferdPID == daemon && kill(daemon, 0) == 0, "the same transferd served it")
        try await origin.shutdown()
    }

    @Test("A connection from another user is refused (SO_PEERCRED), even when the socket's folder lets it in", .enabled(if: getuid() == 0, "switching user needs root"))
    func otherUser() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/small", response: ScriptedResponse(body: "hello"))
        let world = World()
        _ = try await world.run(["otherUser", "download", origin.url("/small").absoluteString])
        // Open the way on purpose: only the peer check stands between.
        // Folders above the test's own (a private TMPDIR) must let the other user pass too.
        var restore: [(String, mode_t)] = []
        var folder = world.directory.url.deletingLastPathComponent().path
        while folder != "/" && !folder.isEmpty {
            var info = stat()
            if stat(folder, &info) == 0, info.st_mode & 0o001 == 0 {
                restore.append((folder, info.st_mode & 0o7777))
                chmod(folder, (info.st_mode & 0o7777) | 0o011)
            }
            folder = (folder as NSString).deletingLastPathComponent
        }
        defer { for (path, mode) in restore { chmod(path, mode) } }
        for path in [world.directory.path("run"), world.paths.runtimeDirectory] { chmod(path, 0o711) }
        chmod(world.paths.socket, 0o666)
        let result = try await ChildProcess.run(ChildProcess.helper, ["connect-as", "65534", world.paths.socket], environment: world.environment)
        #expect(result.standardOutput == "closed\n", "\(result.standardOutput) \(result.standardError)")
        let log = (try? String(contentsOfFile: world.paths.log, encoding: .utf8)) ?? ""
        #expect(log.contains("refused a connection from uid 65534"), "\(log)")
        // Closed again: a folder others may enter is refused by the next app.
        for path in [world.directory.path("run"), world.paths.runtimeDirectory] { chmod(path, 0o700) }
        chmod(world.paths.socket, 0o600)
        let again = try await world.run(["otherUser", "download", origin.url("/small").absoluteString])
        #expect(again.contains("complete 2 nil status 200"), "\(again)")
        try await origin.shutdown()
    }
}

/// A thread-safe counter for routes.
final class Counter: Sendable {
    private let value = Mutex(0)
    func next() -> Int {
        value.withLock {
            $0 += 1; return $0
        }
    }
}
