import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
import Testing
import TestSupport
@testable import URLLoading

/// User code that blocks holds a thread of its own: on Linux, Swift's tasks
/// and Dispatch's global queue share a few threads, which libdispatch grows
/// by about one a second while they are blocked.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(4)))) struct BlockingHandlerTests {
    @Test("A hundred and twenty-eight completion handlers that block are all running within a minute, not one more a second")
    func blockingHandlersRunAtOnce() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { try await origin.shutdown() } }
        origin.route("/x", response: ScriptedResponse(body: "x"))
        let session = Session(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        let count = 128
        let release = DispatchSemaphore(value: 0)
        // How many handlers block now, and when the last of them began to.
        let entered = Lock<(count: Int, allAt: ContinuousClock.Instant?)>((0, nil))
        let returned = Lock(0)
        let started = ContinuousClock.now
        for _ in 0..<count {
            session.dataTask(with: origin.url("/x")) { data, _, _ in
                defer { returned.withLock { $0 += 1 } }
                // A task that failed never counts as entered.
                guard data == Data("x".utf8) else { return }
                entered.withLock { state in
                    state.count += 1
                    if state.count == count { state.allAt = .now }
                }
                release.wait()
            }.resume()
        }
        #expect(await eventually(within: .seconds(170)) { entered.withLock { $0.count } == count })
        for _ in 0..<count { release.signal() }
        #expect(await eventually { returned.withLock { $0 } == count })
        // On Dispatch's global threads the last would begin over two minutes
        // in (all of them blocked, one thread more a second); on threads of
        // their own, as soon as the responses are in. Not scaled under a
        // sanitizer: the bound is about that growth, not the work's speed.
        let took = try #require(entered.withLock { $0.allAt }) - started
        #expect(took < .seconds(60), "the \(count) handlers were all blocked only after \(took)")
    }
}
