import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
@testable import URLLoading

// urlloading-test-helper http-types-responses <url>
//     GETs, POSTs, streams and downloads <url> through swift-http-types'
//     calls (one GET with a task delegate that takes the metrics), then
//     prints "built <n>": the Foundation responses the process built (none
//     are expected). Then reads the metrics' response twice ("built 1":
//     built once, on demand), then one data(from:) and "built <n>" again.

/// Keeps the metrics; never reads a response.
final class MetricsKeeper: SessionTaskDelegate {
    let metrics = Lock<TaskMetrics?>(nil)
    func urlSession(_ session: Session, task: SessionTask, didFinishCollecting metrics: TaskMetrics) {
        self.metrics.withLock { $0 = metrics }
    }
}

func httpTypesResponses(_ arguments: [String]) async -> Never {
    guard arguments.count == 1, let url = URL(string: arguments[0]) else { fail("usage: http-types-responses <url>") }
    let session = Session(configuration: .ephemeral)
    let get = HTTPRequest(method: .get, url: url)
    do {
        _ = try await session.data(for: get)
        _ = try await session.upload(for: HTTPRequest(method: .post, url: url), from: Data("body".utf8))
        let (bytes, _) = try await session.bytes(for: get)
        for try await _ in bytes.lines {}
        let (file, _) = try await session.download(for: get)
        try? FileManager.default.removeItem(at: file)
        let keeper = MetricsKeeper()
        _ = try await session.data(for: get, delegate: keeper)
        print("built \(SessionTask.responsesBuilt.load(ordering: .relaxed))")
        let transaction = keeper.metrics.withLock { $0?.transactionMetrics.last }
        // Read twice: built once, the same object both times.
        let first = transaction?.response as? HTTPURLResponse
        let second = transaction?.response as? HTTPURLResponse
        guard let first, first === second else { fail("no response in the metrics, or a new one per read") }
        print("built \(SessionTask.responsesBuilt.load(ordering: .relaxed))")
        _ = try await session.data(from: url)
        print("built \(SessionTask.responsesBuilt.load(ordering: .relaxed))")
    } catch {
        fail("\(error)")
    }
    exit(0)
}
