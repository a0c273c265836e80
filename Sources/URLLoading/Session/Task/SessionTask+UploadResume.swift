public import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif
import Transport

/// Upload resume data: a resumable upload cancelled with
/// `cancel(byProducingResumeData:)`, or failed after its own resumptions
/// (a lost connection, a timeout) once a `104` named its resumption URL,
/// hands out an `UploadResumeData` blob. A task made from the blob asks
/// that URL for the server's offset and sends only the rest.
extension SessionTask {
    /// What an upload's resume data is made of, read in the task's end's
    /// turn of the lock; the files are touched after it (`make()`).
    struct UploadResumeDraft: Sendable {
        enum Source: Sendable {
            case file(path: String, start: Int64)
            case memory(Data)
            /// The session's copy, from the resume data the task was made from.
            case spill(String)
        }

        let url: URL
        let method: String
        let headers: [[String]]
        let resumptionURL: URL
        let version: ResumableUpload.Version
        let length: Int64
        let offset: Int64
        let source: Source

        /// The blob: the file's identity read, a body in memory copied to a
        /// private file. Nil when the file is gone or the copy fails.
        func make() -> UploadResumeData? {
            let directory = DownloadFiles.directory
            let (file, spill, start): (String?, String?, Int64)
            switch source {
            case .file(let path, let from): (file, spill, start) = (path, nil, from)
            case .spill(let name): (file, spill, start) = (nil, name, 0)
            case .memory(let data):
                guard let name = try? DownloadFiles.spill(data) else { return nil }
                (file, spill, start) = (nil, name, 0)
            }
            let path = file ?? directory.appendingPathComponent(spill ?? "").path
            guard let identity = UploadResumeData.Identity(path: path, followLinks: file != nil) else { return nil }
            return UploadResumeData(
                url: UploadResumeData.withoutUserInfo(url), method: method, headers: headers,
                resumptionURL: UploadResumeData.withoutUserInfo(resumptionURL), interopVersion: version.rawValue, length: length,
                offset: offset, file: file, spill: spill, start: start, fileSize: identity.size, fileModified: identity.modified,
                fileInode: identity.inode)
        }
    }

    /// The resume data of this upload as it stands, while it runs (a
    /// background session's daemon keeps it in its journal once the
    /// server named a resumption URL); nil before, and for other tasks.
    package func uploadResumeData() -> Data? {
        locked.withLock { uploadResumeDraft(&$0, ended: false) }?.make()?.encoded()
    }

    /// The draft of an upload's resume data, when the server named a
    /// resumption URL and, for an upload that `ended`, the failure leaves
    /// it where it can go on.
    func uploadResumeDraft(_ inner: inout Inner, ended: Bool = true) -> UploadResumeDraft? {
        guard inner.kind == .upload, let upload = inner.resumableUpload, let resumption = upload.resumptionURL,
            let request = originalRequest, let url = request.url
        else { return nil }
        if ended {
            guard let failure = inner.machine.error,
                failure.code == .timedOut || failure.code == .networkConnectionLost || (failure.code == .cancelled && inner.resumeDataHandler != nil)
            else { return nil }
        }
        let source: UploadResumeDraft.Source
        if let spill = inner.uploadResumeFrom?.spill {
            source = .spill(spill)
        } else {
            switch body {
            case .data(let data): source = .memory(data)
            case .file(let path, let start, _): source = .file(path: path, start: start)
            case .none, .stream: return nil
            }
        }
        return UploadResumeDraft(
            url: url, method: request.httpMethod ?? "POST", headers: UploadResumeData.keptHeaders(request), resumptionURL: resumption,
            version: upload.version, length: upload.length, offset: upload.confirmed, source: source)
    }
}

extension Session {
    /// An upload task that goes on from upload resume data (Apple's, since
    /// macOS 14): it asks the server how much it has and sends the rest.
    /// Resume data that is damaged, forged, or whose file is gone or
    /// changed makes a task that fails with `.cannotDecodeResumeData` when
    /// resumed.
    public func uploadTask(withResumeData resumeData: Data) -> SessionTask {
        resumedUpload(resumeData, sink: DelegateDataSink())
    }

    /// The same, with a completion handler.
    public func uploadTask(
        withResumeData resumeData: Data, completionHandler: @escaping @Sendable (Data?, URLResponse?, (any Error)?) -> Void
    ) -> SessionTask {
        resumedUpload(resumeData, sink: CollectingSink.completionHandler(completionHandler))
    }

    /// Goes on with an upload from its resume data and returns the body and
    /// response of its answer.
    public func upload(resumeFrom resumeData: Data, delegate: (any SessionDelegate)? = nil) async throws -> (Data, URLResponse) {
        let ((data, response), _) = try await run(delegate: delegate) { deliver, runner in
            resumedUpload(
                resumeData,
                sink: CollectingSink.asyncCall { data, error, response in
                    deliver(error.map { .failure($0) } ?? .success((data ?? Data(), response)))
                }, completionRunner: runner)
        }
        guard let response else { throw SessionError(.badServerResponse, failingURL: nil, message: "no response").urlError }
        return (data, response)
    }

    /// An upload task from resume data whose request is `originalRequest`
    /// (with the fields the blob does not keep, such as `Authorization`),
    /// when it is to the blob's URL: a background session's daemon, which
    /// keeps its requests' secrets sealed apart from the blob.
    package func uploadTask(withResumeData resumeData: Data, originalRequest: URLRequest) -> SessionTask {
        resumedUpload(resumeData, sink: DelegateDataSink(), originalRequest: originalRequest)
    }

    func resumedUpload(
        _ data: Data, sink: any ResponseSink, completionRunner: (@Sendable (@escaping @Sendable () -> Void) -> Void)? = nil,
        originalRequest: URLRequest? = nil
    ) -> SessionTask {
        let directory = DownloadFiles.directory
        do {
            let resume = try UploadResumeData.decode(data, directory: directory)
            if let given = originalRequest?.url, UploadResumeData.withoutUserInfo(given) != resume.url {
                throw SessionError(.cannotDecodeResumeData, failingURL: nil, message: "upload resume data refused: it is another request's")
            }
            guard let request = originalRequest ?? resume.request, let resumption = URL(string: resume.resumptionURL),
                let version = ResumableUpload.Version(rawValue: resume.interopVersion)
            else {
                throw SessionError(.cannotDecodeResumeData, failingURL: nil, message: "upload resume data refused: no request")
            }
            let task = makeTask(.upload, request, body: resume.body(directory: directory), sink: sink, completionRunner: completionRunner)
            task.locked.withLock { inner in
                inner.uploadResumeFrom = resume
                inner.resumableUpload = ResumableUpload(version: version, length: resume.length, resumingAt: resumption, confirmed: resume.offset)
                task.prepareResumption(.offset(resumption), &inner)
            }
            return task
        } catch {
            return refusedResumeTask(.upload, error, sink: sink, completionRunner: completionRunner)
        }
    }
}
