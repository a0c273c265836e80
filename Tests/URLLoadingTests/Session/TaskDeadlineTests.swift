import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
import TestSupport
@testable import URLLoading

/// One deadline per task: `timeoutIntervalForResource` bounds the
/// whole task, every redirect and challenge round included, as Apple's does.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(1)))) struct TaskDeadlineTests {
    /// Answers every challenge with a new user, so no answer is a repeated failure.
    final class AnswersEveryChallenge: SessionTaskDelegate {
        func urlSession(_ session: Session, task: SessionTask, didReceive challenge: AuthenticationChallenge) async -> (
            Session.AuthChallengeDisposition, Credential?
        ) {
            (.useCredential, Credential(user: "user\(challenge.previousFailureCount)", password: "pw", persistence: .none))
        }
    }

    static func session(resourceTimeout: TimeInterval, delegate: (any SessionDelegate)? = nil) -> Session {
        let configuration = SessionConfiguration.ephemeral
        configuration.timeoutIntervalForResource = resourceTimeout
        return Session(configuration: configuration, delegate: delegate, delegateQueue: nil)
    }

    @Test("A 2 s resource timeout and four redirects of 0.8 s each: timedOut with the failing URL, the chain never reaches its end")
    func redirectsShareTheDeadline() async throws {
        let origin = try await TestOrigin.start()
        for step in 0..<4 {
            let next = step == 3 ? "/final" : "/r/\(step + 1)"
            origin.route("/r/\(step)", response: ScriptedResponse(status: 302, headers: [HeaderField("Location", next)], parts: [], delayBeforeHead: .milliseconds(800)))
        }
        origin.route("/final", response: ScriptedResponse(body: "the end"))
        let session = Self.session(resourceTimeout: 2)
        defer { session.finishTasksAndInvalidate() }
        let error = await #expect(throws: URLError.self) { _ = try await session.data(from: origin.url("/r/0")) }
        #expect(error?.code == .timedOut, "\(String(describing: error))")
        #expect(error?.failingURL?.path.hasPrefix("/r/") == true, "\(String(describing: error?.failingURL))")
        #expect(origin.requests(to: "/final").isEmpty, "each hop had the whole limit again")
        try await origin.shutdown()
    }

    @Test("A 2 s resource timeout and a server that challenges every answer after 0.8 s: timedOut, not the 401 after 3.2 s")
    func challengesShareTheDeadline() async throws {
        let origin = try await TestOrigin.start()
        origin.route(
            "/auth",
            response: ScriptedResponse(
                status: 401, headers: [HeaderField("WWW-Authenticate", "Basic realm=\"r\"")], parts: [.bytes(Array("no".utf8))],
                delayBeforeHead: .milliseconds(800)))
        let session = Self.session(resourceTimeout: 2, delegate: AnswersEveryChallenge())
        defer { session.finishTasksAndInvalidate() }
        let error = await #expect(throws: URLError.self) { _ = try await session.data(from: origin.url("/auth")) }
        #expect(error?.code == .timedOut, "\(String(describing: error))")
        #expect(origin.requests(to: "/auth").count <= 3)
        try await origin.shutdown()
    }
}
