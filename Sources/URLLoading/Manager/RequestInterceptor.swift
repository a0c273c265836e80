public import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

/// Changes each request before it is sent (Alamofire's adapter
/// role): for example, adds a token it refreshed. Throwing fails the call
/// with `.adaptationFailed` before anything is sent.
public protocol RequestAdapter: Sendable {
    /// The request to send in place of `request` (each try is adapted anew).
    func adapt(_ request: URLRequest) async throws -> URLRequest
}

/// Whether a failed request is sent again.
public enum RetryDecision: Sendable, Equatable {
    /// Send it again after this many seconds.
    case retry(after: TimeInterval)
    /// Give the failure to the caller.
    case doNotRetry
}

/// Decides whether a failed request is sent again (Alamofire's retrier role).
public protocol RequestRetrier: Sendable {
    /// `attempt` counts the tries so far (1 after the first failed).
    func retry(_ request: URLRequest, failedWith error: ManagerError, attempt: Int) async -> RetryDecision
}

/// A retrier for idempotent requests: transport failures that a new try may
/// cure and the statuses that say "later" (408, 429, 500, 502, 503, 504),
/// with exponential backoff from `baseDelay`, a server's `Retry-After`
/// (seconds) honoured, every delay within `maximumDelay`, and at most
/// `limit` retries.
public struct RetryPolicy: RequestRetrier {
    /// Retries at most (not counting the first try).
    public var limit: Int
    /// The first delay; each next one doubles.
    public var baseDelay: TimeInterval
    /// No delay is longer, whatever the server asks.
    public var maximumDelay: TimeInterval
    /// Methods retried (RFC 9110 §9.2.2's idempotent ones by default).
    public var methods: Set<String> = ["GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE"]
    /// Statuses retried.
    public var statusCodes: Set<Int> = [408, 429, 500, 502, 503, 504]
    /// Transport failures retried.
    public var errorCodes: Set<URLError.Code> = [.timedOut, .cannotFindHost, .cannotConnectToHost, .networkConnectionLost, .dnsLookupFailed, .notConnectedToInternet]

    /// A policy of `limit` retries from `baseDelay`, doubling, within `maximumDelay`.
    public init(limit: Int = 2, baseDelay: TimeInterval = 0.5, maximumDelay: TimeInterval = 30) {
        self.limit = max(0, limit)
        self.baseDelay = max(0, baseDelay)
        self.maximumDelay = max(0, maximumDelay)
    }

    public func retry(_ request: URLRequest, failedWith error: ManagerError, attempt: Int) async -> RetryDecision {
        guard attempt <= limit, methods.contains(request.httpMethod ?? "GET") else { return .doNotRetry }
        switch error.kind {
        case .unacceptableStatusCode(let status) where statusCodes.contains(status):
            break
        case .transport:
            guard let code = (error.underlying as? URLError)?.code, errorCodes.contains(code) else { return .doNotRetry }
        default:
            return .doNotRetry
        }
        let backoff = baseDelay * pow(2, Double(min(attempt - 1, 30)))
        let asked = error.response?.value(forHTTPHeaderField: "Retry-After").flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }
        // Retry-After as seconds, checked before use: negative or absurd values fall back to the backoff.
        let delay = asked.flatMap { $0 >= 0 && $0 <= 86_400 ? TimeInterval($0) : nil } ?? backoff
        return .retry(after: min(delay, maximumDelay))
    }
}

extension HTTPSessionManager {
    /// Changes each request of the `async` calls before it is sent.
    public var adapter: (any RequestAdapter)? {
        get { interceptors.withLock { $0.adapter } }
        set { interceptors.withLock { $0.adapter = newValue } }
    }

    /// Decides whether a failed `async` call is sent again.
    public var retrier: (any RequestRetrier)? {
        get { interceptors.withLock { $0.retrier } }
        set { interceptors.withLock { $0.retrier = newValue } }
    }

    /// Adapts, sends, and retries while the retrier says so. Cancelling the
    /// Swift task ends the wait between tries too.
    func intercepted<S: ResponseSerializer>(
        _ request: URLRequest, serializer: S, uploadProgress: ManagerProgress?, downloadProgress: ManagerProgress?
    ) async -> Result<ManagerResponse<S.Output>, ManagerError> {
        let (adapter, retrier) = interceptors.withLock { ($0.adapter, $0.retrier) }
        var attempt = 0
        while true {
            var sent = request
            if let adapter {
                do {
                    sent = try await adapter.adapt(request)
                } catch {
                    return .failure(ManagerError(.adaptationFailed, message: "the adapter refused the request: \(error)", underlying: error))
                }
            }
            let result = await once(sent, serializer: serializer, uploadProgress: uploadProgress, downloadProgress: downloadProgress)
            guard case .failure(let error) = result, let retrier, !Task.isCancelled else { return result }
            attempt += 1
            guard case .retry(let delay) = await retrier.retry(sent, failedWith: error, attempt: attempt) else { return result }
            do {
                try await Task.sleep(nanoseconds: UInt64(max(0, min(delay, 86_400)) * 1e9))
            } catch {
                return result
            }
        }
    }
}
