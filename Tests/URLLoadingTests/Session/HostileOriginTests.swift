import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
import Testing
import TestSupport
@testable import URLLoading

/// What a hostile origin or a careless caller can throw at a session: every
/// number checked before arithmetic, every loop bounded, nothing injected
/// into the request, nothing trapped on.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(1)))) struct HostileOriginTests {
    @Test("Timeouts of .infinity, NaN, below zero or huge are clamped, never trapped on")
    func extremeTimeouts() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { try await origin.shutdown() } }
        origin.route("/x", response: ScriptedResponse(body: "ok"))
        for value in [Double.infinity, -.infinity, .nan, -1, 0, 1e300, Double(Int64.max)] {
            let configuration = SessionConfiguration.ephemeral
            configuration.timeoutIntervalForResource = value
            configuration.timeoutIntervalForRequest = value
            let session = Session(configuration: configuration)
            var request = URLRequest(url: origin.url("/x"))
            request.timeoutInterval = value
            let (data, _) = try await session.data(for: request)
            #expect(data == Data("ok".utf8), "timeout \(value)")
            session.finishTasksAndInvalidate()
        }
    }

    @Test("CR, LF or NUL in a header name or value or in the method fails the task before anything is sent")
    func injectionRefused() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { try await origin.shutdown() } }
        origin.route("/x", response: ScriptedResponse(body: "ok"))
        let session = Session(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        let cases: [(String, @Sendable (inout URLRequest) -> Void)] = [
            ("CR LF in a name", { $0.setValue("v", forHTTPHeaderField: "X-A\r\nX-Injected") }),
            ("a colon in a name", { $0.setValue("v", forHTTPHeaderField: "X-A: b") }),
            ("CR LF in the method", { $0.httpMethod = "GET / HTTP/1.1\r\nX-Injected: 1\r\n\r\nGET" }),
            ("a space in the method", { $0.httpMethod = "GE T" }),
        ]
        for (name, change) in cases {
            var request = URLRequest(url: origin.url("/x"))
            change(&request)
            let error = await #expect(throws: URLError.self, "\(name)") { _ = try await session.data(for: request) }
            #expect(error?.code == .badURL, "\(name): \(String(describing: error))")
            #expect(error?.localizedDescription.contains("CR") == true || error?.localizedDescription.contains("token") == true, "\(name): \(String(describing: error))")
        }
        #expect(origin.requests.isEmpty)
        // Foundation's URLRequest drops such values itself; the check holds for every other way in.
        for value in ["a\r\nX-Injected: 1", "a\nb", "a\rb", "a\u{0}b"] {
            let problem = FieldSyntax.problem(method: "GET", fields: [("X-Test", value)])
            #expect(problem?.contains("CR, LF or NUL") == true)
            #expect(problem?.contains("X-Injected") != true)
        }
        #expect(FieldSyntax.problem(method: "PATCH", fields: [("X-Test", "a\tb c")]) == nil)
    }

    @Test("Content-Length, Host, Transfer-Encoding and Connection set by the caller are the session's to send")
    func reservedFieldsAreTheSessions() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { try await origin.shutdown() } }
        origin.route("/upload") { request in ScriptedResponse(body: "\(request.bodyLength)") }
        let session = Session(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        var request = URLRequest(url: origin.url("/upload"))
        request.httpMethod = "POST"
        request.httpBody = Data(repeating: 7, count: 10)
        request.setValue("3", forHTTPHeaderField: "Content-Length")
        request.setValue("chunked", forHTTPHeaderField: "Transfer-Encoding")
        request.setValue("evil.example", forHTTPHeaderField: "Host")
        request.setValue("close, X-Hop", forHTTPHeaderField: "Connection")
        let (data, _) = try await session.data(for: request)
        #expect(String(decoding: data, as: UTF8.self) == "10")
        let received = try #require(origin.requests(to: "/upload").first)
        #expect(received.headerValues("Content-Length") == ["10"])
        #expect(received.header("Transfer-Encoding") == nil)
        #expect(received.headerValues("Host") == ["127.0.0.1:\(origin.port)"])
        #expect(received.header("Connection") == nil)
    }

    @Test("A resumed download answered 206 with Content-Length 2^63-1 ends with an error, not a trap")
    func hugeLengthOnResume() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { try await origin.shutdown() } }
        let etag = ResumeDataTests.Tag("\"v1\"")
        ResumeDataTests.route(origin, etag: etag, cut: true)
        let session = Session(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        let error = await #expect(throws: URLError.self) { _ = try await session.download(for: URLRequest(url: origin.url("/big"))) }
        let resumeData = try #require(error?.downloadTaskResumeData)
        origin.route("/big") { _ in
            var response = ScriptedResponse(
                status: 206,
                headers: [
                    HeaderField("ETag", "\"v1\""), HeaderField("Content-Range", "bytes 100000-9223372036854775806/9223372036854775807"),
                    HeaderField("Content-Length", "9223372036854775807"),
                ], parts: [.bytes(Array(repeating: 1, count: 1000)), .closeConnection])
            response.framing = .none
            return response
        }
        let delegate = RecordingDelegate()
        let other = Session(configuration: .ephemeral, delegate: delegate)
        defer { other.finishTasksAndInvalidate() }
        other.downloadTask(withResumeData: resumeData).resume()
        await delegate.waitForCompletion()
        #expect(delegate.events.last?.hasPrefix("complete ") == true, "\(delegate.events)")
    }

    /// Answers every request 401 with a fresh Digest nonce marked stale.
    static func endlessStaleNonces(_ origin: TestOrigin) {
        let counter = Lock(0)
        origin.route("/stale") { _ in
            let n = counter.withLock { value -> Int in
                value += 1
                return value
            }
            return ScriptedResponse(
                status: 401,
                headers: [
                    HeaderField(
                        "WWW-Authenticate", "Digest realm=\"r\", qop=\"auth\", algorithm=SHA-256, nonce=\"n\(n)\", stale=true")
                ], body: "")
        }
    }

    @Test("A server answering every request with a new stale nonce: the nonce is renewed twice in a row, then the credential counts as failed and the 401 is the response")
    func endlessChallengesBounded() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { try await origin.shutdown() } }
        Self.endlessStaleNonces(origin)
        let session = Session(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        var components = URLComponents(url: origin.url("/stale"), resolvingAgainstBaseURL: false)
        components?.user = "u"
        components?.password = "p"
        let url = try #require(components?.url)
        let (_, response) = try await session.data(from: url)
        #expect((response as? HTTPURLResponse)?.statusCode == 401)
        // Without credentials, with them, then two stale nonces answered.
        let count = origin.requests(to: "/stale").count
        #expect(count == 4, "\(count) requests")
    }

    @Test("Redirects and challenges of one task count against one bound")
    func hopsShareOneBound() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { try await origin.shutdown() } }
        // Each hop redirects to the stale-nonce resource's next name, which challenges once.
        let counter = Lock(0)
        origin.route("/mixed") { request in
            let n = counter.withLock { value -> Int in
                value += 1
                return value
            }
            if request.header("Authorization") == nil {
                return ScriptedResponse(
                    status: 401,
                    headers: [
                        HeaderField(
                            "WWW-Authenticate", "Digest realm=\"r\", qop=\"auth\", algorithm=SHA-256, nonce=\"n\(n)\"")
                    ], body: "")
            }
            return ScriptedResponse(status: 302, headers: [HeaderField("Location", "/mixed?\(n)")], body: "")
        }
        let configuration = SessionConfiguration.ephemeral
        configuration.httpMaximumRedirects = 1000
        let session = Session(configuration: configuration)
        defer { session.finishTasksAndInvalidate() }
        var components = URLComponents(url: origin.url("/mixed"), resolvingAgainstBaseURL: false)
        components?.user = "u"
        components?.password = "p"
        let url = try #require(components?.url)
        let error = await #expect(throws: URLError.self) { _ = try await session.data(from: url) }
        #expect(error != nil)
        #expect(origin.requests(to: "/mixed").count <= SessionTask.maximumHops + 1)
    }

    @Test("Vary: a response naming more than 64 fields is not stored; 64 are; 8,000 names do not stall")
    func manyVaryNames() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { try await origin.shutdown() } }
        for count in [64, 65, 8_000] {
            let names = (0..<count).map { "X-V\($0)" }.joined(separator: ", ")
            origin.route(
                "/vary\(count)",
                response: ScriptedResponse(
                    headers: [HeaderField("Cache-Control", "max-age=600"), HeaderField("Vary", names)], body: "v"))
        }
        let session = Session(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        for count in [64, 65, 8_000] {
            for _ in 0..<2 { _ = try await session.data(from: origin.url("/vary\(count)")) }
        }
        #expect(origin.requests(to: "/vary64").count == 1)
        #expect(origin.requests(to: "/vary65").count == 2)
        #expect(origin.requests(to: "/vary8000").count == 2)
        var headers = HeaderFields()
        headers.append("Vary", (0..<65).map { "X-V\($0)" }.joined(separator: ","))
        headers.append("Cache-Control", "max-age=1")
        #expect(!CachePolicy.storability(method: "GET", requestHeaders: [], status: 200, responseHeaders: headers).allowed)
    }

    /// `/me` answers who the Basic credentials say, privately cacheable; with
    /// `vary`, it also says Vary: Authorization.
    static func whoAmI(_ origin: TestOrigin, path: String, vary: Bool) {
        origin.route(path) { request in
            guard let field = request.header("Authorization"), field.hasPrefix("Basic "),
                let decoded = Data(base64Encoded: String(field.dropFirst(6))), let pair = String(data: decoded, encoding: .utf8),
                let user = pair.split(separator: ":").first
            else {
                return ScriptedResponse(status: 401, headers: [HeaderField("WWW-Authenticate", "Basic realm=\"me\"")], body: "")
            }
            var headers = [HeaderField("Cache-Control", "private, max-age=600")]
            if vary { headers.append(HeaderField("Vary", "Authorization")) }
            return ScriptedResponse(headers: headers, body: "user=\(user)")
        }
    }

    static func url(_ origin: TestOrigin, _ path: String, user: String, password: String) throws -> URL {
        var components = URLComponents(url: origin.url(path), resolvingAgainstBaseURL: false)
        components?.user = user
        components?.password = password
        return try #require(components?.url)
    }

    @Test("Credentials a request carries separate cache entries (with and without Vary: Authorization); remembered ones never replace them")
    func cacheSeparatesUsers() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { try await origin.shutdown() } }
        Self.whoAmI(origin, path: "/me", vary: true)
        Self.whoAmI(origin, path: "/me-novary", vary: false)
        let session = Session(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        for path in ["/me", "/me-novary"] {
            for (user, password) in [("alice", "a"), ("bob", "b"), ("alice", "a"), ("bob", "b")] {
                let (data, _) = try await session.data(from: try Self.url(origin, path, user: user, password: password))
                #expect(String(decoding: data, as: UTF8.self) == "user=\(user)", "\(path) as \(user)")
            }
            // Each user's first request went to the origin, the second came from the cache.
            #expect(origin.requests(to: path).filter { $0.header("Authorization") != nil }.count == 2, "\(path)")
        }
        // An explicit Authorization field separates entries too.
        for (user, password) in [("carol", "c"), ("dave", "d")] {
            var request = URLRequest(url: origin.url("/me-novary"))
            request.setValue("Basic " + Data("\(user):\(password)".utf8).base64EncodedString(), forHTTPHeaderField: "Authorization")
            let (data, _) = try await session.data(for: request)
            #expect(String(decoding: data, as: UTF8.self) == "user=\(user)")
        }
        // Nothing of a password reaches the cache: the stored request keeps a fingerprint.
        let alice = URLRequest(url: try Self.url(origin, "/me", user: "alice", password: "a"))
        let key = try #require(CachePolicy.primaryKey(origin.url("/me")))
        let stored = try #require(
            session.urlCache?.lookup(
                key: key,
                requestHeaders: CacheView.requestHeaders(
                    alice, cookie: nil, credentials: CacheView.credentialIdentity(alice, sent: nil))))
        #expect(stored.body == Data("user=alice".utf8))
        #expect(!"\(stored.entry.requestHeaders.map { $0.value })".contains("YWxpY2U6YQ"))
        #expect(!"\(stored.entry.requestHeaders.map { $0.value })".contains("alice:a"))
    }

    final class AnswersCarol: SessionDelegate {
        func urlSession(_ session: Session, task: SessionTask, didReceive challenge: AuthenticationChallenge) async -> ChallengeAnswer {
            use(Credential(user: "carol", password: "c", persistence: .forSession))
        }
    }

    @Test("A credential the session remembers for an origin never replaces the user info a request carries")
    func rememberedCredentialDoesNotReplaceUserInfo() async throws {
        let origin = try await TestOrigin.start()
        defer { Task { try await origin.shutdown() } }
        Self.whoAmI(origin, path: "/who", vary: false)
        let session = Session(configuration: .ephemeral, delegate: AnswersCarol())
        defer { session.finishTasksAndInvalidate() }
        let (first, _) = try await session.data(from: origin.url("/who?1"))
        #expect(String(decoding: first, as: UTF8.self) == "user=carol")
        let (remembered, _) = try await session.data(from: origin.url("/who?2"))
        #expect(String(decoding: remembered, as: UTF8.self) == "user=carol")
        #expect(origin.requests(to: "/who").count == 3, "the second request carries carol's credentials at once")
        let (bob, _) = try await session.data(from: try Self.url(origin, "/who?3", user: "bob", password: "b"))
        #expect(String(decoding: bob, as: UTF8.self) == "user=bob")
    }

    @Test("A 407 from inside a CONNECT tunnel is the origin's response, not a proxy challenge: proxy credentials go only to the proxy")
    func proxyCredentialsStayWithTheProxy() async throws {
        let certificates = try TestCertificates.shared()
        let origin = try await TestOrigin.start(tls: certificates.server)
        defer { Task { try await origin.shutdown() } }
        origin.route(
            "/inner",
            response: ScriptedResponse(
                status: 407, headers: [HeaderField("Proxy-Authenticate", "Basic realm=\"test proxy\"")], body: "origin says 407"))
        let proxy = try TestProxy(user: "proxyuser", password: "proxypass", openTunnels: true)
        defer { proxy.shutdown() }
        let configuration = SessionConfiguration.ephemeral
        configuration.proxyURL = proxy.url
        configuration.trustRootsFile = certificates.caCertificatePath
        let session = Session(configuration: configuration)
        defer { session.finishTasksAndInvalidate() }
        let space = ProtectionSpace(
            host: "127.0.0.1", port: proxy.port, protocol: "http", realm: "test proxy",
            authenticationMethod: .httpBasic, isProxy: true)
        session.credentialStore?.setDefaultCredential(Credential(user: "proxyuser", password: "proxypass", persistence: .forSession), for: space)
        let (data, response) = try await session.data(from: origin.url("/inner"))
        #expect((response as? HTTPURLResponse)?.statusCode == 407)
        #expect(data == Data("origin says 407".utf8))
        #expect(origin.requests(to: "/inner").count == 1)
        #expect(origin.requests.allSatisfy { $0.header("Proxy-Authorization") == nil && $0.overTLS })
        #expect(proxy.received.first?.requestLine.hasPrefix("CONNECT ") == true)
    }
}
