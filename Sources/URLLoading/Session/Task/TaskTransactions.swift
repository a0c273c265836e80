import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Transport

/// A task's exchanges as Apple's transaction metrics (`TaskMetrics`): one
/// for each hop that went to the network, in the hop's slot (`Hop.index`),
/// made from libcurl's figures when its transfer ends, or earlier from what
/// the task saw when the task moves on first (`recordCutShort`, then
/// `fillCutShort`); one for an answer from the cache.
enum TaskTransactions {
    /// The current hop's exchange over the network; `metrics` is nil when
    /// its transfer was cut short (a redirect or challenge answered early).
    /// `inout` only so that the state is read in place: borrowed from the
    /// lock's `inout` value, all of `Inner` was copied for it per request.
    static func network(_ inner: inout SessionTask.Inner, metrics: TransferMetrics?) -> TaskTransactionMetrics {
        let request = inner.machine.request ?? URLRequest(url: URL(fileURLWithPath: "/"))
        let url = request.url ?? URL(fileURLWithPath: "/")
        // The final hop's response may be built already; any other (a redirect, a 401,
        // any on swift-http-types' calls) only when someone reads it (`PendingResponse`):
        // building an HTTPURLResponse costs more than the rest of the transaction.
        let record = inner.machine.record
        let final = record.head.flatMap { head in inner.response.flatMap { $0.statusCode == head.status && $0.url == url ? $0 : nil } }
        var transaction = TaskTransactionMetrics(request: request, response: final, fetchType: .networkLoad, cacheStatus: inner.machine.cache.status)
        if final == nil { transaction.pendingHead = record.head }
        guard let metrics else {
            // Cut short: what the task itself saw, until the transport's
            // figures for the hop arrive (`fillCutShort`).
            transaction.fetchStartDate = record.startedAt
            transaction.responseStartDate = record.headDate
            transaction.isProxyConnection = record.viaProxy
            transaction.networkProtocolName = record.head.flatMap { alpnName($0.httpVersion) }
            transaction.awaitsTransportFigures = true
            return transaction
        }
        transaction.fill(metrics, bodyBytesAfterDecoding: final != nil ? inner.bytesReceived : metrics.bytesReceived)
        return transaction
    }

    /// Records the current hop's exchange before its transfer ends (a
    /// redirect followed, a challenge answered, a 304 served, an upload
    /// resumed): the task may move on, or end, first. Once per hop, in its
    /// slot (`Hop.index`); `fillCutShort` adds the transport's figures.
    static func recordCutShort(_ inner: inout SessionTask.Inner) {
        guard let hop = inner.machine.hop, inner.transactions.count == hop.index else { return }
        inner.transactions.append(network(&inner, metrics: nil))
    }

    /// A hop that was cut short by a redirect or a challenge was recorded
    /// without the transport's figures; they arrive with its end (before the
    /// next hop's, on the same connection and completion path).
    static func fillCutShort(_ inner: inout SessionTask.Inner, hop: Hop, _ metrics: TransferMetrics) {
        let slot = hop.index
        guard !inner.machine.isFinished, inner.transactions.indices.contains(slot), inner.transactions[slot].awaitsTransportFigures else { return }
        inner.transactions[slot].fill(metrics, bodyBytesAfterDecoding: metrics.bytesReceived)
    }

    /// An answer from the response cache: no network phase at all.
    static func cached(_ request: URLRequest, response: HTTPURLResponse, cacheStatus: String) -> TaskTransactionMetrics {
        let now = Date()
        var transaction = TaskTransactionMetrics(request: request, response: response, fetchType: .localCache, cacheStatus: cacheStatus)
        transaction.fetchStartDate = now
        transaction.responseStartDate = now
        transaction.responseEndDate = now
        return transaction
    }

    /// The transactions as a delegate gets them: each response not built
    /// yet is built from its head when first read.
    static func readyToRead(_ transactions: [TaskTransactionMetrics]) -> [TaskTransactionMetrics] {
        transactions.map { transaction in
            guard let head = transaction.pendingHead, let url = transaction.request.url else { return transaction }
            var ready = transaction
            ready.pendingHead = nil
            ready.pendingResponse = PendingResponse(url: url, head: head)
            return ready
        }
    }

    /// "HTTP/1.1" → "http/1.1", "HTTP/2" → "h2", "HTTP/3" → "h3": Apple's (ALPN) spelling.
    static func alpnName(_ httpVersion: String) -> String? {
        switch httpVersion.uppercased() {
        case "": nil
        case "HTTP/2", "HTTP/2.0": "h2"
        case "HTTP/3", "HTTP/3.0": "h3"
        default: httpVersion.lowercased()
        }
    }
}

extension TaskTransactionMetrics {
    /// A transaction with no phase recorded yet.
    init(request: URLRequest, response: URLResponse?, fetchType: ResourceFetchType, cacheStatus: String?) {
        self.request = request
        builtResponse = response
        isProxyConnection = false
        isReusedConnection = false
        resourceFetchType = fetchType
        countOfRequestHeaderBytesSent = 0
        countOfRequestBodyBytesSent = 0
        countOfRequestBodyBytesBeforeEncoding = 0
        countOfResponseHeaderBytesReceived = 0
        countOfResponseBodyBytesReceived = 0
        countOfResponseBodyBytesAfterDecoding = 0
        self.cacheStatus = cacheStatus
    }
}

extension TaskTransactionMetrics {
    /// Dates and counts from libcurl's figures for the exchange.
    mutating func fill(_ metrics: TransferMetrics, bodyBytesAfterDecoding: Int64) {
        awaitsTransportFigures = false
        // libcurl gives seconds from the transfer's start to each phase's end, cumulative.
        let end = metrics.endDate ?? Date()
        let start = end.addingTimeInterval(-max(0, metrics.total))
        func at(_ seconds: Double) -> Date { start.addingTimeInterval(max(0, seconds)) }
        fetchStartDate = start
        if !metrics.reusedConnection {
            domainLookupStartDate = start
            domainLookupEndDate = at(metrics.nameLookup)
            connectStartDate = at(metrics.nameLookup)
            if metrics.tlsHandshake > 0 {
                secureConnectionStartDate = at(metrics.connect)
                secureConnectionEndDate = at(metrics.tlsHandshake)
            }
            connectEndDate = at(max(metrics.connect, metrics.tlsHandshake))
        }
        requestStartDate = at(metrics.requestSent)
        // libcurl 7.88 does not time the end of the upload: with a body, the response's start bounds it.
        requestEndDate = at(metrics.bytesSent > 0 ? metrics.firstByte : metrics.requestSent)
        // A transfer cancelled before its head has no first byte.
        responseStartDate = metrics.firstByte > 0 ? at(metrics.firstByte) : responseStartDate
        responseEndDate = end
        networkProtocolName = TaskTransactions.alpnName(metrics.httpVersion) ?? networkProtocolName
        isProxyConnection = metrics.viaProxy
        isReusedConnection = metrics.reusedConnection
        countOfRequestHeaderBytesSent = metrics.requestHeaderBytes
        countOfRequestBodyBytesSent = metrics.bytesSent
        countOfRequestBodyBytesBeforeEncoding = metrics.bytesSent
        countOfResponseHeaderBytesReceived = metrics.headerBytes
        countOfResponseBodyBytesReceived = metrics.bytesReceived
        countOfResponseBodyBytesAfterDecoding = bodyBytesAfterDecoding
        localAddress = metrics.localAddress
        localPort = metrics.localPort
        remoteAddress = metrics.remoteAddress
        remotePort = metrics.remotePort
        negotiatedTLSProtocolVersion = metrics.tlsVersion
        negotiatedTLSCipherSuite = metrics.tlsCipherSuite
    }
}
