import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
import TestSupport
@testable import URLLoading

/// Cookies through real sessions against the loopback origin (issue
/// "cookie store", part 5): per hop, redirects included; Secure only over
/// https; accept policies; caller's Cookie fields left alone; ephemeral
/// stores private and wiped; persistence across processes.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(1)))) struct SessionCookieTests {
    static func session(_ configure: (inout SessionConfiguration) -> Void = { _ in }) throws -> Session {
        var configuration = SessionConfiguration.ephemeral
        configuration.urlCache = nil
        configure(&configuration)
        return Session(configuration: configuration)
    }

    static func setting(_ cookies: String..., status: Int = 200, location: String? = nil) -> ScriptedResponse {
        var headers = cookies.map { HeaderField("Set-Cookie", $0) }
        if let location { headers.append(HeaderField("Location", location)) }
        return ScriptedResponse(status: status, headers: headers, body: "")
    }

    /// The Cookie field of the requests the origin received for `path`.
    static func cookiesSent(_ origin: TestOrigin, _ path: String) -> [String?] {
        origin.requests.filter { $0.path == path }.map { $0.header("Cookie") }
    }

    @Test("A cookie set on a redirect hop is sent on the next hop and on later requests; the final response's cookie is stored")
    func redirectHop() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/login", response: Self.setting("sid=abc; Path=/; HttpOnly", status: 302, location: "/home"))
        origin.route("/home", response: Self.setting("seen=1; Path=/"))
        let session = try Self.session()
        _ = try await session.data(from: origin.url("/login"))
        #expect(Self.cookiesSent(origin, "/home") == ["sid=abc"])
        _ = try await session.data(from: origin.url("/home"))
        #expect(Self.cookiesSent(origin, "/home").last == "sid=abc; seen=1")
        #expect(session.cookieStore?.allCookies.first { $0.name == "sid" }?.isHTTPOnly == true)
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("Secure cookies go only over https; cookies for one host do not follow a redirect to another")
    func secureAndCrossHost() async throws {
        let certificates = try TestCertificates.shared()
        let tls = try await TestOrigin.start(tls: certificates.server)
        let plain = try await TestOrigin.start()
        tls.route("/set", response: Self.setting("sec=1; Secure; Path=/", "open=2; Path=/"))
        let session = try Self.session { $0.trustRootsFile = certificates.caCertificatePath }
        _ = try await session.data(from: tls.url("/set"))
        // The plain origin under the same name: cookies do not separate ports.
        _ = try await session.data(from: URL(string: "http://localhost:\(plain.port)/echo")!)
        _ = try await session.data(from: tls.url("/echo"))
        #expect(Self.cookiesSent(plain, "/echo") == ["open=2"])
        #expect(Self.cookiesSent(tls, "/echo") == ["sec=1; open=2"])
        // 127.0.0.1 is another host: a redirect there carries none of localhost's cookies.
        tls.route("/away", response: Self.setting(status: 302, location: plain.url("/other").absoluteString))
        _ = try await session.data(from: tls.url("/away"))
        #expect(Self.cookiesSent(plain, "/other") == [nil])
        session.finishTasksAndInvalidate()
        try await tls.shutdown()
        try await plain.shutdown()
    }

    @Test("The configuration's accept policy decides what responses may set")
    func acceptPolicy() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/set", response: Self.setting("a=1"))
        let never = try Self.session { $0.httpCookieAcceptPolicy = .never }
        _ = try await never.data(from: origin.url("/set"))
        #expect(never.cookieStore?.allCookies.isEmpty == true)
        let mainDocument = try Self.session { $0.httpCookieAcceptPolicy = .onlyFromMainDocumentDomain }
        var request = URLRequest(url: origin.url("/set"))
        request.mainDocumentURL = URL(string: "https://elsewhere.test/")
        _ = try await mainDocument.data(for: request)
        #expect(mainDocument.cookieStore?.allCookies.isEmpty == true)
        request.mainDocumentURL = origin.url("/page")
        _ = try await mainDocument.data(for: request)
        #expect(mainDocument.cookieStore?.allCookies.map(\.name) == ["a"])
        never.finishTasksAndInvalidate()
        mainDocument.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("A request's own Cookie field is sent as it is; httpShouldHandleCookies=false sends and stores nothing")
    func callerCookiesLeftAlone() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/set", response: Self.setting("stored=1"))
        let session = try Self.session()
        _ = try await session.data(from: origin.url("/set"))
        var own = URLRequest(url: origin.url("/own"))
        own.setValue("mine=1", forHTTPHeaderField: "Cookie")
        _ = try await session.data(for: own)
        #expect(Self.cookiesSent(origin, "/own") == ["mine=1"])
        var off = URLRequest(url: origin.url("/set"))
        off.httpShouldHandleCookies = false
        origin.route("/set", response: Self.setting("other=2"))
        _ = try await session.data(for: off)
        #expect(Self.cookiesSent(origin, "/set").last == .some(nil))
        #expect(session.cookieStore?.allCookies.map(\.name) == ["stored"])
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("An ephemeral session's cookies are invisible to a session of another configuration and gone after invalidation")
    func ephemeralIsolation() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/set", response: Self.setting("private=1"))
        let (invalidated, signal) = AsyncStream<Void>.makeStream()
        let first = Session(configuration: .ephemeral, delegate: InvalidationDelegate { signal.yield() })
        let second = Session(configuration: .ephemeral)
        _ = try await first.data(from: origin.url("/set"))
        _ = try await second.data(from: origin.url("/echo"))
        #expect(Self.cookiesSent(origin, "/echo") == [nil])
        #expect(second.cookieStore?.allCookies.isEmpty == true)
        let store = try #require(first.cookieStore)
        #expect(store.allCookies.count == 1)
        first.invalidateAndCancel()
        for await _ in invalidated { break }
        #expect(store.allCookies.isEmpty)
        second.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("A default session's cookies persist across a process restart; session cookies do not")
    func persistenceAcrossProcesses() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/set", response: Self.setting("persistent=1; Max-Age=3600", "session=2"))
        let data = TemporaryDirectory()
        var environment = ProcessInfo.processInfo.environment
        environment["XDG_DATA_HOME"] = data.url.path
        environment["XDG_CACHE_HOME"] = data.path("cache")
        let first = try await ChildProcess.run(ChildProcess.helper, ["cookie-fetch", "cookie-test", origin.url("/set").absoluteString], environment: environment)
        #expect(first.status == 0, "\(first.standardError)")
        #expect(first.standardOutput.contains("cookies persistent,session"))
        let second = try await ChildProcess.run(ChildProcess.helper, ["cookie-fetch", "cookie-test", origin.url("/echo").absoluteString], environment: environment)
        #expect(second.status == 0, "\(second.standardError)")
        #expect(Self.cookiesSent(origin, "/echo") == ["persistent=1"])
        #expect(second.standardOutput.contains("cookies persistent\n"))
        let mode = try FileManager.default.attributesOfItem(atPath: data.path("cookie-test/Cookies.sqlite"))[.posixPermissions] as? Int
        #expect(mode == 0o600)
        try await origin.shutdown()
    }

    @Test("Vary: Cookie selects on the cookies the store sent, not only on a Cookie field the caller set")
    func varyCookie() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/page") { request in
            ScriptedResponse(headers: [HeaderField("Cache-Control", "max-age=600"), HeaderField("Vary", "Cookie")], body: "for \(request.header("Cookie") ?? "nobody")")
        }
        origin.route("/login", response: Self.setting("user=ann; Path=/"))
        let session = try Self.session { $0.urlCache = ResponseCache(memoryCapacity: 1 << 20) }
        let (anonymous, _) = try await session.data(from: origin.url("/page"))
        _ = try await session.data(from: origin.url("/login"))
        let (signedIn, _) = try await session.data(from: origin.url("/page"))
        let (again, againResponse) = try await session.data(from: origin.url("/page"))
        #expect((againResponse as? HTTPURLResponse)?.value(forHTTPHeaderField: "Cache-Status") == "URLLoading; hit")
        #expect(String(decoding: anonymous, as: UTF8.self) == "for nobody")
        #expect(String(decoding: signedIn, as: UTF8.self) == "for user=ann")
        #expect(again == signedIn)
        #expect(origin.requests.filter { $0.path == "/page" }.count == 2)
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }
}

/// Calls back when its session becomes invalid.
final class InvalidationDelegate: SessionDelegate, Sendable {
    let done: @Sendable () -> Void
    init(_ done: @escaping @Sendable () -> Void) { self.done = done }
    func urlSession(_ session: Session, didBecomeInvalidWithError error: (any Error)?) { done() }
}
