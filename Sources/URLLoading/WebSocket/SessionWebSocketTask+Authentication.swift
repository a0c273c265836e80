import Foundation

/// Credentials on the opening handshake (RFC 6455 §4.1 allows HTTP
/// authentication there): the session's remembered authorization for the
/// origin goes with the first handshake; a 401 is answered once, on a new
/// connection, with the session's credential for the protection space (or
/// the URL's user info), Basic or Digest, as a data task answers it.
extension SessionWebSocketTask {
    /// On the task's context: a 401 with these challenges.
    func challenged(_ lines: [String]) {
        let retry = inner.withLock { inner -> Bool in
            guard !inner.answeredChallenge else { return false }
            inner.answeredChallenge = true
            return true
        }
        guard retry, let field = authorization(answering: lines) else {
            let reason = retry ? "no credential for its challenge" : "the credential was refused"
            end(SessionError(.userAuthenticationRequired, failingURL: originalRequest?.url, message: "the server answered the handshake 401: \(reason)"))
            return
        }
        handshake(authorization: field)
    }

    /// The Authorization field for the first challenge we can answer.
    func authorization(answering lines: [String]) -> (name: String, value: String)? {
        guard let session, let url = cookieURL else { return nil }
        for challenge in AuthChallenge.parse(lines) {
            let method: ProtectionSpace.AuthenticationMethod
            if challenge.isScheme("Basic") {
                method = .httpBasic
            } else if challenge.isScheme("Digest") {
                method = .httpDigest
            } else {
                continue
            }
            guard let space = SessionTask.protectionSpace(url: url, proxy: nil, realm: challenge.realm, method: method),
                let credential = SessionTask.defaultCredential(for: space, url: originalRequest?.url ?? url, store: session.credentialStore, excluding: []),
                let user = credential.user, let password = credential.password,
                let sent = SessionTask.authorization(
                    challenge, space: space, credential: credential, user: user, password: password, url: url, method: "GET", fieldName: "Authorization")
            else { continue }
            return (sent.fieldName, sent.value)
        }
        return nil
    }

    /// The session's remembered authorization for the origin, unless the
    /// request carries its own or the URL has user info.
    func rememberedAuthorization(existing fields: [(name: String, value: String)]) -> (name: String, value: String)? {
        guard let session, let url = cookieURL, url.user(percentEncoded: false) == nil,
            !fields.contains(where: { $0.name.lowercased() == "authorization" }),
            let remembered = session.preemptiveAuthorization(for: url, method: "GET")
        else { return nil }
        return (remembered.fieldName, remembered.value)
    }
}
