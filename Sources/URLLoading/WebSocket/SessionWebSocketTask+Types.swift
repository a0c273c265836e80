public import Foundation

extension SessionWebSocketTask {
    /// A message (Apple's `URLSessionWebSocketTask.Message`).
    public enum Message: Sendable, Equatable {
        /// A binary message.
        case data(Data)
        /// A text message.
        case string(String)
    }

    /// Why a connection closed (Apple's `URLSessionWebSocketTask.CloseCode`,
    /// RFC 6455 §7.4.1).
    public enum CloseCode: Int, Sendable {
        /// Not closed (yet), or closed with no code.
        case invalid = 0
        /// 1000: the purpose of the connection was fulfilled.
        case normalClosure = 1000
        /// 1001: an endpoint is going away (a server shutting down, a page left).
        case goingAway = 1001
        /// 1002: an endpoint broke the protocol.
        case protocolError = 1002
        /// 1003: a kind of data the endpoint cannot accept.
        case unsupportedData = 1003
        /// 1005: the close frame had no code (never sent in one).
        case noStatusReceived = 1005
        /// 1006: the connection ended without a close frame (never sent in one).
        case abnormalClosure = 1006
        /// 1007: data not consistent with the message's type (text not UTF-8).
        case invalidFramePayloadData = 1007
        /// 1008: a message broke the endpoint's policy.
        case policyViolation = 1008
        /// 1009: a message too big to process.
        case messageTooBig = 1009
        /// 1010: the server did not agree to an extension the client needs.
        case mandatoryExtensionMissing = 1010
        /// 1011: the server met a condition that kept it from answering.
        case internalServerError = 1011
        /// 1015: the TLS handshake failed (never sent in a close frame).
        case tlsHandshakeFailure = 1015
    }
}

extension SessionWebSocketTask.CloseCode {
    /// The code for a number a peer sent; registered codes Apple's enum
    /// does not name (1012–1014, 3000–4999) read as `.invalid`, and the
    /// number stays in `SessionWebSocketTask.closeCodeValue`.
    init(number: UInt16?) {
        self = number.flatMap { Self(rawValue: Int($0)) } ?? (number == nil ? .noStatusReceived : .invalid)
    }
}
