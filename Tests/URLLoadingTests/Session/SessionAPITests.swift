import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
import TestSupport
@testable import URLLoading

/// Apple's session shapes that ported code relies on (issue 19): the
/// non-throwing initializer with a delegate queue, the shared session,
/// a session's description.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(1)))) struct SessionAPITests {
    @Test("Session.shared is one object, fetches with the default configuration, and ignores invalidation")
    func sharedSession() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/s", response: ScriptedResponse(body: "shared"))
        // In a child whose default stores live in a temporary folder.
        let folder = TemporaryDirectory()
        var environment = ProcessInfo.processInfo.environment
        environment["XDG_DATA_HOME"] = folder.path("data")
        environment["XDG_CACHE_HOME"] = folder.path("cache")
        let result = try await ChildProcess.run(ChildProcess.helper, ["shared-session", origin.url("/s").absoluteString], environment: environment)
        #expect(result.status == 0 && result.standardOutput.contains("shared shared"), "\(result.standardError)")
        try await origin.shutdown()
    }

    @Test("init(configuration:delegate:delegateQueue:) takes Apple's arguments; sessionDescription is kept")
    func applesInitializer() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/d", response: ScriptedResponse(body: "d"))
        let session = Session(configuration: .ephemeral, delegate: nil, delegateQueue: OperationQueue())
        #expect(session.startupErrors.isEmpty)
        #expect(session.sessionDescription == nil)
        session.sessionDescription = "uploads"
        #expect(session.sessionDescription == "uploads")
        #expect(try await session.data(from: origin.url("/d")).0 == Data("d".utf8))
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("Errors are URLErrors with Apple's codes and user info, caught as Apple's code catches them, with no secret in them")
    func errorsAreURLErrors() async throws {
        let session = Session(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        let url = try #require(URL(string: "http://ann:s3cret@127.0.0.1:1/x?token=abc123"))
        var caught: URLError?
        do {
            _ = try await session.data(from: url)
        } catch let error as URLError where error.code == .cannotConnectToHost {
            caught = error
        }
        let error = try #require(caught)
        #expect(error.failingURL?.host == "127.0.0.1")
        #expect(error.userInfo[NSURLErrorFailingURLErrorKey] as? URL == error.failingURL)
        #expect(error.sessionError?.code == .cannotConnectToHost)
        #expect(error.downloadTaskResumeData == nil)
        for text in [error.localizedDescription, "\(error)", error.failingURL?.absoluteString ?? ""] {
            #expect(!text.contains("s3cret") && !text.contains("abc123"), "\(text)")
        }
    }
}
