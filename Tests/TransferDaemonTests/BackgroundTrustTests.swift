import Foundation
import Testing
import TestSupport

/// A background session's trust roots reach transferd: an origin with a
/// private CA's certificate is trusted by the app's configuration, not by
/// transferd's system store.
extension BackgroundSessionProcessTests {
    @Test("A background download from an origin of a private CA: trusted with the configuration's roots, refused without them")
    func trustRoots() async throws {
        let certificates = try TestCertificates.shared()
        let origin = try await TestOrigin.start(tls: certificates.server)
        origin.route("/small", response: ScriptedResponse(body: "hello"))
        let world = World()
        let url = origin.url("/small").absoluteString
        let trusted = try await world.run(["roots", "download", url, "--trust-roots", certificates.caCertificatePath])
        #expect(trusted.contains("complete 1 nil status 200"), "\(trusted) \(world.log)")
        #expect(origin.requests(to: "/small").count == 1)
        let refused = try await world.run(["no-roots", "download", url])
        #expect(refused.contains { $0.hasPrefix("complete 1 ") && !$0.hasPrefix("complete 1 nil") }, "\(refused)")
        #expect(origin.requests(to: "/small").count == 1, "a request reached the origin over an untrusted connection")
        try await origin.shutdown()
    }

    @Test("A background download keeps the configuration's TLS versions: an origin that speaks only TLS 1.3 is refused with a maximum of 1.2, served without it")
    func tlsVersions() async throws {
        let certificates = try TestCertificates.shared()
        let origin = try await TestOrigin.start(tls: certificates.server.requiringTLS13())
        origin.route("/small", response: ScriptedResponse(body: "hello"))
        let world = World()
        let url = origin.url("/small").absoluteString
        let capped = try await world.run(["capped", "download", url, "--trust-roots", certificates.caCertificatePath, "--tls-max", "1.2"])
        #expect(capped.contains { $0.hasPrefix("complete 1 ") && !$0.hasPrefix("complete 1 nil") }, "\(capped)\n\(world.log)")
        #expect(origin.requests(to: "/small").isEmpty, "a request reached the origin over TLS the app did not allow")
        let open = try await world.run(["open", "download", url, "--trust-roots", certificates.caCertificatePath])
        #expect(open.contains("complete 1 nil status 200"), "\(open)\n\(world.log)")
        try await origin.shutdown()
    }
}
