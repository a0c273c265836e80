import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Transport

/// Plans one hop of a task: what the request sends, decided in
/// one place from values only — no store, lock or socket — so it is tested
/// without any. The task reads the stores (cookies, credentials, the
/// cache) between the two steps and hands their answers in.
///
/// ```
/// request ─base→ refused (scheme, CR/LF, deadline passed) | transfer (settings, timeouts, body)
///                 ─complete(cookie, authorization, validators)→ transfer as sent
/// ```
enum HopPlan {
    /// The transfer before the stores' part: the request's own fields (less
    /// those the session owns), the configuration's timeouts, proxy and TLS
    /// settings; the hop may take what is left until `deadline`.
    ///
    /// - Returns: The transfer, or why the request cannot be sent.
    static func base(
        _ request: URLRequest, body: TransferRequest.Body, settings: SessionConfiguration.Values, deadline: Date?, now: Date
    ) -> Result<TransferRequest, SessionError> {
        guard let url = request.url, let scheme = url.scheme?.lowercased(),
            scheme == "http" || scheme == "https" || UnixSocketURL.isUnixScheme(scheme)
        else {
            return .failure(
                SessionError(.unsupportedURL, failingURL: request.url, message: "only http, https, http+unix and https+unix URLs are supported"))
        }
        var target = (socketPath: String?.none, transferURL: url.absoluteString)
        if UnixSocketURL.isUnixScheme(scheme) {
            switch UnixSocketURL.split(url) {
            case .success(let split): target = (split.socketPath, split.transferURL)
            case .failure(let error): return .failure(error)
            }
        } else if let socket = settings.unixSocketPath {
            if let problem = UnixSocketURL.problem(with: socket) { return .failure(SessionError(.badURL, failingURL: url, message: problem)) }
            target.socketPath = socket
        }
        if let port = url.port, !(0...65_535).contains(port) {
            return .failure(SessionError(.badURL, failingURL: url, message: "the port \(port) is outside 0...65535"))
        }
        let fields = request.allHTTPHeaderFields ?? [:]
        if let problem = FieldSyntax.problem(method: request.httpMethod ?? "GET", fields: fields.map { ($0.key, $0.value) }) {
            return .failure(SessionError(.badURL, failingURL: url, message: "the request cannot be sent: \(problem)"))
        }
        if let deadline, deadline.timeIntervalSince(now) <= 0 {
            return .failure(
                SessionError(.timedOut, failingURL: url, message: "the resource timeout of \(settings.timeoutIntervalForResource) s passed"))
        }
        // The configuration's additional fields were put into the request
        // (where a field of its own wins); they go out as their caller spelled them.
        var spelled: [String: (name: String, value: String)] = [:]
        for (name, value) in settings.httpAdditionalHeaders { spelled[name.lowercased()] = (name, value) }
        var headers: [(name: String, value: String)] = []
        for (name, value) in fields.sorted(by: { $0.key < $1.key }) where !FieldSyntax.isSessionOwned(name) {
            if let given = spelled[name.lowercased()], given.value == value {
                headers.append(given)
            } else {
                headers.append((name, value))
            }
        }
        var transfer = TransferRequest(url: target.transferURL, method: request.httpMethod ?? "GET", headers: headers, body: body)
        transfer.unixSocketPath = target.socketPath
        let idle = request.timeoutInterval > 0 && request.timeoutInterval != 60 ? request.timeoutInterval : settings.timeoutIntervalForRequest
        let idleLimit = Session.timeLimit(idle)
        transfer.connectTimeout = idleLimit
        transfer.idleTimeout = idleLimit
        transfer.idleTimeoutCountsFromSend = settings.requestTimeoutCountsFromSend
        transfer.totalTimeout = deadline.map { .milliseconds(max(1, Int64(min($0.timeIntervalSince(now), 365 * 86_400) * 1000))) }
        transfer.proxy = target.socketPath == nil ? settings.proxy(for: url) : nil
        transfer.tls.caFile = settings.trustRootsFile
        transfer.tls.minimumVersion = settings.tlsMinimumSupportedVersion.map { ($0.major, $0.minor) }
        transfer.tls.maximumVersion = settings.tlsMaximumSupportedVersion.map { ($0.major, $0.minor) }
        return .success(transfer)
    }

    /// Adds what the stores and the cache gave for this hop: the cookie
    /// store's Cookie field, the credentials chosen (replacing fields of the
    /// same name), libcurl's own scheme, and a revalidation's validators
    /// (never over a field the request carries).
    static func complete(
        _ transfer: inout TransferRequest, cookie: String?, authorization: [(name: String, value: String)],
        libcurlAuthentication: TransferRequest.HTTPAuthentication?, validators: [(name: String, value: String)], isDownload: Bool
    ) {
        if let cookie { transfer.headers.append(("Cookie", cookie)) }
        for field in authorization {
            transfer.headers.removeAll { HeaderFields.namesEqual($0.name, field.name) }
            transfer.headers.append(field)
        }
        transfer.httpAuthentication = libcurlAuthentication
        for field in validators where !transfer.headers.contains(where: { HeaderFields.namesEqual($0.name, field.name) }) {
            transfer.headers.append(field)
        }
        if isDownload { transfer.receiveBufferSize = SessionTask.downloadBufferSize }
    }
}
