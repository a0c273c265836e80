// Written with Apple's URL Loading System names: a data delegate with
// completion-handler methods, a Basic challenge answered through
// completionHandler(.useCredential, URLCredential(...)), metrics.
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization
import Testing

final class DataCollector: NSObject, URLSessionDataDelegate {
    struct Seen {
        var status = 0
        var body = Data()
        var challenges: [String] = []
        var error: (any Error)?
        var metrics: URLSessionTaskMetrics?
    }

    let seen = Mutex(Seen())
    private let finished: @Sendable () -> Void

    init(finished: @escaping @Sendable () -> Void) {
        self.finished = finished
    }

    func urlSession(
        _ session: URLSession, task: URLSessionTask, didReceive challenge: URLAuthenticationChallenge,
        completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
    ) {
        let method = challenge.protectionSpace.authenticationMethod
        seen.withLock { $0.challenges.append(challenge.protectionSpace.realm ?? "") }
        if method == NSURLAuthenticationMethodHTTPBasic, challenge.previousFailureCount == 0 {
            completionHandler(.useCredential, URLCredential(user: "ann", password: "pw", persistence: .forSession))
        } else {
            completionHandler(.cancelAuthenticationChallenge, nil)
        }
    }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
    ) {
        seen.withLock { $0.status = (response as? HTTPURLResponse)?.statusCode ?? 0 }
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        seen.withLock { $0.body.append(data) }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didFinishCollecting metrics: URLSessionTaskMetrics) {
        seen.withLock { $0.metrics = metrics }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        seen.withLock { $0.error = error }
        finished()
    }
}

@Test("Ported: a data delegate with completion handlers answers a Basic challenge and collects the body")
func portedDataDelegate() async throws {
    let origin = try await TestOrigin.start()
    origin.route("/private", Routes.basicAuth(realm: "staff", user: "ann", password: "pw", then: ScriptedResponse(body: "for staff only")))
    let (done, signal) = AsyncStream<Void>.makeStream()
    let delegate = DataCollector { signal.yield() }
    let configuration = URLSessionConfiguration.ephemeral
    configuration.timeoutIntervalForRequest = 10
    let session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
    let task = session.dataTask(with: origin.url("/private"))
    task.taskDescription = "private page"
    #expect(task.state == .suspended)
    task.resume()
    for await _ in done { break }
    let seen = delegate.seen.withLock { $0 }
    #expect(seen.status == 200 && seen.error == nil)
    #expect(String(decoding: seen.body, as: UTF8.self) == "for staff only")
    #expect(seen.challenges == ["staff"])
    #expect(task.state == .completed && task.taskDescription == "private page")
    #expect(seen.metrics?.transactionMetrics.count == 2, "the 401 and the answer")
    session.finishTasksAndInvalidate()
    try await origin.shutdown()
}
