import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
import TestSupport
@testable import URLLoading

/// The manager's server-trust policy against the TLS origin, whose test CA
/// the sessions here do not trust.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(2)))) struct SecurityPolicyTests {
    static func manager(_ origin: TestOrigin, _ policy: SecurityPolicy?) -> HTTPSessionManager {
        let configuration = SessionConfiguration.ephemeral
        configuration.urlCache = nil
        let manager = HTTPSessionManager(baseURL: origin.url("/"), configuration: configuration)
        manager.securityPolicy = policy
        return manager
    }

    static func fetch(_ manager: HTTPSessionManager) async -> Result<String, ManagerError> {
        do throws(ManagerError) {
            return .success(try await manager.request(.get, "x", serializer: StringResponseSerializer()).value)
        } catch {
            return .failure(error)
        }
    }

    static func refusedAsUntrusted(_ result: Result<String, ManagerError>) -> Bool {
        guard case .failure(let error) = result else { return false }
        return error.kind == .transport && (error.underlying as? URLError)?.code == .serverCertificateUntrusted
    }

    @Test("Pinning: the server's key or certificate is accepted, another is refused before any request; allowInvalidCertificates opens the roots' verdict")
    func policies() async throws {
        let certificates = try TestCertificates.shared()
        let origin = try await TestOrigin.start(tls: certificates.server)
        origin.route("/x", response: ScriptedResponse(body: "trusted"))
        let leaf = try String(contentsOfFile: certificates.server.certificatePath, encoding: .utf8)
        let other = try String(contentsOfFile: certificates.clientCertificatePath, encoding: .utf8)
        let pin = try #require(Certificate.publicKeyHash(pem: leaf))
        let cases: [(String, SecurityPolicy?, Bool)] = [
            ("no policy: the roots decide", nil, false),
            ("none", SecurityPolicy(), false),
            ("none, invalid allowed", SecurityPolicy(allowInvalidCertificates: true), true),
            ("key pinned, roots refuse", SecurityPolicy(pinningMode: .publicKey, pinnedPublicKeyHashes: [pin]), false),
            ("key pinned, invalid allowed", SecurityPolicy(pinningMode: .publicKey, pinnedPublicKeyHashes: [pin], allowInvalidCertificates: true), true),
            ("another key", SecurityPolicy(pinningMode: .publicKey, pinnedPublicKeyHashes: ["AAAA"], allowInvalidCertificates: true), false),
            ("certificate pinned", SecurityPolicy(pinningMode: .certificate, pinnedCertificates: [leaf]), true),
            ("another certificate", SecurityPolicy(pinningMode: .certificate, pinnedCertificates: [other]), false),
        ]
        var sent = 0
        for (name, policy, trusted) in cases {
            let manager = Self.manager(origin, policy)
            let result = await Self.fetch(manager)
            if trusted {
                #expect((try? result.get()) == "trusted", "\(name): \(result)")
                sent += 1
            } else {
                #expect(Self.refusedAsUntrusted(result), "\(name): \(result)")
            }
            #expect(origin.requests(to: "/x").count == sent, "\(name): nothing sent to an untrusted server")
            manager.invalidateSession(cancelingTasks: true)
        }
        try await origin.shutdown()
    }
}
