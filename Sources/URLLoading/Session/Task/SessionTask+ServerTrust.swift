import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Transport

/// TLS challenges: server trust and client certificates.
///
/// Server trust, when a delegate `evaluatesServerTrust`:
/// ```
/// new host:port ─probe (connect only, chain collected, nothing sent)→ challenge (session delegate, then task's)
///   useCredential(.serverTrust) → pinned: later transfers accept exactly that public key
///   default handling / reject   → the configured roots decide (libcurl's verification)
///   useCredential(nil / other)  → the task fails: serverCertificateUntrusted
///   cancel                      → the task fails: cancelled
/// ```
/// The decision holds for the session's life; no request byte reaches a
/// server before it.
///
/// Client certificates: a handshake the server fails for want of a client
/// certificate becomes a client-certificate challenge; the identity the
/// delegate (or the store's default for the space) gives is used for the
/// hop sent again.
extension SessionTask {
    /// How a session trusts a host.
    enum TrustDecision: Sendable, Equatable {
        /// The configured roots decide.
        case roots
        /// Exactly this public key (SHA-256 of the SPKI, base64) is accepted.
        case pinned(String)
    }

    /// Applies the session's trust decision for the hop's host, or starts
    /// the probe that leads to one; returns true when the hop waits for it.
    func prepareServerTrust(_ transfer: inout TransferRequest, url: URL, hop: Hop, session: Session) -> Bool {
        guard url.scheme?.lowercased() == "https", let host = url.host?.lowercased(),
            (session.delegate?.evaluatesServerTrust ?? false) || (delegate?.evaluatesServerTrust ?? false)
        else { return false }
        let port = url.port ?? 443
        switch session.trustDecision(host: host, port: port) {
        case .roots:
            return false
        case .pinned(let hash):
            transfer.tls.verifyPeer = false
            transfer.tls.pinnedPublicKey = "sha256//" + hash
            return false
        case nil:
            if locked.withLock({ $0.machine.trust.skipsProbe }) { return false }
            guard locked.withLock({ $0.machine.isCurrent(hop) && $0.machine.wait(.serverTrust) }) else { return true }
            probe(transfer, verifying: true, host: host, port: port, url: url, hop: hop, session: session)
            return true
        }
    }

    /// Connects without sending anything and collects the chain: first
    /// verifying (success means the roots trust the server, name included),
    /// then, if verification failed, without verifying, to show the chain.
    private func probe(_ transfer: TransferRequest, verifying: Bool, host: String, port: Int, url: URL, hop: Hop, session: Session) {
        var probe = TransferRequest(url: transfer.url, method: "GET")
        probe.connectOnly = true
        probe.tls = transfer.tls
        probe.tls.verifyPeer = verifying
        probe.tls.collectsCertificates = true
        probe.proxy = transfer.proxy
        probe.connectTimeout = transfer.connectTimeout
        probe.totalTimeout = transfer.connectTimeout
        // startTransfer fails the task before any probe when there is no transport.
        guard let transport = session.transport else { return }
        transport.start(
            probe,
            observer: CompletionObserver { [weak self] result in
                guard let self else { return }
                if verifying, case .failure(let error) = result, error.failure == .serverCertificateUntrusted {
                    self.probe(transfer, verifying: false, host: host, port: port, url: url, hop: hop, session: session)
                    return
                }
                self.trustProbeCompleted(result, trusted: verifying, host: host, port: port, url: url, hop: hop, session: session)
            })
    }

    private func trustProbeCompleted(
        _ result: Result<TransferMetrics, TransferError>, trusted: Bool, host: String, port: Int, url: URL, hop: Hop, session: Session
    ) {
        guard locked.withLock({ $0.machine.isCurrent(hop) }) else { return }
        guard case .success(let metrics) = result, !metrics.certificateChain.isEmpty else {
            // The real transfer reports the failure (cannot connect, handshake) as it is.
            waitEnded(for: hop) { $0.machine.trust.probeFailed() }
            return
        }
        let trust = ServerTrust(host: host, port: port, certificates: metrics.certificateChain, isTrustedByRoots: trusted)
        let space = ProtectionSpace(host: host, port: port, protocol: "https", authenticationMethod: .serverTrust)
        let challenge = AuthenticationChallenge(
            protectionSpace: space, proposedCredential: nil, previousFailureCount: 0, failureResponse: nil,
            serverChallenge: nil, serverTrust: trust)
        events.enqueue { [self] in
            let answer = await self.askSessionLevel(challenge, session: session)
            switch answer?.disposition ?? .performDefaultHandling {
            case .performDefaultHandling, .rejectProtectionSpace:
                session.setTrustDecision(.roots, host: host, port: port)
            case .useCredential:
                guard answer?.credential?.kind == .serverTrust, let hash = trust.leafPublicKeyHash else {
                    self.perform(
                        self.locked.withLock {
                            $0.machine.fail(
                                SessionError(
                                    .serverCertificateUntrusted, failingURL: url, message: "the delegate did not trust the server's certificate"))
                        })
                    return
                }
                session.setTrustDecision(.pinned(hash), host: host, port: port)
            case .cancelAuthenticationChallenge:
                self.perform(
                    self.locked.withLock {
                        $0.machine.fail(
                            SessionError(
                                .cancelled, failingURL: url, message: "the delegate cancelled the server-trust challenge"))
                    })
                return
            }
            self.waitEnded(for: hop)
        }
    }

    /// Session-level challenges: the session delegate's method
    /// first, then the task-level method of the task's (or session's) delegate.
    func askSessionLevel(_ challenge: AuthenticationChallenge, session: Session) async -> ChallengeReply? {
        if let sessionDelegate = session.delegate,
            let answer = await askIfImplemented(sessionDelegate, { await $0.urlSession(session, didReceive: challenge) })
        {
            return ChallengeReply(answer)
        }
        return await askDelegate { ChallengeReply(await $0.urlSession(session, task: self, didReceive: challenge)) }
    }

    /// Whether a failed handshake means the server wants a client certificate.
    static func asksForClientCertificate(_ error: TransferError) -> Bool {
        error.failure == .clientCertificateRequired
    }

    /// A client-certificate challenge after such a failure; returns whether
    /// the hop is being answered (it is sent again, or the task fails).
    func handleClientCertificateRequest(after error: TransferError, of hop: Hop) -> Bool {
        guard let session, let url = currentRequest?.url, url.scheme?.lowercased() == "https", let host = url.host,
            Self.asksForClientCertificate(error),
            locked.withLock({ $0.machine.isCurrent(hop) && $0.machine.waitForClientCertificate() })
        else { return false }
        let space = ProtectionSpace(host: host, port: url.port ?? 443, protocol: "https", authenticationMethod: .clientCertificate)
        let stored = session.credentialStore?.defaultCredential(for: space)
        let challenge = AuthenticationChallenge(
            protectionSpace: space, proposedCredential: stored, previousFailureCount: 0, failureResponse: nil, serverChallenge: nil)
        events.enqueue { [self] in
            let answer = await self.askSessionLevel(challenge, session: session)
            let credential: Credential?
            switch answer?.disposition ?? .performDefaultHandling {
            case .useCredential: credential = answer?.credential
            case .performDefaultHandling, .rejectProtectionSpace: credential = stored
            case .cancelAuthenticationChallenge:
                self.perform(
                    self.locked.withLock {
                        $0.machine.fail(
                            SessionError(
                                .cancelled, failingURL: url, message: "the delegate cancelled the client-certificate challenge"))
                    })
                return
            }
            guard let credential, case .clientIdentity = credential.kind else {
                self.perform(
                    self.locked.withLock {
                        $0.machine.fail(
                            SessionError(
                                .clientCertificateRejected, failingURL: url, message: "the server requires a client certificate and none was given"))
                    })
                return
            }
            if credential.persistence != .none { session.credentialStore?.set(credential, for: space) }
            self.waitEnded(for: hop) { $0.machine.trust.use(credential) }
        }
        return true
    }

    /// The client identity for a hop's TLS settings.
    static func apply(_ identity: Credential?, to transfer: inout TransferRequest) {
        guard let identity, case .clientIdentity(let certificate, let key, let passphrase) = identity.kind
        else { return }
        transfer.tls.clientCertificateFile = certificate
        transfer.tls.clientKeyFile = key
        transfer.tls.clientKeyPassphrase = passphrase
    }
}

/// A transfer observer that only wants the end (the trust probe).
final class CompletionObserver: TransferObserver, Sendable {
    let done: @Sendable (Result<TransferMetrics, TransferError>) -> Void
    init(_ done: @escaping @Sendable (Result<TransferMetrics, TransferError>) -> Void) { self.done = done }
    func transferDidReceiveHead(_ head: ResponseHead) {}
    func transferDidReceive(_ chunk: UnsafeRawBufferPointer) -> Bool { true }
    func transferDidSendBody(sent: Int64, total: Int64) {}
    func transferDidComplete(_ result: Result<TransferMetrics, TransferError>) { done(result) }
}
