// Written with Apple's URL Loading System names: a download task whose
// handler moves the file, a download delegate, async download(from:).
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization
import Testing

final class DownloadMover: NSObject, URLSessionDownloadDelegate {
    let destination: URL
    let moved = Mutex<Result<Int, any Error>?>(nil)
    private let finished: @Sendable () -> Void

    init(destination: URL, finished: @escaping @Sendable () -> Void) {
        self.destination = destination
        self.finished = finished
    }

    func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didFinishDownloadingTo location: URL) {
        // The file is gone once this method returns: move it now.
        let result = Result {
            try FileManager.default.moveItem(at: location, to: destination)
            return try Data(contentsOf: destination).count
        }
        moved.withLock { $0 = result }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        finished()
    }
}

@Test("Ported: downloads through a delegate, a completion handler and async download(from:)")
func portedDownloads() async throws {
    let origin = try await TestOrigin.start()
    let body = TestOrigin.pattern(offset: 0, count: 300_000)
    origin.route("/file", response: ScriptedResponse(body: body))
    let scratch = try Scratch()
    defer { scratch.remove() }

    let (done, signal) = AsyncStream<Void>.makeStream()
    let mover = DownloadMover(destination: scratch.url.appendingPathComponent("by-delegate")) { signal.yield() }
    let delegateSession = URLSession(configuration: .ephemeral, delegate: mover, delegateQueue: nil)
    delegateSession.downloadTask(with: origin.url("/file")).resume()
    for await _ in done { break }
    #expect(try mover.moved.withLock { $0 }?.get() == body.count)
    delegateSession.finishTasksAndInvalidate()

    let session = URLSession(configuration: .ephemeral)
    let handled = scratch.url.appendingPathComponent("by-handler")
    let outcome: Result<Int, any Error> = await withCheckedContinuation { continuation in
        session.downloadTask(with: origin.url("/file")) { location, _, error in
            continuation.resume(
                returning: Result {
                    if let error { throw error }
                    guard let location else { throw URLError(.cannotCreateFile) }
                    try FileManager.default.moveItem(at: location, to: handled)
                    return try Data(contentsOf: handled).count
                })
        }.resume()
    }
    #expect(try outcome.get() == body.count)

    let (location, response) = try await session.download(from: origin.url("/file"))
    #expect((response as? HTTPURLResponse)?.statusCode == 200)
    #expect(try Data(contentsOf: location) == Data(body))
    try? FileManager.default.removeItem(at: location)
    session.finishTasksAndInvalidate()
    try await origin.shutdown()
}
