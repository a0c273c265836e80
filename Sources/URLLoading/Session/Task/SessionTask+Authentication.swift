import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Transport

/// Authentication challenges in a task: a 401 or 407 is
/// answered by the delegate (routed as A2 says) or by default handling, and
/// the hop is sent again with credentials; a credential that works is kept
/// (as its persistence says) and sent pre-emptively to the same space.
///
/// ```
/// 401/407 ─parse→ candidates (Negotiate, NTLM, Digest strongest first, Basic; rejected spaces left out)
///   none ──────────────────────────────→ the 401/407 is the response
///   next ─ask delegate (A2)→ useCredential(c) ─→ send again with c (NTLM, Negotiate: libcurl runs the exchange)
///                          → default handling → store default / URL user:password ─→ send again
///                          → cancel ─────────→ task fails (userCancelledAuthentication)
///                          → reject space ───→ next candidate
/// send again → 401 for the same space: failure count + 1 (limit → the 401 is the response)
///            → anything else: success, credential kept and remembered
/// ```
extension SessionTask {
    /// Credentials as sent with one hop.
    struct SentAuthorization: Sendable {
        var space: ProtectionSpace
        var credential: Credential
        var fieldName: String
        var value: String
        var digest: DigestChallenge?
        var nonceCount: UInt32 = 1
        /// NTLM or Negotiate: libcurl carries out the exchange (no field of ours).
        var libcurl: TransferRequest.HTTPAuthentication?
    }

    /// Attempts per space before the 401 or 407 is delivered as the response.
    static let maximumAuthenticationFailures = 3

    /// Requests one task may send in all, redirects, challenges answered and
    /// stale nonces together: a server that keeps challenging or redirecting
    /// gets this many and no more (the redirect limit applies as well).
    static let maximumHops = 20

    /// Stale Digest nonces answered in a row: a server that calls the nonce
    /// it just gave stale is broken, and its challenge then counts as a failure.
    static let maximumStaleNonces = 2

    /// The Authorization and Proxy-Authorization fields for a hop:
    /// credentials chosen for a challenge, and those the session remembers
    /// for the origin and the proxy (never replacing fields the request carries).
    /// Returns them with the credentials the hop counts as sent.
    ///
    /// - Parameter pending: What the hop carries for a challenge (`AuthenticationState.beginHop`).
    func authorizationFields(
        for request: URLRequest, headers: [(name: String, value: String)], pending: SentAuthorization?, session: Session
    ) -> (fields: [(name: String, value: String)], sent: SentAuthorization?) {
        guard let url = request.url else { return ([], nil) }
        var sent = pending
        var fields: [(name: String, value: String)] = pending.flatMap { $0.libcurl == nil ? [($0.fieldName, $0.value)] : nil } ?? []
        func carries(_ name: String) -> Bool {
            fields.contains { HeaderFields.namesEqual($0.name, name) } || headers.contains { HeaderFields.namesEqual($0.name, name) }
        }
        // Credentials the request carries (its URL's user info, its own
        // Authorization field) are never replaced by remembered ones.
        if !carries("Authorization"), url.user(percentEncoded: false) == nil,
            let remembered = session.preemptiveAuthorization(for: url, method: request.httpMethod ?? "GET")
        {
            fields.append((remembered.fieldName, remembered.value))
            locked.withLock { $0.machine.authentication.sendRemembered(remembered) }
            if sent == nil { sent = remembered }
        }
        if url.scheme?.lowercased() == "http", let proxy = session.settings.proxyAsURL(for: url), !carries("Proxy-Authorization"),
            let remembered = session.preemptiveAuthorization(for: proxy, method: request.httpMethod ?? "GET", proxy: true)
        {
            fields.append((remembered.fieldName, remembered.value))
        }
        return (fields, sent)
    }

    /// Handles a 401 or 407 head; returns false when it is the task's response.
    func handleChallenge(_ head: ResponseHead, url: URL, request: URLRequest, session: Session) -> Bool {
        // A 407 is the proxy's only when the request went to the proxy itself
        // (plain http in absolute form). Through a CONNECT tunnel (https) the
        // transport answers the proxy and keeps its heads to itself, so a 407
        // seen here came from the origin: a response, never a reason to send
        // the proxy's credentials to it.
        let proxy = session.settings.proxyAsURL(for: url)
        let viaProxy = proxy != nil && url.scheme?.lowercased() == "http"
        let isProxy = head.status == 407 && viaProxy
        guard head.status == 401 || isProxy else { return false }
        let field = isProxy ? "Proxy-Authenticate" : "WWW-Authenticate"
        let lines = head.headers.filter { HeaderFields.namesEqual($0.name, field) }.map(\.value)
        let challenges = AuthChallenge.parse(lines, duplicateParameters: .lastWins)
        let sent = locked.withLock { $0.machine.authentication.sent }
        // A stale nonce is not a failure: answer the new nonce with the same
        // credential, twice in a row at most.
        let fresh = challenges.compactMap(DigestChallenge.init).first(where: \.stale)
        if fresh == nil { locked.withLock { $0.machine.authentication.noStaleNonce() } }
        if let sent, sent.digest != nil, let fresh, fresh.realm == sent.digest?.realm, let user = sent.credential.user,
            let password = sent.credential.password, locked.withLock({ $0.machine.authentication.answerStaleNonce(maximum: Self.maximumStaleNonces) })
        {
            retry(
                with: Self.digestAuthorization(
                    fresh, user: user, password: password, space: sent.space, credential: sent.credential,
                    url: url, method: request.httpMethod ?? "GET", fieldName: isProxy ? "Proxy-Authorization" : "Authorization"),
                url: url)
            return true
        }
        if let sent {
            locked.withLock { $0.machine.authentication.failed(sent) }
        }
        return answerNextChallenge(challenges, head: head, url: url, request: request, session: session, isProxy: isProxy)
    }

    /// Offers the best remaining challenge to the delegate; false when none is left.
    private func answerNextChallenge(
        _ challenges: [AuthChallenge], head: ResponseHead, url: URL, request: URLRequest, session: Session, isProxy: Bool
    ) -> Bool {
        let rejected = locked.withLock { $0.machine.authentication.rejected }
        let proxy = isProxy ? session.settings.proxyAsURL(for: url) : nil
        let candidates = challenges.compactMap { challenge -> (AuthChallenge, ProtectionSpace, Int)? in
            let method: ProtectionSpace.AuthenticationMethod
            let strength: Int
            // Negotiate, then NTLM (libcurl's), then Digest by algorithm, then Basic.
            if challenge.isScheme("Negotiate"), !isProxy {
                method = .negotiate
                strength = 30
            } else if challenge.isScheme("NTLM"), !isProxy {
                method = .ntlm
                strength = 20
            } else if let digest = DigestChallenge(challenge) {
                method = .httpDigest
                strength = 10 + digest.algorithm.strength
            } else if challenge.isScheme("Basic") {
                method = .httpBasic
                strength = 1
            } else {
                return nil
            }
            guard
                let space = Self.protectionSpace(
                    url: url, proxy: proxy,
                    realm: challenge.realm, method: method),
                !rejected.contains(space)
            else { return nil }
            return (challenge, space, strength)
        }.sorted { $0.2 > $1.2 }
        guard let (challenge, space, _) = candidates.first else { return false }
        let (failures, failedUsers, sentCredential) = locked.withLock { inner in
            (
                inner.machine.authentication.failures[space] ?? 0, inner.machine.authentication.failedUsers[space] ?? [],
                inner.machine.authentication.sent?.space == space ? inner.machine.authentication.sent?.credential : nil
            )
        }
        guard failures < Self.maximumAuthenticationFailures else { return false }
        let store = session.credentialStore
        let proposed = sentCredential ?? store?.defaultCredential(for: space)
        let response = Self.makeResponse(url: url, head: head)
        let offered = AuthenticationChallenge(
            protectionSpace: space, proposedCredential: proposed, previousFailureCount: failures,
            failureResponse: response, serverChallenge: challenge)
        events.enqueue { [self] in
            // Session-level methods go to the session delegate first;
            // Basic and Digest only ever reach the task-level method (of the
            // task's delegate, or the session's where the task's has none).
            var answer: ChallengeReply?
            if space.authenticationMethod.isSessionLevel, let sessionDelegate = session.delegate {
                answer = await self.askIfImplemented(sessionDelegate) { await $0.urlSession(session, didReceive: offered) }
                    .map(ChallengeReply.init)
            }
            if answer == nil {
                answer = await self.askDelegate { ChallengeReply(await $0.urlSession(session, task: self, didReceive: offered)) }
            }
            let disposition = answer?.disposition ?? .performDefaultHandling
            var credential: Credential?
            switch disposition {
            case .useCredential:
                credential = answer?.credential
            case .performDefaultHandling:
                credential = Self.defaultCredential(for: space, url: url, store: store, excluding: failedUsers)
            case .cancelAuthenticationChallenge:
                self.perform(
                    self.locked.withLock {
                        $0.machine.fail(
                            SessionError(
                                .userCancelledAuthentication, failingURL: url, message: "the delegate cancelled the authentication challenge"))
                    })
                return
            case .rejectProtectionSpace:
                self.locked.withLock { $0.machine.authentication.reject(space) }
                if !self.answerNextChallenge(challenges, head: head, url: url, request: request, session: session, isProxy: isProxy) {
                    self.acceptResponse(head, url: url, session: session)
                }
                return
            }
            guard let credential, let user = credential.user, let password = credential.password,
                let authorization = Self.authorization(
                    challenge, space: space, credential: credential, user: user, password: password, url: url,
                    method: request.httpMethod ?? "GET", fieldName: isProxy ? "Proxy-Authorization" : "Authorization")
            else {
                // No credential (or none these schemes can carry): the 401/407 is the answer.
                self.acceptResponse(head, url: url, session: session)
                return
            }
            self.retry(with: authorization, url: url)
        }
        return true
    }

    /// Sends the hop again with credentials.
    private func retry(with authorization: SentAuthorization, url: URL) {
        perform(
            locked.withLock { inner in
                TaskTransactions.recordCutShort(&inner)
                return inner.machine.answerChallenge(with: authorization, url: url)
            })
    }

    /// Credentials that worked (a hop's response was not a challenge for
    /// them): kept in the store (as their persistence says) and, for
    /// schemes sent by us, sent ahead to the origin again.
    static func remember(_ sent: SentAuthorization, session: Session) {
        guard sent.credential.persistence != .none else { return }
        session.credentialStore?.set(sent.credential, for: sent.space)
        // NTLM and Negotiate authenticate a connection, not requests: nothing to send ahead.
        if sent.libcurl == nil { session.rememberAuthentication(sent) }
    }

    /// Default handling: the store's default credential for the
    /// space (or, from `.netrc`, for its server), else the URL's user and password.
    static func defaultCredential(for space: ProtectionSpace, url: URL, store: CredentialStore?, excluding failed: Set<String>) -> Credential? {
        var candidates: [Credential] = []
        if let store {
            if let credential = store.defaultCredential(for: space) { candidates.append(credential) }
            if let credential = store.defaultCredential(for: space.serverOnly) { candidates.append(credential) }
        }
        if let user = url.user(percentEncoded: false), let password = url.password(percentEncoded: false) {
            candidates.append(Credential(user: user, password: password, persistence: .forSession))
        }
        return candidates.first { !failed.contains($0.user ?? "") }
    }

    /// The space of a challenge: the origin's, or the proxy's for a 407.
    static func protectionSpace(url: URL, proxy: URL?, realm: String?, method: ProtectionSpace.AuthenticationMethod) -> ProtectionSpace? {
        guard var space = ProtectionSpace(url: proxy ?? url, realm: realm, authenticationMethod: method) else { return nil }
        space.isProxy = proxy != nil
        return space
    }

    static func authorization(
        _ challenge: AuthChallenge, space: ProtectionSpace, credential: Credential, user: String, password: String,
        url: URL, method: String, fieldName: String
    ) -> SentAuthorization? {
        if space.authenticationMethod == .ntlm || space.authenticationMethod == .negotiate {
            var sent = SentAuthorization(space: space, credential: credential, fieldName: fieldName, value: "")
            sent.libcurl =
                space.authenticationMethod == .ntlm
                ? .ntlm(user: user, password: password) : .negotiate(user: user, password: password)
            return sent
        }
        if let digest = DigestChallenge(challenge) {
            return digestAuthorization(
                digest, user: user, password: password, space: space, credential: credential,
                url: url, method: method, fieldName: fieldName)
        }
        guard let value = BasicAuthentication.authorization(user: user, password: password) else { return nil }
        return SentAuthorization(space: space, credential: credential, fieldName: fieldName, value: value)
    }

    static func digestAuthorization(
        _ digest: DigestChallenge, user: String, password: String, space: ProtectionSpace, credential: Credential,
        url: URL, method: String, fieldName: String, nonceCount: UInt32 = 1
    ) -> SentAuthorization {
        let (_, value) = digest.authorization(
            user: user, password: password, method: method, uri: requestTarget(url), nonceCount: nonceCount,
            cnonce: DigestChallenge.makeClientNonce())
        return SentAuthorization(space: space, credential: credential, fieldName: fieldName, value: value, digest: digest, nonceCount: nonceCount)
    }

    /// The request-target Digest signs: the path and query as sent.
    static func requestTarget(_ url: URL) -> String {
        let path = url.path(percentEncoded: true)
        return (path.isEmpty ? "/" : path) + (url.query(percentEncoded: true).map { "?" + $0 } ?? "")
    }
}
