public import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

/// Apple's conveniences that ported code calls: tasks from a URL, the
/// completion-handler forms of the session's own calls.
extension Session {
    /// A data task for `url` with a completion handler.
    public func dataTask(
        with url: URL, completionHandler: @escaping @Sendable (Data?, URLResponse?, (any Error)?) -> Void
    ) -> SessionTask {
        dataTask(with: URLRequest(url: url), completionHandler: completionHandler)
    }

    /// A download task for `url`.
    public func downloadTask(with url: URL) -> SessionTask {
        downloadTask(with: URLRequest(url: url))
    }

    /// A download task for `url` with a completion handler (the file is
    /// deleted when it returns).
    public func downloadTask(
        with url: URL, completionHandler: @escaping @Sendable (URL?, URLResponse?, (any Error)?) -> Void
    ) -> SessionTask {
        downloadTask(with: URLRequest(url: url), completionHandler: completionHandler)
    }

    /// Every task not yet completed, to `completionHandler` (off the caller's thread).
    public func getAllTasks(completionHandler: @escaping @Sendable ([SessionTask]) -> Void) {
        let tasks = allTasks
        DispatchQueue.global().async { completionHandler(tasks) }
    }

    /// The data, upload and download tasks not yet completed, to
    /// `completionHandler` (off the caller's thread).
    public func getTasksWithCompletionHandler(
        _ completionHandler: @escaping @Sendable ([SessionTask], [SessionTask], [SessionTask]) -> Void
    ) {
        let tasks = allTasks
        DispatchQueue.global().async {
            completionHandler(
                tasks.filter { $0.kind == .data }, tasks.filter { $0.kind == .upload }, tasks.filter { $0.kind == .download })
        }
    }

    /// `flush()` with a completion handler.
    public func flush(completionHandler: @escaping @Sendable () -> Void) {
        Task {
            await flush()
            completionHandler()
        }
    }

    /// `reset()` with a completion handler.
    public func reset(completionHandler: @escaping @Sendable () -> Void) {
        Task {
            await reset()
            completionHandler()
        }
    }
}
