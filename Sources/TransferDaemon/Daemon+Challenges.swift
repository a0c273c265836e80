import Dispatch
import Foundation
import URLLoading

/// Challenges of background transfers: an attached app's
/// delegate answers; with none, transferd launches the app when it may and
/// waits `challengeWait`, then the session's stored default credential
/// answers, else the challenge is cancelled.
extension Daemon {
    /// A challenge waiting for an app's answer.
    struct PendingChallenge: Sendable {
        let session: String
        let task: Int
        let spec: BackgroundChallenge
        /// Tells one wait from the next challenge of the same task.
        let token: UInt64
        /// Ends the wait: an app's answer, or nil for the stored credential.
        let resume: @Sendable (BackgroundChallengeAnswer?) -> Void
    }

    /// The answer to a running transfer's challenge (on the transfer's context).
    func challenge(_ running: RunningTransfer, _ challenge: AuthenticationChallenge) async -> (Session.AuthChallengeDisposition, Credential?) {
        let spec = BackgroundChallenge(challenge)
        let token = UInt64.random(in: 1...UInt64.max)
        let asked: (session: String, answer: BackgroundChallengeAnswer?)? = await withCheckedContinuation { continuation in
            owner.async { [self] in
                guard let record = state.withLock({ $0.records[running.id] }) else {
                    continuation.resume(returning: nil)
                    return
                }
                let session = record.session
                let pending = PendingChallenge(session: session, task: record.spec.task, spec: spec, token: token) { answer in
                    continuation.resume(returning: (session, answer))
                }
                state.withLock { $0.challenges[running.id] = pending }
                if let client = client(of: session) {
                    send(.challenge(task: record.spec.task, challenge: spec), to: client)
                } else {
                    launchApp(of: session)
                }
                owner.asyncAfter(deadline: .now() + settings.challengeWait) { [self] in
                    let expired = state.withLock { state -> PendingChallenge? in
                        guard state.challenges[running.id]?.token == token else { return nil }
                        return state.challenges.removeValue(forKey: running.id)
                    }
                    guard let expired else { return }
                    logger.info("no app answered a challenge of task \(expired.task) of \(session) within \(settings.challengeWait) s: its stored credential answers")
                    expired.resume(nil)
                }
            }
        }
        guard let asked else { return (.cancelAuthenticationChallenge, nil) }
        guard let answer = asked.answer, answer.disposition != .performDefaultHandling else {
            return storedAnswer(challenge, session: asked.session)
        }
        return answer.answer
    }

    /// Default handling with the session's own store: its default credential
    /// for the space, once (a credential that failed is not sent again);
    /// else the challenge is cancelled.
    private func storedAnswer(_ challenge: AuthenticationChallenge, session: String) -> (Session.AuthChallengeDisposition, Credential?) {
        guard challenge.previousFailureCount == 0, let store = credentialStore(of: session),
            let stored = store.defaultCredential(for: challenge.protectionSpace), case .password(let user, let password) = stored.kind
        else { return (.cancelAuthenticationChallenge, nil) }
        return (.useCredential, Credential(user: user, password: password, persistence: .none))
    }

    /// The session's persistent credential store, opened once. The folder
    /// came from the app over the socket and was journaled: it is used only
    /// when it is an absolute, normalized path of a folder of this user.
    private func credentialStore(of session: String) -> CredentialStore? {
        if let store = state.withLock({ $0.credentialStores[session] }) { return store }
        guard let folder = (try? journal.credentialStore(session: session)) ?? nil, folder.hasPrefix("/"),
            URL(fileURLWithPath: folder).standardizedFileURL.path == folder
        else { return nil }
        var info = stat()
        guard lstat(folder, &info) == 0, info.st_mode & S_IFMT == S_IFDIR, info.st_uid == getuid() else {
            logger.warning("the credential store of \(session) is not a folder of this user: not used")
            return nil
        }
        do {
            let store = try CredentialStore(directory: URL(fileURLWithPath: folder, isDirectory: true))
            state.withLock { $0.credentialStores[session] = store }
            return store
        } catch {
            logger.error("cannot open the credential store of \(session): \(error)")
            return nil
        }
    }
}
