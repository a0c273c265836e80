import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Logging
import Transport

/// An upload task's resumable upload (`ResumableUpload`) in the engine:
/// the announcing fields on the upload, the `104`'s resumption URL, and
/// after a dropped connection a new hop (`HEAD` for the server's offset,
/// `PATCH` with the rest) under the task's one deadline. Only the final
/// response reaches the delegate; the metrics list every exchange.
extension SessionTask {
    /// The machine of an upload whose body can be sent from any offset,
    /// when the session announces a version: data, a file, or streams of
    /// a known length that the delegate gives again (`needNewBodyStream`,
    /// or its form with an offset); not a stream that can be sent once.
    static func resumableUpload(kind: Kind, body: TransferRequest.Body, streamed: StreamedBody?, version: Int?) -> ResumableUpload? {
        guard kind == .upload, let version = version.flatMap(ResumableUpload.Version.init(rawValue:)) else { return nil }
        if let streamed {
            guard streamed.length >= 0, case .delegate = streamed.remake else { return nil }
            return ResumableUpload(version: version, length: streamed.length)
        }
        switch body {
        case .data(let data): return ResumableUpload(version: version, length: Int64(data.count))
        case .file(_, _, let length): return ResumableUpload(version: version, length: length)
        case .none, .stream: return nil
        }
    }

    /// The fields the task's upload itself announces with, when it is the hop's request.
    static func resumableFields(_ inner: inout Inner) -> [(name: String, value: String)]? {
        guard let upload = inner.resumableUpload, upload.current == .upload else { return nil }
        return upload.fields(for: .upload)
    }

    /// Makes `request` the current hop's: the upload again (whole), or a
    /// `HEAD` or `PATCH` of the resumption URL with the draft's fields, the
    /// caller's `Authorization` (the URL is on the same origin) and, for a
    /// `PATCH`, the body from the server's offset.
    func prepareResumption(_ request: ResumableUpload.Request, _ inner: inout Inner) {
        guard let upload = inner.resumableUpload else { return }
        switch request {
        case .upload:
            if let originalRequest { inner.machine.use(originalRequest) }
            inner.hopBody = nil
            inner.sendBase = 0
            // A streamed body is asked for again, whole.
            inner.streamedBody?.next = nil
            inner.streamedBody?.from = 0
        case .offset(let url), .append(let url, _):
            var next = URLRequest(url: url)
            next.timeoutInterval = originalRequest?.timeoutInterval ?? next.timeoutInterval
            if let authorization = originalRequest?.value(forHTTPHeaderField: "Authorization") {
                next.setValue(authorization, forHTTPHeaderField: "Authorization")
            }
            for field in upload.fields(for: request) { next.setValue(field.value, forHTTPHeaderField: field.name) }
            if case .append(_, let offset) = request {
                next.httpMethod = "PATCH"
                inner.hopBody = Self.slice(body, from: offset)
                inner.sendBase = offset
                // A streamed body: a new stream, from the offset.
                inner.streamedBody?.next = nil
                inner.streamedBody?.from = offset
            } else {
                next.httpMethod = "HEAD"
                inner.hopBody = TransferRequest.Body.none
            }
            inner.machine.use(next)
        }
    }

    /// The body from `offset` on (the machine checked it is within the body).
    static func slice(_ body: TransferRequest.Body, from offset: Int64) -> TransferRequest.Body {
        switch body {
        case .data(let data):
            let start = data.index(data.startIndex, offsetBy: Int(clamping: min(max(0, offset), Int64(data.count))))
            return .data(data.subdata(in: start..<data.endIndex))
        case .file(let path, let start, let length):
            let skipped = min(max(0, offset), length)
            return .file(path: path, offset: start + skipped, length: length - skipped)
        case .none, .stream:
            return body
        }
    }

    /// The transfer of an upload hop ended without a final head (a reset,
    /// a timeout before the deadline): the upload goes on from what the
    /// server has, when a `104` named where. False when it cannot.
    func resumeUpload(after error: TransferError, of hop: Hop) -> Bool {
        switch error.failure {
        case .connectionLost, .timedOut: break
        default: return false
        }
        let actions = locked.withLock { inner -> StateMachine.Actions? in
            guard inner.machine.isCurrent(hop), inner.machine.record.head == nil, var upload = inner.resumableUpload,
                inner.machine.hasTime()
            else { return nil }
            guard case .send(let request) = upload.failed() else { return nil }
            inner.resumableUpload = upload
            TaskTransactions.recordCutShort(&inner)
            prepareResumption(request, &inner)
            return inner.machine.resend(url: inner.machine.request?.url)
        }
        guard let actions else { return false }
        perform(actions)
        return true
    }

    /// What a final head means to a resumable upload, in the head's turn of
    /// the lock: nil when it goes on as any head (the upload's answer),
    /// else the machine's actions for the next request or the failure.
    func resumableStep(_ inner: inout Inner, _ head: ResponseHead) -> StateMachine.Actions? {
        guard var upload = inner.resumableUpload else { return nil }
        let step = upload.response(status: head.status, fields: head.headers)
        inner.resumableUpload = upload
        switch step {
        case .answer:
            return nil
        case .send(let request):
            // This exchange ends here: recorded now, its figures filled when its transfer ends.
            TaskTransactions.recordCutShort(&inner)
            prepareResumption(request, &inner)
            return inner.machine.follow(.resumption, url: inner.machine.request?.url)
        case .fail(let reason):
            let url = originalRequest?.url
            let error =
                reason.map { SessionError(.badServerResponse, failingURL: url, message: $0) }
                ?? SessionError(
                    .networkConnectionLost, failingURL: url,
                    message: "the upload's connection was lost and the server did not say how much of it arrived (status \(head.status))")
            return inner.machine.fail(error)
        }
    }

    /// A `104`'s `Location` on another origin is not the upload's: said in the log, never followed.
    static func logIgnoredResumption(task: Int) {
        Logger(label: "urlloading.session").notice("task \(task): a 104's resumption URL on another origin was ignored")
    }
}
