extension SessionTask {
    /// A task's authentication rounds, across its hops: what
    /// the next hop and the current one carry, failures per space and user,
    /// rejected spaces, stale nonces in a row. Changed only by the named
    /// transitions below, under the task's lock; tested without sockets.
    struct AuthenticationState: Sendable {
        /// Failed attempts per space in this task.
        private(set) var failures: [ProtectionSpace: Int] = [:]
        /// Users whose credential failed, per space (default handling skips them).
        private(set) var failedUsers: [ProtectionSpace: Set<String>] = [:]
        /// Spaces the delegate rejected.
        private(set) var rejected: Set<ProtectionSpace> = []
        /// The credentials to send with the next hop.
        private(set) var pending: SentAuthorization?
        /// The credentials the current hop carries.
        private(set) var sent: SentAuthorization?
        /// Stale nonces answered in a row, with no other answer between.
        private(set) var staleInARow = 0

        /// A new hop begins (the task's machine says when): it carries what
        /// was queued for it, else nothing. A hop that starts again after a
        /// wait is no new hop, and carries what it carried.
        mutating func beginHop() {
            sent = pending
            pending = nil
        }

        /// The hop also carries credentials the session remembers for the
        /// origin; they count as sent when nothing was queued.
        mutating func sendRemembered(_ remembered: SentAuthorization) {
            if sent == nil { sent = remembered }
        }

        /// A challenge answered with these credentials: the next hop carries them.
        mutating func queue(_ authorization: SentAuthorization) {
            pending = authorization
        }

        /// A stale nonce may be answered again with the same credential:
        /// at most `maximum` times in a row. False once that is reached.
        mutating func answerStaleNonce(maximum: Int) -> Bool {
            guard staleInARow < maximum else { return false }
            staleInARow += 1
            return true
        }

        /// A challenge without a stale nonce ends a run of them.
        mutating func noStaleNonce() {
            staleInARow = 0
        }

        /// The credentials sent were refused.
        mutating func failed(_ sent: SentAuthorization) {
            failures[sent.space, default: 0] += 1
            if let user = sent.credential.user { failedUsers[sent.space, default: []].insert(user) }
        }

        /// The delegate rejected the space: the next challenge is tried.
        mutating func reject(_ space: ProtectionSpace) {
            rejected.insert(space)
        }

        /// A head that is not a challenge for the space the credentials
        /// were sent to: they worked. Returns them, once.
        mutating func succeeded(status: Int) -> SentAuthorization? {
            guard let sent, status != (sent.space.isProxy ? 407 : 401) else { return nil }
            self.sent = nil
            return sent
        }
    }
}

extension SessionTask {
    /// A task's TLS questions: whether the server-trust probe
    /// failed (the real transfer then reports why), and the client identity
    /// asked for once and kept for the task's later hops.
    struct TrustState: Sendable {
        /// The probe failed: hops go without it.
        private(set) var skipsProbe = false
        /// The client identity the delegate or the store gave.
        private(set) var clientIdentity: Credential?
        private(set) var askedForClient = false

        /// The server's certificate could not be read for the delegate.
        mutating func probeFailed() {
            skipsProbe = true
        }

        /// A server asking for a certificate is asked about once per task,
        /// and not when an identity is already given.
        var mayAskForClientCertificate: Bool { clientIdentity == nil && !askedForClient }

        mutating func askedForClientCertificate() {
            askedForClient = true
        }

        /// The identity every later hop presents.
        mutating func use(_ identity: Credential) {
            clientIdentity = identity
        }
    }
}
