import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
import TestSupport
@testable import URLLoading

/// The environment's proxies, with curl's rules, without sockets.
@Suite struct ProxyRulesTests {
    static func proxy(_ environment: [String: String], _ url: String) -> String? {
        URL(string: url).flatMap { ProxyRules(environment: environment).proxy(for: $0) }
    }

    @Test("http_proxy in lower case only (httpoxy); https_proxy and all_proxy in either case, lower case first; empty values are none")
    func variables() {
        #expect(Self.proxy(["http_proxy": "http://p:1"], "http://a.example/") == "http://p:1")
        #expect(Self.proxy(["HTTP_PROXY": "http://p:1"], "http://a.example/") == nil)
        #expect(Self.proxy(["http_proxy": "http://p:1"], "https://a.example/") == nil)
        #expect(Self.proxy(["HTTPS_PROXY": "http://p:2"], "https://a.example/") == "http://p:2")
        #expect(Self.proxy(["https_proxy": "http://p:3", "HTTPS_PROXY": "http://p:2"], "https://a.example/") == "http://p:3")
        #expect(Self.proxy(["ALL_PROXY": "socks5h://s:9"], "http://a.example/") == "socks5h://s:9")
        #expect(Self.proxy(["all_proxy": "socks5://s:8", "https_proxy": "http://p:3"], "https://a.example/") == "http://p:3")
        #expect(Self.proxy(["all_proxy": "socks5://s:8", "https_proxy": "http://p:3"], "http://a.example/") == "socks5://s:8")
        #expect(Self.proxy(["http_proxy": "", "all_proxy": " "], "http://a.example/") == nil)
        #expect(Self.proxy(["http_proxy": "p:3128"], "http://a.example/") == "p:3128")
        #expect(ProxyRules.url(of: "p:3128")?.absoluteString == "http://p:3128")
        #expect(Self.proxy([:], "http://a.example/") == nil)
    }

    @Test("no_proxy: *, names as themselves and as suffixes at a dot, addresses and CIDR ranges (IPv4 and IPv6), any case, trailing dots")
    func exceptions() {
        let proxied = ["http_proxy": "http://p:1", "no_proxy": "Example.COM, .internal.test,10.0.0.0/8 192.168.1.7,[fd00::]/8, ::1,junk/x"]
        for direct in [
            "http://example.com/", "http://www.example.com./", "http://a.b.internal.test/", "http://internal.test/",
            "http://10.200.3.4/", "http://192.168.1.7:8080/", "http://[fd12::1]/", "http://[::1]:80/",
        ] {
            #expect(Self.proxy(proxied, direct) == nil, "\(direct)")
        }
        for viaProxy in [
            "http://notexample.com/", "http://example.com.evil/", "http://11.0.0.1/", "http://192.168.1.8/",
            "http://[fe80::1]/", "http://junk/",
        ] {
            #expect(Self.proxy(proxied, viaProxy) == "http://p:1", "\(viaProxy)")
        }
        #expect(Self.proxy(["http_proxy": "http://p:1", "NO_PROXY": "*"], "http://anything.example/") == nil)
        #expect(Self.proxy(["http_proxy": "http://p:1", "no_proxy": "10.0.0.0/33"], "http://10.0.0.1/") == "http://p:1")
        // A name never matches an address, nor an address a name.
        #expect(Self.proxy(["http_proxy": "http://p:1", "no_proxy": "1.2.3.4"], "http://1.2.3.4.example/") == "http://p:1")
    }

    static func rules(_ dictionary: [AnyHashable: Any]) -> ProxyRules {
        let configuration = SessionConfiguration.ephemeral
        configuration.connectionProxyDictionary = dictionary
        var values = configuration.snapshot
        values.resolveProxies()
        return values.proxyRules ?? ProxyRules()
    }

    @Test("Apple's proxy dictionary: HTTP, HTTPS (a tunnel through an HTTP proxy) and SOCKS proxies by their keys, enabled or not; exceptions as *.name; the dictionary given back as set")
    func appleDictionary() throws {
        let rules = Self.rules([
            kCFNetworkProxiesHTTPEnable: true, kCFNetworkProxiesHTTPProxy: "proxy.example", kCFNetworkProxiesHTTPPort: 3128,
            kCFNetworkProxiesHTTPSEnable: 1, kCFNetworkProxiesHTTPSProxy: "fd00::1", kCFNetworkProxiesHTTPSPort: "8443",
            kCFNetworkProxiesSOCKSEnable: false, kCFNetworkProxiesSOCKSProxy: "socks.example", kCFNetworkProxiesSOCKSPort: 1080,
            kCFNetworkProxiesExceptionsList: ["*.local.example", "10.0.0.0/8"], "ProxyAutoConfigURLString": URL(fileURLWithPath: "/x"),
        ])
        #expect(rules == ProxyRules(http: "http://proxy.example:3128", https: "http://[fd00::1]:8443", all: nil, exceptions: rules.exceptions))
        #expect(rules.proxy(for: try #require(URL(string: "http://a.local.example/"))) == nil)
        #expect(rules.proxy(for: try #require(URL(string: "http://10.1.2.3/"))) == nil)
        #expect(rules.proxy(for: try #require(URL(string: "http://www.example/"))) == "http://proxy.example:3128")
        let socks = Self.rules([kCFNetworkProxiesSOCKSEnable: true, kCFNetworkProxiesSOCKSProxy: "socks.example", kCFNetworkProxiesSOCKSPort: 99_999])
        #expect(socks == ProxyRules(all: "socks5h://socks.example"))
        #expect(Self.rules([kCFNetworkProxiesHTTPEnable: true, kCFNetworkProxiesHTTPProxy: "user:pw@evil/"]).isEmpty)
        let configuration = SessionConfiguration.ephemeral
        configuration.connectionProxyDictionary = [kCFNetworkProxiesHTTPEnable: true, kCFNetworkProxiesHTTPPort: 8080, "Odd": Data()]
        let back = try #require(configuration.connectionProxyDictionary)
        #expect(back.count == 2)
        #expect(back[kCFNetworkProxiesHTTPEnable] as? Bool == true)
        #expect(back[kCFNetworkProxiesHTTPPort] as? Int == 8080)
        #expect(configuration.copy().connectionProxyDictionary?.count == 2)
    }
}

/// Sessions through the environment's proxy, against a real proxy and
/// origin on loopback.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(1)))) struct ProxyEnvironmentTests {
    static func session(_ environment: [String: String], configure: (SessionConfiguration) -> Void = { _ in }) -> Session {
        let configuration = SessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.proxyEnvironmentSource = environment
        configure(configuration)
        return Session(configuration: configuration)
    }

    @Test(
        "http_proxy with credentials carries a request (in absolute form, answering the 407 with them); no_proxy, an upper-case HTTP_PROXY or the feature off go directly; the configuration's proxy wins"
    )
    func throughTheEnvironmentsProxy() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/p", response: ScriptedResponse(body: "proxied"))
        let proxy = try TestProxy(user: "proxyuser", password: "pp-secret")
        let proxyURL = "http://proxyuser:pp-secret@127.0.0.1:\(proxy.port)"
        let url = origin.url("/p")

        let viaEnvironment = Self.session(["http_proxy": proxyURL])
        let (data, response) = try await viaEnvironment.data(from: url)
        #expect(data == Data("proxied".utf8))
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        let lines = proxy.received.map(\.requestLine)
        #expect(lines.last == "GET \(url.absoluteString) HTTP/1.1", "\(lines)")
        #expect(proxy.received.last?.proxyAuthorization != nil)

        var before = proxy.received.count
        for environment in [
            ["http_proxy": proxyURL, "no_proxy": "127.0.0.1"],
            ["http_proxy": proxyURL, "no_proxy": "127.0.0.0/8"],
            ["HTTP_PROXY": proxyURL],
        ] {
            let direct = Self.session(environment)
            #expect(try await direct.data(from: url).0 == Data("proxied".utf8))
            #expect(proxy.received.count == before, "\(environment.keys.sorted())")
            direct.finishTasksAndInvalidate()
        }
        let off = Self.session(["http_proxy": proxyURL]) { $0.proxiesFromEnvironment = false }
        #expect(try await off.data(from: url).0 == Data("proxied".utf8))
        #expect(proxy.received.count == before)

        // The configuration's own proxy is for every host: no_proxy does not apply to it.
        let explicit = Self.session(["no_proxy": "*"]) { $0.proxyURL = URL(string: proxyURL) }
        #expect(try await explicit.data(from: url).0 == Data("proxied".utf8))
        #expect(proxy.received.count > before)
        before = proxy.received.count
        #expect(origin.requests(to: "/p").count == 6)
        for session in [viaEnvironment, off, explicit] { session.finishTasksAndInvalidate() }
        proxy.shutdown()
        try await origin.shutdown()
    }

    final class ProxyAnswer: SessionDelegate {
        func urlSession(
            _ session: Session, task: SessionTask, didReceive challenge: AuthenticationChallenge,
            completionHandler: @escaping @Sendable (Session.AuthChallengeDisposition, Credential?) -> Void
        ) {
            let isProxy = challenge.protectionSpace.isProxy && challenge.previousFailureCount == 0
            completionHandler(isProxy ? .useCredential : .cancelAuthenticationChallenge, Credential(user: "proxyuser", password: "pp", persistence: .forSession))
        }
    }

    @Test("Apple's proxy dictionary carries a request through its HTTP proxy (the 407 answered by the delegate) and replaces the environment's proxies")
    func throughTheDictionarysProxy() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/d", response: ScriptedResponse(body: "dictionary"))
        let proxy = try TestProxy(user: "proxyuser", password: "pp")
        let dictionary: [AnyHashable: Any] = [
            kCFNetworkProxiesHTTPEnable: true, kCFNetworkProxiesHTTPProxy: "127.0.0.1", kCFNetworkProxiesHTTPPort: proxy.port,
        ]
        let configuration = SessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.proxyEnvironmentSource = ["no_proxy": "*"]
        configuration.connectionProxyDictionary = dictionary
        let session = Session(configuration: configuration, delegate: ProxyAnswer())
        #expect(try await session.data(from: origin.url("/d")).0 == Data("dictionary".utf8))
        #expect(proxy.received.map(\.requestLine) == Array(repeating: "GET \(origin.url("/d").absoluteString) HTTP/1.1", count: 2))
        // Set but naming no proxy: the environment's is not consulted either.
        configuration.connectionProxyDictionary = [:]
        configuration.proxyEnvironmentSource = ["http_proxy": "http://proxyuser:pp@127.0.0.1:\(proxy.port)"]
        let direct = Session(configuration: configuration)
        #expect(try await direct.data(from: origin.url("/d")).0 == Data("dictionary".utf8))
        #expect(proxy.received.count == 2)
        session.finishTasksAndInvalidate()
        direct.finishTasksAndInvalidate()
        proxy.shutdown()
        try await origin.shutdown()
    }

    @Test("https_proxy carries an https request through a CONNECT tunnel; the origin sees TLS and no proxy credential; http_proxy does not apply to it")
    func httpsThroughATunnel() async throws {
        let certificates = try TestCertificates.shared()
        let origin = try await TestOrigin.start(tls: certificates.server)
        origin.route("/s", response: ScriptedResponse(body: "tunnelled"))
        let proxy = try TestProxy(user: "proxyuser", password: "pp", openTunnels: true)
        let tunnelled = Self.session(["https_proxy": "http://proxyuser:pp@127.0.0.1:\(proxy.port)"]) {
            $0.trustRootsFile = certificates.caCertificatePath
        }
        #expect(try await tunnelled.data(from: origin.url("/s")).0 == Data("tunnelled".utf8))
        #expect(proxy.received.map(\.requestLine) == ["CONNECT localhost:\(origin.port) HTTP/1.1"])
        #expect(origin.requests.allSatisfy { $0.overTLS && $0.header("Proxy-Authorization") == nil })
        let direct = Self.session(["http_proxy": "http://proxyuser:pp@127.0.0.1:\(proxy.port)"]) {
            $0.trustRootsFile = certificates.caCertificatePath
        }
        #expect(try await direct.data(from: origin.url("/s")).0 == Data("tunnelled".utf8))
        #expect(proxy.received.count == 1)
        tunnelled.finishTasksAndInvalidate()
        direct.finishTasksAndInvalidate()
        proxy.shutdown()
        try await origin.shutdown()
    }

    @Test("An https:// proxy: TLS to the proxy checked against the configuration's trust roots (refused without them), its credentials from the URL; an https origin through it is TLS inside TLS")
    func httpsProxy() async throws {
        try #require(TestTLSFront.isInstalled, "tools/install-deps installs socat")
        let certificates = try TestCertificates.shared()
        let origin = try await TestOrigin.start()
        origin.route("/h", response: ScriptedResponse(body: "via an https proxy"))
        let tlsOrigin = try await TestOrigin.start(tls: certificates.server)
        tlsOrigin.route("/t", response: ScriptedResponse(body: "tls in tls"))
        let proxy = try TestProxy(user: "proxyuser", password: "pp", openTunnels: true)
        let front = try await TestTLSFront.start(target: proxy.port, identity: certificates.server)
        let proxyURL = URL(string: "https://proxyuser:pp@localhost:\(front.port)")
        let session = Self.session([:]) {
            $0.proxyURL = proxyURL
            $0.trustRootsFile = certificates.caCertificatePath
        }
        #expect(try await session.data(from: origin.url("/h")).0 == Data("via an https proxy".utf8))
        #expect(proxy.received.map(\.requestLine) == ["GET \(origin.url("/h").absoluteString) HTTP/1.1"])
        #expect(proxy.received.last?.proxyAuthorization != nil)
        #expect(try await session.data(from: tlsOrigin.url("/t")).0 == Data("tls in tls".utf8))
        #expect(proxy.received.last?.requestLine == "CONNECT localhost:\(tlsOrigin.port) HTTP/1.1")
        #expect(tlsOrigin.requests.allSatisfy { $0.overTLS && $0.header("Proxy-Authorization") == nil })

        // The proxy's certificate is the test CA's: without its roots the session refuses it.
        let untrusting = Self.session([:]) { $0.proxyURL = proxyURL }
        await #expect(throws: (any Error).self) { try await untrusting.data(from: origin.url("/h")) }
        #expect(origin.requests(to: "/h").count == 1)
        for session in [session, untrusting] { session.finishTasksAndInvalidate() }
        await front.shutdown()
        proxy.shutdown()
        try await tlsOrigin.shutdown()
        try await origin.shutdown()
    }

    @Test("A redirect to a no_proxy host goes directly; the proxy's password is in no error")
    func perHopAndSecrets() async throws {
        let origin = try await TestOrigin.start()
        let port = origin.url("/").port ?? 0
        origin.route("/start", response: ScriptedResponse(status: 302, headers: [HeaderField("Location", "http://localhost:\(port)/end")], body: ""))
        origin.route("/end", response: ScriptedResponse(body: "end"))
        let proxy = try TestProxy(user: "proxyuser", password: "pp-secret")
        let session = Self.session([
            "http_proxy": "http://proxyuser:pp-secret@127.0.0.1:\(proxy.port)", "no_proxy": "localhost",
        ])
        let (data, response) = try await session.data(from: origin.url("/start"))
        #expect(data == Data("end".utf8))
        #expect(response.url?.host == "localhost")
        #expect(proxy.received.map(\.requestLine).allSatisfy { $0.contains("/start") }, "\(proxy.received.map(\.requestLine))")
        #expect(!proxy.received.isEmpty)
        session.finishTasksAndInvalidate()
        proxy.shutdown()

        // A proxy that is not there: the error names no credential.
        let closed = try await TestOrigin.start()
        let closedPort = closed.url("/").port ?? 0
        try await closed.shutdown()
        let failing = Self.session(["http_proxy": "http://proxyuser:pp-secret@127.0.0.1:\(closedPort)"])
        do {
            _ = try await failing.data(from: origin.url("/end"))
            Issue.record("a request through a closed proxy succeeded")
        } catch {
            #expect(!"\(error)".contains("pp-secret"), "\(error)")
            #expect(!String(reflecting: error).contains("pp-secret"))
        }
        failing.finishTasksAndInvalidate()
        try await origin.shutdown()
    }
}
