import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
import Testing
import TestSupport
@testable import URLLoading

/// The manager's adapter and retrier.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(2)))) struct RequestInterceptorTests {
    struct Token: RequestAdapter {
        let value: String
        func adapt(_ request: URLRequest) async throws -> URLRequest {
            var adapted = request
            adapted.setValue("Bearer \(value)", forHTTPHeaderField: "Authorization")
            return adapted
        }
    }

    struct Refusing: RequestAdapter {
        struct NoToken: Error {}
        func adapt(_ request: URLRequest) async throws -> URLRequest { throw NoToken() }
    }

    static let json = [HeaderField("Content-Type", "application/json")]

    @Test("The adapter changes every try; one that throws fails the call before anything is sent")
    func adapter() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/api/me") { request in ScriptedResponse(headers: Self.json, body: #"{"auth":"\#(request.header("Authorization") ?? "-")"}"#) }
        let manager = HTTPSessionManager(baseURL: origin.url("/api"), configuration: .ephemeral)
        defer { manager.invalidateSession(cancelingTasks: true) }
        manager.adapter = Token(value: "t1")
        #expect(try await manager.get("me")["auth"] == .string("Bearer t1"))
        manager.adapter = Refusing()
        let error = await #expect(throws: ManagerError.self) { try await manager.get("me") }
        #expect(error?.kind == .adaptationFailed && error?.underlying is Refusing.NoToken)
        #expect(origin.requests(to: "/api/me").count == 1)
        try await origin.shutdown()
    }

    @Test("RetryPolicy: a 503's Retry-After is waited, not less; a status that stays fails after the limit; POST is not retried")
    func retries() async throws {
        let origin = try await TestOrigin.start()
        let arrivals = Lock<[ContinuousClock.Instant]>([])
        origin.route("/api/flaky") { _ in
            let count = arrivals.withLock { arrivals in
                arrivals.append(.now)
                return arrivals.count
            }
            return count == 1
                ? ScriptedResponse(status: 503, headers: [HeaderField("Retry-After", "1")], body: "busy")
                : ScriptedResponse(headers: Self.json, body: #"{"ok":true}"#)
        }
        origin.route("/api/broken", response: ScriptedResponse(status: 500, headers: Self.json, body: #"{"error":"down"}"#))
        let manager = HTTPSessionManager(baseURL: origin.url("/api"), configuration: .ephemeral)
        defer { manager.invalidateSession(cancelingTasks: true) }
        manager.retrier = RetryPolicy(limit: 2, baseDelay: 0.05, maximumDelay: 5)
        #expect(try await manager.get("flaky")["ok"] == .bool(true))
        let times = arrivals.withLock { $0 }
        #expect(times.count == 2)
        if times.count == 2 { #expect(times[1] - times[0] >= .seconds(1), "retried after \(times[1] - times[0])") }
        let broken = await #expect(throws: ManagerError.self) { try await manager.get("broken") }
        #expect(broken?.kind == .unacceptableStatusCode(500) && broken?.data == Data(#"{"error":"down"}"#.utf8))
        #expect(origin.requests(to: "/api/broken").count == 3, "the first try and two retries")
        _ = await #expect(throws: ManagerError.self) { try await manager.send(.post, "broken", parameters: ["a": 1], as: JSONValue.self) }
        #expect(origin.requests(to: "/api/broken").count == 4, "POST is not idempotent: one try")
        try await origin.shutdown()
    }

    @Test("RetryPolicy's delays: doubling from the base, a server's Retry-After within the maximum, nonsense ignored; errors it cannot cure are not retried")
    func delays() async throws {
        let policy = RetryPolicy(limit: 3, baseDelay: 0.5, maximumDelay: 30)
        let request = URLRequest(url: URL(string: "http://example.test/")!)
        func error(_ status: Int, retryAfter: String? = nil) -> ManagerError {
            let response = HTTPURLResponse(url: request.url!, statusCode: status, httpVersion: "HTTP/1.1", headerFields: retryAfter.map { ["Retry-After": $0] } ?? [:])
            return ManagerError(.unacceptableStatusCode(status), message: "", response: response)
        }
        #expect(await policy.retry(request, failedWith: error(503), attempt: 1) == .retry(after: 0.5))
        #expect(await policy.retry(request, failedWith: error(503), attempt: 3) == .retry(after: 2))
        #expect(await policy.retry(request, failedWith: error(503), attempt: 4) == .doNotRetry, "past the limit")
        #expect(await policy.retry(request, failedWith: error(429, retryAfter: "7"), attempt: 1) == .retry(after: 7))
        #expect(await policy.retry(request, failedWith: error(429, retryAfter: "99999999"), attempt: 1) == .retry(after: 0.5), "absurd: the backoff")
        #expect(await policy.retry(request, failedWith: error(503, retryAfter: "3600"), attempt: 1) == .retry(after: 30), "within the maximum")
        #expect(await policy.retry(request, failedWith: error(404), attempt: 1) == .doNotRetry)
        let refused = ManagerError(.transport, message: "", underlying: URLError(.badURL))
        #expect(await policy.retry(request, failedWith: refused, attempt: 1) == .doNotRetry)
        let lost = ManagerError(.transport, message: "", underlying: URLError(.networkConnectionLost))
        #expect(await policy.retry(request, failedWith: lost, attempt: 2) == .retry(after: 1))
    }
}
