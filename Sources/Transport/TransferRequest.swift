package import Foundation

/// What one HTTP exchange sends, in the terms libcurl needs. Built by the
/// session for each hop (redirects are separate transfers).
package struct TransferRequest: Sendable {
    /// Where the request body comes from.
    package enum Body: Sendable {
        case none
        case data(Data)
        /// A file streamed from disk: `length` bytes from `offset` on (a
        /// resumed upload sends the rest of its file).
        case file(path: String, offset: Int64 = 0, length: Int64)
        /// Bytes a producer writes while the request is sent; `length` is
        /// -1 when unknown (HTTP/1.1 then sends the body chunked).
        case stream(BodyPipe, length: Int64)
    }

    /// TLS settings.
    package struct TLS: Sendable, Equatable {
        /// A PEM bundle of trust roots instead of the system's.
        package var caFile: String?
        /// Verify the server's certificate chain and name (default: yes).
        package var verifyPeer = true
        /// Minimum and maximum TLS versions as (major, minor), e.g. (1, 2).
        package var minimumVersion: (Int, Int)?
        package var maximumVersion: (Int, Int)?
        /// A client identity (PEM certificate and key files).
        package var clientCertificateFile: String?
        package var clientKeyFile: String?
        /// The passphrase of an encrypted client key.
        package var clientKeyPassphrase: String?
        /// Accept only a server whose public key has this hash
        /// (`sha256//<base64>`, libcurl's CURLOPT_PINNEDPUBLICKEY).
        package var pinnedPublicKey: String?
        /// Collect the server's certificate chain into the metrics.
        package var collectsCertificates = false

        package init() {}

        /// No file, key, pin or collection of its own: only the options
        /// every transfer sets (verification and versions).
        var isPlain: Bool {
            caFile == nil && clientCertificateFile == nil && clientKeyFile == nil && clientKeyPassphrase == nil && pinnedPublicKey == nil
                && !collectsCertificates
        }

        package static func == (a: TLS, b: TLS) -> Bool {
            a.caFile == b.caFile && a.verifyPeer == b.verifyPeer
                && a.minimumVersion.map { [$0.0, $0.1] } == b.minimumVersion.map { [$0.0, $0.1] }
                && a.maximumVersion.map { [$0.0, $0.1] } == b.maximumVersion.map { [$0.0, $0.1] }
                && a.clientCertificateFile == b.clientCertificateFile && a.clientKeyFile == b.clientKeyFile
                && a.clientKeyPassphrase == b.clientKeyPassphrase && a.pinnedPublicKey == b.pinnedPublicKey
                && a.collectsCertificates == b.collectsCertificates
        }
    }

    package var url: String
    package var method: String
    /// Header fields in order; each is sent as given.
    package var headers: [(name: String, value: String)]
    package var body: Body
    /// Give up connecting after this long.
    package var connectTimeout: Duration?
    /// Fail when no byte moves for this long (Apple's request timeout).
    package var idleTimeout: Duration?
    /// The idle timeout counts from the request's sending, not from the
    /// start: a transfer waiting for one of its host's connections (past
    /// the per-host limit, in libcurl's queue) or connecting (bounded by
    /// `connectTimeout`) never times out for idleness. For a daemon that
    /// queues transfers on purpose; a session's tasks keep Apple's rule,
    /// where a task waiting for a connection can time out.
    package var idleTimeoutCountsFromSend = false
    /// Fail when the whole exchange takes longer (Apple's resource timeout).
    package var totalTimeout: Duration?
    /// Ask for a compressed body and decode it (`Accept-Encoding`).
    package var decodeContent = true
    package var tls = TLS()
    /// A proxy URL (`http://host:port`), or nil for none.
    package var proxy: String?
    /// A Unix-domain socket to connect to instead of the URL's host and
    /// port (an absolute path of at most 107 bytes, checked by the caller).
    package var unixSocketPath: String?
    /// Connection-based schemes libcurl carries out itself (several round
    /// trips on one connection), with the user and password to use.
    package enum HTTPAuthentication: Sendable {
        case ntlm(user: String, password: String)
        case negotiate(user: String, password: String)
    }

    /// NTLM or Negotiate for this transfer, or nil.
    package var httpAuthentication: HTTPAuthentication?
    /// libcurl's receive buffer (CURLOPT_BUFFERSIZE), or nil for its 16 KiB:
    /// a download to a file moves in fewer, larger writes with a larger one.
    package var receiveBufferSize: Int?
    /// Only connect (TCP and TLS), send nothing: the transfer completes
    /// once the connection stands (to see a server's certificates first).
    package var connectOnly = false

    package init(url: String, method: String = "GET", headers: [(name: String, value: String)] = [], body: Body = .none) {
        self.url = url
        self.method = method
        self.headers = headers
        self.body = body
    }
}

/// The status line and header fields of a final response.
package struct ResponseHead: Sendable, Equatable {
    package var status: Int
    /// "HTTP/1.1", "HTTP/2", ...
    package var httpVersion: String
    package var headers: [(name: String, value: String)]
    /// The status line's reason phrase as the server sent it ("" when it
    /// sent none, and always under HTTP/2 and later, which have none).
    package var reasonPhrase: String

    package init(status: Int, httpVersion: String, headers: [(name: String, value: String)], reasonPhrase: String = "") {
        self.status = status
        self.httpVersion = httpVersion
        self.headers = headers
        self.reasonPhrase = reasonPhrase
    }

    package static func == (a: ResponseHead, b: ResponseHead) -> Bool {
        a.status == b.status && a.httpVersion == b.httpVersion && a.reasonPhrase == b.reasonPhrase && a.headers.count == b.headers.count
            && zip(a.headers, b.headers).allSatisfy { $0.name == $1.name && $0.value == $1.value }
    }
}

/// Figures libcurl kept about one transfer (the task's metrics).
package struct TransferMetrics: Sendable, Equatable {
    /// Seconds from the start of the transfer to each phase's end.
    package var nameLookup: Double = 0
    package var connect: Double = 0
    package var tlsHandshake: Double = 0
    package var requestSent: Double = 0
    package var firstByte: Double = 0
    package var total: Double = 0
    package var bytesSent: Int64 = 0
    package var bytesReceived: Int64 = 0
    /// The server's certificates, leaf first, as PEM (with `collectsCertificates`).
    package var certificateChain: [String] = []
    package var headerBytes: Int64 = 0
    package var httpVersion: String = ""
    /// Whether an existing connection carried the request.
    package var reusedConnection = false
    package var remoteAddress: String?
    package var remotePort: Int?
    package var localAddress: String?
    package var localPort: Int?
    /// When libcurl reported the transfer done; its phases' dates are this
    /// minus `total` plus each phase's seconds.
    package var endDate: Date?
    /// The connection's TLS version ("TLSv1.3") and cipher suite, for https.
    package var tlsVersion: String?
    package var tlsCipherSuite: String?
    /// Whether the request went through a proxy.
    package var viaProxy = false
    /// Bytes of the request head sent.
    package var requestHeaderBytes: Int64 = 0

    package init() {}
}

/// Receives the events of one transfer, on the transport's thread. Each
/// call must return quickly: hand the work to another context.
package protocol TransferObserver: AnyObject, Sendable {
    /// The final response's head arrived.
    func transferDidReceiveHead(_ head: ResponseHead)
    /// An interim (1xx, not 101) head arrived: 100 Continue, 103 Early Hints.
    func transferDidReceiveInterimHead(_ head: ResponseHead)
    /// A chunked body's trailer fields arrived, after its last chunk.
    func transferDidReceiveTrailers(_ fields: [(name: String, value: String)])
    /// A body chunk arrived. Return false to pause the transfer without
    /// consuming the chunk: libcurl delivers it again after `unpause`.
    func transferDidReceive(_ chunk: UnsafeRawBufferPointer) -> Bool
    /// Request body bytes were sent so far, of `total` (-1 when unknown).
    func transferDidSendBody(sent: Int64, total: Int64)
    /// Asked right after the head by a transfer that can hold the rest (a
    /// connection of the session's own): false holds it until `unpause`,
    /// so the connection can still be handed over untouched.
    func transferMayProceedPastHead() -> Bool
    /// A cancel command ended the transfer: its figures so far, just
    /// before `transferDidComplete` hears `.cancelled`.
    func transferWasCancelled(after metrics: TransferMetrics)
    /// The transfer ended: with metrics, or with an error.
    func transferDidComplete(_ result: Result<TransferMetrics, TransferError>)
}

extension TransferObserver {
    /// Interim heads are of no interest by default.
    package func transferDidReceiveInterimHead(_ head: ResponseHead) {}
    /// Trailers are of no interest by default.
    package func transferDidReceiveTrailers(_ fields: [(name: String, value: String)]) {}
    /// Transfers of libcurl's go on after the head without asking.
    package func transferMayProceedPastHead() -> Bool { true }
    /// A cancelled transfer's figures are of no interest by default.
    package func transferWasCancelled(after metrics: TransferMetrics) {}
}
