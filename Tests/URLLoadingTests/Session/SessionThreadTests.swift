import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
import Testing
import TestSupport
import Transport
@testable import URLLoading

/// Where the session runs the user's code: never on the
/// transport's thread, never inside `resume()`, and a slow handler, delegate
/// or store delays only its own task.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(1)))) struct SessionThreadTests {
    /// The thread that is inside `resume()` right now, if any.
    final class ResumeMarker: Sendable {
        private let thread = Lock<pthread_t?>(nil)
        func resume(_ task: SessionTask) {
            thread.withLock { $0 = pthread_self() }
            task.resume()
            thread.withLock { $0 = nil }
        }
        /// Whether the caller runs inside `resume()` on its thread.
        var callerIsInsideResume: Bool {
            thread.withLock { $0.map { pthread_equal($0, pthread_self()) != 0 } ?? false }
        }
    }

    @Test("A completion handler that blocks delays no other task of the session")
    func blockingHandlerDelaysOnlyItself() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { try await origin.shutdown() } }
        origin.route("/a", response: ScriptedResponse(body: "a"))
        origin.route("/b", response: ScriptedResponse(body: "b"))
        let session = Session(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        let otherDone = DispatchSemaphore(value: 0)
        let blocking = CompletionLatch()
        let returned = CompletionLatch()
        let sawOther = Lock<Bool?>(nil)
        session.dataTask(with: URLRequest(url: origin.url("/a"))) { _, _, _ in
            blocking.open()
            // Blocks until the other task's handler ran (at most 20 s, more
            // under a sanitizer).
            let done = otherDone.wait(timeout: .now() + .seconds(20 * Sanitizer.timeScale)) == .success
            sawOther.withLock { $0 = done }
            returned.open()
        }.resume()
        await blocking.wait()
        session.dataTask(with: URLRequest(url: origin.url("/b"))) { data, _, _ in
            if data == Data("b".utf8) { otherDone.signal() }
        }.resume()
        await returned.wait()
        #expect(sawOther.withLock { $0 } == true, "the second task could not complete while the first one's handler blocked")
    }

    @Test("A cache hit's completion handler runs after resume() returns, never inside it")
    func cacheHitNotInsideResume() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { try await origin.shutdown() } }
        origin.route("/c", response: ScriptedResponse(headers: [HeaderField("Cache-Control", "max-age=600")], body: "cached"))
        let session = Session(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        _ = try await session.data(from: origin.url("/c"))
        let marker = ResumeMarker()
        let insideResume = Lock<Bool?>(nil)
        let done = CompletionLatch()
        let task = session.dataTask(with: URLRequest(url: origin.url("/c"))) { data, _, _ in
            insideResume.withLock { $0 = marker.callerIsInsideResume }
            #expect(data == Data("cached".utf8))
            done.open()
        }
        marker.resume(task)
        await done.wait()
        #expect(insideResume.withLock { $0 } == false)
        #expect(origin.requests(to: "/c").count == 1)
    }

    /// Answers Basic challenges at the task level; nothing else.
    final class BasicAnswering: SessionDelegate {
        func urlSession(_ session: Session, task: SessionTask, didReceive challenge: AuthenticationChallenge) async -> ChallengeAnswer {
            use(Credential(user: "user", password: "pass", persistence: .none))
        }
    }

    /// A task's own delegate that only collects metrics.
    final class MetricsOnly: SessionDelegate {
        let metrics = Lock<Int>(0)
        func urlSession(_ session: Session, task: SessionTask, didFinishCollecting metrics: TaskMetrics) {
            self.metrics.withLock { $0 += 1 }
        }
    }

    @Test("Per-task delegates: a call the task delegate does not handle goes to the session delegate, method by method")
    func taskDelegateFallsBack() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { try await origin.shutdown() } }
        origin.route("/secret") { request in
            guard request.header("Authorization") == "Basic dXNlcjpwYXNz" else {
                return ScriptedResponse(status: 401, headers: [HeaderField("WWW-Authenticate", "Basic realm=\"r\"")], body: "")
            }
            return ScriptedResponse(body: "in")
        }
        let session = Session(configuration: .ephemeral, delegate: BasicAnswering())
        defer { session.finishTasksAndInvalidate() }
        let taskDelegate = MetricsOnly()
        let (data, response) = try await session.data(for: URLRequest(url: origin.url("/secret")), delegate: taskDelegate)
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        #expect(data == Data("in".utf8))
        #expect(taskDelegate.metrics.withLock { $0 } == 1)
    }

    @Test("Another process holding the cookie store's write lock delays only the task whose response sets a cookie")
    func lockedCookieStoreDelaysOnlyItsTask() async throws {
        let directory = TemporaryDirectory()
        let origin = try await TestOrigin.start()
        defer { Task { try await origin.shutdown() } }
        let answered = CompletionLatch()
        origin.route("/sets") { _ in
            answered.open()
            return ScriptedResponse(headers: [HeaderField("Set-Cookie", "a=1; Max-Age=600")], body: "set")
        }
        origin.route("/plain", response: ScriptedResponse(body: "plain"))
        let configuration = SessionConfiguration.ephemeral
        // A writer waits up to 50 s for the lock: far longer than the other
        // request takes, however loaded the machine.
        configuration.httpCookieStorage = try CookieStore(directory: directory.url, busyTimeout: .seconds(50), clock: { Date() })
        configuration.httpCookieAcceptPolicy = .always
        let session = Session(configuration: configuration)
        defer { session.finishTasksAndInvalidate() }
        let holder = try ChildProcess.startWithOutputLines(ChildProcess.helper, ["hold-lock", directory.path(CookieStore.fileName)])
        defer { holder.kill(SIGKILL) }
        #expect(await holder.nextLine() == "locked")
        let settingDone = Lock(false)
        let setting = Task {
            let (data, _) = try await session.data(from: origin.url("/sets"))
            settingDone.withLock { $0 = true }
            return data
        }
        // The origin answers /sets: its Set-Cookie then waits for the lock.
        await answered.wait()
        let (plain, _) = try await session.data(from: URL(string: "http://localhost:\(origin.port)/plain")!)
        #expect(plain == Data("plain".utf8))
        #expect(settingDone.withLock { $0 } == false, "the cookie-setting task finished first: the other task waited for the lock")
        holder.kill(SIGKILL)
        #expect(try await setting.value == Data("set".utf8))
        #expect(configuration.httpCookieStorage?.allCookies.map(\.name) == ["a"])
    }

    @Test("Transport loops: a session with 3 transport loops fetches from 6 origins at once, 4 GETs each; the count is kept, clamped, and 1 to 4 by default")
    func severalTransportLoops() async throws {
        #expect((1...4).contains(SessionConfiguration.defaultTransportLoops))
        #expect(SessionConfiguration.ephemeral.transportLoops == SessionConfiguration.defaultTransportLoops)
        var origins: [TestOrigin] = []
        for index in 0..<6 {
            let origin = try await TestOrigin.start()
            origin.route("/n", response: ScriptedResponse(body: "origin \(index)"))
            origins.append(origin)
        }
        let configuration = SessionConfiguration.ephemeral
        configuration.transportLoops = 3
        let session = Session(configuration: configuration)
        #expect(session.configuration.transportLoops == 3)
        #expect((session.transport as? CurlMulti)?.loopCount == 3)
        let bodies = try await withThrowingTaskGroup(of: (Int, String).self) { group in
            for (index, origin) in origins.enumerated() {
                for _ in 0..<4 {
                    group.addTask {
                        let (data, response) = try await session.data(from: origin.url("/n"))
                        #expect((response as? HTTPURLResponse)?.statusCode == 200)
                        return (index, String(decoding: data, as: UTF8.self))
                    }
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(bodies.count == 24)
        #expect(bodies.allSatisfy { $0.1 == "origin \($0.0)" })
        session.finishTasksAndInvalidate()
        configuration.transportLoops = 99
        let clamped = Session(configuration: configuration)
        #expect((clamped.transport as? CurlMulti)?.loopCount == 16)
        clamped.finishTasksAndInvalidate()
        for origin in origins { try await origin.shutdown() }
    }
}
