import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
import Testing
import TestSupport
@testable import URLLoading

/// `httpMaximumConnectionsPerHost`: what waits for a connection of its
/// origin, and what a waiting task's cancel does.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(1)))) struct ConnectionLimitTests {
    /// Each task's outcome by its query ("1"..."6"): the status, or the error's code.
    final class Outcomes: Sendable {
        let byQuery = Lock<[String: Result<Int, URLError>]>([:])
        func record(_ query: String, _ response: URLResponse?, _ error: (any Error)?) {
            let outcome: Result<Int, URLError> =
                if let error = error as? URLError { .failure(error) } else { .success((response as? HTTPURLResponse)?.statusCode ?? -1) }
            byQuery.withLock { $0[query] = outcome }
        }
        func of(_ query: String) -> Result<Int, URLError>? { byQuery.withLock { $0[query] } }
        var count: Int { byQuery.withLock { $0.count } }
    }

    @Test(
        "Two connections per host, six requests at once: two are served, the others wait without reaching the server; a waiting one cancelled ends at once and never reaches it; the rest follow over the same two connections"
    )
    func waitingForAConnection() async throws {
        let origin = try await TestOrigin.start()
        let gate = OriginGate()
        origin.route("/held", response: ScriptedResponse(parts: [.bytes(Array("held".utf8)), .waitFor(gate), .bytes(Array(" done".utf8))]))
        let configuration = SessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.httpMaximumConnectionsPerHost = 2
        // The held requests are silent until the gate opens: on a loaded
        // machine the test can stall past the default 60 s request timeout
        // in between, and the timeout is not what this test is about.
        configuration.timeoutIntervalForRequest = 600
        let session = Session(configuration: configuration)
        let outcomes = Outcomes()
        func task(_ query: String) -> SessionTask {
            session.dataTask(with: origin.url("/held?\(query)")) { _, response, error in outcomes.record(query, response, error) }
        }
        let first = [task("1"), task("2")]
        first.forEach { $0.resume() }
        #expect(await eventually { origin.requests(to: "/held").count == 2 }, "the first two requests reached the server")
        let waiting = ["3", "4", "5", "6"].map(task)
        waiting.forEach { $0.resume() }
        waiting[1].cancel()
        #expect(await eventually { outcomes.of("4") != nil }, "the cancelled task ended while the connections were busy")
        if case .failure(let error) = outcomes.of("4") { #expect(error.code == .cancelled) } else { Issue.record("task 4 did not fail") }
        #expect(outcomes.count == 1)
        #expect(Set(origin.requests(to: "/held").map(\.query)) == ["1", "2"])
        gate.open()
        #expect(await eventually { outcomes.count == 6 }, "\(outcomes.count) of 6 tasks ended")
        for query in ["1", "2", "3", "5", "6"] {
            switch outcomes.of(query) {
            case .success(let status): #expect(status == 200)
            case .failure(let error): Issue.record("task \(query) failed: \(error.code.rawValue) \(error.localizedDescription)")
            case nil: Issue.record("task \(query) never ended")
            }
        }
        let served = origin.requests(to: "/held")
        // The order among tasks resumed together is not defined: each resume only schedules its start.
        #expect(served.count == 5)
        #expect(Set(served.map(\.query)) == ["1", "2", "3", "5", "6"])
        #expect(origin.peakConcurrentConnections <= 2)
        #expect(origin.connectionCount == 2)
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }
}
