public import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

/// What to do with a response (Apple's `URLSession.ResponseDisposition`).
public enum ResponseDisposition: Sendable, Equatable {
    /// Go on receiving the body.
    case allow
    /// Cancel the task (it completes with `.cancelled`).
    case cancel
    /// Go on as a download task: the body streams to a temporary file,
    /// reported with `didWriteData` and handed over with
    /// `didFinishDownloadingTo`, after `didBecomeDownloadTask`. The same task
    /// object continues (its `kind` becomes `.download`); no `didReceive data`
    /// calls follow.
    case becomeDownload
}

/// The events of a session and its tasks (Apple's `URLSessionDelegate` and
/// its task, data and download sub-protocols, SPEC S6). Every method has a
/// default, so a delegate implements only what it needs. Calls for one task
/// arrive in order, from one serial context per session.
public protocol SessionDelegate: AnyObject, Sendable {
    /// The session was invalidated; the last call it makes.
    func sessionDidBecomeInvalid(_ session: Session, error: (any Error)?)

    /// A redirect: return the request to follow (possibly changed), or nil
    /// to take the redirect response as the task's result.
    func session(_ session: Session, task: SessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                 newRequest request: URLRequest) async -> URLRequest?

    /// Whether this delegate wants server-trust challenges: each new host
    /// then costs one extra TLS handshake, made before any request byte is
    /// sent, to show the delegate the server's certificates. False by default
    /// (the configured roots decide, as under default handling).
    var evaluatesServerTrust: Bool { get }
    /// A session-level challenge (server trust, client certificate, NTLM,
    /// Negotiate; SPEC A2). Return nil (the default) when this delegate does
    /// not handle it: the task's challenge method is asked next.
    func session(_ session: Session, didReceive challenge: AuthenticationChallenge) async -> ChallengeAnswer?
    /// A task-level challenge (Basic, Digest, ...), and a session-level one
    /// the session delegate did not handle. Return nil (the default) for
    /// default handling: the store's default credential for the space, the
    /// URL's user and password, else the 401/407 as the result.
    func session(_ session: Session, task: SessionTask, didReceive challenge: AuthenticationChallenge) async -> ChallengeAnswer?
    /// The task cannot reach its host and waits for connectivity (only with
    /// `waitsForConnectivity`); called once, before the task retries.
    func session(_ session: Session, taskIsWaitingForConnectivity task: SessionTask)

    /// A task whose body comes from streams needs one: for the first
    /// transfer of a streamed upload task, and whenever the body must be sent
    /// again (after a challenge, or a redirect that keeps the method). Return
    /// a new, unopened stream with the whole body; nil (the default) fails
    /// the task with `requestBodyStreamExhausted`. The session reads and
    /// closes it on a thread of its own.
    func session(_ session: Session, needNewBodyStreamFor task: SessionTask) async -> InputStream?

    /// Request body bytes sent.
    func session(_ session: Session, task: SessionTask, didSendBodyData bytesSent: Int64,
                 totalBytesSent: Int64, totalBytesExpectedToSend: Int64)

    /// The response arrived; the body waits for the answer.
    func session(_ session: Session, dataTask: SessionTask, didReceive response: URLResponse) async -> ResponseDisposition

    /// A chunk of the body.
    func session(_ session: Session, dataTask: SessionTask, didReceive data: Data)

    /// The data task continues as a download task (the answer `.becomeDownload`);
    /// `downloadTask` is the same object, now of kind `.download`.
    func session(_ session: Session, dataTask: SessionTask, didBecomeDownloadTask downloadTask: SessionTask)

    /// A storable response (SPEC C4) is about to be cached, after all its
    /// data: return it, a changed one (data, userInfo, storage policy), or
    /// nil to store nothing. The default stores it as proposed.
    func session(_ session: Session, dataTask: SessionTask, willCacheResponse proposed: CachedResponse) async -> CachedResponse?

    /// Body bytes written to a download's file.
    func session(_ session: Session, downloadTask: SessionTask, didWriteData bytesWritten: Int64,
                 totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64)

    /// A download made from resume data goes on at `fileOffset` (0 when the
    /// resource changed and the file starts over).
    func session(_ session: Session, downloadTask: SessionTask, didResumeAtOffset fileOffset: Int64, expectedTotalBytes: Int64)

    /// The download is complete; the file at `location` is deleted when this returns.
    func session(_ session: Session, downloadTask: SessionTask, didFinishDownloadingTo location: URL)

    /// Timing and size figures of the task, before it completes.
    func session(_ session: Session, task: SessionTask, didFinishCollecting metrics: TaskMetrics)

    /// The task ended, with nil for success (a 4xx or 5xx is a success).
    func session(_ session: Session, task: SessionTask, didCompleteWithError error: (any Error)?)

    // MARK: Completion-handler forms
    //
    // Apple's delegate methods answer through a completion handler; each has
    // that form too. The session calls the async form, whose default calls
    // the completion-handler form, whose default gives the default answer:
    // implement whichever form suits, never both.

    /// The redirect method's completion-handler form.
    func session(_ session: Session, task: SessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                 newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void)
    /// The response method's completion-handler form.
    func session(_ session: Session, dataTask: SessionTask, didReceive response: URLResponse,
                 completionHandler: @escaping @Sendable (ResponseDisposition) -> Void)
    /// The willCacheResponse method's completion-handler form.
    func session(_ session: Session, dataTask: SessionTask, willCacheResponse proposed: CachedResponse,
                 completionHandler: @escaping @Sendable (CachedResponse?) -> Void)
    /// The session-level challenge method's completion-handler form.
    func session(_ session: Session, didReceive challenge: AuthenticationChallenge,
                 completionHandler: @escaping @Sendable (ChallengeAnswer?) -> Void)
    /// The task-level challenge method's completion-handler form.
    func session(_ session: Session, task: SessionTask, didReceive challenge: AuthenticationChallenge,
                 completionHandler: @escaping @Sendable (ChallengeAnswer?) -> Void)
    /// The body stream method's completion-handler form.
    func session(_ session: Session, task: SessionTask, needNewBodyStream completionHandler: @escaping @Sendable (InputStream?) -> Void)
}

extension SessionDelegate {
    public func sessionDidBecomeInvalid(_ session: Session, error: (any Error)?) { DelegateFallback.unhandled() }
    public func session(_ session: Session, task: SessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                        newRequest request: URLRequest) async -> URLRequest? {
        await withCheckedContinuation { continuation in
            self.session(session, task: task, willPerformHTTPRedirection: response, newRequest: request) { continuation.resume(returning: $0) }
        }
    }
    public func session(_ session: Session, task: SessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                        newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void) {
        DelegateFallback.unhandled()
        completionHandler(request)
    }
    public var evaluatesServerTrust: Bool { false }
    public func session(_ session: Session, didReceive challenge: AuthenticationChallenge) async -> ChallengeAnswer? {
        await withCheckedContinuation { continuation in
            self.session(session, didReceive: challenge) { continuation.resume(returning: $0) }
        }
    }
    public func session(_ session: Session, didReceive challenge: AuthenticationChallenge,
                        completionHandler: @escaping @Sendable (ChallengeAnswer?) -> Void) {
        DelegateFallback.unhandled()
        completionHandler(nil)
    }
    public func session(_ session: Session, task: SessionTask, didReceive challenge: AuthenticationChallenge) async -> ChallengeAnswer? {
        await withCheckedContinuation { continuation in
            self.session(session, task: task, didReceive: challenge) { continuation.resume(returning: $0) }
        }
    }
    public func session(_ session: Session, task: SessionTask, didReceive challenge: AuthenticationChallenge,
                        completionHandler: @escaping @Sendable (ChallengeAnswer?) -> Void) {
        DelegateFallback.unhandled()
        completionHandler(nil)
    }
    public func session(_ session: Session, taskIsWaitingForConnectivity task: SessionTask) { DelegateFallback.unhandled() }
    public func session(_ session: Session, needNewBodyStreamFor task: SessionTask) async -> InputStream? {
        let box = await withCheckedContinuation { (continuation: CheckedContinuation<OwnedInputStream?, Never>) in
            self.session(session, task: task) { stream in continuation.resume(returning: stream.map(OwnedInputStream.init)) }
        }
        return box?.stream
    }
    public func session(_ session: Session, task: SessionTask, needNewBodyStream completionHandler: @escaping @Sendable (InputStream?) -> Void) {
        DelegateFallback.unhandled()
        completionHandler(nil)
    }
    public func session(_ session: Session, task: SessionTask, didSendBodyData bytesSent: Int64,
                        totalBytesSent: Int64, totalBytesExpectedToSend: Int64) { DelegateFallback.unhandled() }
    public func session(_ session: Session, dataTask: SessionTask, didReceive response: URLResponse) async -> ResponseDisposition {
        await withCheckedContinuation { continuation in
            self.session(session, dataTask: dataTask, didReceive: response) { continuation.resume(returning: $0) }
        }
    }
    public func session(_ session: Session, dataTask: SessionTask, didReceive response: URLResponse,
                        completionHandler: @escaping @Sendable (ResponseDisposition) -> Void) {
        DelegateFallback.unhandled()
        completionHandler(.allow)
    }
    public func session(_ session: Session, dataTask: SessionTask, didReceive data: Data) { DelegateFallback.unhandled() }
    public func session(_ session: Session, dataTask: SessionTask, didBecomeDownloadTask downloadTask: SessionTask) { DelegateFallback.unhandled() }
    public func session(_ session: Session, dataTask: SessionTask, willCacheResponse proposed: CachedResponse) async -> CachedResponse? {
        await withCheckedContinuation { continuation in
            self.session(session, dataTask: dataTask, willCacheResponse: proposed) { continuation.resume(returning: $0) }
        }
    }
    public func session(_ session: Session, dataTask: SessionTask, willCacheResponse proposed: CachedResponse,
                        completionHandler: @escaping @Sendable (CachedResponse?) -> Void) {
        DelegateFallback.unhandled()
        completionHandler(proposed)
    }
    public func session(_ session: Session, downloadTask: SessionTask, didWriteData bytesWritten: Int64,
                        totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64) { DelegateFallback.unhandled() }
    public func session(_ session: Session, downloadTask: SessionTask, didFinishDownloadingTo location: URL) { DelegateFallback.unhandled() }
    public func session(_ session: Session, downloadTask: SessionTask, didResumeAtOffset fileOffset: Int64, expectedTotalBytes: Int64) { DelegateFallback.unhandled() }
    public func session(_ session: Session, task: SessionTask, didFinishCollecting metrics: TaskMetrics) { DelegateFallback.unhandled() }
    public func session(_ session: Session, task: SessionTask, didCompleteWithError error: (any Error)?) { DelegateFallback.unhandled() }
}

/// Timing and size figures of a task, one entry per request it sent
/// (redirects make several), filled from libcurl's timing info.
public struct TaskMetrics: Sendable, Equatable {
    /// One request/response exchange.
    public struct Transaction: Sendable, Equatable {
        /// The request's URL.
        public var url: URL?
        /// The response's status, or nil when none arrived.
        public var statusCode: Int?
        /// "HTTP/1.1", "HTTP/2".
        public var networkProtocolName: String
        /// Whether an existing connection carried it.
        public var isReusedConnection: Bool
        /// Seconds from the start of the exchange to the end of each phase.
        public var domainLookupSeconds: Double
        public var connectSeconds: Double
        public var secureConnectionSeconds: Double
        public var requestSentSeconds: Double
        public var firstByteSeconds: Double
        public var totalSeconds: Double
        public var requestBodyBytesSent: Int64
        public var responseBodyBytesReceived: Int64
        public var responseHeaderBytesReceived: Int64
        public var remoteAddress: String?
        public var remotePort: Int?
        public var localAddress: String?
        public var localPort: Int?
        /// How the cache took part: "hit", "fwd=miss", ... (RFC 9211 terms).
        public var cacheStatus: String?
    }

    /// Every exchange, in order.
    public var transactions: [Transaction]
    /// When the task started and ended.
    public var taskInterval: DateInterval
    /// Redirects followed.
    public var redirectCount: Int
}
