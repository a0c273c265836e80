public import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif
public import HTTPTypes

extension Session {
    /// What to do with a response (Apple's `URLSession.ResponseDisposition`).
    public enum ResponseDisposition: Sendable, Equatable {
        /// Cancel the task (it completes with `.cancelled`).
        case cancel
        /// Go on receiving the body.
        case allow
        /// Go on as a download task: the body streams to a temporary file,
        /// reported with `didWriteData` and handed over with
        /// `didFinishDownloadingTo`, after `urlSession(_:dataTask:didBecome:)`.
        /// The same task object continues (its `kind` becomes `.download`); no
        /// `didReceive data` calls follow.
        case becomeDownload
        /// Turn the data task into a stream task on its connection, which
        /// begins right after the head (a `101 Switching Protocols` answer
        /// included): `urlSession(_:dataTask:didBecome:)` with a
        /// `SessionStreamTask` follows, and no other call for the data task.
        /// Only a task on a connection of the session's own can do it (see
        /// `SessionDataDelegate.mayBecomeStream`); any other fails.
        case becomeStream
    }

    /// How a delegate answers a challenge (Apple's
    /// `URLSession.AuthChallengeDisposition`), given with a credential.
    public enum AuthChallengeDisposition: Sendable, Hashable {
        /// Use the credential given with it; nil sends the request on without
        /// one, so the 401 or 407 becomes the task's response.
        case useCredential
        /// As if the delegate had no challenge method: the store's default
        /// credential for the space, else the URL's user and password, else
        /// the 401 or 407 is the task's response.
        case performDefaultHandling
        /// The task fails with `.userCancelledAuthentication`.
        case cancelAuthenticationChallenge
        /// Skip this space: the next challenge the server offered is tried; when
        /// none is left, the 401 or 407 is the task's response.
        case rejectProtectionSpace
    }
}

/// The events of a session and its tasks (Apple's `URLSessionDelegate`, with
/// the methods of its task, data and download sub-protocols), under
/// Apple's names and labels. Every method has a default, so a delegate
/// implements only what it needs; calls for one task arrive in order, from
/// one serial context per session.
///
/// Methods that answer have two forms, as Apple's: an `async` one and one
/// with a completion handler. The session calls the `async` form, whose
/// default calls the completion-handler form, whose default gives the
/// default answer: implement whichever form suits, never both.
public protocol SessionDelegate: AnyObject, Sendable {
    /// The session was invalidated; the last call it makes.
    func urlSession(_ session: Session, didBecomeInvalidWithError error: (any Error)?)

    /// Whether this delegate wants server-trust challenges: each new host
    /// then costs one extra TLS handshake, made before any request byte is
    /// sent, to show the delegate the server's certificates. False by default
    /// (the configured roots decide, as under default handling). Ours alone:
    /// Apple's sessions always show the trust challenge.
    var evaluatesServerTrust: Bool { get }
    /// A session-level challenge (server trust, client certificate, NTLM,
    /// Negotiate). A delegate without this method leaves them to
    /// the task-level method.
    func urlSession(_ session: Session, didReceive challenge: AuthenticationChallenge) async
        -> (Session.AuthChallengeDisposition, Credential?)
    /// The session-level challenge method's completion-handler form.
    func urlSession(
        _ session: Session, didReceive challenge: AuthenticationChallenge,
        completionHandler: @escaping @Sendable (Session.AuthChallengeDisposition, Credential?) -> Void)

    // MARK: Tasks (Apple's URLSessionTaskDelegate)

    /// A task was made (before `resume()`, before any other call for it).
    func urlSession(_ session: Session, didCreateTask task: SessionTask)

    /// A redirect: return the request to follow (possibly changed), or nil
    /// to take the redirect response as the task's result.
    func urlSession(
        _ session: Session, task: SessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest
    ) async -> URLRequest?
    /// The redirect method's completion-handler form.
    func urlSession(
        _ session: Session, task: SessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void)
    /// A task-level challenge (Basic, Digest, ...), and a session-level one
    /// the session delegate did not take. The default is default handling:
    /// the store's default credential for the space, the URL's user and
    /// password, else the 401/407 as the result.
    func urlSession(_ session: Session, task: SessionTask, didReceive challenge: AuthenticationChallenge) async
        -> (Session.AuthChallengeDisposition, Credential?)
    /// The task-level challenge method's completion-handler form.
    func urlSession(
        _ session: Session, task: SessionTask, didReceive challenge: AuthenticationChallenge,
        completionHandler: @escaping @Sendable (Session.AuthChallengeDisposition, Credential?) -> Void)
    /// The task cannot reach its host and waits for connectivity (only with
    /// `waitsForConnectivity`); called once, before the task retries.
    func urlSession(_ session: Session, taskIsWaitingForConnectivity task: SessionTask)
    /// A task resumed before its `earliestBeginDate` is about to start, at
    /// that date: go on, go on with another request, or cancel. The default
    /// goes on.
    func urlSession(_ session: Session, task: SessionTask, willBeginDelayedRequest request: URLRequest) async
        -> (Session.DelayedRequestDisposition, URLRequest?)
    /// The delayed-request method's completion-handler form.
    func urlSession(
        _ session: Session, task: SessionTask, willBeginDelayedRequest request: URLRequest,
        completionHandler: @escaping @Sendable (Session.DelayedRequestDisposition, URLRequest?) -> Void)
    /// The server sent an interim (1xx) response before the final one:
    /// `100 Continue`, `103 Early Hints` (never `101 Switching Protocols`).
    func urlSession(_ session: Session, task: SessionTask, didReceiveInformationalResponse response: HTTPURLResponse)
    /// An interim (1xx) response as swift-http-types' type: the head as it
    /// arrived (fields in order, the reason phrase), with no Foundation
    /// response built. A delegate that implements this form is not also
    /// called with the `HTTPURLResponse` one.
    func urlSession(_ session: Session, task: SessionTask, didReceiveInformationalResponse response: HTTPResponse)
    /// A chunked body ended with trailer fields (RFC 9112 §7.1.2: a
    /// checksum, a status computed while the body was sent): after the last
    /// body chunk, before the task completes. Fields whose name is no HTTP
    /// token, or lines without a name, are left out.
    func urlSession(_ session: Session, task: SessionTask, didReceiveTrailers trailers: HTTPFields)
    /// A task whose body comes from streams needs one: for the first
    /// transfer of a streamed upload task, and whenever the body must be sent
    /// again (after a challenge, or a redirect that keeps the method). Return
    /// a new, unopened stream with the whole body; nil (the default) fails
    /// the task with `requestBodyStreamExhausted`. The session reads and
    /// closes it on a thread of its own.
    func urlSession(_ session: Session, needNewBodyStreamForTask task: SessionTask) async -> InputStream?
    /// The body stream method's completion-handler form.
    func urlSession(
        _ session: Session, task: SessionTask, needNewBodyStream completionHandler: @escaping @Sendable (InputStream?) -> Void)
    /// A resumable upload whose body comes from streams goes on from
    /// `offset`, the bytes the server has (<doc:ResumableUploads>): return
    /// a new, unopened stream that starts there. Without this method the
    /// session asks `needNewBodyStreamForTask` for the whole body and skips
    /// `offset` bytes of it.
    func urlSession(_ session: Session, needNewBodyStreamForTask task: SessionTask, from offset: Int64) async -> InputStream?
    /// The offset body stream method's completion-handler form.
    func urlSession(
        _ session: Session, task: SessionTask, needNewBodyStreamFrom offset: Int64,
        completionHandler: @escaping @Sendable (InputStream?) -> Void)
    /// Request body bytes sent.
    func urlSession(
        _ session: Session, task: SessionTask, didSendBodyData bytesSent: Int64,
        totalBytesSent: Int64, totalBytesExpectedToSend: Int64)
    /// Timing and size figures of the task, before it completes.
    func urlSession(_ session: Session, task: SessionTask, didFinishCollecting metrics: TaskMetrics)
    /// The task ended, with nil for success (a 4xx or 5xx is a success).
    func urlSession(_ session: Session, task: SessionTask, didCompleteWithError error: (any Error)?)

    // MARK: Data tasks (Apple's URLSessionDataDelegate)

    /// The response arrived; the body waits for the answer.
    func urlSession(_ session: Session, dataTask: SessionTask, didReceive response: URLResponse) async
        -> Session.ResponseDisposition
    /// The response method's completion-handler form.
    func urlSession(
        _ session: Session, dataTask: SessionTask, didReceive response: URLResponse,
        completionHandler: @escaping @Sendable (Session.ResponseDisposition) -> Void)
    /// A chunk of the body.
    func urlSession(_ session: Session, dataTask: SessionTask, didReceive data: Data)
    /// The data task continues as a download task (the answer `.becomeDownload`);
    /// `downloadTask` is the same object, now of kind `.download`.
    func urlSession(_ session: Session, dataTask: SessionTask, didBecome downloadTask: SessionTask)
    /// The data task became `streamTask` (`.becomeStream`); the data task
    /// hears nothing more.
    func urlSession(_ session: Session, dataTask: SessionTask, didBecome streamTask: SessionStreamTask)
    /// Ours: whether this delegate may answer `.becomeStream`. Its data
    /// tasks (and any request asking for an `Upgrade`) then run in HTTP/1.1
    /// on a connection of the session's own, which can be handed over,
    /// instead of libcurl's, which cannot. False by default.
    var mayBecomeStream: Bool { get }
    /// A storable response is about to be cached, after all its
    /// data: return it, a changed one (data, userInfo, storage policy), or
    /// nil to store nothing. The default stores it as proposed.
    func urlSession(_ session: Session, dataTask: SessionTask, willCacheResponse proposedResponse: CachedResponse) async
        -> CachedResponse?
    /// The willCacheResponse method's completion-handler form.
    func urlSession(
        _ session: Session, dataTask: SessionTask, willCacheResponse proposedResponse: CachedResponse,
        completionHandler: @escaping @Sendable (CachedResponse?) -> Void)

    // MARK: Download tasks (Apple's URLSessionDownloadDelegate)

    /// Body bytes written to a download's file.
    func urlSession(
        _ session: Session, downloadTask: SessionTask, didWriteData bytesWritten: Int64,
        totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64)
    /// A download made from resume data goes on at `fileOffset` (0 when the
    /// resource changed and the file starts over).
    func urlSession(_ session: Session, downloadTask: SessionTask, didResumeAtOffset fileOffset: Int64, expectedTotalBytes: Int64)
    /// The download is complete; the file at `location` is deleted when this returns.
    func urlSession(_ session: Session, downloadTask: SessionTask, didFinishDownloadingTo location: URL)

    // MARK: Stream tasks (Apple's URLSessionStreamDelegate)

    /// The peer ended its side of a stream task's connection: a read saw the end.
    func urlSession(_ session: Session, readClosedFor streamTask: SessionStreamTask)
    /// The stream task's write side was closed (`closeWrite()`).
    func urlSession(_ session: Session, writeClosedFor streamTask: SessionStreamTask)
    /// `captureStreams()` handed the stream task's connection over as a
    /// pair of streams, after the reads and writes queued before it; the
    /// task is complete. Streams not kept close the connection.
    func urlSession(_ session: Session, streamTask: SessionStreamTask, didBecome inputStream: InputStream, outputStream: OutputStream)
    /// Never sent on Linux: the system has no route monitor to say that a
    /// better route than the connection's exists. Kept for source compatibility.
    func urlSession(_ session: Session, betterRouteDiscoveredFor streamTask: SessionStreamTask)

    // MARK: WebSocket tasks (Apple's URLSessionWebSocketDelegate)

    /// The server accepted the handshake, choosing `protocol` (nil: none).
    func urlSession(_ session: Session, webSocketTask: SessionWebSocketTask, didOpenWithProtocol protocol: String?)
    /// The server's close frame came (or the closing handshake was given up on).
    func urlSession(_ session: Session, webSocketTask: SessionWebSocketTask, didCloseWith closeCode: SessionWebSocketTask.CloseCode, reason: Data?)

    // MARK: Background sessions

    /// Every event that waited for this background session when it attached
    /// to transferd was delivered (Apple's `URLSessionDelegate` method).
    func urlSessionDidFinishEvents(forBackgroundURLSession session: Session)
}

/// Apple's `URLSessionTaskDelegate`: every method is `SessionDelegate`'s;
/// the name is kept so that ported code conforms as it did.
public protocol SessionTaskDelegate: SessionDelegate {}
/// Apple's `URLSessionDataDelegate` (see `SessionTaskDelegate`).
public protocol SessionDataDelegate: SessionTaskDelegate {}
/// Apple's `URLSessionDownloadDelegate` (see `SessionTaskDelegate`).
public protocol SessionDownloadDelegate: SessionTaskDelegate {}
/// Apple's `URLSessionStreamDelegate` (see `SessionTaskDelegate`).
public protocol SessionStreamDelegate: SessionTaskDelegate {}
/// Apple's `URLSessionWebSocketDelegate` (see `SessionTaskDelegate`).
public protocol SessionWebSocketDelegate: SessionTaskDelegate {}

extension SessionDelegate {
    public func urlSession(_ session: Session, didBecomeInvalidWithError error: (any Error)?) { DelegateFallback.unhandled() }

    public var evaluatesServerTrust: Bool { false }
    public var mayBecomeStream: Bool { false }
    public func urlSession(_ session: Session, dataTask: SessionTask, didBecome streamTask: SessionStreamTask) { DelegateFallback.unhandled() }
    public func urlSession(_ session: Session, didReceive challenge: AuthenticationChallenge) async
        -> (Session.AuthChallengeDisposition, Credential?)
    {
        await awaitingAnswer { self.urlSession(session, didReceive: challenge, completionHandler: $0) }
    }
    public func urlSession(
        _ session: Session, didReceive challenge: AuthenticationChallenge,
        completionHandler: @escaping @Sendable (Session.AuthChallengeDisposition, Credential?) -> Void
    ) {
        DelegateFallback.unhandled()
        completionHandler(.performDefaultHandling, nil)
    }

    public func urlSession(_ session: Session, didCreateTask task: SessionTask) { DelegateFallback.unhandled() }
    public func urlSession(_ session: Session, readClosedFor streamTask: SessionStreamTask) { DelegateFallback.unhandled() }
    public func urlSession(_ session: Session, writeClosedFor streamTask: SessionStreamTask) { DelegateFallback.unhandled() }
    public func urlSession(_ session: Session, betterRouteDiscoveredFor streamTask: SessionStreamTask) { DelegateFallback.unhandled() }
    public func urlSession(_ session: Session, streamTask: SessionStreamTask, didBecome inputStream: InputStream, outputStream: OutputStream) {
        DelegateFallback.unhandled()
    }
    public func urlSession(_ session: Session, webSocketTask: SessionWebSocketTask, didOpenWithProtocol protocol: String?) { DelegateFallback.unhandled() }
    public func urlSession(
        _ session: Session, webSocketTask: SessionWebSocketTask, didCloseWith closeCode: SessionWebSocketTask.CloseCode, reason: Data?
    ) { DelegateFallback.unhandled() }
    public func urlSession(
        _ session: Session, task: SessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest
    ) async -> URLRequest? {
        await withCheckedContinuation { continuation in
            self.urlSession(session, task: task, willPerformHTTPRedirection: response, newRequest: request) {
                continuation.resume(returning: $0)
            }
        }
    }
    public func urlSession(
        _ session: Session, task: SessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        DelegateFallback.unhandled()
        completionHandler(request)
    }
    public func urlSession(_ session: Session, task: SessionTask, didReceive challenge: AuthenticationChallenge) async
        -> (Session.AuthChallengeDisposition, Credential?)
    {
        await awaitingAnswer { self.urlSession(session, task: task, didReceive: challenge, completionHandler: $0) }
    }
    public func urlSession(
        _ session: Session, task: SessionTask, didReceive challenge: AuthenticationChallenge,
        completionHandler: @escaping @Sendable (Session.AuthChallengeDisposition, Credential?) -> Void
    ) {
        DelegateFallback.unhandled()
        completionHandler(.performDefaultHandling, nil)
    }
    public func urlSession(_ session: Session, taskIsWaitingForConnectivity task: SessionTask) { DelegateFallback.unhandled() }
    public func urlSession(_ session: Session, task: SessionTask, didReceiveInformationalResponse response: HTTPURLResponse) {
        DelegateFallback.unhandled()
    }
    public func urlSession(_ session: Session, task: SessionTask, didReceiveInformationalResponse response: HTTPResponse) {
        DelegateFallback.unhandled()
    }
    public func urlSession(_ session: Session, task: SessionTask, didReceiveTrailers trailers: HTTPFields) {
        DelegateFallback.unhandled()
    }
    public func urlSession(_ session: Session, needNewBodyStreamForTask task: SessionTask) async -> InputStream? {
        let box = await withCheckedContinuation { (continuation: CheckedContinuation<OwnedInputStream?, Never>) in
            self.urlSession(session, task: task) { stream in continuation.resume(returning: stream.map(OwnedInputStream.init)) }
        }
        return box?.stream
    }
    public func urlSession(
        _ session: Session, task: SessionTask, needNewBodyStream completionHandler: @escaping @Sendable (InputStream?) -> Void
    ) {
        DelegateFallback.unhandled()
        completionHandler(nil)
    }
    public func urlSession(_ session: Session, needNewBodyStreamForTask task: SessionTask, from offset: Int64) async -> InputStream? {
        let box = await withCheckedContinuation { (continuation: CheckedContinuation<OwnedInputStream?, Never>) in
            self.urlSession(session, task: task, needNewBodyStreamFrom: offset) { stream in continuation.resume(returning: stream.map(OwnedInputStream.init)) }
        }
        return box?.stream
    }
    public func urlSession(
        _ session: Session, task: SessionTask, needNewBodyStreamFrom offset: Int64,
        completionHandler: @escaping @Sendable (InputStream?) -> Void
    ) {
        DelegateFallback.unhandled()
        completionHandler(nil)
    }
    public func urlSession(
        _ session: Session, task: SessionTask, didSendBodyData bytesSent: Int64,
        totalBytesSent: Int64, totalBytesExpectedToSend: Int64
    ) { DelegateFallback.unhandled() }
    public func urlSession(_ session: Session, task: SessionTask, didFinishCollecting metrics: TaskMetrics) { DelegateFallback.unhandled() }
    public func urlSession(_ session: Session, task: SessionTask, didCompleteWithError error: (any Error)?) { DelegateFallback.unhandled() }

    public func urlSession(_ session: Session, dataTask: SessionTask, didReceive response: URLResponse) async
        -> Session.ResponseDisposition
    {
        await withCheckedContinuation { continuation in
            self.urlSession(session, dataTask: dataTask, didReceive: response) { continuation.resume(returning: $0) }
        }
    }
    public func urlSession(
        _ session: Session, dataTask: SessionTask, didReceive response: URLResponse,
        completionHandler: @escaping @Sendable (Session.ResponseDisposition) -> Void
    ) {
        DelegateFallback.unhandled()
        completionHandler(.allow)
    }
    public func urlSession(_ session: Session, dataTask: SessionTask, didReceive data: Data) { DelegateFallback.unhandled() }
    public func urlSession(_ session: Session, dataTask: SessionTask, didBecome downloadTask: SessionTask) { DelegateFallback.unhandled() }
    public func urlSession(_ session: Session, dataTask: SessionTask, willCacheResponse proposedResponse: CachedResponse) async
        -> CachedResponse?
    {
        await withCheckedContinuation { continuation in
            self.urlSession(session, dataTask: dataTask, willCacheResponse: proposedResponse) { continuation.resume(returning: $0) }
        }
    }
    public func urlSession(
        _ session: Session, dataTask: SessionTask, willCacheResponse proposedResponse: CachedResponse,
        completionHandler: @escaping @Sendable (CachedResponse?) -> Void
    ) {
        DelegateFallback.unhandled()
        completionHandler(proposedResponse)
    }

    public func urlSession(
        _ session: Session, downloadTask: SessionTask, didWriteData bytesWritten: Int64,
        totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64
    ) { DelegateFallback.unhandled() }
    public func urlSession(_ session: Session, downloadTask: SessionTask, didResumeAtOffset fileOffset: Int64, expectedTotalBytes: Int64) {
        DelegateFallback.unhandled()
    }
    public func urlSession(_ session: Session, downloadTask: SessionTask, didFinishDownloadingTo location: URL) { DelegateFallback.unhandled() }
    public func urlSessionDidFinishEvents(forBackgroundURLSession session: Session) { DelegateFallback.unhandled() }
}

/// A delegate's answer to a challenge, as the session carries it.
struct ChallengeReply: Sendable {
    var disposition: Session.AuthChallengeDisposition
    var credential: Credential?

    init(_ disposition: Session.AuthChallengeDisposition, _ credential: Credential?) {
        self.disposition = disposition
        self.credential = credential
    }

    init(_ answer: (Session.AuthChallengeDisposition, Credential?)) {
        self.init(answer.0, answer.1)
    }
}

/// The answer a two-argument completion-handler method gives, awaited: how
/// the default async forms call the completion-handler forms.
func awaitingAnswer<Disposition: Sendable, Value: Sendable>(
    _ ask: (@escaping @Sendable (Disposition, Value?) -> Void) -> Void
) async -> (Disposition, Value?) {
    await withCheckedContinuation { continuation in
        ask { continuation.resume(returning: ($0, $1)) }
    }
}
