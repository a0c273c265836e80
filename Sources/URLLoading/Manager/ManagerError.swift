public import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

/// Why a manager's request failed: one flat error whose
/// `kind` says what went wrong and which carries what arrived — the
/// response and its body — so a caller can read an error payload.
public struct ManagerError: Error, Sendable, CustomStringConvertible {
    /// What went wrong.
    public enum Kind: Sendable, Equatable {
        /// The parameters cannot be encoded as the request serializer says
        /// (a value of an unsupported type, a URL that cannot take them);
        /// nothing was sent.
        case parameterEncodingFailed
        /// The path does not make a URL against the base URL; nothing was sent.
        case invalidURL
        /// The transfer failed (`underlying` is the `URLError`).
        case transport
        /// The status code is not one the validation accepts.
        case unacceptableStatusCode(Int)
        /// The response's media type is not one the validation accepts (nil: none given).
        case unacceptableContentType(String?)
        /// The body could not be read as the response serializer says
        /// (not JSON, not the Decodable type, not text in its charset).
        case serializationFailed
        /// The download could not be moved where the destination said.
        case cannotMoveDownload
        /// The request adapter threw (`underlying`); nothing was sent.
        case adaptationFailed
    }

    /// What went wrong.
    public var kind: Kind
    /// The response, when one arrived.
    public var response: HTTPURLResponse?
    /// Its body, when one arrived (for a download: nil).
    public var data: Data?
    /// The error beneath (a `URLError`, a `DecodingError`, ...), if any.
    public var underlying: (any Error)?
    /// A sentence for people.
    public var message: String

    /// An error of `kind`.
    public init(
        _ kind: Kind, message: String, response: HTTPURLResponse? = nil, data: Data? = nil, underlying: (any Error)? = nil
    ) {
        self.kind = kind
        self.message = message
        self.response = response
        self.data = data
        self.underlying = underlying
    }

    /// The kind, the status when there was a response, and the message;
    /// never the body (it may hold secrets).
    public var description: String {
        "ManagerError(\(kind)\(response.map { ", status \($0.statusCode)" } ?? ""): \(message))"
    }
}
