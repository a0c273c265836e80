import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
import Testing
import TestSupport
@testable import URLLoading

/// The session against the loopback origin (never a mock transport):
/// delegate order, completion handlers, redirects, errors, cancellation,
/// invalidation and the configuration's copy rules.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(1)))) struct SessionTests {
    static func session(_ delegate: (any SessionDelegate)? = nil, configure: (inout SessionConfiguration) -> Void = { _ in }) throws -> Session {
        var configuration = SessionConfiguration.ephemeral
        configure(&configuration)
        return Session(configuration: configuration, delegate: delegate)
    }

    @Test("Async data(for:) returns the body and response; a 404 is a response, not an error")
    func asyncData() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/hello", response: ScriptedResponse(headers: [HeaderField("Content-Type", "text/plain")], body: "hello"))
        let session = try Self.session()
        let (data, response) = try await session.data(for: URLRequest(url: origin.url("/hello")))
        #expect(data == Data("hello".utf8))
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        #expect((response as? HTTPURLResponse)?.value(forHTTPHeaderField: "content-type") == "text/plain")
        let (_, missing) = try await session.data(from: origin.url("/missing"))
        #expect((missing as? HTTPURLResponse)?.statusCode == 404)
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("RFC 9110 §5.3: lines of one field name in any case become one value of the response")
    func repeatedFieldsCombined() async throws {
        let origin = try await TestOrigin.start()
        origin.route(
            "/repeated",
            response: ScriptedResponse(
                headers: [HeaderField("Foo", "1"), HeaderField("foo", "2"), HeaderField("Bar", "x"), HeaderField("FOO", "3")], body: "ok"))
        let session = try Self.session()
        let (_, response) = try await session.data(from: origin.url("/repeated"))
        let http = try #require(response as? HTTPURLResponse)
        #expect(http.value(forHTTPHeaderField: "foo") == "1, 2, 3")
        #expect(http.value(forHTTPHeaderField: "bar") == "x")
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("Every delegate call of one exchange, in order: redirect, response, data, metrics, complete")
    func delegateOrder() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/start", Routes.redirect(to: "/end", status: 301))
        origin.route("/end", response: ScriptedResponse(parts: [.bytes(Array("ab".utf8)), .pause(.milliseconds(20)), .bytes(Array("cd".utf8))], framing: .chunked))
        let delegate = RecordingDelegate()
        let session = try Self.session(delegate)
        let task = session.dataTask(with: URLRequest(url: origin.url("/start")))
        #expect(task.state == .suspended)
        #expect(origin.requests.isEmpty)
        task.resume()
        await delegate.waitForCompletion()
        #expect(delegate.events == ["redirect 301", "response 200", "data", "metrics 2", "complete"])
        #expect(delegate.data == Data("abcd".utf8))
        #expect(task.state == .completed)
        #expect(task.currentRequest?.url?.path == "/end")
        #expect(task.countOfBytesReceived == 4)
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("A completion handler gets the body and the end; the delegate gets metrics, no response, data or completion calls")
    func completionHandlerSuppressesDelegate() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/x", response: ScriptedResponse(body: "body"))
        let delegate = RecordingDelegate()
        let session = try Self.session(delegate)
        let body: Data? = await withCheckedContinuation { continuation in
            session.dataTask(with: URLRequest(url: origin.url("/x"))) { data, _, _ in continuation.resume(returning: data) }.resume()
        }
        #expect(body == Data("body".utf8))
        // The session's invalidation comes after every call about its tasks.
        session.finishTasksAndInvalidate()
        #expect(await eventually { delegate.events.last == "invalid" }, "\(delegate.events)")
        #expect(delegate.events == ["metrics 1", "invalid"])
        try await origin.shutdown()
    }

    @Test("DidReceiveResponse .cancel ends the task with cancelled, and no data arrives")
    func responseCancel() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/x", response: ScriptedResponse(body: String(repeating: "z", count: 100_000)))
        let delegate = RecordingDelegate(.init(disposition: .cancel))
        let session = try Self.session(delegate)
        session.dataTask(with: URLRequest(url: origin.url("/x"))).resume()
        await delegate.waitForCompletion()
        #expect(delegate.events == ["response 200", "metrics 0", "complete cancelled"])
        #expect(delegate.data.isEmpty)
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("A redirect the delegate refuses (nil) is the task's response")
    func redirectRefused() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/r", { _ in ScriptedResponse(status: 302, headers: [HeaderField("Location", "/elsewhere")], body: "moved") })
        let delegate = RecordingDelegate(.init(redirect: { _, _ in nil }))
        let session = try Self.session(delegate)
        session.dataTask(with: URLRequest(url: origin.url("/r"))).resume()
        await delegate.waitForCompletion()
        #expect(delegate.events == ["redirect 302", "response 302", "data", "metrics 1", "complete"])
        #expect(delegate.data == Data("moved".utf8))
        #expect(origin.requests(to: "/elsewhere").isEmpty)
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("The delegate may follow a different request")
    func redirectChanged() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/r", Routes.redirect(to: "/a"))
        origin.route("/b") { request in ScriptedResponse(body: request.header("X-Changed") ?? "none") }
        let delegate = RecordingDelegate(
            .init(redirect: { _, request in
                var changed = request
                changed.url = request.url?.deletingLastPathComponent().appendingPathComponent("b")
                changed.setValue("yes", forHTTPHeaderField: "X-Changed")
                return changed
            }))
        let session = try Self.session(delegate)
        session.dataTask(with: URLRequest(url: origin.url("/r"))).resume()
        await delegate.waitForCompletion()
        #expect(delegate.data == Data("yes".utf8))
        #expect(origin.requests(to: "/a").isEmpty)
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("A redirect loop ends with too many redirects")
    func redirectLimit() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/loop", Routes.redirect(to: "/loop"))
        let session = try Self.session { $0.httpMaximumRedirects = 5 }
        let error = await #expect(throws: URLError.self) {
            _ = try await session.data(from: origin.url("/loop"))
        }
        #expect(error?.code == .httpTooManyRedirects)
        #expect(origin.requests(to: "/loop").count == 6)
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("301/302/303 turn POST into GET; 307/308 keep the method and body")
    func redirectMethods() async throws {
        let origin = try await TestOrigin.start()
        for status in [301, 302, 303, 307, 308] { origin.route("/\(status)", Routes.redirect(to: "/target", status: status)) }
        origin.route("/target") { request in ScriptedResponse(body: "\(request.method) \(String(decoding: request.body, as: UTF8.self))") }
        let session = try Self.session()
        for (status, expected) in [(301, "GET "), (302, "GET "), (303, "GET "), (307, "POST payload"), (308, "POST payload")] {
            var request = URLRequest(url: origin.url("/\(status)"))
            request.httpMethod = "POST"
            request.httpBody = Data("payload".utf8)
            let (data, _) = try await session.data(for: request)
            #expect(String(decoding: data, as: UTF8.self) == expected, "\(status)")
        }
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("A cross-origin redirect drops Authorization and Cookie; a same-origin one keeps them")
    func crossOriginRedirectDropsCredentials() async throws {
        let first = try await TestOrigin.start()
        let second = try await TestOrigin.start()
        first.route("/same", Routes.redirect(to: "/landing"))
        first.route("/other", Routes.redirect(to: second.url("/landing").absoluteString))
        for origin in [first, second] {
            origin.route("/landing") { request in
                ScriptedResponse(body: "\(request.header("Authorization") ?? "-") \(request.header("Cookie") ?? "-")")
            }
        }
        let session = try Self.session()
        var request = URLRequest(url: first.url("/same"))
        request.setValue("Bearer secret", forHTTPHeaderField: "Authorization")
        request.setValue("a=1", forHTTPHeaderField: "Cookie")
        let (kept, _) = try await session.data(for: request)
        #expect(String(decoding: kept, as: UTF8.self) == "Bearer secret a=1")
        request.url = first.url("/other")
        let (dropped, _) = try await session.data(for: request)
        #expect(String(decoding: dropped, as: UTF8.self) == "- -")
        session.finishTasksAndInvalidate()
        try await first.shutdown()
        try await second.shutdown()
    }

    @Test("Client-side failures are errors with codes; a server that lies or closes early too")
    func errors() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/short", response: ScriptedResponse(parts: [.bytes([1, 2, 3]), .closeConnection], framing: .declaredLength(1000)))
        // The rest never comes (a gate nobody opens): the 1 s timeout, however late it runs, finds the body unfinished.
        origin.route("/stall", response: ScriptedResponse(parts: [.bytes([1]), .waitFor(OriginGate()), .bytes([2])], framing: .declaredLength(2)))
        origin.route("/huge", response: ScriptedResponse.hugeHead(bytes: 2_000_000))
        let session = try Self.session()
        let impatient = try Self.session { $0.timeoutIntervalForRequest = 1 }
        func code(_ url: URL, in session: Session? = nil) async -> URLError.Code? {
            do {
                _ = try await (session ?? impatient).data(from: url)
                return nil
            } catch {
                return (error as? URLError)?.code
            }
        }
        #expect(await code(origin.url("/short"), in: session) == .networkConnectionLost)
        #expect(await code(origin.url("/stall")) == .timedOut)
        #expect(await code(origin.url("/huge"), in: session) == .badServerResponse)
        #expect(await code(URL(string: "http://127.0.0.1:1/")!) == .cannotConnectToHost)
        #expect(await code(URL(string: "ftp://127.0.0.1/")!) == .unsupportedURL)
        let error = await #expect(throws: URLError.self) { _ = try await session.data(from: origin.url("/short?token=secret")) }
        #expect(error.map { "\($0)" }?.contains("secret") == false)
        session.finishTasksAndInvalidate()
        impatient.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("Cancel during the head and during the body")
    func cancelling() async throws {
        let origin = try await TestOrigin.start()
        let asked = CompletionLatch()
        origin.route("/late") { _ in
            asked.open()
            return ScriptedResponse(body: "x").with(delayBeforeHead: .seconds(30))
        }
        // The rest never comes (a gate nobody opens): the cancel finds the body unfinished, however late it runs.
        origin.route("/body", response: ScriptedResponse(parts: [.bytes([1]), .waitFor(OriginGate()), .bytes([2])], framing: .declaredLength(2)))
        for path in ["/late", "/body"] {
            let delegate = RecordingDelegate()
            let session = try Self.session(delegate)
            let task = session.dataTask(with: URLRequest(url: origin.url(path)))
            task.resume()
            // During the head: the origin has the request and has not answered.
            if path == "/late" { await asked.wait() }
            if path == "/body" {
                // Under the whole suite's load this took up to ~30 s once (see the stop note).
                #expect(await eventually(within: .seconds(45)) { task.countOfBytesReceived > 0 }, "no body byte arrived in 45 s")
            }
            task.cancel()
            await delegate.waitForCompletion()
            #expect(delegate.events.last == "complete cancelled", "\(path)")
            #expect(task.state == .completed)
            session.invalidateAndCancel()
        }
        try await origin.shutdown()
    }

    @Test("Cancelling the Swift task cancels the transfer")
    func asyncCancellation() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/slow", response: ScriptedResponse(body: "x").with(delayBeforeHead: .seconds(30)))
        let session = try Self.session()
        let waiting = Task { try await session.data(from: origin.url("/slow")) }
        #expect(await eventually { !origin.requests.isEmpty }, "the origin never saw the request")
        weak let task = session.allTasks.first
        #expect(task != nil)
        waiting.cancel()
        let result = await waiting.result
        #expect((try? result.get()) == nil)
        if case .failure(let error) = result { #expect((error as? URLError)?.code == .cancelled) }
        // The transfer's own end may come after the result, from the
        // transport's thread; once it is handled nothing keeps the task (no
        // cycle through the awaiting side's hand-over). Turns for that
        // thread, bounded.
        #expect(await eventually { task == nil }, "the cancelled task is still alive after 45 s")
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("Work handed to an async call after it returned runs where it is delivered and is not kept")
    func stepsAfterResult() async throws {
        final class Token: Sendable {}
        let steps = TaskSteps<Int>()
        steps.deliver(.result(.success(1)))
        guard case .result(let result) = await steps.next() else { Issue.record("expected the result first"); return }
        #expect(try result.get() == 1)
        steps.close()
        let ran = Lock(false)
        weak var weakToken: Token?
        do {
            let token = Token()
            weakToken = token
            // A transfer's end arriving after the awaiting task returned (after a cancel).
            steps.deliver(
                .work {
                    _ = token; ran.withLock { $0 = true }
                })
        }
        #expect(ran.withLock { $0 })
        #expect(weakToken == nil, "work delivered after close is kept (a cycle through the task's runner)")
    }

    @Test("Steps delivered before the awaiting task asks are taken in the order they came; work left at close runs then")
    func stepsKeepTheirOrder() async throws {
        let steps = TaskSteps<Int>()
        let order = Lock<[Int]>([])
        for index in 1...3 { steps.deliver(.work { order.withLock { $0.append(index) } }) }
        steps.deliver(.result(.success(4)))
        steps.deliver(.work { order.withLock { $0.append(5) } })
        for _ in 1...3 {
            guard case .work(let work) = await steps.next() else { Issue.record("expected work before the result"); return }
            work()
        }
        guard case .result(let result) = await steps.next() else { Issue.record("expected the result fourth"); return }
        #expect(try result.get() == 4)
        steps.close()
        #expect(order.withLock { $0 } == [1, 2, 3, 5])
    }

    @Test("200 concurrent tasks on 6 connections per host, every body intact")
    func twoHundredConcurrent() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/n") { request in ScriptedResponse(body: String(repeating: request.query ?? "?", count: 100)) }
        let session = try Self.session()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<200 {
                group.addTask {
                    let (data, _) = try await session.data(from: origin.url("/n?\(index)"))
                    #expect(data == Data(String(repeating: "\(index)", count: 100).utf8))
                }
            }
            try await group.waitForAll()
        }
        // At most 6 at once; under a sanitizer on a loaded machine a connection
        // may close and another open (CI saw 7 in all, one at a time).
        #expect(origin.peakConcurrentConnections <= 6 && origin.peakConcurrentConnections >= 1, "\(origin.peakConcurrentConnections)")
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("Over plain http a second request to a host does not wait for the first's response (no HTTP/2 to wait for)")
    func noWaitBehindFirstConnection() async throws {
        let origin = try await TestOrigin.start()
        // Never answered within the test: whether /fast waited cannot depend on
        // how slow a loaded machine is.
        origin.route("/slow", response: ScriptedResponse(parts: [.pause(.seconds(3600)), .bytes(Array("late".utf8))], framing: .closeDelimited))
        origin.route("/fast", response: ScriptedResponse(body: "fast"))
        // Nor on the request timeout: a whole suite under a sanitizer once
        // took longer than the default 60 s, and /slow timed out.
        let session = try Self.session { $0.timeoutIntervalForRequest = 3600 }
        let slow = session.dataTask(with: origin.url("/slow"))
        slow.resume()
        // The slow request holds the host's first connection before the next starts.
        #expect(await eventually { !origin.requests(to: "/slow").isEmpty }, "the origin never saw /slow")
        let (data, _) = try await session.data(from: origin.url("/fast"))
        #expect(data == Data("fast".utf8))
        #expect(slow.state == .running)
        session.invalidateAndCancel()
        try await origin.shutdown()
    }

    @Test("Uploads from data and from a file; a download to a file deleted after the delegate returns")
    func uploadsAndDownloads() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/echo") { request in ScriptedResponse(body: request.body) }
        origin.route("/file", response: ScriptedResponse(parts: [.pattern(offset: 0, count: 500_000)]))
        let session = try Self.session()
        let payload = Data((0..<200_000).map { UInt8(truncatingIfNeeded: $0 * 13) })
        let (echoed, _) = try await session.upload(for: URLRequest(url: origin.url("/echo")), from: payload)
        #expect(echoed == payload)
        let directory = TemporaryDirectory()
        let file = directory.url.appendingPathComponent("upload.bin")
        try payload.write(to: file)
        let (echoedFile, _) = try await session.upload(for: URLRequest(url: origin.url("/echo")), fromFile: file)
        #expect(echoedFile == payload)
        #expect(origin.requests(to: "/echo").allSatisfy { $0.method == "POST" })

        let (location, _) = try await session.download(for: URLRequest(url: origin.url("/file")))
        #expect(try Data(contentsOf: location) == Data(TestOrigin.pattern(offset: 0, count: 500_000)))
        try FileManager.default.removeItem(at: location)

        let delegate = RecordingDelegate()
        let delegated = try Self.session(delegate)
        delegated.downloadTask(with: URLRequest(url: origin.url("/file"))).resume()
        await delegate.waitForCompletion()
        #expect(delegate.downloaded == Data(TestOrigin.pattern(offset: 0, count: 500_000)))
        #expect(delegate.events.suffix(3) == ["downloaded", "metrics 1", "complete"])
        session.finishTasksAndInvalidate()
        delegated.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("FinishTasksAndInvalidate lets tasks finish; invalidateAndCancel cancels them; no task runs after")
    func invalidation() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/slow", response: ScriptedResponse(body: "done").with(delayBeforeHead: .milliseconds(200)))
        let delegate = RecordingDelegate()
        let session = try Self.session(delegate)
        session.dataTask(with: URLRequest(url: origin.url("/slow"))).resume()
        session.finishTasksAndInvalidate()
        await delegate.waitForCompletion()
        #expect(await eventually { session.delegate == nil }, "the session kept its delegate after invalidation")
        #expect(delegate.events.contains("complete"))
        let after = await #expect(throws: URLError.self) { _ = try await session.data(from: origin.url("/slow")) }
        #expect(after?.code == .cancelled && after?.sessionError?.code == .sessionInvalidated, "\(String(describing: after))")

        let cancelling = RecordingDelegate()
        let second = try Self.session(cancelling)
        second.dataTask(with: URLRequest(url: origin.url("/slow"))).resume()
        second.invalidateAndCancel()
        await cancelling.waitForCompletion()
        #expect(await eventually { second.delegate == nil }, "the session kept its delegate after invalidateAndCancel")
        #expect(cancelling.events.contains("complete cancelled"))
        #expect(second.allTasks.isEmpty)
        try await origin.shutdown()
    }

    @Test("A session copies its configuration; copies are independent; a configuration can be changed through a let, as Apple's")
    func configurationCopies() throws {
        let configuration = SessionConfiguration.ephemeral
        configuration.httpAdditionalHeaders = ["X-A": "1"]
        let session = Session(configuration: configuration)
        configuration.httpAdditionalHeaders = ["X-A": "2"]
        configuration.timeoutIntervalForRequest = 5
        #expect(session.configuration.httpAdditionalHeaders == ["X-A": "1"])
        #expect(session.configuration.timeoutIntervalForRequest == 60)
        // A reference type, as Apple's: copy() makes an independent one, and
        // the session hands out a new copy each time.
        let copy = configuration.copy()
        copy.httpMaximumConnectionsPerHost = 1
        #expect(configuration.httpMaximumConnectionsPerHost == 6)
        session.configuration.httpAdditionalHeaders = ["X-A": "3"]
        #expect(session.configuration.httpAdditionalHeaders == ["X-A": "1"])
        #expect(SessionConfiguration.default !== SessionConfiguration.default)
        // Two sessions from one ephemeral value use its cache; another value has its own.
        let other = Session(configuration: configuration)
        #expect(session.urlCache != nil)
        #expect(session.urlCache === other.urlCache)
        #expect(session.urlCache !== Session(configuration: .ephemeral).urlCache)
        session.finishTasksAndInvalidate()
        other.finishTasksAndInvalidate()
    }

    @Test("Interceptors answer without the network, or change the request")
    func interceptors() async throws {
        struct Local: Interceptor {
            func intercept(_ request: URLRequest) async -> InterceptorResult {
                if request.url?.path == "/local" {
                    return .respond(HTTPURLResponse(url: request.url!, statusCode: 203, httpVersion: nil, headerFields: nil)!, Data("local".utf8))
                }
                var changed = request
                changed.setValue("added", forHTTPHeaderField: "X-Intercepted")
                return .proceed(changed)
            }
        }
        let origin = try await TestOrigin.start()
        origin.route("/remote") { request in ScriptedResponse(body: request.header("X-Intercepted") ?? "-") }
        let session = try Self.session { $0.interceptors = [Local()] }
        let (local, response) = try await session.data(from: origin.url("/local"))
        #expect(local == Data("local".utf8))
        #expect((response as? HTTPURLResponse)?.statusCode == 203)
        let (remote, _) = try await session.data(from: origin.url("/remote"))
        #expect(remote == Data("added".utf8))
        #expect(origin.requests(to: "/local").isEmpty)
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("Additional headers are added unless the request sets them")
    func additionalHeaders() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/h") { request in ScriptedResponse(body: "\(request.header("X-A") ?? "-") \(request.header("X-B") ?? "-")") }
        let session = try Self.session { $0.httpAdditionalHeaders = ["X-A": "config", "X-B": "config"] }
        var request = URLRequest(url: origin.url("/h"))
        request.setValue("request", forHTTPHeaderField: "X-B")
        let (data, _) = try await session.data(for: request)
        #expect(String(decoding: data, as: UTF8.self) == "config request")
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }
}
