import Foundation
import Locking
import Streams
import Transport

/// The session's requests on connections of its own (`OwnedTransfer`),
/// by the transfer identifier the task knows: an executor beside libcurl's
/// (`CurlMulti`), whose transfers can also be handed over after the head.
final class OwnedTransfers: TransferExecutor {
    private struct Table {
        /// Numbered apart from libcurl's transfers (the top bit set).
        var next: UInt64 = 1 << 63
        var running: [CurlMulti.TransferID: OwnedTransfer] = [:]
    }

    private let table = Lock(Table())
    /// How to reach a host and port (proxy, TLS, connect timeout): the session's settings.
    /// Where a connection goes: the host, the port and the hop's proxy (as its URL).
    private let endpoint: @Sendable (String, Int, URL?) -> StreamConnection.Endpoint

    init(endpoint: @escaping @Sendable (String, Int, URL?) -> StreamConnection.Endpoint) {
        self.endpoint = endpoint
    }

    /// Starts `request` on a new connection to its URL's host.
    @discardableResult
    func start(_ request: TransferRequest, observer: any TransferObserver) -> CurlMulti.TransferID {
        let id = table.withLock { table -> CurlMulti.TransferID in
            defer { table.next += 1 }
            return CurlMulti.TransferID(table.next)
        }
        switch Self.plan(request, endpoint: endpoint) {
        case .failure(let error):
            observer.transferDidComplete(.failure(error))
        case .success(let plan):
            let transfer = OwnedTransfer(id: id, plan: plan, request: request, observer: observer) { [weak self] id in
                _ = self?.table.withLock { $0.running.removeValue(forKey: id) }
            }
            table.withLock { $0.running[id] = transfer }
            transfer.begin(totalTimeout: request.totalTimeout)
        }
        return id
    }

    /// Cancels the transfer, if it still runs.
    func cancel(_ id: CurlMulti.TransferID) {
        table.withLock { $0.running[id] }?.cancel()
    }

    /// Lets the transfer go on, if it still runs.
    func unpause(_ id: CurlMulti.TransferID) {
        table.withLock { $0.running[id] }?.unpause()
    }

    /// Cancels every running transfer.
    func shutdown() {
        for transfer in table.withLock({ Array($0.running.values) }) { transfer.cancel() }
    }

    /// The connection of a transfer waiting after its head, with the bytes
    /// after the head and where it goes; the transfer is over.
    func handOver(_ id: CurlMulti.TransferID) -> (OwnedTransfer.Plan, StreamConnection, [UInt8])? {
        guard let transfer = table.withLock({ $0.running.removeValue(forKey: id) }) else { return nil }
        guard let (connection, leftover) = transfer.handOver() else { return nil }
        return (transfer.plan, connection, leftover)
    }

    /// Where and what to send: the URL's host and port (80 and 443 by
    /// default), the request line in origin form, and the head with `Host`
    /// and the body's length added unless given.
    static func plan(_ request: TransferRequest, endpoint: (String, Int, URL?) -> StreamConnection.Endpoint) -> Result<OwnedTransfer.Plan, TransferError> {
        guard let components = URLComponents(string: request.url), let scheme = components.scheme?.lowercased(),
            scheme == "http" || scheme == "https", let host = components.host, !host.isEmpty
        else { return .failure(.connection(.unsupportedURL, "only http and https URLs with a host go on a connection of the session's own")) }
        let secure = scheme == "https"
        let port = components.port ?? (secure ? 443 : 80)
        guard (1...65535).contains(port) else { return .failure(.connection(.unsupportedURL, "the port is out of range")) }
        let method = request.method.isEmpty ? "GET" : request.method
        var target = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
        if let query = components.percentEncodedQuery { target += "?" + query }
        let bodyLength: Int64? =
            switch request.body {
            case .none: method == "POST" || method == "PUT" ? 0 : nil
            case .data(let data): Int64(data.count)
            case .file(_, _, let length): length
            case .stream: nil
            }
        var head = "\(method) \(target) HTTP/1.1\r\n"
        func has(_ name: String) -> Bool { request.headers.contains { $0.name.caseInsensitiveCompare(name) == .orderedSame } }
        if !has("Host") {
            let name = host.contains(":") ? "[\(host)]" : host
            head += "Host: \(name)\(port == (secure ? 443 : 80) ? "" : ":\(port)")\r\n"
        }
        for field in request.headers {
            // An empty value asks libcurl to leave a field out; CR, LF and NUL were refused before.
            guard !field.value.isEmpty else { continue }
            head += "\(field.name): \(field.value)\r\n"
        }
        if let bodyLength, !has("Content-Length") { head += "Content-Length: \(bodyLength)\r\n" }
        head += "\r\n"
        // The proxy the hop's plan chose (per hop: a redirect to a `no_proxy` host goes directly).
        var where_ = endpoint(host, port, request.proxy.flatMap(ProxyRules.url(of:)))
        if let timeout = request.connectTimeout { where_.connectTimeout = timeout }
        return .success(OwnedTransfer.Plan(endpoint: where_, secure: secure, head: Array(head.utf8), method: method))
    }
}

extension CurlMulti.TransferID {
    /// Whether the number is one `OwnedTransfers` gave.
    var isOwned: Bool { raw >= 1 << 63 }
}
