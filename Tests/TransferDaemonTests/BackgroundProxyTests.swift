import Foundation
import Testing
import TestSupport
import URLLoading

/// A background session's proxies reach transferd: its transfers go where
/// the app's configuration says, not where transferd's own environment does.
extension BackgroundSessionProcessTests {
    @Test("A background download goes through the configuration's proxy, with its credentials; the journal keeps the password sealed")
    func throughProxy() async throws {
        let secret = "bgPr0xy-s3cret"
        let proxy = try TestProxy(user: "bg", password: secret)
        defer { proxy.shutdown() }
        let origin = try await TestOrigin.start()
        origin.route("/small", response: ScriptedResponse(body: "hello"))
        let world = World()
        let target = origin.url("/small").absoluteString
        let lines = try await world.run(["proxied", "download", target, "--proxy", "http://bg:\(secret)@127.0.0.1:\(proxy.port)"])
        #expect(lines.contains("complete 1 nil status 200"), "\(lines) \(world.log)")
        let received = proxy.received
        #expect(received.map(\.requestLine) == ["GET \(target) HTTP/1.1"], "transferd went around the proxy: \(world.log)")
        #expect(received.first?.proxyAuthorization == "Basic " + Data("bg:\(secret)".utf8).base64EncodedString())
        #expect(origin.requests(to: "/small").count == 1)
        let journal = try JournalTests.bytes(in: URL(fileURLWithPath: world.paths.journal).deletingLastPathComponent().path)
        #expect(!journal.isEmpty && journal.range(of: Data(secret.utf8)) == nil, "the proxy's password in the journal's files")
        #expect(!world.log.contains(secret))
        try await origin.shutdown()
    }
}
