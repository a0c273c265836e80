import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
import Transport

/// One transfer through a `URLProtocol` instance: the instance's client.
///
/// The instance may call its client from any thread, during `startLoading`
/// or after it. Each call becomes an event in a queue; one serial dispatch
/// queue hands the events to the transfer's observer in order, runs
/// `startLoading` and `stopLoading` (before the observer hears the end), and holds the events back while the
/// observer refuses a chunk (the task paused), so nothing is lost or
/// reordered. Calls after the transfer ended are ignored.
final class ProtocolLoader: NSObject, URLProtocolClient, @unchecked Sendable {
    // Sendable: every mutable field is in `state`, behind its lock; the rest
    // is set once in init.

    private enum Event {
        case head(ResponseHead)
        case body(Data)
        case finish
        case fail(TransferError)
    }

    private struct State {
        var events: [Event] = []
        var paused = false
        var ended = false
        var sawHead = false
        var finishing = false
        var bytesReceived: Int64 = 0
        var instance: UncheckedInstance?
    }

    /// The instance, kept to call its `stopLoading`: Foundation's class is
    /// not `Sendable`, and only this queue calls it.
    private struct UncheckedInstance: @unchecked Sendable {
        let instance: URLProtocol
        init(_ instance: URLProtocol) { self.instance = instance }
    }

    private let loading: ProtocolClassTransfers.Loading
    private let observer: any TransferObserver
    private let onEnd: @Sendable () -> Void
    private let queue = DispatchQueue(label: "urlloading.url-protocol")
    private let state = Lock(State())
    private let startDate = Date()

    init(_ loading: ProtocolClassTransfers.Loading, observer: any TransferObserver, onEnd: @escaping @Sendable () -> Void) {
        self.loading = loading
        self.observer = observer
        self.onEnd = onEnd
    }

    /// Makes the instance and calls its `startLoading`, on the queue.
    func start() {
        queue.async { [self] in
            let instance = loading.protocolClass.init(request: loading.request, cachedResponse: loading.cachedResponse, client: self)
            let ended = state.withLock { $0.ended }
            guard !ended else { return }
            let made = UncheckedInstance(instance)
            state.withLock { $0.instance = made }
            instance.startLoading()
        }
    }

    /// Ends the transfer unless it ended: the observer hears it was cancelled.
    func cancel() {
        queue.async { [self] in
            guard end() else { return }
            stop()
            observer.transferWasCancelled(after: metrics())
            observer.transferDidComplete(.failure(.cancelled))
        }
    }

    /// Delivers what was held while the observer refused a chunk.
    func unpause() {
        queue.async { [self] in
            state.withLock { $0.paused = false }
            drain()
        }
    }

    // MARK: URLProtocolClient

    func urlProtocol(_ protocol: URLProtocol, wasRedirectedTo request: URLRequest, redirectResponse: URLResponse) {
        // The task follows the redirect as it follows a server's (asking its
        // delegate); its Location is the request the instance proposes.
        var head = Self.head(of: redirectResponse)
        if let location = request.url?.absoluteString {
            head.headers.removeAll { HeaderFields.namesEqual($0.name, "Location") }
            head.headers.append((name: "Location", value: location))
        }
        enqueue([.head(head), .finish])
    }

    func urlProtocol(_ protocol: URLProtocol, cachedResponseIsValid cachedResponse: CachedURLResponse) {
        enqueue([.head(Self.head(of: cachedResponse.response)), .body(cachedResponse.data), .finish])
    }

    func urlProtocol(_ protocol: URLProtocol, didReceive response: URLResponse, cacheStoragePolicy policy: URLCache.StoragePolicy) {
        let allowed: CacheStoragePolicy =
            switch policy {
            case .allowed: .allowed
            case .allowedInMemoryOnly: .allowedInMemoryOnly
            default: .notAllowed
            }
        (observer as? Hop)?.task.protocolClassAllowsStorage(allowed)
        enqueue([.head(Self.head(of: response))])
    }

    func urlProtocol(_ protocol: URLProtocol, didLoad data: Data) {
        guard !data.isEmpty else { return }
        enqueue([.body(data)])
    }

    func urlProtocolDidFinishLoading(_ protocol: URLProtocol) {
        enqueue([.finish])
    }

    func urlProtocol(_ protocol: URLProtocol, didFailWithError error: any Error) {
        enqueue([.fail(Self.transferError(error))])
    }

    func urlProtocol(_ protocol: URLProtocol, didReceive challenge: URLAuthenticationChallenge) {
        guard let task = (observer as? Hop)?.task, let sender = challenge.sender else { return }
        task.answerProtocolClassChallenge(challenge, sender: sender)
    }

    func urlProtocol(_ protocol: URLProtocol, didCancel challenge: URLAuthenticationChallenge) {
        // The instance withdrew its challenge: whatever the delegate answers
        // later goes to its sender, which ignores it.
    }

    // MARK: Delivery

    private func enqueue(_ events: [Event]) {
        let accepted = state.withLock { state -> Bool in
            guard !state.ended, !state.finishing else { return false }
            for event in events {
                switch event {
                case .head where state.sawHead:
                    // One response per hop: a second one (a class that
                    // restarts its answer) is not a head the task can take.
                    continue
                case .head: state.sawHead = true
                case .body where !state.sawHead:
                    // Apple's session needs a response before data.
                    state.events.append(.fail(.badResponse("the URLProtocol class loaded data before a response")))
                    state.finishing = true
                    return true
                case .finish where !state.sawHead:
                    state.events.append(.fail(.badResponse("the URLProtocol class finished without a response")))
                    state.finishing = true
                    return true
                case .finish, .fail: state.finishing = true
                case .body: break
                }
                state.events.append(event)
            }
            return true
        }
        if accepted { queue.async { [self] in drain() } }
    }

    /// Hands the waiting events to the observer in order, on the queue.
    private func drain() {
        while true {
            let next = state.withLock { state -> Event? in
                guard !state.ended, !state.paused else { return nil }
                return state.events.first
            }
            guard let next else { return }
            switch next {
            case .head(let head):
                state.withLock { _ = $0.events.removeFirst() }
                observer.transferDidReceiveHead(head)
                if !observer.transferMayProceedPastHead() {
                    state.withLock { $0.paused = true }
                }
            case .body(let data):
                let taken = data.withUnsafeBytes { observer.transferDidReceive($0) }
                state.withLock { state in
                    if taken {
                        state.bytesReceived += Int64(data.count)
                        if !state.events.isEmpty { state.events.removeFirst() }
                    } else {
                        state.paused = true
                    }
                }
            case .finish, .fail:
                // Stopped before the task hears its end, so its completion
                // finds the instance done.
                guard end() else { return }
                stop()
                if case .fail(let error) = next {
                    observer.transferDidComplete(.failure(error))
                } else {
                    observer.transferDidComplete(.success(metrics()))
                }
                return
            }
        }
    }

    /// Marks the transfer ended; false when it already was.
    private func end() -> Bool {
        state.withLock { state in
            guard !state.ended else { return false }
            state.ended = true
            state.events.removeAll()
            return true
        }
    }

    /// Calls the instance's `stopLoading` once, and lets it go.
    private func stop() {
        let instance = state.withLock { state in
            defer { state.instance = nil }
            return state.instance
        }
        instance?.instance.stopLoading()
        onEnd()
    }

    private func metrics() -> TransferMetrics {
        var metrics = TransferMetrics()
        metrics.total = Date().timeIntervalSince(startDate)
        metrics.bytesReceived = state.withLock { $0.bytesReceived }
        metrics.httpVersion = "HTTP/1.1"
        metrics.endDate = Date()
        return metrics
    }

    // MARK: Foundation's values as the transport's

    /// A response's head: an HTTP response's status and fields; any other
    /// response (a custom scheme's) as a 200 with its media type and length.
    static func head(of response: URLResponse) -> ResponseHead {
        if let http = response as? HTTPURLResponse {
            let fields = http.allHeaderFields.compactMap { name, value -> (name: String, value: String)? in
                guard let name = name as? String else { return nil }
                return (name: name, value: "\(value)")
            }
            return ResponseHead(status: http.statusCode, httpVersion: "HTTP/1.1", headers: fields.sorted { $0.name < $1.name })
        }
        var fields: [(name: String, value: String)] = []
        if let type = response.mimeType {
            fields.append((name: "Content-Type", value: type + (response.textEncodingName.map { "; charset=\($0)" } ?? "")))
        }
        if response.expectedContentLength >= 0 {
            fields.append((name: "Content-Length", value: String(response.expectedContentLength)))
        }
        return ResponseHead(status: 200, httpVersion: "HTTP/1.1", headers: fields)
    }

    /// An instance's error: a `URLError`'s code is kept for the task's error.
    static func transferError(_ error: any Error) -> TransferError {
        let nsError = error as NSError
        if nsError.domain == NSURLErrorDomain {
            if nsError.code == URLError.cancelled.rawValue { return .cancelled }
            return .connection(.reported(code: nsError.code), nsError.localizedDescription)
        }
        return .connection(.other, "the URLProtocol class failed: \(nsError.domain) \(nsError.code)")
    }
}
