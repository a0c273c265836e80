import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
import Testing
import TestSupport
@testable import URLLoading

/// Server trust and client certificates against the TLS origin: accepted, pinned, rejected, default handling with and without the
/// test CA as a root, and a server that requires a client certificate.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(1)))) struct TLSChallengeTests {
    static func session(_ delegate: (any SessionDelegate)?, roots: String? = nil) throws -> Session {
        let configuration = SessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.trustRootsFile = roots
        return Session(configuration: configuration, delegate: delegate)
    }

    static func session(_ delegate: ChallengeDelegate, roots: String? = nil) throws -> Session {
        try session(delegate.delegate, roots: roots)
    }

    /// The leaf's pin computed by openssl, independently of our DER reader.
    static func opensslPin(_ certificatePath: String) async throws -> String {
        let result = try await ChildProcess.run(
            URL(fileURLWithPath: "/bin/sh"),
            [
                "-c", "openssl x509 -in '\(certificatePath)' -pubkey -noout | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64",
            ])
        #expect(result.status == 0, "\(result.standardError)")
        return result.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test("A server the roots do not trust is accepted by the delegate; nothing is sent before it decides")
    func acceptedByDelegate() async throws {
        let certificates = try TestCertificates.shared()
        let origin = try await TestOrigin.start(tls: certificates.server)
        origin.route("/x", response: ScriptedResponse(body: "over tls"))
        let delegate = ChallengeDelegate(
            evaluatesServerTrust: true,
            session: { challenge in
                challenge.protectionSpace.authenticationMethod == .serverTrust && challenge.serverTrust?.isTrustedByRoots == false
                    ? use(.serverTrust) : (.cancelAuthenticationChallenge, nil)
            })
        let session = try Self.session(delegate)
        let (data, _) = try await session.data(from: origin.url("/x"))
        #expect(String(decoding: data, as: UTF8.self) == "over tls")
        _ = try await session.data(from: origin.url("/x"))
        let seen = delegate.seen
        #expect(seen.count == 1)
        #expect(seen.first?.serverTrust?.certificates.first?.contains("BEGIN CERTIFICATE") == true)
        #expect(origin.requests.count == 2)
        session.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("Pinning by public key hash: the matching pin is accepted, another one cancels before any request")
    func pinning() async throws {
        let certificates = try TestCertificates.shared()
        let origin = try await TestOrigin.start(tls: certificates.server)
        origin.route("/x", response: ScriptedResponse(body: "pinned"))
        let pin = try await Self.opensslPin(certificates.server.certificatePath)
        let pinning = ChallengeDelegate(
            evaluatesServerTrust: true,
            session: { challenge in
                challenge.serverTrust?.leafPublicKeyHash == pin ? use(.serverTrust) : (.cancelAuthenticationChallenge, nil)
            })
        let session = try Self.session(pinning)
        #expect(try await session.data(from: origin.url("/x")).0 == Data("pinned".utf8))
        let wrongPin = ChallengeDelegate(
            evaluatesServerTrust: true,
            session: { challenge in
                challenge.serverTrust?.leafPublicKeyHash == "AAAA" ? use(.serverTrust) : (.cancelAuthenticationChallenge, nil)
            })
        let other = try Self.session(wrongPin)
        await #expect {
            _ = try await other.data(from: origin.url("/x"))
        } throws: { ($0 as? URLError)?.code == .cancelled }
        #expect(origin.requests.count == 1)
        session.finishTasksAndInvalidate()
        other.finishTasksAndInvalidate()
        try await origin.shutdown()
    }

    @Test("Rejected (useCredential nil) fails as untrusted; default handling follows the roots; a task-level method gets the challenge when the session-level one is missing")
    func rejectedAndDefault() async throws {
        let certificates = try TestCertificates.shared()
        let origin = try await TestOrigin.start(tls: certificates.server)
        origin.route("/x", response: ScriptedResponse(body: "ok"))
        let rejecting = try Self.session(ChallengeDelegate(evaluatesServerTrust: true, session: { _ in use(nil) }))
        await #expect {
            _ = try await rejecting.data(from: origin.url("/x"))
        } throws: { ($0 as? URLError)?.code == .serverCertificateUntrusted }
        let defaultNoRoots = try Self.session(ChallengeDelegate(evaluatesServerTrust: true, task: { _ in (.performDefaultHandling, nil) }))
        await #expect {
            _ = try await defaultNoRoots.data(from: origin.url("/x"))
        } throws: { ($0 as? URLError)?.code == .serverCertificateUntrusted }
        let taskLevel = ChallengeDelegate(evaluatesServerTrust: true, task: { _ in (.performDefaultHandling, nil) })
        let withRoots = try Self.session(taskLevel, roots: certificates.caCertificatePath)
        #expect(try await withRoots.data(from: origin.url("/x")).0 == Data("ok".utf8))
        #expect(taskLevel.seen.first?.serverTrust?.isTrustedByRoots == true)
        #expect(origin.requests.count == 1)
        for s in [rejecting, defaultNoRoots, withRoots] { s.finishTasksAndInvalidate() }
        try await origin.shutdown()
    }

    @Test("A server that requires a client certificate gets the identity the delegate gives; without one the task fails clearly")
    func clientCertificate() async throws {
        let certificates = try TestCertificates.shared()
        let origin = try await TestOrigin.start(tls: certificates.server.requiringClientCertificate(issuedBy: certificates.caCertificatePath))
        origin.route("/x", response: ScriptedResponse(body: "hello client"))
        final class IdentityDelegate: SessionDelegate, Sendable {
            let identity: Credential?
            let asked = Lock(0)
            init(_ identity: Credential?) { self.identity = identity }
            func urlSession(_ session: Session, didReceive challenge: AuthenticationChallenge) async -> ChallengeAnswer {
                guard challenge.protectionSpace.authenticationMethod == .clientCertificate else { return (.performDefaultHandling, nil) }
                asked.withLock { $0 += 1 }
                return use(identity)
            }
        }
        let giving = IdentityDelegate(Credential(certificatePath: certificates.clientCertificatePath, privateKeyPath: certificates.clientPrivateKeyPath))
        let session = try Self.session(giving, roots: certificates.caCertificatePath)
        #expect(try await session.data(from: origin.url("/x")).0 == Data("hello client".utf8))
        #expect(giving.asked.withLock { $0 } == 1)
        let refusing = try Self.session(IdentityDelegate(nil), roots: certificates.caCertificatePath)
        await #expect {
            _ = try await refusing.data(from: origin.url("/x"))
        } throws: { ($0 as? URLError)?.code == .clientCertificateRejected }
        session.finishTasksAndInvalidate()
        refusing.finishTasksAndInvalidate()
        try await origin.shutdown()
    }
}
