import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
import Transport

/// A hop loaded by one of the configuration's `URLProtocol` classes instead
/// of the network: the request it gets, the stored response it may declare
/// valid, and its challenges put to the task's delegate.
extension SessionTask {
    /// Starts the hop through `protocolClass`. The instance sees the request
    /// after its class's `canonicalRequest(for:)` (which becomes the task's
    /// current request), with the body of an upload task and the cookies the
    /// session would send; a GET that may use the cache hands it the stored
    /// response, and what it loads is stored by the usual rules, within the
    /// storage policy it gives.
    func startThroughProtocolClass(
        _ protocolClass: URLProtocol.Type, transfers: ProtocolClassTransfers, request: URLRequest, hop: Hop, usesCache: Bool, session: Session
    ) {
        let canonical = protocolClass.canonicalRequest(for: request)
        var loaded = canonical
        if sendsBody(hop, request: request) {
            switch body {
            case .data(let data): loaded.httpBody = data
            case .file(let path, _, _): loaded.httpBodyStream = InputStream(fileAtPath: path)
            case .stream, .none: break
            }
        }
        let cookie = RequestCookies.header(for: loaded, headers: [], session: session)
        if let cookie { loaded.setValue(cookie, forHTTPHeaderField: "Cookie") }
        locked.withLock { inner in
            inner.machine.use(canonical)
            if inner.machine.isCurrent(hop) { inner.machine.planned(cookie: cookie, credentialIdentity: nil) }
        }
        var cached: CachedURLResponse?
        if hop.isFirst, usesCache, let cache = session.urlCache, (loaded.httpMethod ?? "GET") == "GET", let url = loaded.url,
            let key = CachePolicy.primaryKey(url)
        {
            let now = Date().timeIntervalSince1970
            let stored = cache.lookup(key: key, requestHeaders: CacheView.requestHeaders(loaded, cookie: cookie, credentials: nil), now: now)
            if let stored, let response = stored.httpResponse(), let data = try? stored.bodyFile.map({ try $0.readAll() }) ?? stored.body {
                cached = CachedURLResponse(response: response, data: data)
            }
            locked.withLock { $0.machine.cacheConsulted(key: key, status: nil, revalidating: nil, fallback: nil, requestTime: now) }
        }
        let startedAt = Date()
        let loading = ProtocolClassTransfers.Loading(protocolClass: protocolClass, request: loaded, cachedResponse: cached)
        let id = transfers.start(loading, observer: hop)
        perform(
            locked.withLock { inner in
                guard inner.machine.isCurrent(hop) else { return StateMachine.Actions(.cancelTransfer(id)) }
                inner.machine.handedOver(at: startedAt, viaProxy: false)
                return inner.machine.started(id)
            })
    }

    /// The storage policy a protocol class gave with its response: `.notAllowed`
    /// keeps the response out of the cache, `.allowedInMemoryOnly` off disk.
    func protocolClassAllowsStorage(_ policy: CacheStoragePolicy) {
        locked.withLock { $0.machine.limitStorage(policy) }
    }

    /// A protocol instance's challenge, put to the task's delegate as a
    /// server's is; the answer goes to the challenge's sender.
    func answerProtocolClassChallenge(_ challenge: URLAuthenticationChallenge, sender: any URLAuthenticationChallengeSender) {
        guard let session else { return }
        let space = challenge.protectionSpace
        let offered = AuthenticationChallenge(
            protectionSpace: ProtectionSpace(
                host: space.host, port: space.port, protocol: space.protocol, realm: space.realm,
                authenticationMethod: space.authenticationMethod),
            proposedCredential: challenge.proposedCredential.flatMap { proposed in
                guard let user = proposed.user, let password = proposed.password else { return nil }
                return Credential(user: user, password: password, persistence: .forSession)
            },
            previousFailureCount: challenge.previousFailureCount, failureResponse: challenge.failureResponse as? HTTPURLResponse,
            serverChallenge: nil)
        let pending = PendingChallenge(challenge: challenge, sender: sender)
        events.enqueue { [self] in
            let answer = await self.askDelegate { ChallengeReply(await $0.urlSession(session, task: self, didReceive: offered)) }
            pending.reply(answer ?? ChallengeReply(.performDefaultHandling, nil))
        }
    }
}

/// A protocol instance's challenge and its sender, waiting for the
/// delegate's answer.
private struct PendingChallenge: @unchecked Sendable {
    // Foundation's challenge and sender are used once, by the delegate's answer.
    let challenge: URLAuthenticationChallenge
    let sender: any URLAuthenticationChallengeSender

    func reply(_ answer: ChallengeReply) {
        switch answer.disposition {
        case .useCredential:
            if case .password(let user, let password)? = answer.credential?.kind {
                sender.use(URLCredential(user: user, password: password, persistence: .forSession), for: challenge)
            } else {
                sender.continueWithoutCredential(for: challenge)
            }
        case .cancelAuthenticationChallenge:
            sender.cancel(challenge)
        case .rejectProtectionSpace:
            sender.rejectProtectionSpaceAndContinue(with: challenge)
        default:
            sender.performDefaultHandling(for: challenge)
        }
    }
}
