import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
import Transport

extension SessionTask {
    /// All of a task's mutable state, behind the task's one lock.
    struct Inner {
        var machine = StateMachine()
        /// Where the response goes (delegate, handler, file, stream).
        var sink: any ResponseSink
        var session: Session?
        var delegate: (any SessionDelegate)?
        /// The response as the user sees it, built from `head` on first use
        /// (Foundation's initializer is the costliest step of a request).
        var response: HTTPURLResponse?
        var head: (url: URL, head: ResponseHead)?
        var bytesReceived: Int64 = 0
        var bytesSent: Int64 = 0
        /// The hop whose body `bytesSent` counts.
        var sendingHop = 0
        var bytesExpectedToReceive: Int64 = -1
        var bytesExpectedToSend: Int64 = 0
        var taskDescription: String?
        var priority: Float = 0.5
        var transactions: [TaskMetrics.Transaction] = []
        var started: Date?
        /// Not before this date does a resumed task start.
        var earliestBeginDate: Date?
        /// Data, upload or download; a data task may become a download.
        var kind = Kind.data
        /// The task's `Progress`, once somebody asked for it.
        var progress: Progress?
        // Resume data.
        /// The download's validators, when its response allows resuming.
        var resumable: (entityTag: String?, lastModified: String?)?
        /// `cancel(byProducingResumeData:)` was called with this handler.
        var resumeDataHandler: (@Sendable (Data?) -> Void)?
        /// The task goes on from this resume data.
        var resumeFrom: ResumeData?
        /// The upload goes on from this resume data.
        var uploadResumeFrom: UploadResumeData?
        /// A failure known before the task starts (resume data refused).
        var startupError: SessionError?
        /// The request body comes from streams (`httpBodyStream`, `needNewBodyStream`).
        var streamedBody: StreamedBody?
        /// An upload that can go on after a dropped connection (`ResumableUpload`).
        var resumableUpload: ResumableUpload?
        /// The current hop's body when it is not the task's (a resumed
        /// upload's `HEAD` has none, its `PATCH` the rest).
        var hopBody: TransferRequest.Body?
        /// The body bytes the server had before the current hop (a resumed
        /// upload's offset): progress counts on from there.
        var sendBase: Int64 = 0
    }
}

extension SessionTask.Inner {
    /// Mirrors the byte counts into `progress` (called under the task's
    /// lock). `mutating` only so that the state is read in place: called
    /// on the lock's `inout` value, a non-mutating method (even inlined)
    /// was handed a copy of all of `Inner`, made and destroyed per chunk.
    mutating func updateProgress() {
        guard let progress else { return }
        if kind == .upload {
            progress.totalUnitCount = bytesExpectedToSend > 0 ? bytesExpectedToSend : -1
            progress.completedUnitCount = bytesSent
        } else {
            progress.totalUnitCount = bytesExpectedToReceive >= 0 ? bytesExpectedToReceive : -1
            progress.completedUnitCount = bytesReceived
        }
    }
}
