import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization
import URLLoading

/// A data delegate that keeps nothing of the body but its length, and can
/// be slow: it takes `microsecondsPerChunk` for each chunk.
final class CountingDelegate: SessionDelegate {
    private let microsecondsPerChunk: UInt32
    private let state = Mutex<(bytes: Int64, error: String?, waiter: CheckedContinuation<(Int64, String), Never>?)>((0, nil, nil))

    init(microsecondsPerChunk: UInt32) {
        self.microsecondsPerChunk = microsecondsPerChunk
    }

    func session(_ session: Session, dataTask: SessionTask, didReceive data: Data) {
        if microsecondsPerChunk > 0 { usleep(microsecondsPerChunk) }
        state.withLock { $0.bytes += Int64(data.count) }
    }

    func session(_ session: Session, task: SessionTask, didCompleteWithError error: (any Error)?) {
        let (waiter, result) = state.withLock { state -> (CheckedContinuation<(Int64, String), Never>?, (Int64, String)) in
            state.error = error.map { "\($0)" } ?? ""
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
