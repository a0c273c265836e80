import CoreMetrics
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
import Transport

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
///
/// And per background session, the gauge `urlloading_background_tasks`:
/// its tasks that transferd holds and has not finished (queued, running
/// or suspended there), as this process last learnt.
final class SessionMeters: Sendable {
    /// The metrics' labels.
    enum Label {
        static let requests = "urlloading_requests_total"
        static let duration = "urlloading_request_duration"
        static let cache = "urlloading_cache_lookups_total"
        static let bytesReceived = "urlloading_bytes_received_total"
        static let bytesSent = "urlloading_bytes_sent_total"
        static let connections = "urlloading_connections_total"
        static let backgroundTasks = "urlloading_background_tasks"
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
    /// Counters and timers already made: a backend's handler is made once,
    /// on first use, not per task.
    private struct Made {
        var byRequest: [RequestKey: (requests: Counter, duration: CoreMetrics.Timer)] = [:]
        var cache: [String: Counter] = [:]
        var bytesReceived: Counter?
        var bytesSent: Counter?
        var newConnections: Counter?
        var reusedConnections: Counter?
        var backgroundTasks: Gauge?
    }
    private struct RequestKey: Hashable {
        let method: String
        let statusClass: String
    }
    /// What one task's end adds to, taken in one turn of the lock.
    private struct Handles {
        let requests: Counter
        let duration: CoreMetrics.Timer
        let cache: Counter?
        let bytesReceived: Counter?
        let bytesSent: Counter?
        let newConnections: Counter?
        let reusedConnections: Counter?
    }
    private let made = Lock(Made())

    /// nil when `factory` is swift-metrics' no-op backend.
    init?(sessionLabel: String, factory: any MetricsFactory = MetricsSystem.factory) {
        guard !(factory is NOOPMetricsHandler) else { return nil }
        session = sessionLabel
        self.factory = factory
    }

    func record(_ end: TaskEnd) {
        let handles = made.withLock { made in
            let key = RequestKey(method: end.method, statusClass: end.statusClass)
            let byRequest: (requests: Counter, duration: CoreMetrics.Timer)
            if let existing = made.byRequest[key] {
                byRequest = existing
            } else {
                let dimensions = [("session", session), ("method", end.method), ("status", end.statusClass)]
                byRequest = (
                    Counter(label: Label.requests, dimensions: dimensions, factory: factory),
                    CoreMetrics.Timer(label: Label.duration, dimensions: dimensions, factory: factory)
                )
                made.byRequest[key] = byRequest
            }
            // Dimensions are built only when a metric is made: an array
            // literal in the call would cost an allocation per task.
            return Handles(
                requests: byRequest.requests, duration: byRequest.duration,
                cache: end.cacheResult.map { result in
                    Self.made(&made.cache[result], Label.cache, [("session", session), ("result", result)], factory)
                },
                bytesReceived: end.bytesReceived > 0 ? Self.made(&made.bytesReceived, Label.bytesReceived, [("session", session)], factory) : nil,
                bytesSent: end.bytesSent > 0 ? Self.made(&made.bytesSent, Label.bytesSent, [("session", session)], factory) : nil,
                newConnections: end.newConnections > 0
                    ? Self.made(&made.newConnections, Label.connections, [("session", session), ("reused", "false")], factory) : nil,
                reusedConnections: end.reusedConnections > 0
                    ? Self.made(&made.reusedConnections, Label.connections, [("session", session), ("reused", "true")], factory) : nil)
        }
        handles.requests.increment()
        handles.duration.recordNanoseconds(end.nanoseconds)
        handles.cache?.increment()
        handles.bytesReceived?.increment(by: end.bytesReceived)
        handles.bytesSent?.increment(by: end.bytesSent)
        handles.newConnections?.increment(by: end.newConnections)
        handles.reusedConnections?.increment(by: end.reusedConnections)
    }

    /// A background session's tasks that transferd holds unfinished.
    func backgroundTasks(_ count: Int) {
        let gauge = made.withLock { made in
            if let gauge = made.backgroundTasks { return gauge }
            let gauge = Gauge(label: Label.backgroundTasks, dimensions: [("session", session)], factory: factory)
            made.backgroundTasks = gauge
            return gauge
        }
        gauge.record(count)
    }

    /// The counter in `slot`, made there first if it is not yet.
    private static func made(
        _ slot: inout Counter?, _ label: String, _ dimensions: @autoclosure () -> [(String, String)], _ factory: any MetricsFactory
    ) -> Counter {
        if let counter = slot { return counter }
        let counter = Counter(label: label, dimensions: dimensions(), factory: factory)
        slot = counter
        return counter
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
                end.cacheResult = cacheResult(status, answer: transaction.statusCode)
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
        var (hit, validated, stale) = (false, false, false)
        // Compared by bytes: every task's end with a cache reads its value, twice when a tracer is bootstrapped too.
        FieldList.forEachMember(of: status, separator: UInt8(ascii: ";")) { parameter in
            if ResponseHeadParser.asciiCaseInsensitiveEqual(parameter, "hit") { hit = true }
            if ResponseHeadParser.asciiCaseInsensitiveEqual(parameter, "fwd-status=304") { validated = true }
            if ResponseHeadParser.asciiCaseInsensitiveEqual(parameter, "fwd=stale") { stale = true }
        }
        if hit { return "hit" }
        if validated || (stale && answer == 304) { return "revalidated" }
        return "miss"
    }
}
