import CoreMetrics
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking

/// A session's counters and timers in the process's swift-metrics backend
/// (whatever `MetricsSystem.bootstrap` installed — Prometheus, StatsD,
/// OpenTelemetry —, or a task-local factory while the session is made).
/// Made only when that backend is not swift-metrics' no-op one: without a
/// backend, a task's end costs one nil check.
///
/// Every metric carries the session's label (`session`); per task:
/// - `urlloading_requests_total` and the timer `urlloading_request_duration`
///   by `method` (the standard ones, else `other`) and `status` class
///   (`2xx`...`5xx`, or `error` for a task that failed without a response);
/// - `urlloading_cache_lookups_total` by `result` (`hit`, `miss`,
///   `revalidated`) when the task consulted a cache;
/// - `urlloading_bytes_received_total` and `urlloading_bytes_sent_total`
///   (heads and bodies on the wire);
/// - `urlloading_connections_total` by `reused` (`true`, `false`): each
///   exchange on the network, on a connection opened for it or not.
final class SessionMeters: Sendable {
    /// The metrics' labels.
    enum Label {
        static let requests = "urlloading_requests_total"
        static let duration = "urlloading_request_duration"
        static let cache = "urlloading_cache_lookups_total"
        static let bytesReceived = "urlloading_bytes_received_total"
        static let bytesSent = "urlloading_bytes_sent_total"
        static let connections = "urlloading_connections_total"
    }

    /// What a task's end adds.
    struct TaskEnd: Equatable {
        var method: String
        var statusClass: String
        var nanoseconds: Int64
        var cacheResult: String?
        var bytesReceived: Int64
        var bytesSent: Int64
        var newConnections: Int
        var reusedConnections: Int
    }

    private let session: String
    private let factory: any MetricsFactory
    /// Counters and timers already made, by label and dimensions: a
    /// backend's handler is made once, not per task.
    private struct Made {
        var counters: [String: Counter] = [:]
        var timers: [String: CoreMetrics.Timer] = [:]
    }
    private let made = Lock(Made())

    /// nil when `factory` is swift-metrics' no-op backend.
    init?(sessionLabel: String, factory: any MetricsFactory = MetricsSystem.factory) {
        guard !(factory is NOOPMetricsHandler) else { return nil }
        session = sessionLabel
        self.factory = factory
    }

    func record(_ end: TaskEnd) {
        let byRequest = [("session", session), ("method", end.method), ("status", end.statusClass)]
        counter(Label.requests, byRequest).increment()
        timer(Label.duration, byRequest).recordNanoseconds(end.nanoseconds)
        if let result = end.cacheResult {
            counter(Label.cache, [("session", session), ("result", result)]).increment()
        }
        if end.bytesReceived > 0 { counter(Label.bytesReceived, [("session", session)]).increment(by: end.bytesReceived) }
        if end.bytesSent > 0 { counter(Label.bytesSent, [("session", session)]).increment(by: end.bytesSent) }
        if end.newConnections > 0 {
            counter(Label.connections, [("session", session), ("reused", "false")]).increment(by: end.newConnections)
        }
        if end.reusedConnections > 0 {
            counter(Label.connections, [("session", session), ("reused", "true")]).increment(by: end.reusedConnections)
        }
    }

    private static let standardMethods: Set<String> = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "CONNECT", "TRACE"]

    /// What a task's end adds, from its metrics and response; the method
    /// and status become a few fixed values, so a server's numbers or a
    /// caller's own methods never multiply a backend's series.
    static func taskEnd(method: String?, status: Int?, failed: Bool, metrics: TaskMetrics) -> TaskEnd {
        let upper = (method ?? "GET").uppercased()
        let statusClass: String =
            if let status, (100...599).contains(status), !(failed && status < 200) { "\(status / 100)xx" } else { "error" }
        var end = TaskEnd(
            method: standardMethods.contains(upper) ? upper : "other", statusClass: statusClass,
            nanoseconds: Int64((max(0, metrics.taskInterval.duration) * 1e9).rounded()), cacheResult: nil,
            bytesReceived: 0, bytesSent: 0, newConnections: 0, reusedConnections: 0)
        for transaction in metrics.transactionMetrics {
            if let status = transaction.cacheStatus {
                let answer =
                    transaction.pendingHead?.status ?? transaction.pendingResponse?.head.status
                    ?? (transaction.builtResponse as? HTTPURLResponse)?.statusCode
                end.cacheResult = cacheResult(status, answer: answer)
            }
            guard transaction.resourceFetchType == .networkLoad else { continue }
            end.bytesReceived += transaction.countOfResponseHeaderBytesReceived + transaction.countOfResponseBodyBytesReceived
            end.bytesSent += transaction.countOfRequestHeaderBytesSent + transaction.countOfRequestBodyBytesSent
            if transaction.isReusedConnection { end.reusedConnections += 1 } else { end.newConnections += 1 }
        }
        return end
    }

    /// An RFC 9211 Cache-Status value's outcome: served from the cache,
    /// validated with the origin (a stored entry forwarded and `answer`ed
    /// with 304), or fetched.
    static func cacheResult(_ status: String, answer: Int? = nil) -> String {
        let parameters = status.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        if parameters.contains("hit") { return "hit" }
        if parameters.contains("fwd-status=304") || (parameters.contains("fwd=stale") && answer == 304) { return "revalidated" }
        return "miss"
    }

    private func counter(_ label: String, _ dimensions: [(String, String)]) -> Counter {
        let key = Self.key(label, dimensions)
        return made.withLock { made in
            if let counter = made.counters[key] { return counter }
            let counter = Counter(label: label, dimensions: dimensions, factory: factory)
            made.counters[key] = counter
            return counter
        }
    }

    private func timer(_ label: String, _ dimensions: [(String, String)]) -> CoreMetrics.Timer {
        let key = Self.key(label, dimensions)
        return made.withLock { made in
            if let timer = made.timers[key] { return timer }
            let timer = CoreMetrics.Timer(label: label, dimensions: dimensions, factory: factory)
            made.timers[key] = timer
            return timer
        }
    }

    private static func key(_ label: String, _ dimensions: [(String, String)]) -> String {
        dimensions.reduce(label) { $0 + "\u{1}" + $1.0 + "=" + $1.1 }
    }
}
