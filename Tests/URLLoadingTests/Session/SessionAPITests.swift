import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
import Testing
import TestSupport
@_spi(Tools) @testable import URLLoading

/// Apple's session shapes that ported code relies on: the
/// non-throwing initializer with a delegate queue, the shared session,
/// a session's description.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(1)))) struct SessionAPITests {
    /// Runs the helper's `shared-session` on `origin`'s `/s` in a child
    /// whose default stores' XDG folders are in `folder`.
    static func sharedSession(_ origin: TestOrigin, storesIn folder: TemporaryDirectory) async throws -> ChildProcess.Result {
        var environment = ProcessInfo.processInfo.environment
        environment["XDG_DATA_HOME"] = folder.path("data")
        environment["XDG_CACHE_HOME"] = folder.path("cache")
        return try await ChildProcess.run(ChildProcess.helper, ["shared-session", origin.url("/s").absoluteString], environment: environment)
    }

    @Test("Session.shared is one object, fetches with the default configuration, ignores invalidation, and uses the shared stores")
    func sharedSession() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/s", response: ScriptedResponse(headers: [HeaderField("Set-Cookie", "k=v; Max-Age=600")], body: "shared"))
        // In a child whose default stores live in a temporary folder.
        let folder = TemporaryDirectory()
        let result = try await Self.sharedSession(origin, storesIn: folder)
        #expect(result.status == 0 && result.standardOutput.contains("shared shared"), "\(result.standardError)")
        #expect(result.standardOutput.contains("cookies k=v"))
        #expect(!result.standardOutput.contains("startup error"), "\(result.standardOutput)")
        // The cookie and the permanent credential are in the default files.
        let data = URL(fileURLWithPath: folder.path("data")).appendingPathComponent(ChildProcess.helper.lastPathComponent)
        #expect(
            result.standardOutput.contains("stores \(data.appendingPathComponent("Cookies.sqlite").path) \(data.appendingPathComponent("Credentials.sqlite").path)"),
            "\(result.standardOutput)")
        let cookies = try CookieStore(directory: data, keepSessionCookies: true)
        #expect(cookies.allCookies.map(\.headerPair) == ["k=v"])
        #expect(try CredentialStore(directory: data).allCredentials.values.flatMap(\.keys) == ["ann"])
        try await origin.shutdown()
    }

    @Test("A program that exits without flush() leaves its cache's hit and miss counters on disk for cachetool stats")
    func countersWrittenAtExit() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/s", response: ScriptedResponse(headers: [HeaderField("Cache-Control", "max-age=600")], body: "shared"))
        let folder = TemporaryDirectory()
        // Two processes: the first misses and stores, the second hits; neither flushes.
        for _ in 0..<2 {
            let result = try await Self.sharedSession(origin, storesIn: folder)
            #expect(result.status == 0 && result.standardOutput.contains("shared shared"), "\(result.standardError)")
        }
        let cache = URL(fileURLWithPath: folder.path("cache")).appendingPathComponent(ChildProcess.helper.lastPathComponent)
        let stats = try CacheMaintenance.stats(in: cache)
        #expect(stats.counters["misses"] == 1, "\(stats.counters)")
        #expect(stats.counters["hits"] == 1, "\(stats.counters)")
        #expect(origin.requests(to: "/s").count == 1, "the second process was answered by the cache")
        try await origin.shutdown()
    }

    @Test("Shared stores whose folder cannot be made keep memory only, say why in startupError, and the shared session still works")
    func sharedStoresFallBackToMemory() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/s", response: ScriptedResponse(headers: [HeaderField("Set-Cookie", "k=v")], body: "shared"))
        let folder = TemporaryDirectory()
        // XDG folders that are files: no store can be created under them.
        try Data().write(to: URL(fileURLWithPath: folder.path("data")))
        try Data().write(to: URL(fileURLWithPath: folder.path("cache")))
        let result = try await Self.sharedSession(origin, storesIn: folder)
        #expect(result.status == 0 && result.standardOutput.contains("shared shared"), "\(result.standardError)")
        #expect(result.standardOutput.contains("cookies k=v"), "cookies are kept in memory")
        #expect(result.standardOutput.contains("stores memory memory"))
        #expect(result.standardOutput.components(separatedBy: "startup error").count == 4, "\(result.standardOutput)")
        try await origin.shutdown()
    }

    @Test("init(configuration:delegate:delegateQueue:) takes Apple's arguments; sessionDescription is kept")
    func applesInitializer() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/d", response: ScriptedResponse(body: "d"))
        let session = Session(configuration: .ephemeral, delegate: nil, delegateQueue: OperationQueue())
        #expect(session.startupErrors.isEmpty)
        #expect(session.sessionDescription == nil)
        session.sessionDescription = "uploads"
        #expect(session.sessionDescription == "uploads")
        #expect(try await session.data(from: origin.url("/d")).0 == Data("d".utf8))
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("Errors are URLErrors with Apple's codes and user info, caught as Apple's code catches them, with no secret in them")
    func errorsAreURLErrors() async throws {
        let session = Session(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        let url = try #require(URL(string: "http://ann:s3cret@127.0.0.1:1/x?token=abc123"))
        var caught: URLError?
        do {
            _ = try await session.data(from: url)
        } catch let error as URLError where error.code == .cannotConnectToHost {
            caught = error
        }
        let error = try #require(caught)
        #expect(error.failingURL?.host == "127.0.0.1")
        #expect(error.userInfo[NSURLErrorFailingURLErrorKey] as? URL == error.failingURL)
        #expect(error.sessionError?.code == .cannotConnectToHost)
        #expect(error.downloadTaskResumeData == nil)
        for text in [error.localizedDescription, "\(error)", error.failingURL?.absoluteString ?? ""] {
            #expect(!text.contains("s3cret") && !text.contains("abc123"), "\(text)")
        }
    }

    @Test("Apple's conveniences: tasks from a URL, download(from:), download(resumeFrom:), task lists and flush/reset with handlers")
    func conveniences() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/c", response: ScriptedResponse(body: "conv"))
        let session = Session(configuration: .ephemeral)
        let url = origin.url("/c")
        let data = await withCheckedContinuation { continuation in
            session.dataTask(with: url) { data, _, _ in continuation.resume(returning: data) }.resume()
        }
        #expect(data == Data("conv".utf8))
        let downloaded = await withCheckedContinuation { continuation in
            session.downloadTask(with: url) { location, _, _ in
                continuation.resume(returning: location.flatMap { try? Data(contentsOf: $0) })
            }.resume()
        }
        #expect(downloaded == Data("conv".utf8))
        let (file, response) = try await session.download(from: url)
        defer { try? FileManager.default.removeItem(at: file) }
        #expect((response as? HTTPURLResponse)?.statusCode == 200 && (try? Data(contentsOf: file)) == Data("conv".utf8))
        await #expect { _ = try await session.download(resumeFrom: Data("not resume data".utf8)) } throws: {
            ($0 as? URLError)?.sessionError?.code == .cannotDecodeResumeData
        }
        // Suspended tasks of each kind, as the task lists give them.
        let tasks = [session.dataTask(with: url), session.uploadTask(with: URLRequest(url: url), from: Data()), session.downloadTask(with: url)]
        #expect(tasks.map(\.state) == [.suspended, .suspended, .suspended])
        let all = await withCheckedContinuation { continuation in session.getAllTasks { continuation.resume(returning: $0) } }
        #expect(all.map(\.taskIdentifier) == tasks.map(\.taskIdentifier))
        let (dataTasks, uploads, downloads) = await withCheckedContinuation { continuation in
            session.getTasksWithCompletionHandler { continuation.resume(returning: ($0, $1, $2)) }
        }
        #expect([dataTasks.count, uploads.count, downloads.count] == [1, 1, 1] as [Int])
        await withCheckedContinuation { continuation in session.flush { continuation.resume() } }
        await withCheckedContinuation { continuation in session.reset { continuation.resume() } }
        session.invalidateAndCancel()
        #expect(await eventually { tasks.allSatisfy { $0.state == .completed } })
        try await origin.shutdown()
    }

    final class CreationDelegate: SessionTaskDelegate {
        let events = Lock<[String]>([])
        let completed = CompletionLatch()
        func urlSession(_ session: Session, didCreateTask task: SessionTask) {
            events.withLock { $0.append("created \(task.taskIdentifier)") }
        }
        func urlSession(_ session: Session, task: SessionTask, didCompleteWithError error: (any Error)?) {
            events.withLock { $0.append("complete \(task.taskIdentifier)") }
            completed.open()
        }
    }

    @Test("didCreateTask comes for every task made, before any other call for it")
    func didCreateTask() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/t", response: ScriptedResponse(body: "t"))
        let delegate = CreationDelegate()
        let session = Session(configuration: .ephemeral, delegate: delegate)
        let first = session.dataTask(with: origin.url("/t"))
        first.resume()
        await delegate.completed.wait()
        _ = session.downloadTask(with: origin.url("/t"))
        #expect(await eventually { delegate.events.withLock { $0.count } == 3 })
        #expect(delegate.events.withLock { $0 } == ["created 1", "complete 1", "created 2"])
        session.invalidateAndCancel()
        try await origin.shutdown()
    }

    final class InformationalDelegate: NSObject, SessionDataDelegate {
        let events = Lock<[String]>([])
        let done = CompletionLatch()
        func urlSession(_ session: Session, task: SessionTask, didReceiveInformationalResponse response: HTTPURLResponse) {
            events.withLock { $0.append("\(response.statusCode) \(response.value(forHTTPHeaderField: "Link") ?? "-")") }
        }
        func urlSession(
            _ session: Session, dataTask: SessionDataTask, didReceive response: URLResponse,
            completionHandler: @escaping @Sendable (Session.ResponseDisposition) -> Void
        ) {
            events.withLock { $0.append("response \((response as? HTTPURLResponse)?.statusCode ?? 0)") }
            completionHandler(.allow)
        }
        func urlSession(_ session: Session, task: SessionTask, didCompleteWithError error: (any Error)?) {
            events.withLock { $0.append(error == nil ? "complete" : "failed") }
            done.open()
        }
    }

    @Test("didReceiveInformationalResponse: each 103 Early Hints head, in order, before the final response")
    func informationalResponses() async throws {
        let origin = try await TestOrigin.start()
        var hinted = ScriptedResponse(body: "ok")
        hinted.rawHead = Array(
            ("HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n"
                + "HTTP/1.1 103 Early Hints\r\nLink: </b.js>; rel=preload\r\n\r\n"
                + "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n").utf8)
        origin.route("/hinted", response: hinted)
        let delegate = InformationalDelegate()
        let session = Session(configuration: .ephemeral, delegate: delegate, delegateQueue: nil)
        session.dataTask(with: origin.url("/hinted")).resume()
        await delegate.done.wait()
        #expect(
            delegate.events.withLock { $0 } == [
                "103 </a.css>; rel=preload", "103 </b.js>; rel=preload", "response 200", "complete",
            ])
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    final class DelayingDelegate: NSObject, SessionTaskDelegate {
        let answer: Session.DelayedRequestDisposition
        let replacement: URL?
        let asked = Lock<[String]>([])
        init(_ answer: Session.DelayedRequestDisposition, replacement: URL? = nil) {
            self.answer = answer
            self.replacement = replacement
        }
        func urlSession(
            _ session: Session, task: SessionTask, willBeginDelayedRequest request: URLRequest,
            completionHandler: @escaping @Sendable (Session.DelayedRequestDisposition, URLRequest?) -> Void
        ) {
            asked.withLock { $0.append(request.url?.path ?? "") }
            completionHandler(answer, replacement.map { URLRequest(url: $0) })
        }
    }

    @Test("earliestBeginDate: the request goes no earlier; willBeginDelayedRequest can replace it or cancel the task")
    func delayedRequests() async throws {
        let origin = try await TestOrigin.start()
        let arrivals = Lock<[String: Date]>([:])
        for path in ["/a", "/b", "/c"] {
            origin.route(path) { request in
                arrivals.withLock { $0[request.path] = Date() }
                return ScriptedResponse(body: request.path)
            }
        }
        let session = Session(configuration: .ephemeral)
        /// Runs a task for `path` with `delegate` that begins `lead` seconds
        /// after it is resumed; its data or error, and its begin date. (The
        /// date is taken just before `resume()`: a date already past when the
        /// task resumes delays nothing, and the whole suite's load can stall a
        /// test between two lines.)
        func fetch(_ path: String, lead: TimeInterval, delegate: DelayingDelegate) async -> (Data?, (any Error)?, Date) {
            var begin = Date.distantPast
            let (data, error) = await withCheckedContinuation { continuation in
                let task = session.dataTask(with: URLRequest(url: origin.url(path))) { data, _, error in
                    continuation.resume(returning: (data, error))
                }
                task.delegate = delegate
                begin = Date().addingTimeInterval(lead)
                task.earliestBeginDate = begin
                task.resume()
            }
            return (data, error, begin)
        }
        // Replaced: /b is fetched instead of /a, not before the date.
        let replacing = DelayingDelegate(.useNewRequest, replacement: origin.url("/b"))
        let (data, error, begin) = await fetch("/a", lead: 0.5, delegate: replacing)
        #expect(error == nil && data.map { String(decoding: $0, as: UTF8.self) } == "/b")
        #expect(replacing.asked.withLock { $0 } == ["/a"])
        #expect(arrivals.withLock { $0["/b"] }.map { $0 >= begin } == true, "not before the begin date")
        #expect(arrivals.withLock { $0["/a"] } == nil)
        // Cancelled: the task ends cancelled and the origin never hears of it.
        let cancelling = DelayingDelegate(.cancel)
        let (_, cancelled, _) = await fetch("/c", lead: 0.5, delegate: cancelling)
        #expect((cancelled as? URLError)?.code == .cancelled)
        #expect(cancelling.asked.withLock { $0 } == ["/c"] && arrivals.withLock { $0["/c"] } == nil)
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }
}
