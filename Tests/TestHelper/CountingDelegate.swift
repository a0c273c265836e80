import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
import URLLoading

/// A data delegate that keeps nothing of the body but its length, and can
/// be slow: it takes `microsecondsPerChunk` for each chunk.
final class CountingDelegate: SessionDelegate {
    private let microsecondsPerChunk: UInt32
    private let state = Lock<(bytes: Int64, error: String?, waiter: CheckedContinuation<(Int64, String), Never>?)>((0, nil, nil))

    init(microsecondsPerChunk: UInt32) {
        self.microsecondsPerChunk = microsecondsPerChunk
    }

    func urlSession(_ session: Session, dataTask: SessionTask, didReceive data: Data) {
        if microsecondsPerChunk > 0 { usleep(microsecondsPerChunk) }
        state.withLock { $0.bytes += Int64(data.count) }
    }

    func urlSession(_ session: Session, task: SessionTask, didCompleteWithError error: (any Error)?) {
        let (waiter, result) = state.withLock { state -> (CheckedContinuation<(Int64, String), Never>?, (Int64, String)) in
            state.error = error.map(describe) ?? ""
            defer { state.waiter = nil }
            return (state.waiter, (state.bytes, state.error ?? ""))
        }
        waiter?.resume(returning: result)
    }

    /// The bytes seen and the error ("" for none), once the task completed.
    func finished() async -> (Int64, String) {
        await withCheckedContinuation { continuation in
            let done = state.withLock { state -> (Int64, String)? in
                if let error = state.error { return (state.bytes, error) }
                state.waiter = continuation
                return nil
            }
            if let done { continuation.resume(returning: done) }
        }
    }
}

/// A download delegate that reports the modes of the file it is handed and
/// of the folder holding it, or the task's error.
final class ModeReportingDelegate: SessionDelegate {
    private let state = Lock<(report: String?, waiter: CheckedContinuation<String, Never>?)>((nil, nil))

    func urlSession(_ session: Session, downloadTask: SessionTask, didFinishDownloadingTo location: URL) {
        func mode(_ path: String) -> String {
            var info = stat()
            guard lstat(path, &info) == 0 else { return "missing" }
            return String(info.st_mode & 0o777, radix: 8)
        }
        let line = "file \(mode(location.path)) folder \(mode(location.deletingLastPathComponent().path)) in \(location.deletingLastPathComponent().lastPathComponent)"
        state.withLock { $0.report = line }
    }

    func urlSession(_ session: Session, task: SessionTask, didCompleteWithError error: (any Error)?) {
        let (waiter, report) = state.withLock { state -> (CheckedContinuation<String, Never>?, String) in
            if let error { state.report = "error \(describe(error))" }
            let report = state.report ?? "no file"
            state.report = report
            defer { state.waiter = nil }
            return (state.waiter, report)
        }
        waiter?.resume(returning: report)
    }

    func finished() async -> String {
        await withCheckedContinuation { continuation in
            let done = state.withLock { state -> String? in
                if let report = state.report, report.hasPrefix("error") || report.hasPrefix("file") { return report }
                state.waiter = continuation
                return nil
            }
            if let done { continuation.resume(returning: done) }
        }
    }
}

/// A task's error as the tests read it: the session's own account when the
/// error is the URLError a task delivers.
func describe(_ error: any Error) -> String {
    (error as? URLError)?.sessionError?.description ?? "\(error)"
}
