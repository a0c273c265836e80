/// Why a stream operation failed; `Session` maps it to a `URLError`.
package struct StreamError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The failure's kind.
    package enum Kind: Sendable, Equatable {
        /// The host's name could not be resolved.
        case cannotFindHost
        /// No address of the host accepted the connection.
        case cannotConnect
        /// The operation's time ran out.
        case timedOut
        /// The peer closed the connection, or the side used was closed.
        case closed
        /// The TLS handshake failed or the peer's certificate was not trusted.
        case tls
        /// The proxy refused the tunnel.
        case proxy
        /// The operation or the connection was cancelled.
        case cancelled
        /// The system refused a read or write.
        case io
    }

    package let kind: Kind
    /// What happened, for logs and errors (never data from the stream).
    package let message: String

    package init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    package var description: String { message }
}
