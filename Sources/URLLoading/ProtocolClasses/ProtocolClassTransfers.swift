import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
import Transport

/// Runs transfers through the app's Foundation `URLProtocol` subclasses
/// (`SessionConfiguration.protocolClasses`), as Apple's session does: each
/// transfer makes one instance of its class and calls `startLoading`; the
/// instance's `URLProtocolClient` calls become the transfer's events, so the
/// task's usual delivery (redirects, cookies, the cache, progress, delegate
/// calls) runs on them as on a server's answer. `stopLoading` is called once
/// when the transfer ends or is cancelled.
final class ProtocolClassTransfers: TransferExecutor {
    /// What one transfer loads: the class chosen by `canInit(with:)`, the
    /// request after its `canonicalRequest(for:)`, and the stored response
    /// the class may declare valid.
    struct Loading: @unchecked Sendable {
        // A class and Foundation's request and cached response are values
        // handed over once and only read after.
        let protocolClass: URLProtocol.Type
        let request: URLRequest
        let cachedResponse: CachedURLResponse?
    }

    private struct State {
        var last: UInt64 = 0
        var running: [UInt64: ProtocolLoader] = [:]
        var isShutDown = false

        mutating func nextID() -> CurlMulti.TransferID {
            last += 1
            return CurlMulti.TransferID(ProtocolClassTransfers.firstNumber + last)
        }
    }

    /// Numbers of this executor's transfers start here, apart from
    /// libcurl's (counted from 1) and the session's own connections' (from 2^63).
    static let firstNumber: UInt64 = 1 << 62

    private let classes: [URLProtocol.Type]
    private let state = Lock(State())

    /// An executor over `classes`, consulted in order.
    init(classes: [URLProtocol.Type]) {
        self.classes = classes
    }

    /// The first class that takes `request`, as Apple's session picks one.
    func protocolClass(for request: URLRequest) -> URLProtocol.Type? {
        classes.first { $0.canInit(with: request) }
    }

    /// Starts loading `loading` through its class.
    @discardableResult
    func start(_ loading: Loading, observer: any TransferObserver) -> CurlMulti.TransferID {
        let (id, loader) = state.withLock { state -> (CurlMulti.TransferID, ProtocolLoader?) in
            let id = state.nextID()
            guard !state.isShutDown else { return (id, nil) }
            let loader = ProtocolLoader(loading, observer: observer) { [weak self] in self?.ended(id) }
            state.running[id.raw] = loader
            return (id, loader)
        }
        if let loader {
            loader.start()
        } else {
            observer.transferDidComplete(.failure(.shutDown))
        }
        return id
    }

    /// A wire-level request, turned back into a `URLRequest` for the first
    /// class that takes it; none does: it fails as an unsupported URL.
    @discardableResult
    func start(_ request: TransferRequest, observer: any TransferObserver) -> CurlMulti.TransferID {
        let loading = URL(string: request.url).flatMap { url -> Loading? in
            var urlRequest = URLRequest(url: url)
            urlRequest.httpMethod = request.method
            for field in request.headers { urlRequest.addValue(field.value, forHTTPHeaderField: field.name) }
            switch request.body {
            case .none: break
            case .data(let data): urlRequest.httpBody = data
            case .file(let path, _, _): urlRequest.httpBodyStream = InputStream(fileAtPath: path)
            case .stream: return nil  // a producer's bytes cannot be read twice
            }
            return protocolClass(for: urlRequest).map { Loading(protocolClass: $0, request: $0.canonicalRequest(for: urlRequest), cachedResponse: nil) }
        }
        guard let loading else {
            let id = state.withLock { $0.nextID() }
            observer.transferDidComplete(.failure(.connection(.unsupportedURL, "no protocol class takes this request")))
            return id
        }
        return start(loading, observer: observer)
    }

    func cancel(_ id: CurlMulti.TransferID) {
        state.withLock { $0.running[id.raw] }?.cancel()
    }

    func unpause(_ id: CurlMulti.TransferID) {
        state.withLock { $0.running[id.raw] }?.unpause()
    }

    func shutdown() {
        let running = state.withLock { state in
            state.isShutDown = true
            return Array(state.running.values)
        }
        for loader in running { loader.cancel() }
    }

    private func ended(_ id: CurlMulti.TransferID) {
        _ = state.withLock { $0.running.removeValue(forKey: id.raw) }
    }
}

extension CurlMulti.TransferID {
    /// Whether the number is one `ProtocolClassTransfers` gave.
    var isProtocolClass: Bool { raw >= ProtocolClassTransfers.firstNumber && !isOwned }
}
