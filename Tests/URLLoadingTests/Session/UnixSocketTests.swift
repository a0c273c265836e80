import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
import TestSupport
@testable import URLLoading

/// `http+unix://` URLs: a server on a Unix-domain socket, the socket's path
/// percent-encoded as the host.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(1)))) struct UnixSocketTests {
    static func socketPath() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("u-\(UUID().uuidString.prefix(8)).sock").path
    }

    static func session() -> Session {
        let configuration = SessionConfiguration.ephemeral
        configuration.urlCache = nil
        return Session(configuration: configuration)
    }

    @Test("The socket's path and libcurl's URL from an http+unix URL; a relative, too long or NUL-holding path is badURL")
    func split() throws {
        let url = try #require(URL(string: "http+unix://%2Fvar%2Frun%2Fdocker.sock/v1.43/info?all=1#top"))
        let split = try UnixSocketURL.split(url).get()
        #expect(split.socketPath == "/var/run/docker.sock")
        #expect(split.transferURL == "http://localhost/v1.43/info?all=1")
        let bare = try UnixSocketURL.split(try #require(URL(string: "https+unix://%2Fs?x"))).get()
        #expect(bare.transferURL == "https://localhost/?x")
        let long = "%2F" + String(repeating: "a", count: UnixSocketURL.maximumPathBytes)
        for bad in ["http+unix://relative.sock/x", "http+unix://\(long)/x", "http+unix://%2Fa%00b/x"] {
            let url = try #require(URL(string: bad))
            #expect(throws: SessionError.self, "\(bad)") { try UnixSocketURL.split(url).get() }
        }
    }

    @Test("A server on a Unix socket: a GET, a relative redirect on the same socket, a cookie kept for the socket and sent back")
    func requests() async throws {
        let path = Self.socketPath()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let origin = try await TestOrigin.start(unixSocket: path)
        origin.route("/hello", response: ScriptedResponse(headers: [HeaderField("Set-Cookie", "id=7; Path=/")], body: "over the socket"))
        origin.route("/from", response: ScriptedResponse(status: 302, headers: [HeaderField("Location", "/to")], body: ""))
        origin.route("/to", response: ScriptedResponse(body: "redirected"))
        let session = Self.session()
        let (data, response) = try await session.data(from: origin.url("/hello"))
        #expect(data == Data("over the socket".utf8))
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        #expect(origin.requests(to: "/hello").first?.header("Host") == "localhost")
        let (redirected, last) = try await session.data(from: origin.url("/from"))
        #expect(redirected == Data("redirected".utf8))
        #expect(last.url == origin.url("/to"))
        #expect(origin.requests(to: "/to").first?.header("Cookie") == "id=7")
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("The configuration's socket carries every http request, whatever its host; a bad one fails each task with badURL")
    func configurationsSocket() async throws {
        let path = Self.socketPath()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let origin = try await TestOrigin.start(unixSocket: path)
        origin.route("/v1/info", response: ScriptedResponse(body: "daemon"))
        let configuration = SessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.unixSocketPath = path
        let session = Session(configuration: configuration)
        let url = try #require(URL(string: "http://docker.invalid/v1/info"))
        #expect(try await session.data(from: url).0 == Data("daemon".utf8))
        #expect(origin.requests(to: "/v1/info").first?.header("Host") == "docker.invalid")
        configuration.unixSocketPath = "relative.sock"
        let bad = Session(configuration: configuration)
        let error = await #expect(throws: URLError.self) { _ = try await bad.data(from: url) }
        #expect(error?.code == .badURL)
        session.finishTasksAndInvalidate()
        bad.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("nginx on a Unix socket: a file by http+unix URL, and by a plain http URL through the configuration's socket")
    func nginx() async throws {
        guard TestNginx.isInstalled else {
            Issue.record("nginx is not installed: run tools/install-deps")
            return
        }
        let path = Self.socketPath()
        let nginx = try await TestNginx.start(socketPath: path)
        let contents = Data((0..<70_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        try nginx.serve("v1.43-info.json", contents)
        let encoded = try #require(path.addingPercentEncoding(withAllowedCharacters: .alphanumerics))
        let session = Self.session()
        let (data, response) = try await session.data(from: try #require(URL(string: "http+unix://\(encoded)/v1.43-info.json")))
        #expect(data == contents)
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        #expect((response as? HTTPURLResponse)?.value(forHTTPHeaderField: "Server")?.hasPrefix("nginx") == true)
        let missing = try await session.data(from: try #require(URL(string: "http+unix://\(encoded)/absent")))
        #expect((missing.1 as? HTTPURLResponse)?.statusCode == 404)
        let configuration = SessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.unixSocketPath = path
        let viaConfiguration = Session(configuration: configuration)
        #expect(try await viaConfiguration.data(from: try #require(URL(string: "http://docker.invalid/v1.43-info.json"))).0 == contents)
        #expect(nginx.requests == ["GET /v1.43-info.json host=localhost", "GET /absent host=localhost", "GET /v1.43-info.json host=docker.invalid"])
        session.finishTasksAndInvalidate()
        viaConfiguration.finishTasksAndInvalidate()
        await nginx.shutdown()
    }

    @Test("A server on the network cannot send the client into a Unix socket: its redirect is the response")
    func noRedirectIntoASocket() async throws {
        let path = Self.socketPath()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let local = try await TestOrigin.start(unixSocket: path)
        local.route("/admin", response: ScriptedResponse(body: "local daemon"))
        let remote = try await TestOrigin.start()
        remote.route("/r", response: ScriptedResponse(status: 302, headers: [HeaderField("Location", local.url("/admin").absoluteString)], body: ""))
        let session = Self.session()
        let (_, response) = try await session.data(from: remote.url("/r"))
        #expect((response as? HTTPURLResponse)?.statusCode == 302)
        #expect(local.requests.isEmpty)
        session.finishTasksAndInvalidate()
        try await remote.shutdown()
        try await local.shutdown()
    }

    @Test("A socket path that is not absolute, or one too long, fails the task with badURL and connects nowhere")
    func badPaths() async throws {
        let session = Self.session()
        let long = "%2F" + String(repeating: "a", count: UnixSocketURL.maximumPathBytes)
        for bad in ["http+unix://relative.sock/x", "http+unix://\(long)/x"] {
            let url = try #require(URL(string: bad))
            let error = await #expect(throws: URLError.self) { _ = try await session.data(from: url) }
            #expect(error?.code == .badURL, "\(bad)")
        }
        session.finishTasksAndInvalidate()
    }
}
