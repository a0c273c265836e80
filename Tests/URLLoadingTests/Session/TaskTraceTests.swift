import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import InMemoryTracing
import Testing
import TestSupport
import Tracing
@testable import URLLoading

/// A task's client span in the process's tracer, and its context in each request.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(1)))) struct TaskTraceTests {
    @Test("A span's URL has no user, password or fragment, and no query value; methods outside OpenTelemetry's list (in their case) are _OTHER")
    func requestAttributes() throws {
        let url = try #require(URL(string: "https://user:secret@api.example:8443/v1/items?token=abc123&page=2&flag#frag"))
        let attributes = TaskTrace.endAttributes(URLRequest(url: url), status: nil, error: nil, metrics: nil)
        #expect(attributes["url.full"]?.toSpanAttribute() == "https://api.example:8443/v1/items?token=REDACTED&page=REDACTED&flag")
        #expect(attributes["http.request.method"]?.toSpanAttribute() == "GET")
        #expect(attributes["server.address"]?.toSpanAttribute() == "api.example")
        #expect(attributes["server.port"]?.toSpanAttribute() == 8443)
        #expect(attributes["http.response.status_code"] == nil)
        var purge = URLRequest(url: URL(string: "http://cache.example/x")!)
        purge.httpMethod = "purge"
        let plain = TaskTrace.endAttributes(purge, status: 404, error: nil, metrics: nil)
        #expect(plain["http.request.method"]?.toSpanAttribute() == "_OTHER")
        #expect(plain["http.request.method_original"]?.toSpanAttribute() == "purge")
        #expect(plain["server.port"]?.toSpanAttribute() == 80, "the scheme's port when the URL names none")
        #expect(plain["error.type"]?.toSpanAttribute() == "404")
        #expect(!TaskTrace.redacted(url).contains("secret"))
        #expect(!TaskTrace.redacted(url).contains("abc123"))
    }

    @Test("The server's address and port read from a plain URL's text are Foundation's; any other URL is left to Foundation")
    func plainAuthority() throws {
        let texts = [
            "http://127.0.0.1:8080/x", "https://Example.COM/a?b#c", "http://h:/x", "http://h:0080/", "ws://h?x", "http://h#f",
            "HTTP://h", "http://h:99999/", "https://[::1]:8443/a", "http://h%41b/", "http://u:p@h:81/", "http://h:123456/",
            "http://b\u{FC}cher.example/",
        ]
        for text in texts {
            let url = try #require(URL(string: text), "\(text)")
            let attributes = TaskTrace.endAttributes(URLRequest(url: url), status: nil, error: nil, metrics: nil)
            #expect(attributes["server.address"]?.toSpanAttribute() == url.host.map { .string($0) }, "\(text)")
            if let port = url.port {
                #expect(attributes["server.port"]?.toSpanAttribute() == .int64(Int64(port)), "\(text)")
            }
            if let plain = TaskTrace.plainAuthority(url.absoluteString) {
                #expect(plain.scheme == url.scheme && plain.host == url.host && plain.port == url.port, "\(text)")
            }
        }
        #expect(TaskTrace.plainAuthority("https://[::1]:8443/a") == nil)
        #expect(TaskTrace.plainAuthority("http://u:p@h/") == nil)
        #expect(TaskTrace.plainAuthority("http://h%41b/") == nil)
        #expect(TaskTrace.plainAuthority("http://h:123456/") == nil)
        #expect(TaskTrace.plainAuthority("http://h:8a/") == nil)
        #expect(TaskTrace.plainAuthority("http://h:8080/x").map { "\($0.scheme) \($0.host) \($0.port ?? -1)" } == "http h 8080")
    }

    @Test("Events from a task's requests: a redirect followed, a challenge answered, a cache hit; the last request's answer is none")
    func eventsFromMetrics() throws {
        func transaction(_ path: String, status: Int, fetch: TaskTransactionMetrics.ResourceFetchType = .networkLoad, cacheStatus: String? = nil)
            throws -> TaskTransactionMetrics
        {
            let url = try #require(URL(string: "http://origin.example\(path)"))
            let response = HTTPURLResponse(url: url, statusCode: status, httpVersion: "HTTP/1.1", headerFields: [:])
            return TaskTransactionMetrics(request: URLRequest(url: url), response: response, fetchType: fetch, cacheStatus: cacheStatus)
        }
        let events = TaskTrace.events(of: [
            try transaction("/a", status: 302),
            try transaction("/b?key=secret", status: 401),
            try transaction("/b?key=secret", status: 200),
        ])
        #expect(events.map(\.name) == ["redirect", "authentication challenge"])
        #expect(events.first?.attributes["http.response.status_code"]?.toSpanAttribute() == 302)
        #expect(events.first?.attributes["url.full"]?.toSpanAttribute() == "http://origin.example/b?key=REDACTED")
        let hit = TaskTrace.events(of: [try transaction("/c", status: 200, fetch: .localCache, cacheStatus: "URLLoading; hit")])
        #expect(hit.map(\.name) == ["cache hit"])
        let revalidated = TaskTrace.events(of: [try transaction("/c", status: 304, cacheStatus: "URLLoading; fwd=stale; fwd-status=304")])
        #expect(revalidated.map(\.name) == ["cache revalidated"])
        #expect(TaskTrace.events(of: [try transaction("/d", status: 302)]).isEmpty, "a redirect that was the answer was not followed")
    }

    @Test("One client span per task, a child of the caller's; each request carries its context; a redirect is an event and a resend")
    func spanPerTask() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/start", Routes.redirect(to: "/end?secret=hunter2", status: 302))
        origin.route("/end", response: ScriptedResponse(body: "done"))
        let tracer = TestW3CTracer()
        let session = withTracer(tracer) { Session(configuration: .ephemeral) }
        #expect(session.tracer != nil)

        let parent = tracer.startSpan("caller", context: .topLevel)
        let (data, _) = try await ServiceContext.withValue(parent.context) {
            try await session.data(from: origin.url("/start"))
        }
        parent.end()
        #expect(String(decoding: data, as: UTF8.self) == "done")
        // The span ends with the task, after its caller has the data.
        #expect(await eventually { tracer.memory.finishedSpans.count == 2 })
        let span = try #require(tracer.memory.finishedSpans.first { $0.operationName == "GET" })
        #expect(span.kind == .client)
        #expect(span.traceID == parent.traceID)
        #expect(span.parentSpanID == parent.spanID)
        #expect(span.attributes["http.request.method"]?.toSpanAttribute() == "GET")
        #expect(span.attributes["http.response.status_code"]?.toSpanAttribute() == 200)
        #expect(span.attributes["http.request.resend_count"]?.toSpanAttribute() == 1)
        #expect(span.attributes["server.address"]?.toSpanAttribute() == "127.0.0.1")
        #expect(span.attributes["server.port"]?.toSpanAttribute() == .int64(Int64(origin.port)))
        #expect(span.attributes["network.protocol.version"]?.toSpanAttribute() == "1.1")
        #expect(span.attributes["error.type"] == nil)
        #expect(span.attributes["tracer.sampled"]?.toSpanAttribute() == true, "the tracer's own attribute was replaced")
        #expect(span.events.map(\.name) == ["redirect"])
        #expect(span.status == nil)
        let shown = "\(span.attributes) \(span.events)"
        #expect(!shown.contains("hunter2"), "a query value reached the span")

        // Both requests carried the task's span as their parent.
        let expected = "00-\(span.traceID)-\(span.spanID)-01"
        #expect(origin.requests(to: "/start").map { $0.headerValues("traceparent") } == [[expected]])
        #expect(origin.requests(to: "/end").map { $0.headerValues("traceparent") } == [[expected]])
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("A 4xx answer and a failure mark the span as an error with error.type; a cache hit is an event; a caller's traceparent is replaced")
    func errorsAndCache() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/missing", response: ScriptedResponse(status: 404, body: "no"))
        origin.route("/fresh", response: ScriptedResponse(headers: [HeaderField("Cache-Control", "max-age=600")], body: "fresh"))
        let tracer = TestW3CTracer()
        let session = withTracer(tracer) { Session(configuration: .ephemeral) }

        var request = URLRequest(url: origin.url("/missing"))
        request.setValue("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", forHTTPHeaderField: "traceparent")
        _ = try await session.data(for: request)
        #expect(await eventually { tracer.memory.finishedSpans.count == 1 })
        let missing = try #require(tracer.memory.finishedSpans.first)
        #expect(missing.status?.code == .error)
        #expect(missing.attributes["error.type"]?.toSpanAttribute() == "404")
        #expect(origin.requests(to: "/missing").map { $0.headerValues("traceparent") } == [["00-\(missing.traceID)-\(missing.spanID)-01"]])

        _ = try await session.data(from: origin.url("/fresh"))
        #expect(await eventually { session.urlCache?.cachedResponse(for: URLRequest(url: origin.url("/fresh"))) != nil })
        _ = try await session.data(from: origin.url("/fresh"))
        #expect(await eventually { tracer.memory.finishedSpans.count == 3 })
        let hit = try #require(tracer.memory.finishedSpans.last)
        #expect(hit.events.map(\.name) == ["cache hit"])
        #expect(origin.requests(to: "/fresh").count == 1, "the hit reached the origin")

        let closed = try await TestOrigin.start()
        let closedURL = closed.url("/x")
        try await closed.shutdown()
        await #expect(throws: (any Error).self) { try await session.data(from: closedURL) }
        #expect(await eventually { tracer.memory.finishedSpans.count == 4 })
        let failed = try #require(tracer.memory.finishedSpans.last)
        #expect(failed.status?.code == .error)
        #expect(failed.attributes["error.type"]?.toSpanAttribute() == "cannot connect to host")
        #expect(failed.attributes["http.response.status_code"] == nil)
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("Without a tracer a session has none and its requests carry no trace context")
    func noTracer() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/plain", response: ScriptedResponse(body: "plain"))
        let session = Session(configuration: .ephemeral)
        #expect(session.tracer == nil, "swift-distributed-tracing's no-op tracer: nothing is made")
        _ = try await session.data(from: origin.url("/plain"))
        let request = try #require(origin.requests(to: "/plain").first)
        #expect(request.header("traceparent") == nil)
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }
}
