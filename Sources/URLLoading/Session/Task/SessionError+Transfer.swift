package import Foundation
package import Transport

extension SessionError {
    /// The session's view of a transport failure (also transferd's, for
    /// the transfers it runs on the transport itself).
    package init(transfer error: TransferError, url: URL? = nil) {
        let code: Code
        switch error.failure {
        case .cancelled: self.init(.cancelled, failingURL: url, message: "the task was cancelled"); return
        case .shutDown: code = .sessionInvalidated
        case .unsupportedURL: code = .unsupportedURL
        case .cannotFindHost: code = .cannotFindHost
        case .cannotConnect: code = .cannotConnectToHost
        case .timedOut: code = .timedOut
        case .connectionLost: code = .networkConnectionLost
        case .badResponse: code = .badServerResponse
        case .tlsFailed: code = .secureConnectionFailed
        case .serverCertificateUntrusted: code = .serverCertificateUntrusted
        case .clientCertificateRejected, .clientCertificateRequired: code = .clientCertificateRejected
        case .bodyUnreadable: code = .cannotReadBody
        case .cannotWrite: code = .cannotWriteFile
        case .other: code = .unknown
        case .reported(let raw):
            // The nearest code of ours; Apple's own travels on to `urlError`.
            let reported = URLError.Code(rawValue: raw)
            self.init(Code.all.first { $0.urlErrorCode == reported && $0 != .sessionInvalidated } ?? .unknown, failingURL: url, message: error.message)
            reportedURLErrorCode = raw
            return
        }
        self.init(code, failingURL: url, message: error.message)
    }
}
