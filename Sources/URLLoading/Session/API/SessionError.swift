public import Foundation

/// A client-side failure of a task: server statuses (4xx, 5xx) are
/// responses, never errors. A struct around a code, so new codes never break
/// a caller's `switch`; compare `code` with the static members.
///
/// Tasks deliver, and async calls throw, its Apple form, `URLError`
/// (`urlError`); this one rides along in it as `URLError.sessionError`.
public struct SessionError: Error, CustomStringConvertible, Sendable, Equatable {
    /// What went wrong, stable for callers to branch on.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String
        private init(_ name: String) { self.name = name }

        /// The task was cancelled.
        public static let cancelled = Code("cancelled")
        /// The delegate cancelled an authentication challenge.
        public static let userCancelledAuthentication = Code("user cancelled authentication")
        /// Authentication did not come to an end within the task's bound of
        /// requests (a server that keeps challenging).
        public static let userAuthenticationRequired = Code("user authentication required")
        /// The request or resource timeout passed.
        public static let timedOut = Code("timed out")
        /// The host name did not resolve.
        public static let cannotFindHost = Code("cannot find host")
        /// No connection could be made.
        public static let cannotConnectToHost = Code("cannot connect to host")
        /// The connection broke during the exchange.
        public static let networkConnectionLost = Code("network connection lost")
        /// The server's response could not be read as HTTP.
        public static let badServerResponse = Code("bad server response")
        /// More redirects than the configuration allows.
        public static let httpTooManyRedirects = Code("too many redirects")
        /// A scheme the session does not fetch.
        public static let unsupportedURL = Code("unsupported URL")
        /// A URL that cannot be requested.
        public static let badURL = Code("bad URL")
        /// The TLS handshake failed.
        public static let secureConnectionFailed = Code("secure connection failed")
        /// The server's certificate is not trusted.
        public static let serverCertificateUntrusted = Code("server certificate untrusted")
        /// The server refused the client certificate.
        public static let clientCertificateRejected = Code("client certificate rejected")
        /// The request body could not be read.
        public static let cannotReadBody = Code("cannot read request body")
        /// A download file could not be written.
        public static let cannotWriteFile = Code("cannot write file")
        /// The body had to be sent again and no new body stream was given
        /// (the delegate's `needNewBodyStream` returned nil).
        public static let requestBodyStreamExhausted = Code("request body stream exhausted")
        /// The cache had no answer where only the cache may answer.
        public static let resourceUnavailable = Code("resource unavailable")
        /// The session was invalidated before the task could run.
        public static let sessionInvalidated = Code("session invalidated")
        /// Any other failure.
        public static let unknown = Code("unknown")
        /// Resume data that is damaged, forged, of another version, or whose file is gone.
        public static let cannotDecodeResumeData = Code("cannot decode resume data")
        /// Another process has a live background session with this identifier.
        public static let backgroundSessionInUseByAnotherProcess = Code("background session in use by another process")
        /// The background session lost transferd (not found, not starting, gone).
        public static let backgroundSessionWasDisconnected = Code("background session was disconnected")
        /// What a background session cannot do: data tasks, uploads from
        /// data or streams, completion handlers, a session without a delegate.
        public static let notSupportedInBackground = Code("not supported in a background session")

        /// Every code, to read one back from its name (transferd's messages).
        static let all: [Code] = [
            .cancelled, .userCancelledAuthentication, .userAuthenticationRequired, .timedOut, .cannotFindHost, .cannotConnectToHost,
            .networkConnectionLost, .badServerResponse, .httpTooManyRedirects, .unsupportedURL, .badURL, .secureConnectionFailed,
            .serverCertificateUntrusted, .clientCertificateRejected, .cannotReadBody, .cannotWriteFile, .requestBodyStreamExhausted,
            .resourceUnavailable, .sessionInvalidated, .unknown, .cannotDecodeResumeData, .backgroundSessionInUseByAnotherProcess,
            .backgroundSessionWasDisconnected, .notSupportedInBackground,
        ]

        /// The code of this name; `.unknown` for a name no code has.
        package init(named name: String) {
            self = Self.all.first { $0.name == name } ?? .unknown
        }

        /// The code's name.
        public var description: String { name }
    }

    /// The failure.
    public let code: Code
    /// The URL of the request that failed, with its query and user info removed.
    public let failingURL: URL?
    /// Details, free of secrets.
    public let message: String
    /// For a download that failed after bytes arrived from a server that
    /// allows resuming: pass it to `Session.downloadTask(withResumeData:)`;
    /// for a resumable upload that failed after the server named its
    /// resumption URL: to `Session.uploadTask(withResumeData:)`.
    /// Never part of `description`.
    public internal(set) var resumeData: Data?
    /// `resumeData` is an upload's (Apple's `uploadTaskResumeData`).
    var resumesUpload = false
    /// The `URLError` code a `URLProtocol` class failed with, which
    /// `urlError` gives back as it was (ours may have none as precise).
    var reportedURLErrorCode: Int?

    /// Creates an error.
    public init(_ code: Code, failingURL: URL?, message: String) {
        self.code = code
        self.failingURL = failingURL.map(Self.redacted)
        self.message = message
    }

    /// The code, the message and the failing URL (its secrets redacted).
    public var description: String {
        "\(code): \(message)" + (failingURL.map { " (\($0.absoluteString))" } ?? "")
    }

    /// A URL without user, password, query or fragment: those may hold secrets.
    static func redacted(_ url: URL) -> URL {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: true) else { return url }
        components.user = nil
        components.password = nil
        if components.query != nil { components.query = "…" }
        components.fragment = nil
        return components.url ?? url
    }
}
