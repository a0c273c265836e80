import Foundation

/// Whether a manager trusts a TLS server (AFNetworking's
/// `AFSecurityPolicy`), decided on what the session's trust probe shows:
/// the server's chain, the configured roots' verdict (which includes the
/// host name) and the chain's public key hashes.
///
/// - `.none`: the roots decide (`allowInvalidCertificates` accepts any).
/// - `.publicKey`: a key of the chain must be one of `pinnedPublicKeyHashes`
///   (base64 SHA-256 of the SubjectPublicKeyInfo, curl's `sha256//` form),
///   and the roots must trust the chain unless invalid certificates are allowed.
/// - `.certificate`: a certificate of the chain must be one of
///   `pinnedCertificates` (PEM, compared by their DER bytes); a pinned
///   certificate is an anchor of its own, so the roots need not know it.
///
/// A server the policy trusts is pinned by its leaf key for the session's
/// later connections to it (the session's server-trust rule).
public struct SecurityPolicy: Sendable, Equatable {
    /// What the policy compares.
    public enum PinningMode: Sendable, Equatable {
        case none
        case publicKey
        case certificate
    }

    public var pinningMode: PinningMode
    /// Pinned keys, base64 SHA-256 of SubjectPublicKeyInfo.
    public var pinnedPublicKeyHashes: Set<String>
    /// Pinned certificates, PEM.
    public var pinnedCertificates: [String]
    /// Accepts a chain the roots do not trust (expired, self-signed, another host).
    public var allowInvalidCertificates: Bool

    /// A policy; `.none` with nothing allowed is the roots' own verdict.
    public init(
        pinningMode: PinningMode = .none, pinnedPublicKeyHashes: Set<String> = [], pinnedCertificates: [String] = [],
        allowInvalidCertificates: Bool = false
    ) {
        self.pinningMode = pinningMode
        self.pinnedPublicKeyHashes = pinnedPublicKeyHashes
        self.pinnedCertificates = pinnedCertificates
        self.allowInvalidCertificates = allowInvalidCertificates
    }

    /// Whether the server that showed `trust` is trusted.
    public func evaluate(_ trust: ServerTrust) -> Bool {
        switch pinningMode {
        case .none:
            return trust.isTrustedByRoots || allowInvalidCertificates
        case .publicKey:
            guard trust.isTrustedByRoots || allowInvalidCertificates else { return false }
            return trust.publicKeyHashes.contains { !$0.isEmpty && pinnedPublicKeyHashes.contains($0) }
        case .certificate:
            let pinned = Set(pinnedCertificates.compactMap(Certificate.der(pem:)))
            return trust.certificates.contains { pem in Certificate.der(pem: pem).map(pinned.contains) ?? false }
        }
    }

    /// The answer to a server-trust challenge: trust, or refuse (the task
    /// fails with `serverCertificateUntrusted` and nothing is sent).
    func answer(_ challenge: AuthenticationChallenge) -> (Session.AuthChallengeDisposition, Credential?) {
        guard let trust = challenge.serverTrust else { return (.performDefaultHandling, nil) }
        return evaluate(trust) ? (.useCredential, .serverTrust) : (.useCredential, nil)
    }
}

extension HTTPSessionManager {
    /// Decides server trust for the manager's session; nil leaves it to the
    /// configured roots. A `setSessionDidReceiveChallenge` closure, when
    /// set, is asked instead.
    public var securityPolicy: SecurityPolicy? {
        get { router.policy.withLock { $0 } }
        set { router.policy.withLock { $0 = newValue } }
    }
}
