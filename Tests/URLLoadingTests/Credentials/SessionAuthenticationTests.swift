import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
import Testing
import TestSupport
@testable import URLLoading

/// Authentication through real sessions against the loopback origin:
/// routing, dispositions, default handling, the failure limit,
/// Digest nonce counting, pre-emptive credentials, cross-origin redirects
/// and what the stores keep.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(1)))) struct SessionAuthenticationTests {
    static func session(_ delegate: (any SessionDelegate)? = nil, configure: (inout SessionConfiguration) -> Void = { _ in }) throws -> Session {
        var configuration = SessionConfiguration.ephemeral
        configuration.urlCache = nil
        configure(&configuration)
        return Session(configuration: configuration, delegate: delegate)
    }

    static func session(_ delegate: ChallengeDelegate, configure: (inout SessionConfiguration) -> Void = { _ in }) throws -> Session {
        try session(delegate.delegate, configure: configure)
    }

    static let ok = ScriptedResponse(body: "secret page")

    static func status(_ session: Session, _ url: URL) async throws -> (Int, String) {
        let (data, response) = try await session.data(from: url)
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, String(decoding: data, as: UTF8.self))
    }

    @Test("Default handling uses the store's default credential, then sends it pre-emptively to the same origin")
    func defaultHandlingFromStore() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/private", Routes.basicAuth(realm: "r", user: "ann", password: "pw", then: Self.ok))
        let session = try Self.session()
        let space = ProtectionSpace(host: "127.0.0.1", port: origin.port, protocol: "http", realm: "r", authenticationMethod: .httpBasic)
        session.credentialStore?.setDefaultCredential(Credential(user: "ann", password: "pw", persistence: .forSession), for: space)
        #expect(try await Self.status(session, origin.url("/private")) == (200, "secret page"))
        #expect(origin.requests.map { $0.header("Authorization") != nil } == [false, true])
        #expect(try await Self.status(session, origin.url("/private")).0 == 200)
        // Pre-emptive: the third request carried the credential at once.
        #expect(origin.requests.count == 3 && origin.requests[2].header("Authorization") != nil)
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("Default handling falls back to the URL's user and password; without any credential the 401 is the response")
    func defaultHandlingFromURLAndNone() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/private", Routes.basicAuth(realm: "r", user: "bob", password: "p w", then: Self.ok))
        let session = try Self.session()
        let withUser = try #require(URL(string: "http://bob:p%20w@127.0.0.1:\(origin.port)/private"))
        #expect(try await Self.status(session, withUser).0 == 200)
        let other = try Self.session()
        let (status, body) = try await Self.status(other, origin.url("/private"))
        #expect(status == 401 && body == "authentication required\n")
        session.finishTasksAndInvalidate()
        other.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("Basic goes to the task-level method only; a delegate with only the session-level method gets default handling")
    func routing() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/private", Routes.basicAuth(realm: "r", user: "ann", password: "pw", then: Self.ok))
        let good = Credential(user: "ann", password: "pw", persistence: .none)
        // Both methods: only the task-level one is asked.
        let both = ChallengeDelegate(session: { _ in use(good) }, task: { _ in use(good) })
        let session = try Self.session(both)
        #expect(try await Self.status(session, origin.url("/private")).0 == 200)
        #expect(both.calls == ["task basic r failures=0"])
        // Only the session-level method: never asked for Basic; default handling finds nothing.
        let sessionOnly = ChallengeDelegate(session: { _ in use(good) })
        let second = try Self.session(sessionOnly)
        #expect(try await Self.status(second, origin.url("/private")).0 == 401)
        #expect(sessionOnly.calls.isEmpty)
        // A per-task delegate takes the task-level challenge instead of the session's.
        let perTask = ChallengeDelegate(task: { _ in use(good) })
        let third = try Self.session(ChallengeDelegate())
        let (_, response) = try await third.data(for: URLRequest(url: origin.url("/private")), delegate: perTask.delegate)
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        #expect(perTask.calls.count == 1)
        for s in [session, second, third] { s.finishTasksAndInvalidate() }
        try await origin.shutdown()
    }

    @Test("UseCredential(nil) delivers the 401; cancel fails the task; reject tries the next offered scheme")
    func dispositions() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/two") { request in
            if request.header("Authorization") == "Basic " + Data("ann:pw".utf8).base64EncodedString() { return Self.ok }
            return ScriptedResponse(
                status: 401,
                headers: [
                    HeaderField("WWW-Authenticate", "Digest realm=\"d\", nonce=\"n1\", qop=\"auth\""),
                    HeaderField("WWW-Authenticate", "Basic realm=\"b\""),
                ], body: "no")
        }
        let none = ChallengeDelegate(task: { _ in use(nil) })
        let session = try Self.session(none)
        #expect(try await Self.status(session, origin.url("/two")).0 == 401)
        let cancel = try Self.session(ChallengeDelegate(task: { _ in (.cancelAuthenticationChallenge, nil) }))
        await #expect {
            _ = try await cancel.data(from: origin.url("/two"))
        } throws: { error in
            (error as? URLError)?.code == .userCancelledAuthentication
        }
        let reject = ChallengeDelegate(task: { challenge in
            challenge.protectionSpace.authenticationMethod == .httpDigest
                ? (.rejectProtectionSpace, nil) : use(Credential(user: "ann", password: "pw", persistence: .none))
        })
        let third = try Self.session(reject)
        #expect(try await Self.status(third, origin.url("/two")).0 == 200)
        #expect(reject.calls == ["task digest d failures=0", "task basic b failures=0"])
        for s in [session, cancel, third] { s.finishTasksAndInvalidate() }
        try await origin.shutdown()
    }

    @Test("A wrong password is offered back with a growing failure count until the limit, then the 401 is the response")
    func failureLimit() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/private", Routes.basicAuth(realm: "r", user: "ann", password: "pw", then: Self.ok))
        let proposed = Lock<[String?]>([])
        let wrong = ChallengeDelegate(task: { challenge in
            proposed.withLock { $0.append(challenge.proposedCredential?.user) }
            return use(Credential(user: "ann", password: "wrong", persistence: .forSession))
        })
        let session = try Self.session(wrong)
        #expect(try await Self.status(session, origin.url("/private")).0 == 401)
        #expect(wrong.calls == ["task basic r failures=0", "task basic r failures=1", "task basic r failures=2"])
        #expect(proposed.withLock { $0 } == [nil, "ann", "ann"])
        #expect(origin.requests.count == 4)
        // A credential that failed is not kept.
        #expect(session.credentialStore?.allCredentials.isEmpty == true)
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("Digest with qop=auth; the next request reuses the nonce with the next nonce count")
    func digestAcrossRequests() async throws {
        let origin = try await TestOrigin.start()
        let nonce = "dcd98b7102dd2f0e8b11d0f600bfb0c093"
        origin.route(
            "/digest",
            Routes.digest(realm: "digest@test", user: "zoe", password: "pa55", nonce: nonce) { nc in
                ScriptedResponse(headers: [HeaderField("X-NC", nc)], body: "ok \(nc)")
            })
        let session = try Self.session()
        let space = ProtectionSpace(host: "127.0.0.1", port: origin.port, protocol: "http", realm: "digest@test", authenticationMethod: .httpDigest)
        session.credentialStore?.setDefaultCredential(Credential(user: "zoe", password: "pa55", persistence: .forSession), for: space)
        #expect(try await Self.status(session, origin.url("/digest?a=1")) == (200, "ok 00000001"))
        #expect(try await Self.status(session, origin.url("/digest?a=2")) == (200, "ok 00000002"))
        #expect(origin.requests.count == 3)
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("Authorization never follows a redirect to another origin, set by the caller or pre-emptive")
    func crossOriginRedirect() async throws {
        let origin = try await TestOrigin.start()
        let other = try await TestOrigin.start()
        origin.route("/private", Routes.basicAuth(realm: "r", user: "ann", password: "pw", then: Self.ok))
        origin.route("/away", Routes.redirect(to: other.url("/landing").absoluteString))
        let session = try Self.session(ChallengeDelegate(task: { _ in use(Credential(user: "ann", password: "pw", persistence: .forSession)) }))
        #expect(try await Self.status(session, origin.url("/private")).0 == 200)
        var request = URLRequest(url: origin.url("/away"))
        request.setValue("Bearer caller-token", forHTTPHeaderField: "Authorization")
        _ = try await session.data(for: request)
        _ = try await session.data(from: origin.url("/away"))
        #expect(other.requests.count == 2)
        #expect(other.requests.allSatisfy { $0.header("Authorization") == nil })
        // The pre-emptive credential did go to the same origin's redirecting URL.
        #expect(origin.requests.filter { $0.path == "/away" }.last?.header("Authorization")?.hasPrefix("Basic ") == true)
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
        try await other.shutdown()
    }

    @Test("A permanent credential a delegate gave is kept on disk; a forSession one only in memory")
    func persistenceOfUsedCredentials() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/a", Routes.basicAuth(realm: "a", user: "ann", password: "pw", then: Self.ok))
        origin.route("/b", Routes.basicAuth(realm: "b", user: "bob", password: "pw", then: Self.ok))
        let directory = TemporaryDirectory()
        let store = try CredentialStore(directory: directory.url)
        let delegate = ChallengeDelegate(task: { challenge in
            challenge.protectionSpace.realm == "a"
                ? use(Credential(user: "ann", password: "pw", persistence: .permanent))
                : use(Credential(user: "bob", password: "pw", persistence: .forSession))
        })
        let session = try Self.session(delegate) { $0.urlCredentialStorage = store }
        #expect(try await Self.status(session, origin.url("/a")).0 == 200)
        #expect(try await Self.status(session, origin.url("/b")).0 == 200)
        #expect(Set(store.allCredentials.keys.compactMap(\.realm)) == ["a", "b"])
        let reopened = try CredentialStore(directory: directory.url)
        #expect(reopened.allCredentials.keys.compactMap(\.realm) == ["a"])
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("An ephemeral session's credentials are gone after invalidation")
    func ephemeralCredentialsWiped() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/private", Routes.basicAuth(realm: "r", user: "ann", password: "pw", then: Self.ok))
        let (invalidated, signal) = AsyncStream<Void>.makeStream()
        final class Delegate: SessionDelegate, Sendable {
            let signal: AsyncStream<Void>.Continuation
            init(_ signal: AsyncStream<Void>.Continuation) { self.signal = signal }
            func urlSession(_ session: Session, task: SessionTask, didReceive challenge: AuthenticationChallenge) async -> ChallengeAnswer {
                use(Credential(user: "ann", password: "pw", persistence: .forSession))
            }
            func urlSession(_ session: Session, didBecomeInvalidWithError error: (any Error)?) { signal.yield() }
        }
        let session = try Self.session(Delegate(signal))
        #expect(try await Self.status(session, origin.url("/private")).0 == 200)
        let store = try #require(session.credentialStore)
        #expect(store.allCredentials.count == 1)
        session.finishTasksAndInvalidate()
        for await _ in invalidated { break }
        #expect(store.allCredentials.isEmpty)
        try await origin.shutdown()
    }
}

extension SessionAuthenticationTests {
    @Test("A 407 from a real forwarding proxy is answered for the proxy's space; later requests carry Proxy-Authorization at once")
    func proxyAuthentication() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/via-proxy", response: ScriptedResponse(body: "through the proxy"))
        let proxy = try TestProxy(user: "proxyuser", password: "pp")
        let delegate = ChallengeDelegate(task: { challenge in
            challenge.protectionSpace.isProxy
                ? use(Credential(user: "proxyuser", password: "pp", persistence: .forSession)) : (.performDefaultHandling, nil)
        })
        let session = try Self.session(delegate) { $0.proxyURL = proxy.url }
        #expect(try await Self.status(session, origin.url("/via-proxy")) == (200, "through the proxy"))
        #expect(try await Self.status(session, origin.url("/via-proxy")).0 == 200)
        #expect(delegate.calls == ["task basic test proxy failures=0"])
        #expect(proxy.received.map { $0.proxyAuthorization != nil } == [false, true, true])
        #expect(proxy.received.first?.requestLine.hasPrefix("GET http://127.0.0.1:\(origin.port)/via-proxy") == true)
        // The origin never sees the proxy's credentials.
        #expect(origin.requests.count == 2)
        #expect(origin.requests.allSatisfy { $0.header("Proxy-Authorization") == nil })
        let space = try #require(session.credentialStore?.allCredentials.keys.first)
        #expect(space.isProxy && space.port == proxy.port && space.realm == "test proxy")
        session.finishTasksAndInvalidate()
        proxy.shutdown()
        try await origin.shutdown()
    }
}

extension SessionAuthenticationTests {
    /// An NTLM server's side of the three messages (MS-NLMP): a Type 2
    /// challenge for any Type 1, and the user name read from the Type 3.
    /// (The response hashes are not checked: that is libcurl's arithmetic.)
    static func ntlmRoute(expecting user: String) -> TestOrigin.Handler {
        { request in
            let denied = ScriptedResponse(status: 401, headers: [HeaderField("WWW-Authenticate", "NTLM")], body: "")
            guard let field = request.header("Authorization"), field.hasPrefix("NTLM "),
                let message = Data(base64Encoded: String(field.dropFirst(5))).map(Array.init), message.count >= 12,
                message.starts(with: Array("NTLMSSP\0".utf8))
            else { return denied }
            func le32(_ at: Int) -> Int { Int(message[at]) | Int(message[at + 1]) << 8 | Int(message[at + 2]) << 16 | Int(message[at + 3]) << 24 }
            func le16(_ at: Int) -> Int { Int(message[at]) | Int(message[at + 1]) << 8 }
            switch le32(8) {
            case 1:
                var type2: [UInt8] = Array("NTLMSSP\0".utf8) + [2, 0, 0, 0]
                type2 += [0, 0, 0, 0, 48, 0, 0, 0]  // target name: empty, at 48
                type2 += [0x01, 0x02, 0x00, 0x00]  // flags: UNICODE | NTLM
                type2 += [1, 2, 3, 4, 5, 6, 7, 8]  // server challenge
                type2 += [UInt8](repeating: 0, count: 8)  // context
                type2 += [0, 0, 0, 0, 48, 0, 0, 0]  // target info: empty
                return ScriptedResponse(
                    status: 401,
                    headers: [
                        HeaderField("WWW-Authenticate", "NTLM " + Data(type2).base64EncodedString())
                    ], body: "")
            case 3 where message.count >= 44:
                let (length, offset) = (le16(36), le32(40))
                guard offset + length <= message.count else { return denied }
                let name = String(
                    decoding: stride(from: offset, to: offset + length, by: 2).map { UInt16(message[$0]) | UInt16(message[$0 + 1]) << 8 },
                    as: UTF16.self)
                return name == user ? ScriptedResponse(body: "hello \(name)") : denied
            default:
                return denied
            }
        }
    }

    @Test("NTLM is a session-level challenge; libcurl carries out the exchange with the delegate's credential")
    func ntlmThroughLibcurl() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/ntlm", Self.ntlmRoute(expecting: "carol"))
        let delegate = ChallengeDelegate(
            session: { challenge in
                challenge.protectionSpace.authenticationMethod == .ntlm
                    ? use(Credential(user: "carol", password: "pw", persistence: .forSession)) : (.performDefaultHandling, nil)
            },
            task: { _ in (.performDefaultHandling, nil) })
        let session = try Self.session(delegate)
        #expect(try await Self.status(session, origin.url("/ntlm")) == (200, "hello carol"))
        #expect(delegate.calls == ["session ntlm"])
        // No Authorization at first, then Type 1 and Type 3 from libcurl.
        let sent = origin.requests.map { $0.header("Authorization").map { String($0.prefix(5)) } }
        #expect(sent == [nil, "NTLM ", "NTLM "])
        // Without a session-level method, the task-level one gets the session-level challenge.
        let taskOnly = ChallengeDelegate(task: { _ in use(Credential(user: "carol", password: "pw", persistence: .none)) })
        let second = try Self.session(taskOnly)
        #expect(try await Self.status(second, origin.url("/ntlm")).0 == 200)
        #expect(taskOnly.calls == ["task ntlm - failures=0"])
        second.finishTasksAndInvalidate()
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }
}
