import Foundation
import Testing
import TestSupport
@testable import URLLoading

/// Stream tasks through the proxies the session's rules choose: a SOCKS5
/// proxy on loopback (Debian's microsocks) with a user and password, and
/// the loopback HTTP proxy's CONNECT with the credentials of the
/// environment's proxy URL; `no_proxy` goes directly.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(1)))) struct StreamProxyTests {
    static func session(_ configure: (SessionConfiguration) -> Void) -> Session {
        let configuration = SessionConfiguration.ephemeral
        configuration.proxyEnvironmentSource = [:]
        configure(configuration)
        return Session(configuration: configuration)
    }

    /// Writes a line on a new stream task to `host` and reads its echo.
    static func echo(_ session: Session, host: String, port: Int, _ text: String) async throws -> Data {
        let task = session.streamTask(withHostName: host, port: port)
        task.resume()
        defer { task.cancel() }
        try await task.write(StreamTaskTests.line(text), timeout: 10)
        return try await StreamTaskTests.read(task, count: StreamTaskTests.line("echo: \(text)").count).0
    }

    @Test("SOCKS5 with a user and password: socks5h leaves the name to the proxy, socks5 sends the address; a refused password is in no error")
    func socks5() async throws {
        try #require(TestSOCKSProxy.isInstalled, "tools/install-deps installs microsocks")
        let server = try await TestStreamServer.start()
        let proxy = try await TestSOCKSProxy.start(user: "streamer", password: "str3am-secret")

        let byName = Self.session { $0.proxyURL = URL(string: "socks5h://streamer:str3am-secret@127.0.0.1:\(proxy.port)") }
        #expect(try await Self.echo(byName, host: "localhost", port: server.port, "by name") == StreamTaskTests.line("echo: by name"))
        #expect(proxy.connections == ["localhost:\(server.port)"], "the proxy resolves the name")

        let byAddress = Self.session { $0.proxyEnvironmentSource = ["all_proxy": "socks5://streamer:str3am-secret@127.0.0.1:\(proxy.port)"] }
        #expect(try await Self.echo(byAddress, host: "localhost", port: server.port, "by address") == StreamTaskTests.line("echo: by address"))
        #expect(proxy.connections.last == "127.0.0.1:\(server.port)", "\(proxy.connections)")

        let refused = Self.session { $0.proxyURL = URL(string: "socks5h://streamer:wrong-secret@127.0.0.1:\(proxy.port)") }
        do {
            _ = try await Self.echo(refused, host: "localhost", port: server.port, "refused")
            Issue.record("a stream with a refused proxy password was carried")
        } catch {
            #expect((error as? URLError)?.code == .cannotConnectToHost, "\(error)")
            #expect(!String(reflecting: error).contains("wrong-secret") && String(reflecting: error).contains("user name and password"), "\(error)")
        }
        #expect(proxy.connections.count == 2)
        #expect(server.received == ["by name", "by address"])
        await proxy.shutdown()
        try await server.shutdown()
    }

    @Test("The environment's https_proxy tunnels a stream with its credentials; no_proxy goes directly; an https:// proxy is refused clearly")
    func environmentsProxy() async throws {
        let server = try await TestStreamServer.start()
        let proxy = try TestProxy(user: "u", password: "p", openTunnels: true)
        defer { proxy.shutdown() }
        let environment = ["https_proxy": "http://tunnel:tunn3l-secret@127.0.0.1:\(proxy.port)"]
        let tunnelled = Self.session { $0.proxyEnvironmentSource = environment }
        #expect(try await Self.echo(tunnelled, host: "127.0.0.1", port: server.port, "tunnelled") == StreamTaskTests.line("echo: tunnelled"))
        #expect(proxy.received.map(\.requestLine) == ["CONNECT 127.0.0.1:\(server.port) HTTP/1.1"])
        #expect(proxy.received.first?.proxyAuthorization == "Basic " + Data("tunnel:tunn3l-secret".utf8).base64EncodedString())

        let direct = Self.session { $0.proxyEnvironmentSource = environment.merging(["no_proxy": "127.0.0.1"]) { $1 } }
        #expect(try await Self.echo(direct, host: "127.0.0.1", port: server.port, "direct") == StreamTaskTests.line("echo: direct"))
        #expect(proxy.received.count == 1, "a no_proxy host went through the proxy")

        let tls = Self.session { $0.proxyURL = URL(string: "https://127.0.0.1:\(proxy.port)") }
        do {
            _ = try await Self.echo(tls, host: "127.0.0.1", port: server.port, "never")
            Issue.record("a stream went through an https:// proxy, which streams cannot use")
        } catch {
            #expect(String(reflecting: error).contains("http, socks5 and socks5h"), "\(error)")
        }
        try await server.shutdown()
    }
}
