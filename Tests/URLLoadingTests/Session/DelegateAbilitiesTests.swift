import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
import Testing
import TestSupport
@testable import URLLoading

/// A session learns which per-task methods its delegate lacks (for
/// speed: a delegate that implements none of them costs a task
/// nothing), and never skips one it implements.
@Suite struct DelegateAbilitiesTests {
    @Test("A method whose default reports itself is called once, then skipped; an implemented one is called every time")
    func learning() {
        let abilities = DelegateAbilities()
        let calls = Lock((lacking: 0, implemented: 0))
        for _ in 0..<3 {
            abilities.call(.didFinishCollectingMetrics) {
                calls.withLock { $0.lacking += 1 }
                DelegateFallback.unhandled()
            }
            abilities.call(.didCompleteWithError) { calls.withLock { $0.implemented += 1 } }
        }
        #expect(calls.withLock { $0 } == (1, 3))
        #expect(abilities.knows(.didFinishCollectingMetrics) && abilities.lacks(.didFinishCollectingMetrics))
        #expect(abilities.knows(.didCompleteWithError) && !abilities.lacks(.didCompleteWithError))
        #expect(!abilities.knows(.didCreateTask) && !abilities.lacks(.didCreateTask))
    }

    /// Implements task creation and metrics only.
    final class CreationAndMetrics: SessionDelegate, Sendable {
        let seen = Lock((created: 0, metrics: 0))
        func urlSession(_ session: Session, didCreateTask task: SessionTask) { seen.withLock { $0.created += 1 } }
        func urlSession(_ session: Session, task: SessionTask, didFinishCollecting metrics: TaskMetrics) { seen.withLock { $0.metrics += 1 } }
    }

    /// Implements nothing.
    final class Empty: SessionDataDelegate, Sendable {}

    @Test("A delegate implementing didCreateTask and metrics hears them for every task, before the task's await returns; one implementing nothing is learned to lack them")
    func sessionsLearn() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/a", response: ScriptedResponse(body: "a"))
        let delegate = CreationAndMetrics()
        let session = try SessionTests.session(delegate)
        for round in 1...3 {
            let (data, _) = try await session.data(from: origin.url("/a"))
            #expect(data == Data("a".utf8))
            #expect(delegate.seen.withLock { $0 } == (round, round), "round \(round)")
        }
        #expect(!session.delegateAbilities.lacks(.didCreateTask) && !session.delegateAbilities.lacks(.didFinishCollectingMetrics))

        let empty = try SessionTests.session(Empty())
        for _ in 1...3 {
            let (data, _) = try await empty.data(from: origin.url("/a"))
            #expect(data == Data("a".utf8))
        }
        #expect(empty.delegateAbilities.lacks(.didCreateTask) && empty.delegateAbilities.lacks(.didFinishCollectingMetrics))
        session.finishTasksAndInvalidate()
        empty.finishTasksAndInvalidate()
        try await origin.shutdown()
    }
}
