import CCurl

/// Why a transfer failed: libcurl's code, or a limit of ours.
package struct TransferError: Error, CustomStringConvertible, Sendable, Equatable {
    package enum Kind: Sendable, Equatable {
        /// libcurl reported `curl`.
        case curl
        /// The transfer was cancelled.
        case cancelled
        /// The response head exceeded `CurlMulti.maximumHeadBytes`.
        case headTooLarge
        /// The response did not parse as HTTP.
        case badResponse
        /// The request body could not be read.
        case bodyUnreadable
        /// The transport was shut down.
        case shutDown
        /// No byte moved for the idle timeout (pauses of ours not counted).
        case idleTimeout
        /// A connection of the session's own (not libcurl's) failed this way.
        case connection(Failure)
    }

    package let kind: Kind
    /// libcurl's error, when `kind` is `.curl`.
    package let curl: CurlError?
    package let message: String

    package static func curl(_ error: CurlError) -> TransferError {
        TransferError(kind: .curl, curl: error, message: error.message)
    }

    package static let cancelled = TransferError(kind: .cancelled, curl: nil, message: "cancelled")
    package static let shutDown = TransferError(kind: .shutDown, curl: nil, message: "the transport was shut down")

    package static func idleTimeout(_ seconds: Double) -> TransferError {
        TransferError(kind: .idleTimeout, curl: nil, message: "no data moved for \(seconds) seconds")
    }

    package static func headTooLarge(_ limit: Int) -> TransferError {
        TransferError(kind: .headTooLarge, curl: nil, message: "the response's header fields exceed \(limit) bytes")
    }

    package static func badResponse(_ message: String) -> TransferError {
        TransferError(kind: .badResponse, curl: nil, message: message)
    }

    package static func bodyUnreadable(_ message: String) -> TransferError {
        TransferError(kind: .bodyUnreadable, curl: nil, message: message)
    }

    /// A failure of a connection the session runs itself.
    package static func connection(_ failure: Failure, _ message: String) -> TransferError {
        TransferError(kind: .connection(failure), curl: nil, message: message)
    }

    package var description: String { message }

    /// What kind of failure this is, for the session to act on and to map
    /// to its error codes: the transport reads libcurl's numbers and text,
    /// nobody above it does.
    package enum Failure: Sendable, Equatable {
        case unsupportedURL
        case cannotFindHost
        case cannotConnect
        case timedOut
        case connectionLost
        case badResponse
        case tlsFailed
        /// The server's certificate (or its pin) was not accepted.
        case serverCertificateUntrusted
        /// Our client certificate or key could not be used, or was refused.
        case clientCertificateRejected
        /// The server ended the handshake asking for a client certificate.
        case clientCertificateRequired
        case bodyUnreadable
        case cannotWrite
        case cancelled
        case shutDown
        case other
        /// A loader of the app's own (a `URLProtocol` class) failed with
        /// this code of Foundation's URL loading errors.
        case reported(code: Int)
    }

    /// The failure's kind (see `Failure`).
    package var failure: Failure {
        switch kind {
        case .cancelled: return .cancelled
        case .headTooLarge, .badResponse: return .badResponse
        case .bodyUnreadable: return .bodyUnreadable
        case .shutDown: return .shutDown
        case .idleTimeout: return .timedOut
        case .connection(let failure): return failure
        case .curl: return curl.map { Self.failure(curlCode: $0.code, message: $0.message) } ?? .other
        }
    }

    /// The kind of a libcurl easy-interface failure, by `CURLE_*` name; the
    /// text tells a handshake that ended for want of a client certificate
    /// from other TLS failures (OpenSSL reports it as an alert).
    package static func failure(curlCode code: Int32, message: String) -> Failure {
        func is_(_ name: CURLcode) -> Bool { code == Int32(name.rawValue) }
        if is_(CURLE_SSL_CLIENTCERT) { return .clientCertificateRequired }
        if is_(CURLE_SSL_CONNECT_ERROR) || is_(CURLE_RECV_ERROR) || is_(CURLE_SSL_CERTPROBLEM) {
            let text = message.lowercased()
            if text.contains("certificate required") || text.contains("handshake failure") || text.contains("alert bad certificate") {
                return .clientCertificateRequired
            }
        }
        if is_(CURLE_UNSUPPORTED_PROTOCOL) || is_(CURLE_URL_MALFORMAT) { return .unsupportedURL }
        if is_(CURLE_COULDNT_RESOLVE_HOST) || is_(CURLE_COULDNT_RESOLVE_PROXY) { return .cannotFindHost }
        if is_(CURLE_COULDNT_CONNECT) { return .cannotConnect }
        if is_(CURLE_OPERATION_TIMEDOUT) { return .timedOut }
        if is_(CURLE_PARTIAL_FILE) || is_(CURLE_GOT_NOTHING) || is_(CURLE_SEND_ERROR) || is_(CURLE_RECV_ERROR) { return .connectionLost }
        if is_(CURLE_WEIRD_SERVER_REPLY) || is_(CURLE_HTTP2) || is_(CURLE_BAD_CONTENT_ENCODING) || is_(CURLE_HTTP2_STREAM) {
            return .badResponse
        }
        if is_(CURLE_SSL_CONNECT_ERROR) { return .tlsFailed }
        if is_(CURLE_SSL_CERTPROBLEM) || is_(CURLE_SSL_CIPHER) { return .clientCertificateRejected }
        if is_(CURLE_PEER_FAILED_VERIFICATION) || is_(CURLE_SSL_PINNEDPUBKEYNOTMATCH) { return .serverCertificateUntrusted }
        if is_(CURLE_READ_ERROR) { return .bodyUnreadable }
        if is_(CURLE_WRITE_ERROR) { return .cannotWrite }
        if is_(CURLE_ABORTED_BY_CALLBACK) { return .cancelled }
        return .other
    }
}
