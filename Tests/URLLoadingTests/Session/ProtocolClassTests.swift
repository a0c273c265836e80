import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
import Testing
import TestSupport
@testable import URLLoading

/// A Foundation `URLProtocol` subclass as test libraries write them: it
/// takes every `*.stub.test` URL and plays what a test scripted for it.
/// Scripts and records are per URL, so tests running at once never share one.
final class StubProtocol: URLProtocol {
    typealias Script = @Sendable (StubProtocol) -> Void

    private static let scripts = Lock<[String: Script]>([:])
    private static let seen = Lock<[String: [URLRequest]]>([:])
    private static let cachedSeen = Lock<[String: Int]>([:])
    private static let stops = Lock<[String: Int]>([:])

    static func script(_ url: String, _ script: @escaping Script) { scripts.withLock { $0[url] = script } }
    static func requests(_ url: String) -> [URLRequest] { seen.withLock { $0[url] ?? [] } }
    static func cachedResponsesSeen(_ url: String) -> Int { cachedSeen.withLock { $0[url] ?? 0 } }
    static func stopCount(_ url: String) -> Int { stops.withLock { $0[url] ?? 0 } }

    override class func canInit(with request: URLRequest) -> Bool {
        request.url?.host?.hasSuffix(".stub.test") == true
    }

    override class func canonicalRequest(for request: URLRequest) -> URLRequest {
        var canonical = request
        canonical.setValue("yes", forHTTPHeaderField: "X-Canonical")
        return canonical
    }

    var key: String { request.url?.absoluteString ?? "" }

    override func startLoading() {
        let key = self.key
        Self.seen.withLock { $0[key, default: []].append(request) }
        if cachedResponse != nil { Self.cachedSeen.withLock { $0[key, default: 0] += 1 } }
        guard let script = Self.scripts.withLock({ $0[key] }) else {
            client?.urlProtocol(self, didFailWithError: URLError(.unsupportedURL))
            return
        }
        script(self)
    }

    override func stopLoading() {
        let key = self.key
        Self.stops.withLock { $0[key, default: 0] += 1 }
    }

    /// Answers with a status, fields and a body in `chunks`.
    func respond(
        _ status: Int = 200, _ fields: [String: String] = [:], chunks: [String], policy: URLCache.StoragePolicy = .notAllowed, finish: Bool = true
    ) {
        guard let url = request.url, let response = HTTPURLResponse(url: url, statusCode: status, httpVersion: "HTTP/1.1", headerFields: fields) else { return }
        client?.urlProtocol(self, didReceive: response, cacheStoragePolicy: policy)
        for chunk in chunks { client?.urlProtocol(self, didLoad: Data(chunk.utf8)) }
        if finish { client?.urlProtocolDidFinishLoading(self) }
    }
}

/// A class that declines every request, before `StubProtocol` in the list.
final class DecliningProtocol: URLProtocol {
    override class func canInit(with request: URLRequest) -> Bool { false }
    override func startLoading() {}
    override func stopLoading() {}
}

/// Answers a protocol instance's challenge as the instance's sender: a
/// credential it is given makes the instance answer with the user's name.
final class StubChallengeSender: NSObject, URLAuthenticationChallengeSender, @unchecked Sendable {
    // Sendable: `answers` is behind its lock; the instance is only used to answer once.
    let instance: StubProtocol
    let answers = Lock<[String]>([])

    init(_ instance: StubProtocol) { self.instance = instance }

    func use(_ credential: URLCredential, for challenge: URLAuthenticationChallenge) {
        answers.withLock { $0.append("use") }
        instance.respond(chunks: ["user=\(credential.user ?? "-")"])
    }
    func continueWithoutCredential(for challenge: URLAuthenticationChallenge) {
        answers.withLock { $0.append("without") }
        instance.respond(401, chunks: [])
    }
    func cancel(_ challenge: URLAuthenticationChallenge) {
        answers.withLock { $0.append("cancel") }
        instance.client?.urlProtocol(instance, didFailWithError: URLError(.userCancelledAuthentication))
    }
    func performDefaultHandling(for challenge: URLAuthenticationChallenge) { continueWithoutCredential(for: challenge) }
    func rejectProtectionSpaceAndContinue(with challenge: URLAuthenticationChallenge) { continueWithoutCredential(for: challenge) }
}

@Suite("URLProtocol classes load requests as Apple's session runs them")
struct ProtocolClassTests {
    static func session(_ delegate: (any SessionDelegate)? = nil, configure: (inout SessionConfiguration) -> Void = { _ in }) -> Session {
        var configuration = SessionConfiguration.ephemeral
        configuration.protocolClasses = [DecliningProtocol.self, NSString.self, StubProtocol.self]
        configure(&configuration)
        return Session(configuration: configuration, delegate: delegate)
    }

    @Test("The first class that takes a request loads it from its canonical request; the response, data and end reach the delegate; other requests go to the network")
    func loadsThroughTheClass() async throws {
        let url = "https://serve.stub.test/hello"
        StubProtocol.script(url) { $0.respond(200, ["Content-Type": "text/plain", "X-Stub": "1"], chunks: ["hello ", "world"]) }
        let delegate = RecordingDelegate()
        let session = Self.session(delegate)
        #expect(SessionConfiguration.ephemeral.protocolClasses?.isEmpty == true)
        #expect(session.configuration.protocolClasses?.count == 2)
        let task = session.dataTask(with: try #require(URL(string: url)))
        task.resume()
        await delegate.waitForCompletion()
        #expect(delegate.data == Data("hello world".utf8))
        #expect(delegate.events.contains("response 200"))
        let response = try #require(task.response as? HTTPURLResponse)
        #expect(response.value(forHTTPHeaderField: "X-Stub") == "1")
        #expect(task.currentRequest?.value(forHTTPHeaderField: "X-Canonical") == "yes")
        #expect(task.error == nil)
        #expect(StubProtocol.requests(url).count == 1)
        #expect(StubProtocol.stopCount(url) == 1)

        let origin = try await TestOrigin.start()
        origin.route("/net", response: ScriptedResponse(body: "from the network"))
        let (data, _) = try await session.data(from: origin.url("/net"))
        #expect(data == Data("from the network".utf8))
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("A custom scheme's plain URLResponse arrives as a 200 with its media type and length")
    func customScheme() async throws {
        let url = "notes://scheme.stub.test/today"
        StubProtocol.script(url) { instance in
            guard let url = instance.request.url else { return }
            let response = URLResponse(url: url, mimeType: "text/plain", expectedContentLength: 4, textEncodingName: "utf-8")
            instance.client?.urlProtocol(instance, didReceive: response, cacheStoragePolicy: .notAllowed)
            instance.client?.urlProtocol(instance, didLoad: Data("milk".utf8))
            instance.client?.urlProtocolDidFinishLoading(instance)
        }
        let session = Self.session()
        let (data, response) = try await session.data(from: try #require(URL(string: url)))
        #expect(data == Data("milk".utf8))
        #expect(response.mimeType == "text/plain")
        #expect(response.textEncodingName == "utf-8")
        #expect(response.expectedContentLength == 4)
        session.finishTasksAndInvalidate()
    }

    @Test("A redirect the class reports is followed as a server's: the delegate is asked, the new request goes to the class")
    func redirect() async throws {
        let (old, new) = ("https://redirect.stub.test/old", "https://redirect.stub.test/new")
        StubProtocol.script(old) { instance in
            guard let target = URL(string: new), let url = instance.request.url,
                let response = HTTPURLResponse(url: url, statusCode: 302, httpVersion: "HTTP/1.1", headerFields: [:])
            else { return }
            instance.client?.urlProtocol(instance, wasRedirectedTo: URLRequest(url: target), redirectResponse: response)
        }
        StubProtocol.script(new) { $0.respond(chunks: ["moved here"]) }
        let delegate = RecordingDelegate()
        let session = Self.session(delegate)
        let task = session.dataTask(with: try #require(URL(string: old)))
        task.resume()
        await delegate.waitForCompletion()
        #expect(delegate.events.contains("redirect 302"))
        #expect(delegate.data == Data("moved here".utf8))
        #expect(task.currentRequest?.url?.absoluteString == new)
        #expect(StubProtocol.requests(new).count == 1)
        session.finishTasksAndInvalidate()
    }

    @Test("A class's failure is the task's error with its URLError code; data before a response is a bad response; a second response is ignored")
    func failures() async throws {
        let offline = "https://fail.stub.test/offline"
        StubProtocol.script(offline) { $0.client?.urlProtocol($0, didFailWithError: URLError(.notConnectedToInternet)) }
        let early = "https://fail.stub.test/early"
        StubProtocol.script(early) { instance in
            instance.client?.urlProtocol(instance, didLoad: Data("x".utf8))
            instance.client?.urlProtocolDidFinishLoading(instance)
        }
        let twice = "https://fail.stub.test/twice"
        StubProtocol.script(twice) { instance in
            instance.respond(200, ["X-Answer": "first"], chunks: ["one "], finish: false)
            instance.respond(500, ["X-Answer": "second"], chunks: ["two"])
        }
        let session = Self.session()
        // A second response is ignored; its data still belongs to the body.
        let (both, response) = try await session.data(from: try #require(URL(string: twice)))
        #expect(String(decoding: both, as: UTF8.self) == "one two")
        #expect((response as? HTTPURLResponse)?.value(forHTTPHeaderField: "X-Answer") == "first")
        await #expect(throws: URLError.self) { try await session.data(from: try #require(URL(string: offline))) }
        do {
            _ = try await session.data(from: try #require(URL(string: offline)))
        } catch let error as URLError {
            #expect(error.code == .notConnectedToInternet)
        }
        do {
            _ = try await session.data(from: try #require(URL(string: early)))
            Issue.record("data before a response was accepted")
        } catch let error as URLError {
            #expect(error.code == .badServerResponse)
        }
        session.finishTasksAndInvalidate()
    }

    @Test("The cache: a response the class allows is stored and handed back to the next instance, which may declare it valid; one it does not allow is not stored")
    func cacheStoragePolicy() async throws {
        let folder = TemporaryDirectory()
        let cache = try ResponseCache.open(memoryCapacity: 0, diskCapacity: 1 << 20, directory: folder.url)
        let (stored, refused) = ("https://cache.stub.test/stored", "https://cache.stub.test/refused")
        StubProtocol.script(stored) { instance in
            if let cached = instance.cachedResponse {
                instance.client?.urlProtocol(instance, cachedResponseIsValid: cached)
            } else {
                instance.respond(200, ["Cache-Control": "max-age=600"], chunks: ["kept"], policy: .allowed)
            }
        }
        StubProtocol.script(refused) { $0.respond(200, ["Cache-Control": "max-age=600"], chunks: ["not kept"], policy: .notAllowed) }
        let session = Self.session { $0.urlCache = cache }
        let storedURL = try #require(URL(string: stored))
        let (first, _) = try await session.data(from: storedURL)
        #expect(first == Data("kept".utf8))
        #expect(cache.cachedResponse(for: URLRequest(url: storedURL))?.data == Data("kept".utf8))
        let (second, _) = try await session.data(from: storedURL)
        #expect(second == Data("kept".utf8))
        #expect(StubProtocol.cachedResponsesSeen(stored) == 1)
        let refusedURL = try #require(URL(string: refused))
        _ = try await session.data(from: refusedURL)
        #expect(cache.cachedResponse(for: URLRequest(url: refusedURL)) == nil)
        session.finishTasksAndInvalidate()
    }

    @Test("A challenge from the class goes to the task's delegate; its credential goes to the challenge's sender")
    func challenge() async throws {
        final class Answering: SessionDelegate {
            let spaces = Lock<[String]>([])
            func urlSession(_ session: Session, task: SessionTask, didReceive challenge: AuthenticationChallenge) async -> (
                Session.AuthChallengeDisposition, Credential?
            ) {
                spaces.withLock { $0.append("\(challenge.protectionSpace.realm ?? "-") \(challenge.protectionSpace.authenticationMethod.appleName)") }
                return (.useCredential, Credential(user: "alice", password: "secret", persistence: .forSession))
            }
        }
        let url = "https://auth.stub.test/private"
        let senders = Lock<[StubChallengeSender]>([])
        StubProtocol.script(url) { instance in
            let sender = StubChallengeSender(instance)
            senders.withLock { $0.append(sender) }
            let space = URLProtectionSpace(
                host: "auth.stub.test", port: 443, protocol: "https", realm: "stub", authenticationMethod: NSURLAuthenticationMethodHTTPBasic)
            let challenge = URLAuthenticationChallenge(
                protectionSpace: space, proposedCredential: nil, previousFailureCount: 0, failureResponse: nil, error: nil, sender: sender)
            instance.client?.urlProtocol(instance, didReceive: challenge)
        }
        let delegate = Answering()
        let session = Self.session(delegate)
        let (data, _) = try await session.data(from: try #require(URL(string: url)))
        #expect(String(decoding: data, as: UTF8.self) == "user=alice")
        #expect(delegate.spaces.withLock { $0 } == ["stub NSURLAuthenticationMethodHTTPBasic"])
        #expect(senders.withLock { $0.first?.answers.withLock { $0 } } == ["use"])
        session.finishTasksAndInvalidate()
    }

    @Test("Cancelling a task the class has not finished calls its stopLoading once and ends the task cancelled")
    func cancel() async throws {
        let url = "https://cancel.stub.test/endless"
        StubProtocol.script(url) { $0.respond(chunks: ["first"], finish: false) }
        var script = RecordingDelegate.Script()
        script.cancelsOnData = true
        let delegate = RecordingDelegate(script)
        let session = Self.session(delegate)
        let task = session.dataTask(with: try #require(URL(string: url)))
        task.resume()
        await delegate.waitForCompletion()
        #expect((task.error as? URLError)?.code == .cancelled)
        #expect(delegate.data == Data("first".utf8))
        // The instance stops after the task ended, as Apple's does.
        #expect(await eventually { StubProtocol.stopCount(url) == 1 })
        session.finishTasksAndInvalidate()
    }

    @Test("Cookies the class sets are stored and sent to it; an upload's body and a download's file go through it")
    func cookiesUploadsDownloads() async throws {
        let (set, echo, upload, download) = (
            "https://jar.stub.test/set", "https://jar.stub.test/echo", "https://jar.stub.test/upload", "https://jar.stub.test/download"
        )
        StubProtocol.script(set) { $0.respond(200, ["Set-Cookie": "flavour=oat; Path=/"], chunks: []) }
        StubProtocol.script(echo) { $0.respond(chunks: [$0.request.value(forHTTPHeaderField: "Cookie") ?? "-"]) }
        StubProtocol.script(upload) { $0.respond(chunks: [String(decoding: $0.request.httpBody ?? Data(), as: UTF8.self)]) }
        StubProtocol.script(download) { $0.respond(chunks: ["file ", "contents"]) }
        let session = Self.session()
        _ = try await session.data(from: try #require(URL(string: set)))
        let (cookie, _) = try await session.data(from: try #require(URL(string: echo)))
        #expect(String(decoding: cookie, as: UTF8.self) == "flavour=oat")
        var request = URLRequest(url: try #require(URL(string: upload)))
        request.httpMethod = "POST"
        let (sent, _) = try await session.upload(for: request, from: Data("the body".utf8))
        #expect(String(decoding: sent, as: UTF8.self) == "the body")
        let (file, _) = try await session.download(from: try #require(URL(string: download)))
        #expect(try Data(contentsOf: file) == Data("file contents".utf8))
        try? FileManager.default.removeItem(at: file)
        session.finishTasksAndInvalidate()
    }
}
