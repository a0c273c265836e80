public import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

extension Session {
    /// Loads `request` and returns the body and response. Cancelling the
    /// calling Swift task cancels the transfer.
    ///
    /// - Parameter delegate: A delegate for this task alone (redirects, metrics).
    /// - Throws: `SessionError` for client-side failures; a 4xx or 5xx is a response.
    public func data(for request: URLRequest, delegate: (any SessionDelegate)? = nil) async throws -> (Data, URLResponse) {
        try await run { completion in
            let task = dataTask(with: request) { data, response, error in
                completion(Result { () throws -> (Data, URLResponse) in
                    if let error { throw error }
                    guard let response else { throw SessionError(.badServerResponse, failingURL: request.url, message: "no response") }
                    return (data ?? Data(), response)
                })
            }
            task.delegate = delegate
            return task
        }
    }

    /// Loads `url`.
    public func data(from url: URL, delegate: (any SessionDelegate)? = nil) async throws -> (Data, URLResponse) {
        try await data(for: URLRequest(url: url), delegate: delegate)
    }

    /// Uploads `bodyData` with `request`.
    public func upload(for request: URLRequest, from bodyData: Data, delegate: (any SessionDelegate)? = nil) async throws -> (Data, URLResponse) {
        try await run { completion in
            let task = uploadTask(with: request, from: bodyData) { data, response, error in
                completion(Result { () throws -> (Data, URLResponse) in
                    if let error { throw error }
                    guard let response else { throw SessionError(.badServerResponse, failingURL: request.url, message: "no response") }
                    return (data ?? Data(), response)
                })
            }
            task.delegate = delegate
            return task
        }
    }

    /// Uploads the file at `fileURL` with `request`, streamed from disk.
    public func upload(for request: URLRequest, fromFile fileURL: URL, delegate: (any SessionDelegate)? = nil) async throws -> (Data, URLResponse) {
        try await run { completion in
            let task = uploadTask(with: request, fromFile: fileURL) { data, response, error in
                completion(Result { () throws -> (Data, URLResponse) in
                    if let error { throw error }
                    guard let response else { throw SessionError(.badServerResponse, failingURL: request.url, message: "no response") }
                    return (data ?? Data(), response)
                })
            }
            task.delegate = delegate
            return task
        }
    }

    /// Downloads `request` to a file that the caller owns (and must delete).
    public func download(for request: URLRequest, delegate: (any SessionDelegate)? = nil) async throws -> (URL, URLResponse) {
        try await run { completion in
            let task = downloadTask(with: request) { location, response, error in
                completion(Result { () throws -> (URL, URLResponse) in
                    if let error { throw error }
                    guard let location, let response else {
                        throw SessionError(.badServerResponse, failingURL: request.url, message: "no response")
                    }
                    // The task deletes its file when this handler returns: keep a copy under a new name.
                    let kept = try SessionTask.newDownloadFile()
                    try? FileManager.default.removeItem(at: kept)
                    try FileManager.default.moveItem(at: location, to: kept)
                    return (kept, response)
                })
            }
            task.delegate = delegate
            return task
        }
    }

    /// Bridges one task to async/await: one checked continuation, and
    /// cancellation of the Swift task cancels the session task.
    private func run<T: Sendable>(_ make: (@escaping @Sendable (Result<T, any Error>) -> Void) -> SessionTask) async throws -> T {
        let box = TaskBox()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let task = make { continuation.resume(with: $0) }
                box.set(task)
                task.resume()
            }
        } onCancel: {
            box.cancel()
        }
    }
}

/// Holds the task for the cancellation handler, which may run before the
/// task exists.
private final class TaskBox: Sendable {
    private let state = Mutex<(task: SessionTask?, cancelled: Bool)>((nil, false))

    func set(_ task: SessionTask) {
        let cancelled = state.withLock { state -> Bool in
            state.task = task
            return state.cancelled
        }
        if cancelled { task.cancel() }
    }

    func cancel() {
        let task = state.withLock { state -> SessionTask? in
            state.cancelled = true
            return state.task
        }
        task?.cancel()
    }
}

import Synchronization
