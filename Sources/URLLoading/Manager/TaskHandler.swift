import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking

/// One task's part of a manager (SPEC M3; AFNetworking's
/// `AFURLSessionManagerTaskDelegate`): its upload and download `Progress`,
/// the caller's progress closures, the body as it arrives, a download's
/// destination, and what to do at the end.
final class TaskHandler: Sendable {
    /// What the task ended with, as the handler gathered it.
    struct Outcome: Sendable {
        var response: HTTPURLResponse?
        var data: Data
        /// A download's file where it was moved (or left, without a destination).
        var file: URL?
        var error: ManagerError?
    }

    /// Moves a finished download; nil keeps it where the session put it
    /// (it is removed when the delegate call returns, as the session does).
    typealias Destination = @Sendable (_ temporary: URL, _ response: HTTPURLResponse?) -> URL

    let uploadProgress = Progress(totalUnitCount: -1)
    let downloadProgress = Progress(totalUnitCount: -1)
    private let onUpload: (@Sendable (Progress) -> Void)?
    private let onDownload: (@Sendable (Progress) -> Void)?
    private let destination: Destination?
    private let completion: @Sendable (SessionTask, Outcome) -> Void
    private let state = Lock<(data: Data, file: URL?, moveError: ManagerError?)>((Data(), nil, nil))

    init(
        upload: (@Sendable (Progress) -> Void)?, download: (@Sendable (Progress) -> Void)?, destination: Destination? = nil,
        completion: @escaping @Sendable (SessionTask, Outcome) -> Void
    ) {
        onUpload = upload
        onDownload = download
        self.destination = destination
        self.completion = completion
    }

    /// Ties both `Progress` objects to the task: cancelling, pausing or
    /// resuming either does that to the task (AFNetworking's `setupProgressForTask:`).
    ///
    /// - Parameter changed: Told of a resume (true) or suspension (false) made that way.
    func attach(to task: SessionTask, changed: @escaping @Sendable (SessionTask, Bool) -> Void) {
        for progress in [uploadProgress, downloadProgress] {
            progress.isCancellable = true
            progress.isPausable = true
            progress.cancellationHandler = { [weak task] in task?.cancel() }
            progress.pausingHandler = { [weak task] in
                guard let task else { return }
                task.suspend()
                changed(task, false)
            }
            progress.resumingHandler = { [weak task] in
                guard let task else { return }
                task.resume()
                changed(task, true)
            }
        }
    }

    func sent(total: Int64, expected: Int64) {
        uploadProgress.totalUnitCount = expected
        uploadProgress.completedUnitCount = total
        onUpload?(uploadProgress)
    }

    func received(_ data: Data, expected: Int64) {
        let total = state.withLock { state -> Int64 in
            state.data.append(data)
            return Int64(state.data.count)
        }
        report(total: total, expected: expected)
    }

    func wrote(total: Int64, expected: Int64) {
        report(total: total, expected: expected)
    }

    private func report(total: Int64, expected: Int64) {
        downloadProgress.totalUnitCount = expected
        downloadProgress.completedUnitCount = total
        onDownload?(downloadProgress)
    }

    /// A download finished in `location`: moved where the destination says.
    func finishedDownload(at location: URL, response: HTTPURLResponse?) {
        guard let destination else { return }
        let target = destination(location, response)
        do {
            let files = FileManager.default
            try files.createDirectory(at: target.deletingLastPathComponent(), withIntermediateDirectories: true)
            if files.fileExists(atPath: target.path) { try files.removeItem(at: target) }
            try files.moveItem(at: location, to: target)
            state.withLock { $0.file = target }
        } catch {
            state.withLock {
                $0.moveError = ManagerError(
                    .cannotMoveDownload, message: "the download cannot be moved to \(target.path): \(error.localizedDescription)", response: response,
                    underlying: error)
            }
        }
    }

    /// The task ended: the completion hears it once.
    func completed(_ task: SessionTask, error: (any Error)?) {
        let response = task.response as? HTTPURLResponse
        let (data, file, moveError) = state.withLock { ($0.data, $0.file, $0.moveError) }
        var failure = moveError
        if let error {
            failure = ManagerError(
                .transport, message: (error as? URLError)?.localizedDescription ?? "\(error)", response: response, data: data.isEmpty ? nil : data,
                underlying: error)
        }
        completion(task, Outcome(response: response, data: data, file: file, error: failure))
    }
}
