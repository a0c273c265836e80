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

    package var description: String { message }
}
