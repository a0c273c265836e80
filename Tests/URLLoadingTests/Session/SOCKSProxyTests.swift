import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
import TestSupport
@testable import URLLoading

/// Requests through a real SOCKS5 proxy on loopback (Debian's microsocks).
@Suite(.timeLimit(.minutes(Sanitizer.minutes(1)))) struct SOCKSProxyTests {
    static func session(_ configure: (SessionConfiguration) -> Void) -> Session {
        let configuration = SessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.proxyEnvironmentSource = [:]
        configure(configuration)
        return Session(configuration: configuration)
    }

    @Test("socks5h leaves the name to the proxy, socks5 sends the address; a user and password from the URL; all_proxy and no_proxy; a refused password is in no error")
    func throughSOCKS5() async throws {
        try #require(TestSOCKSProxy.isInstalled, "tools/install-deps installs microsocks")
        let origin = try await TestOrigin.start()
        origin.route("/s", response: ScriptedResponse(body: "socks"))
        let proxy = try await TestSOCKSProxy.start(user: "sockuser", password: "sock-secret")
        let byName = URL(string: "http://localhost:\(origin.port)/s")
        let url = try #require(byName)

        let remote = Self.session { $0.proxyURL = URL(string: "socks5h://sockuser:sock-secret@127.0.0.1:\(proxy.port)") }
        #expect(try await remote.data(from: url).0 == Data("socks".utf8))
        #expect(proxy.connections == ["localhost:\(origin.port)"], "the proxy resolves the name")

        let local = Self.session { $0.proxyEnvironmentSource = ["all_proxy": "socks5://sockuser:sock-secret@127.0.0.1:\(proxy.port)"] }
        #expect(try await local.data(from: origin.url("/s")).0 == Data("socks".utf8))
        #expect(proxy.connections.last == "127.0.0.1:\(origin.port)", "\(proxy.connections)")

        let excepted = Self.session {
            $0.proxyEnvironmentSource = ["all_proxy": "socks5://sockuser:sock-secret@127.0.0.1:\(proxy.port)", "no_proxy": "127.0.0.1"]
        }
        #expect(try await excepted.data(from: origin.url("/s")).0 == Data("socks".utf8))
        #expect(proxy.connections.count == 2, "a no_proxy host went through the proxy")

        let refused = Self.session { $0.proxyURL = URL(string: "socks5://sockuser:wrong-secret@127.0.0.1:\(proxy.port)") }
        do {
            _ = try await refused.data(from: origin.url("/s"))
            Issue.record("a request with a refused proxy password succeeded")
        } catch {
            #expect(!String(reflecting: error).contains("wrong-secret"), "\(error)")
        }
        #expect(proxy.connections.count == 2)
        #expect(origin.requests(to: "/s").count == 3)
        for session in [remote, local, excepted, refused] { session.finishTasksAndInvalidate() }
        await proxy.shutdown()
        try await origin.shutdown()
    }

    @Test("Apple's proxy dictionary's SOCKS keys carry http and https requests; the origin sees TLS end to end")
    func throughTheDictionarysSOCKSProxy() async throws {
        try #require(TestSOCKSProxy.isInstalled, "tools/install-deps installs microsocks")
        let certificates = try TestCertificates.shared()
        let origin = try await TestOrigin.start(tls: certificates.server)
        origin.route("/t", response: ScriptedResponse(body: "tls through socks"))
        let proxy = try await TestSOCKSProxy.start()
        let session = Self.session {
            $0.trustRootsFile = certificates.caCertificatePath
            $0.connectionProxyDictionary = [
                kCFNetworkProxiesSOCKSEnable: true, kCFNetworkProxiesSOCKSProxy: "127.0.0.1", kCFNetworkProxiesSOCKSPort: proxy.port,
            ]
        }
        #expect(try await session.data(from: origin.url("/t")).0 == Data("tls through socks".utf8))
        #expect(proxy.connections == ["localhost:\(origin.port)"])
        #expect(origin.requests.count == 1)
        #expect(origin.requests.allSatisfy { $0.overTLS })
        session.finishTasksAndInvalidate()
        await proxy.shutdown()
        try await origin.shutdown()
    }
}
