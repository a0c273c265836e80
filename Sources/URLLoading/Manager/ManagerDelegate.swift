import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking

/// The manager's session delegate (SPEC M3): it routes each task's events
/// to its `TaskHandler`, by task identifier. The session holds it, so the
/// manager and its session do not hold each other.
final class ManagerDelegate: SessionDataDelegate, SessionDownloadDelegate, Sendable {
    let handlers = Lock<[Int: TaskHandler]>([:])

    func handler(_ task: SessionTask) -> TaskHandler? {
        handlers.withLock { $0[task.taskIdentifier] }
    }

    func urlSession(_ session: Session, task: SessionTask, didSendBodyData bytesSent: Int64, totalBytesSent: Int64, totalBytesExpectedToSend: Int64) {
        handler(task)?.sent(total: totalBytesSent, expected: totalBytesExpectedToSend)
    }

    func urlSession(_ session: Session, dataTask: SessionTask, didReceive data: Data) {
        handler(dataTask)?.received(data, expected: dataTask.countOfBytesExpectedToReceive)
    }

    func urlSession(
        _ session: Session, downloadTask: SessionTask, didWriteData bytesWritten: Int64, totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64
    ) {
        handler(downloadTask)?.wrote(total: totalBytesWritten, expected: totalBytesExpectedToWrite)
    }

    func urlSession(_ session: Session, downloadTask: SessionTask, didFinishDownloadingTo location: URL) {
        handler(downloadTask)?.finishedDownload(at: location, response: downloadTask.response as? HTTPURLResponse)
    }

    func urlSession(_ session: Session, task: SessionTask, didCompleteWithError error: (any Error)?) {
        guard let handler = handlers.withLock({ $0.removeValue(forKey: task.taskIdentifier) }) else { return }
        handler.completed(task, error: error)
    }
}
