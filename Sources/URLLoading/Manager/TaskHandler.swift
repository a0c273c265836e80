import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking

/// One task's part of a manager (AFNetworking's
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

    /// The task and what its `Progress` objects tell of it; the objects are
    /// made when first asked for (a `Progress` costs more to make than the
    /// rest of a small request's handling).
    private let progress = Lock<(task: SessionTask?, changed: (@Sendable (SessionTask, Bool) -> Void)?, upload: Progress?, download: Progress?)>(
        (nil, nil, nil, nil))
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

    /// Remembers the task its `Progress` objects control.
    ///
    /// - Parameter changed: Told of a resume (true) or suspension (false) made through them.
    func attach(to task: SessionTask, changed: @escaping @Sendable (SessionTask, Bool) -> Void) {
        progress.withLock { $0 = (task, changed, $0.upload, $0.download) }
    }

    /// The upload progress, made on first use.
    var uploadProgress: Progress { progressObject(upload: true) }
    /// The download progress, made on first use.
    var downloadProgress: Progress { progressObject(upload: false) }

    private func progressObject(upload: Bool) -> Progress {
        progress.withLock { state in
            if let made = upload ? state.upload : state.download { return made }
            let made = Progress(totalUnitCount: -1)
            if let task = state.task, let changed = state.changed { Self.tie(made, to: task, changed: changed) }
            if upload { state.upload = made } else { state.download = made }
            return made
        }
    }

    /// Cancelling, pausing or resuming the `Progress` does that to the task
    /// (AFNetworking's `setupProgressForTask:`).
    private static func tie(_ progress: Progress, to task: SessionTask, changed: @escaping @Sendable (SessionTask, Bool) -> Void) {
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

    func sent(total: Int64, expected: Int64) {
        report(upload: true, total: total, expected: expected)
    }

    func received(_ data: Data, expected: Int64) {
        let total = state.withLock { state -> Int64 in
            state.data.append(data)
            return Int64(state.data.count)
        }
        report(upload: false, total: total, expected: expected)
    }

    func wrote(total: Int64, expected: Int64) {
        report(upload: false, total: total, expected: expected)
    }

    /// Updates the `Progress` when a closure or somebody holding it may look.
    private func report(upload: Bool, total: Int64, expected: Int64) {
        let closure = upload ? onUpload : onDownload
        let existing = progress.withLock { upload ? $0.upload : $0.download }
        guard closure != nil || existing != nil else { return }
        let object = existing ?? progressObject(upload: upload)
        object.totalUnitCount = expected
        object.completedUnitCount = total
        closure?(object)
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

    /// A completion-handler task ended with its whole body.
    func completed(_ task: SessionTask, data: Data?, error: (any Error)?) {
        if let data { state.withLock { $0.data = data } }
        completed(task, error: error)
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
