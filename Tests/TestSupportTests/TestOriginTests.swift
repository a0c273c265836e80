import CCurl
import Foundation
import Testing
import TestSupport

/// The loopback origin the other suites test against: it must do exactly
/// what a test scripts, byte for byte.
@Suite struct TestOriginTests {
    @Test func scriptedRouteAnswersAndLogsTheRequest() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/hello") { request in
            ScriptedResponse(status: 201, headers: [HeaderField("X-Echo", request.header("X-Test") ?? "none")], body: "hi there")
        }
        let response = try await CurlTestClient().get(origin.url("/hello?q=1"), headers: ["X-Test: 42"])
        #expect(response.status == 201)
        #expect(response.header("X-Echo") == "42")
        #expect(response.header("Content-Length") == "8")
        #expect(response.body == Array("hi there".utf8))
        let logged = origin.requests(to: "/hello")
        #expect(logged.count == 1)
        #expect(logged.first?.method == "GET")
        #expect(logged.first?.query == "q=1")
        #expect(logged.first?.header("x-test") == "42")
        try await origin.shutdown()
    }

    @Test func unknownRouteIs404() async throws {
        let origin = try await TestOrigin.start()
        let response = try await CurlTestClient().get(origin.url("/nothing"))
        #expect(response.status == 404)
        try await origin.shutdown()
    }

    @Test func conditionalRouteAnswers304ForMatchingETag() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/doc", Routes.conditional(etag: "\"v1\"", body: Array("content".utf8), headers: [HeaderField("Cache-Control", "max-age=60")]))
        let client = CurlTestClient()
        let full = try await client.get(origin.url("/doc"))
        #expect(full.status == 200)
        #expect(full.header("ETag") == "\"v1\"")
        #expect(full.body == Array("content".utf8))
        let notModified = try await client.get(origin.url("/doc"), headers: ["If-None-Match: \"v0\", W/\"v1\""])
        #expect(notModified.status == 304)
        #expect(notModified.body.isEmpty)
        #expect(notModified.header("ETag") == "\"v1\"")
        let changed = try await client.get(origin.url("/doc"), headers: ["If-None-Match: \"v2\""])
        #expect(changed.status == 200)
        // One connection carried all three (keep-alive works).
        #expect(Set(origin.requests(to: "/doc").map(\.connectionNumber)).count == 1)
        try await origin.shutdown()
    }

    @Test func tlsRequestIsVerifiedAgainstTheTestCA() async throws {
        let certificates = try TestCertificates.shared()
        let origin = try await TestOrigin.start(tls: certificates.server)
        origin.route("/secure") { request in
            ScriptedResponse(body: request.overTLS ? "tls" : "plain")
        }
        #expect(origin.baseURL.scheme == "https")
        let response = try await CurlTestClient().get(origin.url("/secure"), caFile: certificates.caCertificatePath)
        #expect(response.status == 200)
        #expect(response.body == Array("tls".utf8))
        // Against the system's roots the test CA is unknown: verification fails.
        let failure = await #expect(throws: CurlTestClient.Failure.self) {
            _ = try await CurlTestClient().get(origin.url("/secure"), caFile: "/etc/ssl/certs/ca-certificates.crt")
        }
        #expect(failure?.code == CURLE_PEER_FAILED_VERIFICATION)
        try await origin.shutdown()
    }

    @Test func earlyCloseEndsTheBodyShort() async throws {
        let origin = try await TestOrigin.start()
        origin.route(
            "/short",
            response: ScriptedResponse(
                parts: [.bytes(Array(repeating: 0x61, count: 100)), .closeConnection], framing: .declaredLength(1000)))
        let failure = await #expect(throws: CurlTestClient.Failure.self) {
            _ = try await CurlTestClient().get(origin.url("/short"))
        }
        #expect(failure?.code == CURLE_PARTIAL_FILE)
        #expect(failure?.received.body.count == 100)
        try await origin.shutdown()
    }

    @Test func chunkedPartsWithPausesArriveWhole() async throws {
        let origin = try await TestOrigin.start()
        origin.route(
            "/chunks",
            response: ScriptedResponse(
                parts: [.bytes(Array("one,".utf8)), .pause(.milliseconds(20)), .bytes(Array("two".utf8)), .pattern(offset: 0, count: 200_000)],
                framing: .chunked))
        let response = try await CurlTestClient().get(origin.url("/chunks"))
        #expect(response.header("Transfer-Encoding") == "chunked")
        #expect(response.body.count == 7 + 200_000)
        #expect(Array(response.body.prefix(7)) == Array("one,two".utf8))
        #expect(Array(response.body.dropFirst(7)) == TestOrigin.pattern(offset: 0, count: 200_000))
        try await origin.shutdown()
    }

    @Test func headRequestGetsHeadersOnly() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/thing", response: ScriptedResponse(body: "0123456789"))
        let response = try await CurlTestClient().get(origin.url("/thing"), head: true)
        #expect(response.status == 200)
        #expect(response.header("Content-Length") == "10")
        #expect(response.body.isEmpty)
        #expect(origin.requests.first?.method == "HEAD")
        try await origin.shutdown()
    }

    @Test func basicAuthRouteChallengesThenServes() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/private", Routes.basicAuth(realm: "test", user: "ann", password: "pw", then: ScriptedResponse(body: "ok")))
        let client = CurlTestClient()
        let challenged = try await client.get(origin.url("/private"))
        #expect(challenged.status == 401)
        #expect(challenged.header("WWW-Authenticate")?.hasPrefix("Basic realm=\"test\"") == true)
        let token = Data("ann:pw".utf8).base64EncodedString()
        let served = try await client.get(origin.url("/private"), headers: ["Authorization: Basic \(token)"])
        #expect(served.status == 200)
        try await origin.shutdown()
    }

    @Test("A reserved port refuses connections, cannot be bound by another server even with SO_REUSEADDR, and an origin adopting it answers there")
    func reservedPortIsHeldUntilAdopted() async throws {
        let reserved = try ReservedPort()
        let url = try #require(URL(string: "http://127.0.0.1:\(reserved.port)/late"))
        let client = CurlTestClient()
        do {
            _ = try await client.get(url)
            Issue.record("a reserved port accepted a connection")
        } catch {
            #expect(error.code == CURLE_COULDNT_CONNECT)
        }
        // What another test's server does when the kernel offers it this port.
        let other = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(other) }
        var one: CInt = 1
        #expect(setsockopt(other, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<CInt>.size)) == 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = in_addr_t(0x7f00_0001).bigEndian
        address.sin_port = UInt16(reserved.port).bigEndian
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(other, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        let bindError = errno
        #expect(bound == -1 && bindError == EADDRINUSE)
        let origin = try await TestOrigin.start(adopting: reserved, routes: ["/late": ScriptedResponse(body: "reached")])
        #expect(origin.port == reserved.port)
        let response = try await client.get(url)
        #expect(response.status == 200 && response.body == Array("reached".utf8))
        try await origin.shutdown()
    }
}
