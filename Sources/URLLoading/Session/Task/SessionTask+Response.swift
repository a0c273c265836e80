import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
import Transport

/// A hop's head: cookies stored, challenges, redirects, then the
/// response as the task's, in the order of Apple's delegate calls.
extension SessionTask {
    /// What deciding on a head reads of the task, taken in the head's turn
    /// of the lock; whether credentials sent worked is learnt there, once.
    struct DecisionInputs {
        let session: Session?
        let request: URLRequest?
        let revalidating: StoredResponse?
        let sentCredentials: Bool
        let worked: SentAuthorization?

        init(_ inner: inout Inner, status: Int) {
            session = inner.session
            request = inner.machine.request
            revalidating = inner.machine.cache.revalidating
            sentCredentials = inner.machine.authentication.sent != nil
            worked = inner.machine.authentication.succeeded(status: status)
        }
    }

    /// Decides on a hop's head. From the transport's thread: a decision that
    /// writes to a store (cookies, credentials, the cache) or talks to the
    /// delegate goes to the task's own context.
    ///
    /// - Parameter touchesStores: `decisionTouchesStores`, when the caller
    ///   learned it already.
    func decideOnHead(_ head: ResponseHead, of hop: Hop, _ inputs: DecisionInputs, touchesStores: Bool? = nil) {
        if touchesStores ?? decisionTouchesStores(head, inputs) {
            events.enqueueSync { [self] in self.decide(head, of: hop, inputs) }
        } else {
            decide(head, of: hop, inputs)
        }
    }

    /// Whether deciding on `head` may write to a store: Set-Cookie to keep,
    /// credentials that worked, a challenge, a revalidation's answer.
    func decisionTouchesStores(_ head: ResponseHead, _ inputs: DecisionInputs) -> Bool {
        if head.status == 401 || head.status == 407 { return true }
        if inputs.revalidating != nil || inputs.sentCredentials { return true }
        guard let session = inputs.session, let request = inputs.request, RequestCookies.handled(request, session: session) else { return false }
        return head.headers.contains { HeaderFields.namesEqual($0.name, "Set-Cookie") }
    }

    /// Carries out what a hop's head asks (`HeadDecision`, in that order):
    /// cookies kept and credentials remembered first, then a challenge, a
    /// revalidation's 304, stale-if-error, a redirect, else the response.
    func decide(_ head: ResponseHead, of hop: Hop, _ inputs: DecisionInputs) {
        let (session, request, revalidating, worked) = (inputs.session, inputs.request, inputs.revalidating, inputs.worked)
        guard let session, let request, let url = request.url else { return }
        RequestCookies.store(from: head, url: url, request: request, session: session)
        if let worked { Self.remember(worked, session: session) }
        let decision = HeadDecision.of(status: head.status, headers: head.headers, request: request, firstRequest: hop.isFirst, revalidating: revalidating != nil)
        if decision == .challenge, handleChallenge(head, url: url, request: request, session: session) { return }
        if revalidating != nil { session.urlCache?.count(head.status == 304 ? "revalidations-not-modified" : "revalidations-replaced") }
        switch decision {
        case .notModified:
            if let stored = revalidating, serveNotModified(head, stored: stored, session: session) { return }
        case .serverError:
            if serveStaleIfError(reason: "fwd-status=\(head.status)") { return }
        case .redirect(let redirect):
            followRedirect(redirect, head: head, url: url, session: session)
            return
        case .challenge, .response:
            break
        }
        acceptResponse(head, url: url, session: session)
    }

    /// The 304 answers the conditional request made for `stored`: its body
    /// is served (as 200, like Apple). Its headers refresh the entry only
    /// when the 304 selects it (RFC 9111 §4.3.4). False when it cannot be served.
    private func serveNotModified(_ head: ResponseHead, stored: StoredResponse, session: Session) -> Bool {
        guard let cache = session.urlCache else { return false }
        let notModified = HeaderFields(head.headers.map { HeaderFields.Field($0.name, $0.value) })
        let now = Date().timeIntervalSince1970
        let (served, refreshed) = CacheExchange.notModified(
            stored, notModifiedHeaders: notModified, requestTime: locked.withLock { $0.machine.cache.requestTime }, now: now)
        if refreshed { cache.store(served, now: now) }
        let shown = session.settings.sendsCacheStatus ? CacheExchange.notModifiedStatus : nil
        guard let response = CacheView.servedResponse(served, cacheStatus: shown, now: now) else { return false }
        locked.withLock { $0.machine.cacheAnswered(status: shown) }
        respondWithoutNetwork(response, body: ServedBody(served)) { inner in
            // The 304's exchange, recorded now: its transfer may end after the
            // task does, and the task's metrics must list it all the same.
            TaskTransactions.recordCutShort(&inner)
        }
        return true
    }

    /// Asks the delegate about a redirect (past the limit it is not asked:
    /// following fails at once), then follows it or takes the head as the response.
    private func followRedirect(_ redirect: URLRequest, head: ResponseHead, url: URL, session: Session) {
        let maximum = session.settings.httpMaximumRedirects
        if locked.withLock({ $0.machine.redirects >= maximum }) {
            perform(locked.withLock { $0.machine.follow(.redirect, url: url, maximumRedirects: maximum) })
            return
        }
        let follow: @Sendable (URLRequest?) -> Void = { [self] chosen in
            guard let chosen else {
                self.acceptResponse(head, url: url, session: session)
                return
            }
            self.perform(
                self.locked.withLock { inner in
                    // The redirect's own transfer may be cut short: record its exchange now.
                    TaskTransactions.recordCutShort(&inner)
                    return inner.machine.follow(.redirect, url: url, to: chosen, maximumRedirects: maximum)
                })
        }
        guard hasDelegate, let response = Self.makeResponse(url: url, head: head) else {
            // Nobody to ask: the next hop starts on the task's context (its
            // cookies and credentials may be read from disk), without
            // waiting for one of Swift's few cooperative threads.
            events.enqueueSync { follow(redirect) }
            return
        }
        events.enqueue { [self] in
            follow(
                await self.askDelegate {
                    await $0.urlSession(session, task: self, willPerformHTTPRedirection: response, newRequest: redirect)
                } ?? redirect)
        }
    }

    /// The response as the task's (the head, its length, the sink's
    /// terms), in a turn of the task's lock: published, and allowed when
    /// nobody is asked, unless a download's file must be opened first (nil).
    static func accept(
        _ inner: inout Inner, _ head: ResponseHead, url: URL, session: Session
    ) -> (kind: Kind, published: Published?) {
        let length = head.headers.first { HeaderFields.namesEqual($0.name, "Content-Length") }.flatMap { FieldNumber.length($0.value) } ?? -1
        let fields = HeaderFields(head.headers.map { HeaderFields.Field($0.name, $0.value) })
        inner.machine.responseAccepted(headers: fields)
        var shown = head
        if let status = inner.machine.cache.status { shown.headers.append(("Cache-Status", status)) }
        inner.head = (url, shown)
        inner.response = nil
        inner.bytesExpectedToReceive = length
        inner.updateProgress()
        // A delegate's data task keeps a copy of a storable body, up to
        // what the cache could store (the 5% rule's largest tier).
        var limit = 0
        if inner.sink.asksDelegate, inner.machine.cache.key != nil, inner.kind == .data {
            let request = inner.machine.request
            let storable = CachePolicy.storability(
                method: request?.httpMethod ?? "GET", requestHeaders: HeaderFields(request?.allHTTPHeaderFields ?? [:]),
                status: head.status, responseHeaders: fields
            ).allowed
            if storable { limit = max(session.urlCache?.memoryCapacity ?? 0, session.urlCache?.diskCapacity ?? 0) / 20 }
        }
        inner.sink.accept(length: length, cacheCopyLimit: limit)
        return (inner.kind, inner.kind == .download ? nil : publish(&inner))
    }

    /// An accepted response's publication: whether the delegate is asked,
    /// else the machine's actions for the allowed response.
    typealias Published = (asksDelegate: Bool, allowed: StateMachine.Actions)

    static func publish(_ inner: inout Inner) -> Published {
        let sink = inner.sink
        sink.publish(head: inner.head) { Self.response(of: &inner) }
        return sink.asksDelegate ? (true, []) : (false, inner.machine.allow())
    }

    func acceptResponse(_ head: ResponseHead, url: URL, session: Session) {
        let (kind, published) = locked.withLock { Self.accept(&$0, head, url: url, session: session) }
        accepted(head, url: url, session: session, kind: kind, published: published)
    }

    /// What follows the response's acceptance: a download's file, the
    /// delegate's answer, then the body.
    func accepted(_ head: ResponseHead, url: URL, session: Session, kind: Kind, published: Published?) {
        var outcome = published
        if kind == .download {
            guard prepareDownloadFile(head, url: url, session: session) else { return }
            outcome = locked.withLock { Self.publish(&$0) }
        }
        guard let (asksDelegate, allowed) = outcome else { return }
        guard asksDelegate else {
            perform(allowed)
            return
        }
        if let contentType = head.headers.first(where: { HeaderFields.namesEqual($0.name, "Content-Type") })?.value,
            let boundary = MixedReplaceParser.boundary(ofContentType: contentType)
        {
            // Each part gets its own didReceiveResponse, when it begins.
            perform(
                locked.withLock { inner in
                    inner.sink.splitParts(boundary: boundary)
                    return inner.machine.allow()
                })
            return
        }
        events.enqueue { [self] in
            var disposition = Session.ResponseDisposition.allow
            if let response = self.httpURLResponse {
                disposition = await self.askDelegate { await $0.urlSession(session, dataTask: self, didReceive: response) } ?? .allow
            }
            switch disposition {
            case .allow:
                self.perform(self.locked.withLock { $0.machine.allow() })
            case .cancel:
                self.perform(
                    self.locked.withLock {
                        $0.machine.fail(SessionError(.cancelled, failingURL: url, message: "the delegate cancelled the task"))
                    })
            case .becomeDownload:
                // No body byte was delivered yet (it waits for this answer): all of it goes to the file.
                guard let file = self.createDownloadFile(url: url) else { return }
                self.locked.withLock { inner in
                    inner.kind = .download
                    inner.sink = DownloadSink(file: file)
                    inner.sink.accept(length: inner.bytesExpectedToReceive, cacheCopyLimit: 0)
                }
                self.callDelegate { $0.urlSession(session, dataTask: self, didBecome: self) }
                self.perform(self.locked.withLock { $0.machine.allow() })
            case .becomeStream:
                self.becomeStream(url: url, session: session)
            }
        }
    }

    /// Creates the temporary file a download streams into and gives it to
    /// the sink; false (the task failed) when it cannot.
    func openDownloadFile(url: URL) -> Bool {
        guard let file = createDownloadFile(url: url) else { return false }
        _ = locked.withLock { $0.sink.attach(file) }
        return true
    }

    /// A new private download file; nil (the task failed) when it cannot be made.
    func createDownloadFile(url: URL) -> DownloadFile? {
        do {
            let file = try DownloadFiles.create()
            return DownloadFile(handle: file.handle, url: file.url)
        } catch {
            perform(locked.withLock { $0.machine.fail(SessionError(.cannotWriteFile, failingURL: url, message: error.message)) })
            return nil
        }
    }

    /// The request a redirect asks for (RFC 9110 §15.4; browsers' method
    /// rewriting), or nil when the response is not a redirect to follow.
    static func redirectRequest(from request: URLRequest, status: Int, headers: [(name: String, value: String)]) -> URLRequest? {
        guard [301, 302, 303, 307, 308].contains(status), let base = request.url,
            let location = headers.first(where: { $0.name.caseInsensitiveCompare("Location") == .orderedSame })?.value,
            let target = URL(string: location, relativeTo: base)?.absoluteURL,
            let scheme = target.scheme?.lowercased(), scheme == "http" || scheme == "https" || UnixSocketURL.isUnixScheme(scheme)
        else { return nil }
        // Into a Unix socket only from the same socket: a server on the
        // network must not send the client to a local daemon's API.
        if UnixSocketURL.isUnixScheme(scheme) {
            guard let from = base.scheme?.lowercased(), UnixSocketURL.isUnixScheme(from),
                base.host(percentEncoded: false) == target.host(percentEncoded: false)
            else { return nil }
        }
        var next = request
        next.url = target
        let method = request.httpMethod ?? "GET"
        if (status == 303 && method != "HEAD") || ((status == 301 || status == 302) && method == "POST") {
            next.httpMethod = "GET"
            next.httpBody = nil
            for name in ["Content-Type", "Content-Length", "Content-Encoding", "Transfer-Encoding"] {
                next.setValue(nil, forHTTPHeaderField: name)
            }
        }
        // Credentials never cross origins.
        if !CachePolicy.sameOrigin(base, target) {
            next.setValue(nil, forHTTPHeaderField: "Authorization")
            next.setValue(nil, forHTTPHeaderField: "Proxy-Authorization")
            next.setValue(nil, forHTTPHeaderField: "Cookie")
        }
        return next
    }

    /// libcurl's receive buffer for download tasks: 16 times its default,
    /// so a gigabyte goes to disk in 4,096 writes rather than 65,536.
    static let downloadBufferSize = 256 * 1024

    /// A byte stream's reader made room: take body bytes again.
    func continueDelivery() {
        perform(locked.withLock { $0.machine.continueDelivery() })
    }
}
