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
        case normalClosure = 1000
        case goingAway = 1001
        case protocolError = 1002
        case unsupportedData = 1003
        case noStatusReceived = 1005
        case abnormalClosure = 1006
        case invalidFramePayloadData = 1007
        case policyViolation = 1008
        case messageTooBig = 1009
        case mandatoryExtensionMissing = 1010
        case internalServerError = 1011
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
