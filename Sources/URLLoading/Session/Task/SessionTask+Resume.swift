public import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif
import Transport

/// Resume data: a download cancelled with
/// `cancel(byProducingResumeData:)`, or failed after bytes arrived (timeout,
/// lost connection), keeps its partial file when the response allowed
/// resuming (a strong ETag or Last-Modified, ranges not refused), and hands
/// out a `ResumeData` blob pointing at it. A task made from the blob sends
/// Range and If-Range: a 206 from the offset appends to the file
/// (`didResumeAtOffset` with the offset); a 200 (the resource changed)
/// starts the file over (`didResumeAtOffset` with 0).
extension SessionTask {
    /// Cancels a download, producing resume data when the server allows
    /// resuming and bytes arrived, or a resumable upload, producing resume
    /// data once the server named its resumption URL
    /// (`Session.uploadTask(withResumeData:)`); nil otherwise. Any other
    /// task is cancelled too, with nil.
    public func cancel(byProducingResumeData completionHandler: @escaping @Sendable (Data?) -> Void) {
        let accepted = locked.withLock { inner -> Bool in
            guard inner.kind == .download || inner.resumableUpload != nil, !inner.machine.isFinished else { return false }
            inner.resumeDataHandler = completionHandler
            return true
        }
        cancel()
        if !accepted { completionHandler(nil) }
    }

    /// `cancel(byProducingResumeData:)` for async code.
    public func cancelByProducingResumeData() async -> Data? {
        await withCheckedContinuation { continuation in
            cancel(byProducingResumeData: { continuation.resume(returning: $0) })
        }
    }

    /// The resume data of a failed or cancelled download, when it may resume.
    func resumeData(_ inner: inout Inner, file: DownloadFile?) -> ResumeData? {
        guard let file, let failure = inner.machine.error else { return nil }
        let (offset, overflow) = file.offset.addingReportingOverflow(inner.bytesReceived)
        guard !overflow,
            StateMachine.leavesResumeData(
                failure: failure.code, askedForResumeData: inner.resumeDataHandler != nil, resumable: inner.resumable != nil, bytesOnDisk: offset),
            let validators = inner.resumable, let url = inner.machine.request?.url
        else { return nil }
        return ResumeData(
            url: url.absoluteString, headers: ResumeData.keptHeaders(inner.resumeFrom?.request ?? originalRequest),
            file: file.url.lastPathComponent, offset: offset, entityTag: validators.entityTag,
            lastModified: validators.lastModified,
            expectedLength: inner.bytesExpectedToReceive >= 0 ? Self.sum(file.offset, inner.bytesExpectedToReceive) : nil)
    }

    /// Opens the download's file: a new one, or for a resumed task the
    /// partial one, appended to after a 206 from the offset and started
    /// over after anything else. False when the task failed.
    func prepareDownloadFile(_ head: ResponseHead, url: URL, session: Session) -> Bool {
        let (resume, expected) = locked.withLock { inner in
            if (200...299).contains(head.status) { inner.resumable = ResumeData.validators(head.headers) }
            return (inner.resumeFrom, inner.bytesExpectedToReceive)
        }
        guard let resume else { return openDownloadFile(url: url) }
        let range = head.headers.last { HeaderFields.namesEqual($0.name, "Content-Range") }?.value
        let continues = head.status == 206 && range.map { Self.rangeStart($0) == resume.offset } == true
        let offset = continues ? resume.offset : 0
        do {
            let reopened = try DownloadFiles.reopen(resume.file)
            try reopened.handle.truncate(atOffset: UInt64(offset))
            try reopened.handle.seekToEnd()
            let file = DownloadFile(handle: reopened.handle, url: reopened.url, offset: offset)
            guard locked.withLock({ $0.sink.attach(file) }), hasDelegate else { return true }
        } catch {
            let message = (error as? SessionError)?.message ?? "cannot reopen the partial download: \(error.localizedDescription)"
            perform(locked.withLock { $0.machine.fail(SessionError(.cannotWriteFile, failingURL: url, message: message)) })
            return false
        }
        let total = expected >= 0 ? Self.sum(offset, expected) ?? -1 : -1
        events.enqueueSync { [self] in
            self.callDelegate { $0.urlSession(session, downloadTask: self, didResumeAtOffset: offset, expectedTotalBytes: total) }
        }
        return true
    }

    /// `a + b`, or nil past Int64's range (a length a server sent).
    static func sum(_ a: Int64, _ b: Int64) -> Int64? {
        let (sum, overflow) = a.addingReportingOverflow(b)
        return overflow ? nil : sum
    }

    /// The first byte of `bytes FIRST-LAST/TOTAL`.
    static func rangeStart(_ contentRange: String) -> Int64? {
        let text = contentRange.trimmingCharacters(in: .whitespaces)
        guard text.lowercased().hasPrefix("bytes ") else { return nil }
        return Int64(text.dropFirst(6).prefix { $0 != "-" })
    }
}

extension Session {
    /// A download task that goes on from resume data. Resume data
    /// that is damaged, forged or whose file is gone makes a task that fails
    /// with `.cannotDecodeResumeData` when resumed.
    public func downloadTask(withResumeData resumeData: Data) -> SessionTask {
        resumedTask(resumeData, sink: DownloadSink())
    }

    /// The same, with a completion handler (the file is deleted when it returns).
    public func downloadTask(withResumeData resumeData: Data, completionHandler: @escaping @Sendable (URL?, URLResponse?, (any Error)?) -> Void) -> SessionTask {
        resumedTask(resumeData, sink: DownloadSink(handler: completionHandler))
    }

    func resumedTask(
        _ data: Data, sink: any ResponseSink, completionRunner: (@Sendable (@escaping @Sendable () -> Void) -> Void)? = nil
    ) -> SessionTask {
        do {
            let resume = try ResumeData.decode(data, directory: DownloadFiles.directory)
            guard let request = resume.request else {
                throw SessionError(.cannotDecodeResumeData, failingURL: nil, message: "resume data refused: no request")
            }
            let task = makeTask(.download, request, body: Self.body(of: request), sink: sink, completionRunner: completionRunner)
            task.locked.withLock { $0.resumeFrom = resume }
            return task
        } catch {
            return refusedResumeTask(.download, error, sink: sink, completionRunner: completionRunner)
        }
    }

    /// A task made from resume data that was refused: it fails with `error` when resumed.
    func refusedResumeTask(
        _ kind: SessionTask.Kind, _ error: any Error, sink: any ResponseSink, completionRunner: (@Sendable (@escaping @Sendable () -> Void) -> Void)?
    ) -> SessionTask {
        // Force-unwrap: a literal URL.
        let task = makeTask(
            kind, URLRequest(url: URL(string: "http://resume-data.invalid/")!), body: .none, sink: sink, completionRunner: completionRunner)
        task.locked.withLock { $0.startupError = error as? SessionError }
        return task
    }
}
