import Foundation
#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
import URLLoading

/// One running transfer: its task, the partial file it writes (downloads),
/// its byte counts, and progress reports throttled for the app.
final class RunningTransfer: Sendable {
    let id: Int64
    let kind: TaskSpec.Kind
    /// Where this transfer's body starts in the file, as asked.
    private let startOffset: Int64
    private let counts: Lock<Counts>

    struct Counts {
        var descriptor: Int32
        /// Bytes in the file (downloads) or sent (uploads).
        var bytes: Int64
        var expected: Int64 = -1
        var task: SessionTask?
        /// The transfer, when transferd runs it on the transport itself.
        var direct: DirectDownload?
        var stopped = false
        /// Set when the transfer ends for a retry (busy server, wrong range).
        var retry: Retry?
        var body = Data()
        var lastReport = Date.distantPast
        var reported: Int64 = 0
        var writeError: String?
    }

    /// An upload's response body kept for the app at most.
    static let maximumResponseBody = 1 << 20

    init(id: Int64, kind: TaskSpec.Kind, descriptor: Int32, offset: Int64) {
        self.id = id
        self.kind = kind
        startOffset = offset
        counts = Lock(Counts(descriptor: descriptor, bytes: offset, reported: offset))
    }

    var isStopped: Bool { counts.withLock { $0.stopped } }

    /// Why a transfer whose head came is given up and tried again.
    enum Retry: Equatable {
        /// 429 or 503: after the server's Retry-After (seconds), or the
        /// backoff when it gave none.
        case busy(status: Int, after: TimeInterval?)
        /// A 206 of another range than the one asked for: at once, from zero.
        case wrongRange
    }

    var retry: Retry? {
        get { counts.withLock { $0.retry } }
        set { counts.withLock { $0.retry = newValue } }
    }

    func start(_ task: SessionTask, runner: TransferRunner) {
        counts.withLock { $0.task = task }
        runner.transfers.withLock { $0[ObjectIdentifier(task)] = self }
        task.resume()
    }

    /// Runs a download on the transport itself (`DirectDownload`).
    func start(_ direct: DirectDownload) {
        counts.withLock { $0.direct = direct }
        direct.start()
    }

    /// The head said where the body starts (the machine may have emptied
    /// the file). A body that starts where this transfer asked goes on as
    /// it is (a direct download may have written some of it already).
    func restart(at bytes: Int64, expected: Int64) {
        counts.withLock { counts in
            if bytes != startOffset {
                if counts.descriptor >= 0 {
                    _ = ftruncate(counts.descriptor, off_t(bytes))
                    _ = lseek(counts.descriptor, off_t(bytes), SEEK_SET)
                }
                counts.bytes = bytes
            }
            counts.expected = expected
        }
    }

    /// The whole length the head announced (-1 unknown), before the daemon's decision.
    func expect(_ expected: Int64) {
        counts.withLock { $0.expected = expected }
    }

    /// Appends a chunk of a download's body; false when it cannot be written.
    func write(_ data: Data) -> Bool {
        data.withUnsafeBytes { write($0) }
    }

    /// Appends a chunk of a download's body; false when it cannot be written.
    func write(_ raw: UnsafeRawBufferPointer) -> Bool {
        counts.withLock { counts in
            guard counts.descriptor >= 0, !counts.stopped else { return false }
            let ok = { () -> Bool in
                var offset = 0
                while offset < raw.count {
                    guard let base = raw.baseAddress else { return false }
                    let written = Glibc.write(counts.descriptor, base + offset, raw.count - offset)
                    if written < 0 && errno == EINTR { continue }
                    guard written > 0 else { return false }
                    offset += written
                }
                return true
            }()
            if ok {
                counts.bytes += Int64(raw.count)
            } else {
                counts.writeError = String(cString: strerror(errno))
            }
            return ok
        }
    }

    func keepResponseBody(_ data: Data) {
        counts.withLock { counts in
            let room = Self.maximumResponseBody - counts.body.count
            if room > 0 { counts.body.append(data.prefix(room)) }
        }
    }

    func noteSent(_ total: Int64, expected: Int64) {
        counts.withLock {
            $0.bytes = total
            $0.expected = expected
        }
    }

    /// A progress report when one is due (at most 10 a second, and at the
    /// end). The whole body's count waits for the end's report (or goes
    /// with the task's `finished`): a small download sends no frame of
    /// progress of its own.
    func progressDue(final: Bool = false) -> (bytes: Int64, expected: Int64)? {
        counts.withLock { counts in
            let now = Date()
            guard counts.bytes != counts.reported, final || now.timeIntervalSince(counts.lastReport) >= 0.1 else { return nil }
            if !final, counts.expected >= 0, counts.bytes >= counts.expected { return nil }
            counts.lastReport = now
            counts.reported = counts.bytes
            return (counts.bytes, counts.expected)
        }
    }

    var responseBody: Data? { counts.withLock { $0.body.isEmpty ? nil : $0.body } }
    var writeError: String? { counts.withLock { $0.writeError } }

    /// Stops the transfer (cancel or suspend).
    func stop() {
        let (task, direct) = counts.withLock { counts in
            counts.stopped = true
            return (counts.task, counts.direct)
        }
        task?.cancel()
        direct?.cancel()
    }

    /// Makes the file durable (unless `flush` is false: nothing was
    /// written) and closes it: the bytes it holds.
    func close(flush: Bool = true) -> Int64 {
        counts.withLock { counts in
            if counts.descriptor >= 0 {
                if flush { _ = fsync(counts.descriptor) }
                _ = Glibc.close(counts.descriptor)
                counts.descriptor = -1
            }
            return counts.bytes
        }
    }
}

/// The session transferd runs every transfer on, and its delegate: each
/// task's events go to its `RunningTransfer` and the daemon.
final class TransferRunner: SessionDataDelegate, SessionTaskDelegate {
    let daemon = Lock<Daemon?>(nil)
    /// Running transfers by their task (tasks of different sessions share identifiers).
    let transfers = Lock<[ObjectIdentifier: RunningTransfer]>([:])
    /// What a task's transfers need of their session, as the app's configuration chose it.
    private struct SessionChoice: Hashable {
        var proxies: ProxyRules?
        var trustRootsFile: String?
        var resumableUploadVersion: Int?
        var tlsMinimumVersion: [Int]?
        var tlsMaximumVersion: [Int]?
    }
    /// One session per choice the apps made (proxies, trust roots), made on first use.
    private let sessions = Lock<[SessionChoice: Session]>([:])
    /// A configuration's resumable uploads version when the app's journal entry names none.
    private static let defaultResumableUploadVersion = SessionConfiguration.ephemeral.resumableUploadVersion

    /// The session for `spec`'s transfers: the app's proxies and trust
    /// roots, never transferd's own environment's. A roots path that is
    /// not absolute (or holds a NUL) is not read: the system's roots apply.
    func session(for spec: TaskSpec) -> Session {
        let roots = spec.trustRootsFile.flatMap { $0.hasPrefix("/") && !$0.utf8.contains(0) ? $0 : nil }
        // 0: the app turned resumable uploads off; absent: the default.
        let version = spec.resumableUploadVersion.map { $0 == 0 ? nil : $0 } ?? Self.defaultResumableUploadVersion
        let choice = SessionChoice(
            proxies: spec.proxies, trustRootsFile: roots, resumableUploadVersion: version, tlsMinimumVersion: Self.tlsVersion(spec.tlsMinimumVersion),
            tlsMaximumVersion: Self.tlsVersion(spec.tlsMaximumVersion))
        return sessions.withLock { sessions in
            if let session = sessions[choice] { return session }
            let configuration = SessionConfiguration.ephemeral
            configuration.urlCache = nil
            configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
            // Sessions are shared by every app of the user with the same
            // choice: a store of their own would carry one app's cookies or
            // credentials into another's requests. The app sends its own
            // cookies with the request and keeps the response's.
            configuration.httpCookieStorage = nil
            configuration.httpShouldSetCookies = false
            configuration.urlCredentialStorage = nil
            configuration.transportSpins = false
            // More transfers run than a host has connections: those waiting
            // for one must not time out for it (see `Daemon.Settings.maximumRunning`).
            configuration.requestTimeoutCountsFromSend = true
            configuration.proxiesFromEnvironment = false
            configuration.presetProxyRules = choice.proxies
            configuration.trustRootsFile = choice.trustRootsFile
            configuration.resumableUploadVersion = choice.resumableUploadVersion
            configuration.tlsMinimumSupportedVersion = choice.tlsMinimumVersion.map { ($0[0], $0[1]) }
            configuration.tlsMaximumSupportedVersion = choice.tlsMaximumVersion.map { ($0[0], $0[1]) }
            let session = Session(configuration: configuration, delegate: self)
            sessions[choice] = session
            return session
        }
    }

    /// A TLS version read back from the journal: `[major, minor]` of TLS
    /// 1.0 to 1.3 (major 1, minor 0...3), else none.
    static func tlsVersion(_ pair: [Int]?) -> [Int]? {
        guard let pair, pair.count == 2, pair[0] == 1, (0...3).contains(pair[1]) else { return nil }
        return pair
    }

    private func transfer(_ task: SessionTask) -> RunningTransfer? {
        transfers.withLock { $0[ObjectIdentifier(task)] }
    }

    /// A server's or proxy's HTTP challenge goes to the app (or the stored
    /// credential); TLS questions keep default handling.
    func urlSession(_ session: Session, task: SessionTask, didReceive challenge: AuthenticationChallenge) async
        -> (Session.AuthChallengeDisposition, Credential?)
    {
        let method = challenge.protectionSpace.authenticationMethod
        guard method != .serverTrust, method != .clientCertificate, let running = transfer(task), let daemon = daemon.withLock({ $0 }) else {
            return (.performDefaultHandling, nil)
        }
        return await daemon.challenge(running, challenge)
    }

    func urlSession(_ session: Session, dataTask: SessionTask, didReceive response: URLResponse) async -> Session.ResponseDisposition {
        guard let running = transfer(dataTask), let http = response as? HTTPURLResponse, let daemon = daemon.withLock({ $0 }) else { return .cancel }
        return await daemon.headArrived(running.id, http, asArrived: dataTask.httpResponse) ? .allow : .cancel
    }

    func urlSession(_ session: Session, dataTask: SessionTask, didReceive data: Data) {
        guard let running = transfer(dataTask) else { return }
        if running.kind == .upload {
            running.keepResponseBody(data)
            return
        }
        if !running.write(data) {
            dataTask.cancel()
            return
        }
        if let (bytes, expected) = running.progressDue() { daemon.withLock { $0 }?.reportProgress(running, bytes: bytes, expected: expected) }
    }

    /// A `104` named an upload's resumption URL: its resume data goes to
    /// the journal, so that a restarted transferd sends only the rest.
    func urlSession(_ session: Session, task: SessionTask, didReceiveInformationalResponse response: HTTPURLResponse) {
        guard response.statusCode == 104, let running = transfer(task), running.kind == .upload, let blob = task.uploadResumeData() else { return }
        daemon.withLock { $0 }?.uploadResumable(running.id, blob)
    }

    func urlSession(_ session: Session, task: SessionTask, didSendBodyData bytesSent: Int64, totalBytesSent: Int64, totalBytesExpectedToSend: Int64) {
        guard let running = transfer(task) else { return }
        running.noteSent(totalBytesSent, expected: totalBytesExpectedToSend)
        if let (bytes, expected) = running.progressDue() { daemon.withLock { $0 }?.reportProgress(running, bytes: bytes, expected: expected) }
    }

    func urlSession(_ session: Session, task: SessionTask, didCompleteWithError error: (any Error)?) {
        guard let running = transfers.withLock({ $0.removeValue(forKey: ObjectIdentifier(task)) }) else { return }
        if let (bytes, expected) = running.progressDue(final: true) {
            daemon.withLock { $0 }?.reportProgress(running, bytes: bytes, expected: expected, final: true)
        }
        var failure = error
        if let problem = running.writeError {
            failure = SessionError(.cannotWriteFile, failingURL: nil, message: "cannot write the partial file: \(problem)").urlError
        }
        // Made durable and closed here, on the task's context, whether or
        // not the daemon still waits for it (a cancelled or suspended
        // transfer's too): the owner's queue never waits for the disk.
        let bytes = running.close()
        daemon.withLock { $0 }?.transferEnded(running.id, bytes: bytes, error: failure, body: running.responseBody)
    }
}
