import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
import Testing
import TestSupport
@testable import URLLoading

/// Behaviours Apple's URLSession has that ported code relies on.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(1)))) struct AppleCompatibilityTests {
    @Test("1: tasks with a completion handler or async calls bypass the session delegate's response, data and completion; metrics and redirects still reach it")
    func handlersBypassTheDelegate() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/hop", response: ScriptedResponse(status: 302, headers: [HeaderField("Location", "/body")], body: ""))
        origin.route("/body", response: ScriptedResponse(body: "hello"))
        let delegate = RecordingDelegate()
        let session = Session(configuration: .ephemeral, delegate: delegate, delegateQueue: nil)
        defer { session.finishTasksAndInvalidate() }
        let done = CompletionLatch()
        session.dataTask(with: origin.url("/hop")) { data, _, _ in
            #expect(data == Data("hello".utf8))
            done.open()
        }.resume()
        await done.wait()
        let (data, _) = try await session.data(from: origin.url("/hop"))
        #expect(data == Data("hello".utf8))
        let (file, _) = try await session.download(from: origin.url("/body"))
        try? FileManager.default.removeItem(at: file)
        // Metrics come with the end, on the task's context: wait for all three.
        #expect(await eventually { delegate.events.filter { $0.hasPrefix("metrics") }.count == 3 }, "\(delegate.events)")
        let events = delegate.events
        #expect(!events.contains { $0.hasPrefix("complete") || $0.hasPrefix("response") || $0.hasPrefix("data") }, "\(events)")
        #expect(events.filter { $0.hasPrefix("redirect") }.count == 2, "\(events)")
        try await origin.shutdown()
    }

    @Test("2: an ephemeral configuration has in-memory stores of its own, which the sessions made from it use")
    func ephemeralStores() {
        let configuration = SessionConfiguration.ephemeral
        let cache = configuration.urlCache
        let cookies = configuration.httpCookieStorage
        let credentials = configuration.urlCredentialStorage
        #expect(cache != nil && cookies != nil && credentials != nil)
        #expect(configuration.urlCache === cache && configuration.httpCookieStorage === cookies, "the same objects on every read")
        #expect(cache?.diskCapacity == 0)
        let session = Session(configuration: configuration)
        defer { session.finishTasksAndInvalidate() }
        #expect(session.cookieStore === cookies && session.urlCache === cache && session.credentialStore === credentials)
    }

    @Test("3: an empty body sends Content-Length: 0 and no Content-Type; a body without a Content-Type gets none from libcurl")
    func emptyBodies() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/echo", response: ScriptedResponse(body: "ok"))
        let session = Session(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        for (method, body) in [("POST", Data()), ("DELETE", Data()), ("POST", Data("a=1".utf8))] {
            var request = URLRequest(url: origin.url("/echo"))
            request.httpMethod = method
            request.httpBody = body
            _ = try await session.data(for: request)
            let seen = try #require(origin.requests(to: "/echo").last)
            #expect(seen.method == method && seen.header("Content-Length") == "\(body.count)", "\(method) \(seen.headers)")
            #expect(seen.header("Content-Type") == nil, "\(method) \(seen.headers)")
        }
        var typed = URLRequest(url: origin.url("/echo"))
        typed.httpMethod = "POST"
        typed.httpBody = Data("{}".utf8)
        typed.setValue("application/json", forHTTPHeaderField: "content-type")
        _ = try await session.data(for: typed)
        #expect(origin.requests(to: "/echo").last?.header("Content-Type") == "application/json")
        try await origin.shutdown()
    }

    @Test("4: a port out of range is badURL; errors carry the failing URL in both of Apple's keys; a cancelled task says \"cancelled\"")
    func errors() async throws {
        let session = Session(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        let badPort = await #expect(throws: URLError.self) { _ = try await session.data(from: URL(string: "http://127.0.0.1:99999/x")!) }
        #expect(badPort?.code == .badURL, "\(String(describing: badPort))")
        #expect(badPort?.userInfo["NSErrorFailingURLStringKey"] as? String == "http://127.0.0.1:99999/x")
        #expect((badPort?.userInfo[NSURLErrorFailingURLErrorKey] as? URL)?.port == 99999)
        let origin = try await TestOrigin.start()
        origin.route("/slow", response: ScriptedResponse(body: "late").with(delayBeforeHead: .seconds(30)))
        let ended = Lock<(any Error)?>(nil)
        let done = CompletionLatch()
        let task = session.dataTask(with: origin.url("/slow")) { _, _, error in
            ended.withLock { $0 = error }
            done.open()
        }
        task.resume()
        task.cancel()
        await done.wait()
        let cancelled = try #require(ended.withLock { $0 } as? URLError)
        #expect(cancelled.code == .cancelled && cancelled.localizedDescription == "cancelled")
        #expect(cancelled.sessionError?.message == "the task was cancelled")
        #expect(cancelled.userInfo["NSErrorFailingURLStringKey"] as? String == origin.url("/slow").absoluteString)
        try await origin.shutdown()
    }

    @Test("5: after invalidateAndCancel, getAllTasks and getTasksWithCompletionHandler list nothing, never-resumed tasks included")
    func noTasksAfterInvalidateAndCancel() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/slow", response: ScriptedResponse(body: "late").with(delayBeforeHead: .seconds(30)))
        let delegate = RecordingDelegate()
        let session = Session(configuration: .ephemeral, delegate: delegate, delegateQueue: nil)
        session.dataTask(with: origin.url("/slow")).resume()
        _ = session.dataTask(with: origin.url("/slow"))
        #expect(session.allTasks.count == 2)
        session.invalidateAndCancel()
        let listed = await withCheckedContinuation { continuation in session.getAllTasks { continuation.resume(returning: $0) } }
        #expect(listed.isEmpty)
        let grouped = await withCheckedContinuation { continuation in
            session.getTasksWithCompletionHandler { data, upload, download in continuation.resume(returning: data + upload + download) }
        }
        #expect(grouped.isEmpty)
        try await origin.shutdown()
    }

    @Test("6: httpAdditionalHeaders go out as spelled; a request's own field of the same name, in any case, wins")
    func additionalHeaders() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/h", response: ScriptedResponse(body: "ok"))
        let configuration = SessionConfiguration.ephemeral
        configuration.httpAdditionalHeaders = ["x-api-KEY": "k1", "X-Tenant": "t1"]
        let session = Session(configuration: configuration)
        defer { session.finishTasksAndInvalidate() }
        var request = URLRequest(url: origin.url("/h"))
        request.setValue("own", forHTTPHeaderField: "x-tenant")
        _ = try await session.data(for: request)
        let seen = try #require(origin.requests(to: "/h").last)
        #expect(seen.headers.contains { $0.name == "x-api-KEY" && $0.value == "k1" }, "\(seen.headers)")
        #expect(seen.headers.filter { $0.name.lowercased() == "x-tenant" }.map(\.value) == ["own"], "\(seen.headers)")
        try await origin.shutdown()
    }

    @Test("7: Apple's configuration members are kept and deep-copied; a task's copy is itself; stores compare by identity")
    func members() {
        let configuration = SessionConfiguration.default
        configuration.networkServiceType = .background
        configuration.allowsCellularAccess = false
        configuration.allowsExpensiveNetworkAccess = false
        configuration.allowsConstrainedNetworkAccess = false
        configuration.httpShouldUsePipelining = true
        configuration.shouldUseExtendedBackgroundIdleMode = true
        configuration.isDiscretionary = true
        let copy = configuration.copy()
        configuration.allowsCellularAccess = true
        #expect(copy.networkServiceType == .background && !copy.allowsCellularAccess && !copy.allowsExpensiveNetworkAccess)
        #expect(!copy.allowsConstrainedNetworkAccess && copy.httpShouldUsePipelining && copy.shouldUseExtendedBackgroundIdleMode && copy.isDiscretionary)
        let store = CookieStore()
        let other = SessionConfiguration.ephemeral
        other.httpCookieStorage = store
        #expect(other.httpCookieStorage == store && other.httpCookieStorage != CookieStore())
        let session = Session(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        let task = session.dataTask(with: URL(string: "http://127.0.0.1:9/")!)
        #expect((task.copy() as? SessionTask) === task)
    }
}
