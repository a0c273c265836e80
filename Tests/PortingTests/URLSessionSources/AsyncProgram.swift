// Written with Apple's URL Loading System names: async methods with a
// per-task delegate answering a challenge, an upload, errors caught as
// URLError.
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization
import Testing

final class TaskAuthenticator: NSObject, URLSessionTaskDelegate {
    let asked = Mutex(0)

    func urlSession(_ session: URLSession, task: URLSessionTask, didReceive challenge: URLAuthenticationChallenge) async
        -> (URLSession.AuthChallengeDisposition, URLCredential?)
    {
        asked.withLock { $0 += 1 }
        guard challenge.protectionSpace.authenticationMethod == NSURLAuthenticationMethodHTTPBasic else {
            return (.performDefaultHandling, nil)
        }
        return (.useCredential, URLCredential(user: "bob", password: "secret", persistence: .none))
    }
}

@Test("Ported: async data with a per-task delegate, an upload, and URLErrors")
func portedAsync() async throws {
    let origin = try await TestOrigin.start()
    origin.route("/hello", response: ScriptedResponse(body: "hello"))
    origin.route("/guarded", Routes.basicAuth(realm: "r", user: "bob", password: "secret", then: ScriptedResponse(body: "guarded")))
    origin.route("/upload") { request in ScriptedResponse(status: 201, body: "got \(request.body.count) bytes") }
    origin.route(
        "/slow",
        response: {
            var slow = ScriptedResponse(body: "late"); slow.delayBeforeHead = .seconds(5); return slow
        }())
    let session = URLSession(configuration: .ephemeral)

    let (data, response) = try await session.data(from: origin.url("/hello"))
    #expect(String(decoding: data, as: UTF8.self) == "hello")
    #expect((response as? HTTPURLResponse)?.statusCode == 200)

    let authenticator = TaskAuthenticator()
    let (guarded, _) = try await session.data(for: URLRequest(url: origin.url("/guarded")), delegate: authenticator)
    #expect(String(decoding: guarded, as: UTF8.self) == "guarded" && authenticator.asked.withLock { $0 } == 1)

    var request = URLRequest(url: origin.url("/upload"))
    request.httpMethod = "POST"
    let (uploaded, uploadResponse) = try await session.upload(for: request, from: Data(repeating: 7, count: 1000))
    #expect((uploadResponse as? HTTPURLResponse)?.statusCode == 201)
    #expect(String(decoding: uploaded, as: UTF8.self) == "got 1000 bytes")

    var slow = URLRequest(url: origin.url("/slow"))
    slow.timeoutInterval = 0.5
    do {
        _ = try await session.data(for: slow)
        Issue.record("a response that comes after the timeout was accepted")
    } catch let error as URLError where error.code == .timedOut {
        #expect(error.failingURL == origin.url("/slow"))
    }

    do {
        _ = try await session.data(from: URL(string: "http://127.0.0.1:1/")!)
        Issue.record("a closed port answered")
    } catch let error as URLError {
        #expect(error.code == .cannotConnectToHost)
    }
    session.invalidateAndCancel()
    try await origin.shutdown()
}
