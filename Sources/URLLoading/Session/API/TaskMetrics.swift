public import Foundation
import Locking
import Transport
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

/// What a task's exchanges took (Apple's `URLSessionTaskMetrics`): one
/// transaction per request it made or answer it took from the cache
/// (redirects and authentication challenges make several), with the dates
/// of each phase from libcurl's timing info.
public struct TaskMetrics: Sendable {
    /// Every transaction, in order.
    public var transactionMetrics: [TaskTransactionMetrics]
    /// From the task's `resume()` to its end.
    public var taskInterval: DateInterval
    /// Redirects followed.
    public var redirectCount: Int
}

/// One request and its response (Apple's `URLSessionTaskTransactionMetrics`).
///
/// Dates are nil for phases that did not happen: no name lookup or connect
/// on a reused connection, no TLS over http, none at all for an answer
/// from the cache (`resourceFetchType == .localCache`). A hop the task cut
/// short (a redirect followed or a challenge answered before its body
/// ended) has only what the task saw: its start, its response's start,
/// the protocol and the proxy flag.
public struct TaskTransactionMetrics: Sendable {
    /// Where the response came from.
    public enum ResourceFetchType: Int, Sendable, Hashable {
        /// Not known.
        case unknown
        /// Fetched from the network.
        case networkLoad
        /// Pushed by the server (HTTP/2 push; libcurl does not accept pushes, so never).
        case serverPush
        /// Answered from the response cache.
        case localCache
    }

    /// The request as sent (after redirects and added fields).
    public var request: URLRequest
    /// The response, nil when none arrived. A response the task did not
    /// need as Foundation's (an earlier hop's, or any on swift-http-types'
    /// calls) is built from its head the first time this is read, once.
    public var response: URLResponse? {
        get { builtResponse ?? pendingResponse?.response }
        set {
            builtResponse = newValue
            pendingResponse = nil
            pendingHead = nil
        }
    }
    /// The response as built, or as set.
    var builtResponse: URLResponse?
    /// The head `response` is built from on its first read.
    var pendingResponse: PendingResponse?
    /// The head, until the metrics go to a delegate (`readyToRead`): then
    /// it becomes `pendingResponse`; nobody's metrics cost no object.
    var pendingHead: ResponseHead?

    /// The response's status, read without building a Foundation response.
    var statusCode: Int? {
        pendingHead?.status ?? pendingResponse?.head.status ?? (builtResponse as? HTTPURLResponse)?.statusCode
    }

    /// When the task began to fetch this resource (from the network or the cache).
    public var fetchStartDate: Date?
    /// When the name lookup began (nil on a reused connection).
    public var domainLookupStartDate: Date?
    /// When the name lookup ended.
    public var domainLookupEndDate: Date?
    /// When the connection began to be made.
    public var connectStartDate: Date?
    /// When the TLS handshake began (nil over http).
    public var secureConnectionStartDate: Date?
    /// When the TLS handshake ended.
    public var secureConnectionEndDate: Date?
    /// When the connection was ready (TLS included).
    public var connectEndDate: Date?
    /// When the request began to be sent.
    public var requestStartDate: Date?
    /// When the request was sent (with a body, at the latest when the response began).
    public var requestEndDate: Date?
    /// When the first byte of the response arrived.
    public var responseStartDate: Date?
    /// When the last byte of the response arrived.
    public var responseEndDate: Date?

    /// The protocol as its ALPN identifier: "http/1.1", "h2", "h3" (Apple's spelling).
    public var networkProtocolName: String?
    /// Whether a proxy carried the request.
    public var isProxyConnection: Bool
    /// Whether an existing connection carried the request.
    public var isReusedConnection: Bool
    /// Network or cache.
    public var resourceFetchType: ResourceFetchType

    /// Bytes of the request head sent (libcurl's count: a small body sent
    /// along with the head is counted too).
    public var countOfRequestHeaderBytesSent: Int64
    /// Bytes of request body sent.
    public var countOfRequestBodyBytesSent: Int64
    /// The same, before any content encoding (the library encodes none).
    public var countOfRequestBodyBytesBeforeEncoding: Int64
    /// Bytes of response head received.
    public var countOfResponseHeaderBytesReceived: Int64
    /// Bytes of response body received, as sent (before decoding).
    public var countOfResponseBodyBytesReceived: Int64
    /// Bytes of response body after content decoding.
    public var countOfResponseBodyBytesAfterDecoding: Int64

    /// The local IP address of the connection.
    public var localAddress: String?
    /// The local port of the connection.
    public var localPort: Int?
    /// The server's (or proxy's) IP address.
    public var remoteAddress: String?
    /// The server's (or proxy's) port.
    public var remotePort: Int?

    /// The TLS version ("TLSv1.3"; Apple's `tls_protocol_version_t` does not
    /// exist on Linux), nil over http.
    public var negotiatedTLSProtocolVersion: String?
    /// The TLS cipher suite's name ("TLS_AES_256_GCM_SHA384"), nil over http.
    public var negotiatedTLSCipherSuite: String?

    /// Ours: how the cache took part, in RFC 9211 terms (`"URLLoading; hit"`,
    /// `"URLLoading; fwd=uri-miss"`, ...), nil when the task used no cache.
    public var cacheStatus: String?

    /// Recorded when the hop was cut short (a redirect or challenge answered
    /// before its transfer ended): the transport's figures are still to come.
    var awaitsTransportFigures = false
}

/// Members of Apple's transaction metrics that describe the device's path,
/// which a Linux host and libcurl do not report: constant here, so code
/// that reads them compiles and gets the answer a wired server's would.
extension TaskTransactionMetrics {
    /// How the name was resolved (Apple's
    /// `URLSessionTaskTransactionMetrics.DomainResolutionProtocol`).
    public enum DomainResolutionProtocol: Int, Sendable, Hashable {
        /// Not known: always, here (libcurl resolves through the system's
        /// resolver, or DNS over HTTPS only when configured, which the
        /// session never does; it reports neither).
        case unknown
        /// Plain DNS over UDP.
        case udp
        /// Plain DNS over TCP.
        case tcp
        /// DNS over TLS.
        case tls
        /// DNS over HTTPS.
        case https
    }

    /// Whether the interface was cellular: false (no such interface here).
    public var isCellular: Bool { false }
    /// Whether the interface was considered expensive: false.
    public var isExpensive: Bool { false }
    /// Whether the interface was in Low Data Mode: false.
    public var isConstrained: Bool { false }
    /// Whether Multipath TCP carried the connection: false (libcurl does not use it).
    public var isMultipath: Bool { false }
    /// How the name was resolved: `.unknown` (see ``DomainResolutionProtocol``).
    public var domainResolutionProtocol: DomainResolutionProtocol { .unknown }
}

/// Apple's nested names.
extension TaskMetrics {
    /// `URLSessionTaskTransactionMetrics` under its Apple-like nesting.
    public typealias Transaction = TaskTransactionMetrics
}

/// A response kept as the transport's head until someone reads it: then
/// built as Foundation's, once (the copies of a transaction share it).
final class PendingResponse: Sendable {
    let url: URL
    let head: ResponseHead
    private let built = Lock<HTTPURLResponse??>(nil)

    init(url: URL, head: ResponseHead) {
        self.url = url
        self.head = head
    }

    var response: HTTPURLResponse? {
        built.withLock { built in
            if let response = built { return response }
            let response = SessionTask.makeResponse(url: url, head: head)
            built = .some(response)
            return response
        }
    }
}
