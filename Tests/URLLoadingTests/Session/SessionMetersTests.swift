import CoreMetrics
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import MetricsTestKit
import Testing
import TestSupport
@testable import URLLoading

/// A session's counters and timers in the process's swift-metrics backend.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(1)))) struct SessionMetersTests {
    @Test("Cache-Status values become hit, revalidated or miss; a caller's own method counts as other; a failure without a response is error")
    func classification() {
        #expect(SessionMeters.cacheResult("URLLoading; hit") == "hit")
        #expect(SessionMeters.cacheResult("URLLoading; hit; detail=stale-while-revalidate") == "hit")
        #expect(SessionMeters.cacheResult("URLLoading; fwd=stale; fwd-status=304") == "revalidated")
        #expect(SessionMeters.cacheResult("URLLoading; fwd=stale", answer: 304) == "revalidated")
        #expect(SessionMeters.cacheResult("URLLoading; fwd=stale", answer: 200) == "miss")
        #expect(SessionMeters.cacheResult("URLLoading; fwd=uri-miss") == "miss")
        #expect(SessionMeters.cacheResult("URLLoading;HIT") == "hit")
        #expect(SessionMeters.cacheResult("URLLoading; \tFwd-Status=304\t") == "revalidated")
        #expect(SessionMeters.cacheResult("URLLoading; hits; fwd=stale-ish", answer: 304) == "miss")
        #expect(SessionMeters.cacheResult("") == "miss")
        #expect(SessionMeters.cacheResult(";;") == "miss")
        let metrics = TaskMetrics(transactionMetrics: [], taskInterval: DateInterval(start: Date(), duration: 0.25), redirectCount: 0)
        let custom = SessionMeters.taskEnd(method: "PURGE", status: 204, failed: false, metrics: metrics)
        #expect(custom.method == "other")
        #expect(custom.statusClass == "2xx")
        #expect(custom.nanoseconds == 250_000_000)
        #expect(SessionMeters.taskEnd(method: "post", status: nil, failed: true, metrics: metrics).statusClass == "error")
        #expect(SessionMeters.taskEnd(method: "GET", status: 9_999, failed: false, metrics: metrics).statusClass == "error")
        #expect(
            SessionMeters.taskEnd(method: nil, status: 503, failed: true, metrics: metrics)
                == SessionMeters.TaskEnd(
                    method: "GET", statusClass: "5xx", nanoseconds: 250_000_000, cacheResult: nil, bytesReceived: 0, bytesSent: 0,
                    newConnections: 0, reusedConnections: 0))
    }

    @Test("Requests by method and status class, their durations, cache hits, misses and revalidations, bytes and connections, under the session's label; no meters without a backend")
    func countedInTheBackend() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/fresh", response: ScriptedResponse(headers: [HeaderField("Cache-Control", "max-age=600")], body: "fresh"))
        origin.route("/validated") { request in
            if request.header("If-None-Match") == "\"v1\"" {
                return ScriptedResponse(status: 304, headers: [HeaderField("ETag", "\"v1\"")], framing: .none)
            }
            return ScriptedResponse(headers: [HeaderField("ETag", "\"v1\""), HeaderField("Cache-Control", "no-cache")], body: "validated")
        }
        origin.route("/missing", response: ScriptedResponse(status: 404, body: "no"))
        let backend = TestMetrics()
        let configuration = SessionConfiguration.ephemeral
        configuration.metricsLabel = "api"
        let session = withMetricsFactory(backend) { Session(configuration: configuration) }
        #expect(session.meters != nil)
        #expect(Session(configuration: .ephemeral).meters == nil, "swift-metrics' no-op backend: nothing is made")

        for path in ["/fresh", "/fresh", "/validated", "/validated", "/missing"] {
            _ = try await session.data(from: origin.url(path))
            // The second request of a path must find the first's response stored (stored after it is delivered).
            let stored = URLRequest(url: origin.url(path))
            #expect(await eventually { path == "/missing" || session.urlCache?.cachedResponse(for: stored) != nil })
        }
        var post = URLRequest(url: origin.url("/missing"))
        post.httpMethod = "POST"
        _ = try await session.upload(for: post, from: Data("body".utf8))
        let closed = try await TestOrigin.start()
        let closedURL = closed.url("/x")
        try await closed.shutdown()
        _ = try? await session.data(from: closedURL)

        let requests = SessionMeters.Label.requests
        // A task's figures are added at its end, after its caller has the response.
        #expect(await eventually { backend.counterTotal(label: requests) == 7 })
        #expect(backend.counterTotal(label: requests, dimensions: [("session", "api"), ("method", "GET"), ("status", "2xx")]) == 4)
        #expect(backend.counterTotal(label: requests, dimensions: [("method", "GET"), ("status", "4xx")]) == 1)
        #expect(backend.counterTotal(label: requests, dimensions: [("method", "POST"), ("status", "4xx")]) == 1)
        #expect(backend.counterTotal(label: requests, dimensions: [("method", "GET"), ("status", "error")]) == 1)
        #expect(backend.counterTotal(label: requests) == 7)
        let durations = backend.timers(label: SessionMeters.Label.duration).flatMap(\.values)
        #expect(durations.count == 7)
        #expect(durations.allSatisfy { $0 >= 0 })
        #expect(backend.counterTotal(label: SessionMeters.Label.cache, dimensions: [("result", "hit")]) == 1)
        #expect(backend.counterTotal(label: SessionMeters.Label.cache, dimensions: [("result", "revalidated")]) == 1)
        #expect(backend.counterTotal(label: SessionMeters.Label.cache, dimensions: [("result", "miss")]) >= 2)
        #expect(backend.counterTotal(label: SessionMeters.Label.bytesReceived) > Int64("fresh".utf8.count))
        #expect(backend.counterTotal(label: SessionMeters.Label.bytesSent) > Int64("body".utf8.count))
        let connections = SessionMeters.Label.connections
        #expect(backend.counterTotal(label: connections, dimensions: [("reused", "false")]) >= 1)
        #expect(backend.counterTotal(label: connections, dimensions: [("reused", "true")]) >= 3)
        #expect(backend.counters.allSatisfy { counter in counter.dimensions.contains { $0 == ("session", "api") } })
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }
}
