import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
import Testing
import TestSupport
@testable import URLLoading

/// A delegate that records every call, and can be told how to answer.
final class RecordingDelegate: SessionDelegate {
    struct Script: Sendable {
        var redirect: (@Sendable (HTTPURLResponse, URLRequest) -> URLRequest?)?
        var disposition: Session.ResponseDisposition = .allow
        /// Cancel the task when its first data arrives.
        var cancelsOnData = false
    }

    private let state = Lock<(events: [String], data: Data, script: Script, finished: CheckedContinuation<Void, Never>?, done: Bool, downloaded: Data?)>(([], Data(), Script(), nil, false, nil))

    init(_ script: Script = Script()) {
        state.withLock { $0.script = script }
    }

    var events: [String] { state.withLock { $0.events } }
    var data: Data { state.withLock { $0.data } }
    var downloaded: Data? { state.withLock { $0.downloaded } }

    private func record(_ event: String) { state.withLock { $0.events.append(event) } }

    /// Waits for `didCompleteWithError`, at most `seconds` (scaled under a
    /// sanitizer): a call that never comes fails the test instead of
    /// hanging the run.
    func waitForCompletion(seconds: Int = 60) async {
        let bound = Double(seconds * Sanitizer.timeScale)
        await withCheckedContinuation { continuation in
            let done = state.withLock { state -> Bool in
                if state.done { return true }
                state.finished = continuation
                return false
            }
            if done {
                continuation.resume()
                return
            }
            DispatchQueue.global().asyncAfter(deadline: .now() + bound) { [self] in
                // Only this wait's continuation: a later wait's is not ours to end.
                let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
                    guard !state.done, state.finished != nil else { return nil }
                    defer { state.finished = nil }
                    return state.finished
                }
                guard let waiter else { return }
                Issue.record("no didCompleteWithError within \(Int(bound)) s; calls so far: \(events)")
                waiter.resume()
            }
        }
    }

    func urlSession(_ session: Session, didBecomeInvalidWithError error: (any Error)?) { record("invalid") }

    func urlSession(
        _ session: Session, task: SessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest
    ) async -> URLRequest? {
        record("redirect \(response.statusCode)")
        let script = state.withLock { $0.script }
        return script.redirect.map { $0(response, request) } ?? request
    }

    func urlSession(_ session: Session, task: SessionTask, didSendBodyData bytesSent: Int64, totalBytesSent: Int64, totalBytesExpectedToSend: Int64) {
        state.withLock { state in
            if state.events.last?.hasPrefix("sent") != true { state.events.append("sent") }
            state.events[state.events.count - 1] = "sent \(totalBytesSent)/\(totalBytesExpectedToSend)"
        }
    }

    func urlSession(_ session: Session, dataTask: SessionTask, didReceive response: URLResponse) async -> Session.ResponseDisposition {
        record("response \((response as? HTTPURLResponse)?.statusCode ?? 0)")
        return state.withLock { $0.script.disposition }
    }

    func urlSession(_ session: Session, dataTask: SessionTask, didReceive data: Data) {
        let cancels = state.withLock { state in
            state.data.append(data)
            if state.events.last != "data" { state.events.append("data") }
            return state.script.cancelsOnData
        }
        if cancels { dataTask.cancel() }
    }

    func urlSession(_ session: Session, downloadTask: SessionTask, didResumeAtOffset fileOffset: Int64, expectedTotalBytes: Int64) {
        record("resumed \(fileOffset) of \(expectedTotalBytes)")
    }

    func urlSession(_ session: Session, dataTask: SessionTask, didBecome downloadTask: SessionTask) {
        record("became download")
    }

    func urlSession(_ session: Session, downloadTask: SessionTask, didWriteData bytesWritten: Int64, totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64) {
        state.withLock { state in
            if state.events.last != "write" { state.events.append("write") }
        }
    }

    func urlSession(_ session: Session, downloadTask: SessionTask, didFinishDownloadingTo location: URL) {
        let contents = try? Data(contentsOf: location)
        state.withLock { state in
            state.downloaded = contents
            state.events.append("downloaded")
        }
    }

    func urlSession(_ session: Session, task: SessionTask, didFinishCollecting metrics: TaskMetrics) {
        record("metrics \(metrics.transactionMetrics.count)")
    }

    func urlSession(_ session: Session, task: SessionTask, didCompleteWithError error: (any Error)?) {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.events.append(error.map { "complete \(($0 as? URLError)?.sessionError?.code.description ?? "\($0)")" } ?? "complete")
            state.done = true
            defer { state.finished = nil }
            return state.finished
        }
        waiter?.resume()
    }
}
