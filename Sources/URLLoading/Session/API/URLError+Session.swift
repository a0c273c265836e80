public import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension SessionError.Code {
    /// Apple's code for this failure. Ours that Apple lacks map to the
    /// nearest; the error's `sessionError` keeps ours.
    var urlErrorCode: URLError.Code {
        switch self {
        case .cancelled, .sessionInvalidated: .cancelled
        case .userCancelledAuthentication: .userCancelledAuthentication
        case .userAuthenticationRequired: .userAuthenticationRequired
        case .timedOut: .timedOut
        case .cannotFindHost: .cannotFindHost
        case .cannotConnectToHost: .cannotConnectToHost
        case .networkConnectionLost: .networkConnectionLost
        case .badServerResponse: .badServerResponse
        case .httpTooManyRedirects: .httpTooManyRedirects
        case .unsupportedURL: .unsupportedURL
        case .badURL: .badURL
        case .secureConnectionFailed: .secureConnectionFailed
        case .serverCertificateUntrusted: .serverCertificateUntrusted
        case .clientCertificateRejected: .clientCertificateRejected
        case .cannotReadBody: .cannotOpenFile
        case .cannotWriteFile: .cannotWriteToFile
        case .requestBodyStreamExhausted: .requestBodyStreamExhausted
        case .resourceUnavailable: .resourceUnavailable
        case .cannotDecodeResumeData: .cannotDecodeRawData
        case .backgroundSessionInUseByAnotherProcess: .backgroundSessionInUseByAnotherProcess
        case .backgroundSessionWasDisconnected: .backgroundSessionWasDisconnected
        default: .unknown
        }
    }
}

extension SessionError {
    /// The key of `URLError.userInfo` that holds the `SessionError` behind it.
    static let userInfoKey = "URLLoadingSessionError"
    /// Apple's key for a failed download's resume data.
    static let resumeDataKey = "NSURLSessionDownloadTaskResumeData"
    /// Apple's key for a failed upload's resume data.
    static let uploadResumeDataKey = "NSURLSessionUploadTaskResumeData"

    /// The error as tasks deliver it and async calls throw it (Apple's
    /// `URLError`): Apple's code, the failing URL (without its password or
    /// query values), this error's message as the localized description,
    /// and a download's or upload's resume data.
    public var urlError: URLError {
        // A cancelled task says so as Apple's does; the detail stays in `sessionError`.
        let text = code == .cancelled ? "cancelled" : description
        var userInfo: [String: Any] = [NSLocalizedDescriptionKey: text, Self.userInfoKey: self]
        if let failingURL {
            userInfo[NSURLErrorFailingURLErrorKey] = failingURL
            // NSURLErrorFailingURLStringErrorKey's value: the constant is deprecated, code being ported still reads it.
            userInfo["NSErrorFailingURLStringKey"] = failingURL.absoluteString
        }
        if let resumeData { userInfo[resumesUpload ? Self.uploadResumeDataKey : Self.resumeDataKey] = resumeData }
        return URLError(reportedURLErrorCode.flatMap(URLError.Code.init(rawValue:)) ?? code.urlErrorCode, userInfo: userInfo)
    }
}

extension URLError {
    /// A failed download's resume data: pass it to
    /// `Session.downloadTask(withResumeData:)` (Apple's `downloadTaskResumeData`,
    /// which swift-corelibs-foundation lacks).
    public var downloadTaskResumeData: Data? { userInfo[SessionError.resumeDataKey] as? Data }

    /// A failed resumable upload's resume data: pass it to
    /// `Session.uploadTask(withResumeData:)` (Apple's `uploadTaskResumeData`).
    public var uploadTaskResumeData: Data? { userInfo[SessionError.uploadResumeDataKey] as? Data }

    /// The session's own account of the failure, with codes Apple lacks
    /// (`cannotDecodeResumeData`, `sessionInvalidated`, ...). Ours alone.
    public var sessionError: SessionError? { userInfo[SessionError.userInfoKey] as? SessionError }
}
