import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
import Testing
import TestSupport
import URLLoading

/// Code in Apple's shapes with only type names changed: a data
/// delegate declared with the task type names, answering a Digest challenge
/// through the completion handler and comparing the method with Foundation's
/// constant; priorities; a configuration changed through a `let`.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(1)))) struct PortedShapesTests {
    final class PortedDelegate: NSObject, SessionDataDelegate {
        let received = Lock<Data>(Data())
        let methods = Lock<[String]>([])
        let done = CompletionLatch()

        func urlSession(
            _ session: Session, task: SessionTask, didReceive challenge: AuthenticationChallenge,
            completionHandler: @escaping @Sendable (Session.AuthChallengeDisposition, Credential?) -> Void
        ) {
            let method = challenge.protectionSpace.authenticationMethod
            methods.withLock { $0.append(method.appleName) }
            if method == NSURLAuthenticationMethodHTTPDigest {
                completionHandler(.useCredential, Credential(user: "ann", password: "pw", persistence: .forSession))
            } else {
                completionHandler(.performDefaultHandling, nil)
            }
        }

        func urlSession(
            _ session: Session, dataTask: SessionDataTask, didReceive response: URLResponse,
            completionHandler: @escaping @Sendable (Session.ResponseDisposition) -> Void
        ) {
            completionHandler(.allow)
        }

        func urlSession(_ session: Session, dataTask: SessionDataTask, didReceive data: Data) {
            received.withLock { $0.append(data) }
        }

        func urlSession(_ session: Session, task: SessionTask, didCompleteWithError error: (any Error)?) {
            done.open()
        }
    }

    @Test("A data delegate in Apple's shapes is called, answers Digest through its completion handler, and compares methods with Foundation's constants")
    func portedDelegate() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/digest", Routes.digest(realm: "r", user: "ann", password: "pw", nonce: "n1") { _ in ScriptedResponse(body: "behind digest") })
        let configuration = SessionConfiguration.ephemeral
        // Changed through a `let`, as Apple's class allows. Generous: under the
        // sanitizers the whole suite shares two cores, and 5 s once ran out
        // before the origin's answer.
        configuration.timeoutIntervalForRequest = 30
        let delegate = PortedDelegate()
        let session = Session(configuration: configuration, delegate: delegate, delegateQueue: nil)
        let task: SessionDataTask = session.dataTask(with: origin.url("/digest"))
        task.priority = SessionTask.highPriority
        #expect(task.priority == 0.75)
        task.resume()
        await delegate.done.wait()
        #expect(delegate.received.withLock { $0 } == Data("behind digest".utf8))
        #expect(delegate.methods.withLock { $0 } == ["NSURLAuthenticationMethodHTTPDigest"])
        #expect(ProtectionSpace.AuthenticationMethod(appleName: NSURLAuthenticationMethodHTTPBasic) == .httpBasic)
        switch ProtectionSpace.AuthenticationMethod.ntlm {
        case NSURLAuthenticationMethodNTLM: break
        default: Issue.record("switch did not match Foundation's constant")
        }
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }
}
