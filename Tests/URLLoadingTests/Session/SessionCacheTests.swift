import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
import Testing
import TestSupport
@testable import URLLoading

/// The cache through real sessions: serving, revalidating,
/// the request cache policies, invalidation and Cache-Status (RFC 9211).
@Suite(.timeLimit(.minutes(Sanitizer.minutes(1)))) struct SessionCacheTests {
    static func get(
        _ session: Session, _ url: URL, policy: URLRequest.CachePolicy = .useProtocolCachePolicy,
        headers: [String: String] = [:]
    ) async throws -> (String, HTTPURLResponse) {
        var request = URLRequest(url: url, cachePolicy: policy)
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let (data, response) = try await session.data(for: request)
        return (String(decoding: data, as: UTF8.self), try #require(response as? HTTPURLResponse))
    }

    @Test("A fresh response is served from the cache, with Age and Cache-Status")
    func freshHit() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/fresh", response: ScriptedResponse(headers: [HeaderField("Cache-Control", "max-age=600")], body: "fresh body"))
        let session = Session(configuration: .ephemeral)
        let (first, firstResponse) = try await Self.get(session, origin.url("/fresh"))
        let (second, secondResponse) = try await Self.get(session, origin.url("/fresh"))
        #expect(first == "fresh body")
        #expect(second == "fresh body")
        #expect(origin.requests(to: "/fresh").count == 1)
        #expect(firstResponse.value(forHTTPHeaderField: "Cache-Status") == "URLLoading; fwd=uri-miss")
        #expect(secondResponse.value(forHTTPHeaderField: "Cache-Status") == "URLLoading; hit")
        #expect((secondResponse.value(forHTTPHeaderField: "Age").flatMap { Int($0) } ?? -1) >= 0)
        #expect(secondResponse.statusCode == 200)
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("No-store responses are not stored; non-GET responses are not stored")
    func notStored() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/nostore", response: ScriptedResponse(headers: [HeaderField("Cache-Control", "max-age=600, no-store")], body: "x"))
        let session = Session(configuration: .ephemeral)
        _ = try await Self.get(session, origin.url("/nostore"))
        _ = try await Self.get(session, origin.url("/nostore"))
        #expect(origin.requests(to: "/nostore").count == 2)
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("A stale entry is revalidated; a 304 refreshes it and its body is delivered as 200")
    func revalidation() async throws {
        let origin = try await TestOrigin.start()
        origin.route(
            "/doc",
            Routes.conditional(
                etag: "\"v1\"", body: Array("stored body".utf8),
                headers: [HeaderField("Cache-Control", "max-age=0"), HeaderField("X-Version", "1")]))
        let session = Session(configuration: .ephemeral)
        _ = try await Self.get(session, origin.url("/doc"))
        let (body, response) = try await Self.get(session, origin.url("/doc"))
        let requests = origin.requests(to: "/doc")
        #expect(requests.count == 2)
        #expect(requests.last?.header("If-None-Match") == "\"v1\"")
        #expect(body == "stored body")
        #expect(response.statusCode == 200)
        #expect(response.value(forHTTPHeaderField: "Cache-Status") == "URLLoading; fwd=stale; fwd-status=304")
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("ReturnCacheDataDontLoad fails without an entry and serves a stale one without the network")
    func dontLoad() async throws {
        let origin = try await TestOrigin.start()
        origin.route(
            "/r", response: ScriptedResponse(headers: [HeaderField("Cache-Control", "max-age=0"), HeaderField("Last-Modified", HTTPDate.format(Date().timeIntervalSince1970 - 1000))], body: "v"))
        let session = Session(configuration: .ephemeral)
        let error = await #expect(throws: URLError.self) {
            _ = try await Self.get(session, origin.url("/r"), policy: .returnCacheDataDontLoad)
        }
        #expect(error?.code == .resourceUnavailable)
        #expect(origin.requests.isEmpty)
        _ = try await Self.get(session, origin.url("/r"))
        let (body, _) = try await Self.get(session, origin.url("/r"), policy: .returnCacheDataDontLoad)
        #expect(body == "v")
        let (elseLoad, _) = try await Self.get(session, origin.url("/r"), policy: .returnCacheDataElseLoad)
        #expect(elseLoad == "v")
        #expect(origin.requests.count == 1)
        _ = try await Self.get(session, origin.url("/r"), policy: .reloadIgnoringLocalCacheData)
        #expect(origin.requests.count == 2)
        #expect(origin.requests.last?.header("If-Modified-Since") == nil)
        _ = try await Self.get(session, origin.url("/r"), policy: .reloadRevalidatingCacheData)
        #expect(origin.requests.last?.header("If-Modified-Since") != nil)
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("RFC 9111 §5.2.1.7: only-if-cached with nothing usable answers 504")
    func onlyIfCached() async throws {
        let origin = try await TestOrigin.start()
        let session = Session(configuration: .ephemeral)
        let (_, response) = try await Self.get(session, origin.url("/none"), headers: ["Cache-Control": "only-if-cached"])
        #expect(response.statusCode == 504)
        #expect(origin.requests.isEmpty)
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("RFC 9111 §4.4: a successful POST invalidates the stored GET")
    func invalidation() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/item") { request in
            request.method == "POST"
                ? ScriptedResponse(status: 204, framing: .none)
                : ScriptedResponse(headers: [HeaderField("Cache-Control", "max-age=600")], body: "item")
        }
        let session = Session(configuration: .ephemeral)
        _ = try await Self.get(session, origin.url("/item"))
        _ = try await Self.get(session, origin.url("/item"))
        #expect(origin.requests.count == 1)
        var post = URLRequest(url: origin.url("/item"))
        post.httpMethod = "POST"
        post.httpBody = Data("change".utf8)
        _ = try await session.data(for: post)
        _ = try await Self.get(session, origin.url("/item"))
        #expect(origin.requests.map(\.method) == ["GET", "POST", "GET"])
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("An ephemeral session's cache is private; a default session persists to its directory")
    func privateAndPersistent() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/p", response: ScriptedResponse(headers: [HeaderField("Cache-Control", "max-age=600")], body: "p"))
        let first = Session(configuration: .ephemeral)
        let second = Session(configuration: .ephemeral)
        _ = try await Self.get(first, origin.url("/p"))
        _ = try await Self.get(second, origin.url("/p"))
        #expect(origin.requests.count == 2)
        let directory = TemporaryDirectory()
        let configuration = SessionConfiguration.default
        // Every store in the temporary directory: nothing under the real home.
        configuration.urlCache = try ResponseCache.open(memoryCapacity: 0, diskCapacity: 1 << 20, directory: directory.url)
        configuration.httpCookieStorage = try CookieStore(directory: directory.url)
        configuration.urlCredentialStorage = CredentialStore()
        let persistent = Session(configuration: configuration)
        _ = try await Self.get(persistent, origin.url("/p"))
        let reopened = try ResponseCache.open(memoryCapacity: 0, diskCapacity: 1 << 20, directory: directory.url)
        #expect(reopened.cachedResponse(for: URLRequest(url: origin.url("/p")))?.data == Data("p".utf8))
        for session in [first, second, persistent] { session.finishTasksAndInvalidate() }
        try await origin.shutdown()
    }
}

@Suite struct ByteRangeTests {
    @Test(
        "RFC 9110 §14.1.2: single byte ranges resolve against the stored length",
        arguments: [
            ("bytes=0-1", 0..<2), ("bytes=5-", 5..<10), ("bytes=-3", 7..<10), ("bytes=8-100", 8..<10), ("bytes=-20", 0..<10),
        ])
    func ranges(field: String, expected: Range<Int>) {
        #expect(CacheExchange.byteRange(field, length: 10) == expected)
    }

    @Test("Other forms are not served from the cache", arguments: ["bytes=0-1,3-4", "items=0-1", "bytes=10-", "bytes=5-2", "bytes=-0", "junk"])
    func unsupported(field: String) {
        #expect(CacheExchange.byteRange(field, length: 10) == nil)
    }
}

@Suite(.timeLimit(.minutes(Sanitizer.minutes(1)))) struct StaleIfErrorTests {
    @Test("RFC 5861 §4: a 5xx or a lost connection within stale-if-error serves the stale entry; outside it, the failure")
    func staleIfError() async throws {
        let origin = try await TestOrigin.start()
        let lastModified = HTTPDate.format(Date().timeIntervalSince1970 - 100)
        origin.route("/a", response: ScriptedResponse(headers: [HeaderField("Cache-Control", "max-age=0, stale-if-error=600"), HeaderField("Last-Modified", lastModified)], body: "stale a"))
        origin.route("/b", response: ScriptedResponse(headers: [HeaderField("Cache-Control", "max-age=0")], body: "b"))
        let session = Session(configuration: .ephemeral)
        _ = try await SessionCacheTests.get(session, origin.url("/a"))
        _ = try await SessionCacheTests.get(session, origin.url("/b"))
        origin.route("/a", response: ScriptedResponse(status: 503, body: "down"))
        let (body, response) = try await SessionCacheTests.get(session, origin.url("/a"))
        #expect(body == "stale a")
        #expect(response.statusCode == 200)
        #expect(response.value(forHTTPHeaderField: "Cache-Status")?.contains("stale-if-error") == true)
        origin.route("/a", response: ScriptedResponse(parts: [.closeConnection], framing: .none).withRawHead([]))
        let (lost, _) = try await SessionCacheTests.get(session, origin.url("/a"))
        #expect(lost == "stale a")
        origin.route("/b", response: ScriptedResponse(status: 503, body: "down"))
        let (failed, failure) = try await SessionCacheTests.get(session, origin.url("/b"))
        #expect(failure.statusCode == 503)
        #expect(failed == "down")
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }
}

extension ScriptedResponse {
    func withRawHead(_ bytes: [UInt8]) -> ScriptedResponse {
        var copy = self
        copy.rawHead = bytes
        return copy
    }
}

@Suite(.timeLimit(.minutes(Sanitizer.minutes(1)))) struct WillCacheResponseTests {
    /// Answers willCacheResponse as scripted and records the calls' order.
    final class CachingDelegate: SessionDelegate {
        enum Answer: Sendable { case proposed, modified, none }
        let answer: Answer
        let events = Lock<[String]>([])
        let done: AsyncStream<Void>
        private let finished: AsyncStream<Void>.Continuation

        init(_ answer: Answer) {
            self.answer = answer
            (done, finished) = AsyncStream.makeStream(of: Void.self)
        }

        func urlSession(_ session: Session, dataTask: SessionTask, didReceive data: Data) {
            events.withLock { if $0.last != "data" { $0.append("data") } }
        }

        func urlSession(_ session: Session, dataTask: SessionTask, willCacheResponse proposed: CachedResponse) async -> CachedResponse? {
            events.withLock { $0.append("willCache \(proposed.data.count)") }
            switch answer {
            case .proposed: return proposed
            case .none: return nil
            case .modified:
                return CachedResponse(
                    response: proposed.response, data: Data("changed".utf8), userInfo: ["by": "delegate"], storagePolicy: proposed.storagePolicy)
            }
        }

        func urlSession(_ session: Session, task: SessionTask, didFinishCollecting metrics: TaskMetrics) {
            events.withLock { $0.append("metrics") }
        }

        func urlSession(_ session: Session, task: SessionTask, didCompleteWithError error: (any Error)?) {
            events.withLock { $0.append("complete") }
            finished.yield()
        }

        func waitForCompletion() async {
            var iterator = done.makeAsyncIterator()
            _ = await iterator.next()
        }
    }

    @Test(
        "WillCacheResponse comes after all data, before metrics; its answer is what the cache keeps",
        arguments: [
            CachingDelegate.Answer.proposed, .modified, .none,
        ])
    func willCacheResponse(answer: CachingDelegate.Answer) async throws {
        let origin = try await TestOrigin.start()
        origin.route("/c", response: ScriptedResponse(headers: [HeaderField("Cache-Control", "max-age=600")], body: "original"))
        let delegate = CachingDelegate(answer)
        let session = Session(configuration: .ephemeral, delegate: delegate)
        session.dataTask(with: URLRequest(url: origin.url("/c"))).resume()
        await delegate.waitForCompletion()
        #expect(delegate.events.withLock { $0 } == ["data", "willCache 8", "metrics", "complete"])
        let cached = session.urlCache?.cachedResponse(for: URLRequest(url: origin.url("/c")))
        switch answer {
        case .proposed: #expect(cached?.data == Data("original".utf8))
        case .modified:
            #expect(cached?.data == Data("changed".utf8))
            #expect(cached?.userInfo?["by"] as? String == "delegate")
        case .none: #expect(cached == nil)
        }
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("A response that may not be stored never reaches willCacheResponse")
    func notOffered() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/n", response: ScriptedResponse(headers: [HeaderField("Cache-Control", "no-store")], body: "x"))
        let delegate = CachingDelegate(.proposed)
        let session = Session(configuration: .ephemeral, delegate: delegate)
        session.dataTask(with: URLRequest(url: origin.url("/n"))).resume()
        await delegate.waitForCompletion()
        #expect(delegate.events.withLock { $0 } == ["data", "metrics", "complete"])
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }
}

@Suite(.timeLimit(.minutes(Sanitizer.minutes(1)))) struct StaleWhileRevalidateTests {
    @Test("RFC 5861 §3: a stale response within stale-while-revalidate is served at once and revalidated in the background")
    func staleWhileRevalidate() async throws {
        let origin = try await TestOrigin.start()
        let dated = HTTPDate.format(Date().timeIntervalSince1970 - 10)
        origin.route(
            "/swr",
            Routes.conditional(
                etag: "\"v1\"", body: Array("stale but fine".utf8),
                headers: [
                    HeaderField("Cache-Control", "max-age=5, stale-while-revalidate=600"), HeaderField("Date", dated),
                ]))
        let session = Session(configuration: .ephemeral)
        _ = try await SessionCacheTests.get(session, origin.url("/swr"))
        let (body, response) = try await SessionCacheTests.get(session, origin.url("/swr"))
        #expect(body == "stale but fine")
        #expect(response.value(forHTTPHeaderField: "Cache-Status") == "URLLoading; hit; detail=stale-while-revalidate")
        // The background revalidation reaches the origin, conditionally.
        #expect(await eventually { origin.requests(to: "/swr").count >= 2 }, "the background revalidation never reached the origin")
        #expect(origin.requests(to: "/swr")[1].header("If-None-Match") == "\"v1\"")
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }
}

@Suite(.timeLimit(.minutes(Sanitizer.minutes(1)))) struct CoalescingTests {
    @Test("Ten concurrent identical GETs make one origin request when the response is storable")
    func coalescing() async throws {
        let origin = try await TestOrigin.start()
        origin.route(
            "/one",
            response: ScriptedResponse(headers: [HeaderField("Cache-Control", "max-age=600")], body: "shared")
                .with(delayBeforeHead: .milliseconds(300)))
        origin.route(
            "/never",
            response: ScriptedResponse(headers: [HeaderField("Cache-Control", "no-store")], body: "own")
                .with(delayBeforeHead: .milliseconds(100)))
        let session = Session(configuration: .ephemeral)
        let bodies = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<10 { group.addTask { try await SessionCacheTests.get(session, origin.url("/one")).0 } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(bodies == Array(repeating: "shared", count: 10))
        #expect(origin.requests(to: "/one").count == 1)
        // Not storable: the waiting requests go to the network after all.
        let others = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<3 { group.addTask { try await SessionCacheTests.get(session, origin.url("/never")).0 } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(others == Array(repeating: "own", count: 3))
        #expect(origin.requests(to: "/never").count == 3)
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }
}

@Suite(.timeLimit(.minutes(Sanitizer.minutes(1)))) struct FivePercentThroughSessionTests {
    @Test("Through a session: a body over 5% of the memory tier goes to disk only; over 5% of both, nowhere")
    func fivePercentPerTier() async throws {
        let origin = try await TestOrigin.start()
        for (path, size) in [("/small", 1_000), ("/medium", 30_000), ("/large", 300_000)] {
            origin.route(
                path,
                response: ScriptedResponse(
                    headers: [HeaderField("Cache-Control", "max-age=600")],
                    parts: [.pattern(offset: 0, count: size)]))
        }
        let directory = TemporaryDirectory()
        // Memory 200 KB (5% = 10 KB), disk 2 MB (5% = 100 KB).
        let cache = try ResponseCache.open(memoryCapacity: 200_000, diskCapacity: 2_000_000, directory: directory.url)
        let configuration = SessionConfiguration.ephemeral
        configuration.urlCache = cache
        let session = Session(configuration: configuration)
        for path in ["/small", "/medium", "/large"] { _ = try await SessionCacheTests.get(session, origin.url(path)) }
        let memoryOnly = try ResponseCache.open(memoryCapacity: 0, diskCapacity: 2_000_000, directory: directory.url)
        #expect(memoryOnly.cachedResponse(for: URLRequest(url: origin.url("/small")))?.data.count == 1_000)
        #expect(memoryOnly.cachedResponse(for: URLRequest(url: origin.url("/medium")))?.data.count == 30_000)
        #expect(memoryOnly.cachedResponse(for: URLRequest(url: origin.url("/large"))) == nil)
        #expect(cache.currentMemoryUsage > 1_000 && cache.currentMemoryUsage < 10_000)
        // Served again: small and medium from the cache, large from the origin.
        for path in ["/small", "/medium", "/large"] { _ = try await SessionCacheTests.get(session, origin.url(path)) }
        #expect(origin.requests(to: "/small").count == 1)
        #expect(origin.requests(to: "/medium").count == 1)
        #expect(origin.requests(to: "/large").count == 2)
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("RFC 9211: Cache-Status can be turned off")
    func cacheStatusOff() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/s", response: ScriptedResponse(headers: [HeaderField("Cache-Control", "max-age=600")], body: "s"))
        let configuration = SessionConfiguration.ephemeral
        configuration.sendsCacheStatus = false
        let session = Session(configuration: configuration)
        let (_, first) = try await SessionCacheTests.get(session, origin.url("/s"))
        let (_, second) = try await SessionCacheTests.get(session, origin.url("/s"))
        #expect(first.value(forHTTPHeaderField: "Cache-Status") == nil)
        #expect(second.value(forHTTPHeaderField: "Cache-Status") == nil)
        #expect(origin.requests.count == 1)
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }
}

@Suite(.timeLimit(.minutes(Sanitizer.minutes(1)))) struct HeadUpdateTests {
    @Test("RFC 9111 §4.3.5: a HEAD response refreshes the stored GET it selects; a new Content-Length removes it")
    func headFreshens() async throws {
        let origin = try await TestOrigin.start()
        let version = Lock(1)
        origin.route("/h") { request in
            let current = version.withLock { $0 }
            return ScriptedResponse(
                headers: [
                    HeaderField("Cache-Control", "max-age=600"), HeaderField("ETag", "\"v1\""),
                    HeaderField("X-Version", "\(current)"),
                ], body: current == 3 ? "longer body" : "body")
        }
        let session = Session(configuration: .ephemeral)
        _ = try await SessionCacheTests.get(session, origin.url("/h"))
        version.withLock { $0 = 2 }
        var head = URLRequest(url: origin.url("/h"))
        head.httpMethod = "HEAD"
        _ = try await session.data(for: head)
        let (_, refreshed) = try await SessionCacheTests.get(session, origin.url("/h"))
        #expect(refreshed.value(forHTTPHeaderField: "X-Version") == "2")
        #expect(refreshed.value(forHTTPHeaderField: "Cache-Status") == "URLLoading; hit")
        version.withLock { $0 = 3 }
        _ = try await session.data(for: head)
        let (body, _) = try await SessionCacheTests.get(session, origin.url("/h"))
        #expect(body == "longer body")
        #expect(origin.requests.map(\.method) == ["GET", "HEAD", "HEAD", "GET"])
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }
}
