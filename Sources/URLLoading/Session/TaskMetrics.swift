public import Foundation

/// Timing and size figures of a task, one entry per request it sent
/// (redirects make several), filled from libcurl's timing info.
public struct TaskMetrics: Sendable, Equatable {
    /// One request/response exchange.
    public struct Transaction: Sendable, Equatable {
        /// The request's URL.
        public var url: URL?
        /// The response's status, or nil when none arrived.
        public var statusCode: Int?
        /// "HTTP/1.1", "HTTP/2".
        public var networkProtocolName: String
        /// Whether an existing connection carried it.
        public var isReusedConnection: Bool
        /// Seconds from the start of the exchange to the end of each phase.
        public var domainLookupSeconds: Double
        public var connectSeconds: Double
        public var secureConnectionSeconds: Double
        public var requestSentSeconds: Double
        public var firstByteSeconds: Double
        public var totalSeconds: Double
        public var requestBodyBytesSent: Int64
        public var responseBodyBytesReceived: Int64
        public var responseHeaderBytesReceived: Int64
        public var remoteAddress: String?
        public var remotePort: Int?
        public var localAddress: String?
        public var localPort: Int?
        /// How the cache took part: "hit", "fwd=miss", ... (RFC 9211 terms).
        public var cacheStatus: String?
    }

    /// Every exchange, in order.
    public var transactions: [Transaction]
    /// When the task started and ended.
    public var taskInterval: DateInterval
    /// Redirects followed.
    public var redirectCount: Int
}
