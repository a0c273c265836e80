// Written with Apple's URL Loading System names: task metrics per
// transaction, a cache hit seen as a local-cache fetch.
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization
import Testing

final class MetricsCollector: NSObject, URLSessionTaskDelegate {
    let collected = Mutex<[URLSessionTaskMetrics]>([])

    func urlSession(_ session: URLSession, task: URLSessionTask, didFinishCollecting metrics: URLSessionTaskMetrics) {
        collected.withLock { $0.append(metrics) }
    }
}

@Test("Ported: metrics per transaction, with phases, protocol, byte counts and the fetch type")
func portedMetrics() async throws {
    let origin = try await TestOrigin.start()
    origin.route("/page", response: ScriptedResponse(headers: [HeaderField("Cache-Control", "max-age=86400")], body: "page"))
    let configuration = URLSessionConfiguration.ephemeral
    configuration.urlCache = URLCache(memoryCapacity: 1 << 20, diskCapacity: 0, directory: nil)
    let collector = MetricsCollector()
    let session = URLSession(configuration: configuration, delegate: collector, delegateQueue: nil)
    for _ in 0..<2 {
        _ = try await session.data(from: origin.url("/page"))
    }
    let collected = collector.collected.withLock { $0 }
    #expect(collected.count == 2)
    let network: URLSessionTaskTransactionMetrics? = collected.first?.transactionMetrics.first
    #expect(network?.resourceFetchType == .networkLoad)
    #expect(network?.networkProtocolName == "http/1.1")
    #expect(network?.countOfResponseBodyBytesReceived == 4)
    if let start = network?.fetchStartDate, let end = network?.responseEndDate {
        #expect(start <= end)
    } else {
        Issue.record("no fetch dates")
    }
    #expect(collected.last?.transactionMetrics.first?.resourceFetchType == .localCache)
    #expect((collected.last?.transactionMetrics.first?.response as? HTTPURLResponse)?.statusCode == 200)
    #expect(collected.allSatisfy { $0.taskInterval.duration >= 0 && $0.redirectCount == 0 })
    session.finishTasksAndInvalidate()
    try await origin.shutdown()
}
