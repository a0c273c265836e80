import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
import Tracing

/// A task's client span in the process's tracer (whatever
/// `InstrumentationSystem.bootstrap` installed — swift-otel, Zipkin,
/// Jaeger —, or one bound with `withTracer` while the session is made),
/// named and described as OpenTelemetry's HTTP client conventions say.
///
/// The span starts when the task first runs, as a child of the service
/// context the task was made in; each request the task sends carries its
/// context in the fields the tracer's propagation writes (W3C
/// `traceparent` under swift-otel). It ends with the task, with events for
/// what happened between its requests: redirects followed, challenges
/// answered, tries after a lost connection, answers from the cache.
///
/// A task has one only when its session found a tracer other than
/// swift-distributed-tracing's no-op one: without, tracing costs a task
/// one nil check where it starts, each request and its end.
final class TaskTrace: Sendable {
    private let tracer: any Tracer
    /// The service context of the code that made the task.
    private let parent: ServiceContext
    private struct State {
        var span: (any Span)?
        /// The task ended: a span started after this would never end.
        var ended = false
    }
    private let state = Lock(State())

    init(tracer: any Tracer, parent: ServiceContext) {
        self.tracer = tracer
        self.parent = parent
    }

    /// Starts the span for `request` (the task's first run). Its
    /// attributes are all set at its end, in one write: a tracer's sampler
    /// sees none at the start either (`startSpan` takes none).
    func start(_ request: URLRequest?) {
        let method = request?.httpMethod ?? "GET"
        state.withLock { state in
            guard state.span == nil, !state.ended else { return }
            state.span = tracer.startSpan(
                Self.isStandardMethod(method) ? method : "HTTP", context: parent, ofKind: .client, at: DefaultTracerClock.now)
        }
    }

    /// Writes the span's context into a request's fields, replacing any of
    /// the same names the caller set.
    func inject(into fields: inout [(name: String, value: String)]) {
        guard let span = state.withLock({ $0.span }) else { return }
        // A carrier of a nominal type: a tuple array's type would be looked up at run time on each call.
        var carrier = FieldCarrier(fields: fields)
        fields = []
        tracer.inject(span.context, into: &carrier, using: FieldInjector())
        fields = carrier.fields
    }

    /// The host could not be reached and the request goes again later
    /// (`waitsForConnectivity`): the `number`th try.
    func retrying(after error: SessionError, try number: Int) {
        guard let span = state.withLock({ $0.span }) else { return }
        var attributes = SpanAttributes()
        attributes["error.type"] = error.code.description
        attributes["http.request.resend_count"] = number
        span.addEvent(SpanEvent(name: "retry", at: DefaultTracerClock.now, attributes: attributes))
    }

    /// Ends the span with the task: what it asked for (`request`, the
    /// task's original request), its answer's status, its failure, and the
    /// events its metrics show (redirects, challenges, the cache).
    ///
    /// - Parameter instant: When the task ended (now by default).
    func end(
        _ request: URLRequest?, status: Int?, error: SessionError?, metrics: TaskMetrics?,
        at instant: DefaultTracerClock.Instant = DefaultTracerClock.now
    ) {
        guard
            let span = state.withLock({ state -> (any Span)? in
                state.ended = true
                defer { state.span = nil }
                return state.span
            })
        else { return }
        for event in Self.events(of: metrics?.transactionMetrics ?? []) { span.addEvent(event) }
        let attributes = Self.endAttributes(request, status: status, error: error, metrics: metrics)
        // Whatever the tracer set on the span itself stays.
        if span.attributes.isEmpty { span.attributes = attributes } else { span.updateAttributes { $0.merge(attributes) } }
        if let error {
            span.setStatus(SpanStatus(code: .error, message: error.code.description))
        } else if let status, status >= 400 {
            span.setStatus(SpanStatus(code: .error))
        }
        span.end(at: instant)
    }

    // MARK: What the span says (pure, so that it is tested without a tracer)

    /// Whether OpenTelemetry names `method` (case-sensitive, as methods
    /// are); any other is `_OTHER`, its name kept in
    /// `http.request.method_original`.
    static func isStandardMethod(_ method: String) -> Bool {
        switch method {
        case "GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "CONNECT", "TRACE", "QUERY": true
        default: false
        }
    }

    /// The request's attributes and the end's, built once (a span's
    /// attributes are a dictionary: made at its final size, in one write).
    static func endAttributes(_ request: URLRequest?, status: Int?, error: SessionError?, metrics: TaskMetrics?) -> SpanAttributes {
        var attributes = [String: SpanAttribute](minimumCapacity: 12)
        addRequest(&attributes, method: request?.httpMethod ?? "GET", url: request?.url)
        if let status, (100...999).contains(status) { attributes["http.response.status_code"] = .int64(Int64(status)) }
        if let error {
            attributes["error.type"] = .string(error.code.description)
        } else if let status, status >= 400 {
            attributes["error.type"] = .string("\(status)")
        }
        var requests = 0
        var last: TaskTransactionMetrics?
        for transaction in metrics?.transactionMetrics ?? [] where transaction.resourceFetchType == .networkLoad {
            requests += 1
            last = transaction
        }
        if requests > 1 { attributes["http.request.resend_count"] = .int64(Int64(requests - 1)) }
        if let last {
            if let version = protocolVersion(last.networkProtocolName) { attributes["network.protocol.version"] = .string(version) }
            if let address = last.remoteAddress { attributes["network.peer.address"] = .string(address) }
            if let port = last.remotePort { attributes["network.peer.port"] = .int64(Int64(port)) }
        }
        return SpanAttributes(attributes)
    }

    private static func addRequest(_ attributes: inout [String: SpanAttribute], method: String, url: URL?) {
        if isStandardMethod(method) {
            attributes["http.request.method"] = .string(method)
        } else {
            attributes["http.request.method"] = .string("_OTHER")
            attributes["http.request.method_original"] = .string(method)
        }
        guard let url else { return }
        let text = url.absoluteString
        attributes["url.full"] = .string(redacted(url, text: text))
        let scheme: String?
        let host: String?
        let port: Int?
        // Foundation's getters parse the URL again, each of them.
        if let plain = plainAuthority(text) {
            (scheme, host, port) = (plain.scheme, plain.host, plain.port)
        } else {
            (scheme, host, port) = (url.scheme, url.host, url.port)
        }
        if let host { attributes["server.address"] = .string(host) }
        if let port = port ?? defaultPort(scheme) { attributes["server.port"] = .int64(Int64(port)) }
    }

    /// The scheme, host and port of a URL's text in the plain form
    /// `scheme://host[:port]` followed by `/`, `?`, `#` or nothing; nil for
    /// any other (user info, an IP literal, escapes, a port of over five
    /// digits), which Foundation's getters then read.
    static func plainAuthority(_ text: String) -> (scheme: String, host: String, port: Int?)? {
        var text = text
        return text.withUTF8 { bytes -> (scheme: String, host: String, port: Int?)? in
            func string(_ range: Range<Int>) -> String { String(decoding: UnsafeBufferPointer(rebasing: bytes[range]), as: UTF8.self) }
            var index = 0
            scheme: while index < bytes.count {
                switch bytes[index] {
                case UInt8(ascii: ":"): break scheme
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                    UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."):
                    index += 1
                default: return nil
                }
            }
            let colon = index
            guard colon > 0, colon + 2 < bytes.count, bytes[colon + 1] == UInt8(ascii: "/"), bytes[colon + 2] == UInt8(ascii: "/") else { return nil }
            let hostStart = colon + 3
            index = hostStart
            var portColon: Int?
            authority: while index < bytes.count {
                switch bytes[index] {
                case UInt8(ascii: "/"), UInt8(ascii: "?"), UInt8(ascii: "#"): break authority
                case UInt8(ascii: "@"), UInt8(ascii: "["), UInt8(ascii: "%"), 0x80...0xFF: return nil
                case UInt8(ascii: ":"):
                    guard portColon == nil else { return nil }
                    portColon = index
                default: break
                }
                index += 1
            }
            let hostEnd = portColon ?? index
            guard hostStart < hostEnd else { return nil }
            var port: Int?
            if let portColon {
                guard index - portColon - 1 <= 5 else { return nil }
                for byte in bytes[(portColon + 1)..<index] {
                    guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
                    port = (port ?? 0) * 10 + Int(byte - UInt8(ascii: "0"))
                }
            }
            return (string(0..<colon), string(hostStart..<hostEnd), port)
        }
    }

    /// What happened between the task's requests, as its metrics list them:
    /// a request answered with a redirect or a challenge and followed by
    /// another, and the cache's answers.
    static func events(of transactions: [TaskTransactionMetrics]) -> [SpanEvent] {
        var events: [SpanEvent] = []
        for (index, transaction) in transactions.enumerated() {
            let status = transaction.statusCode
            let at = instant(transaction.responseEndDate ?? transaction.responseStartDate ?? transaction.fetchStartDate)
            if let cacheStatus = transaction.cacheStatus {
                switch SessionMeters.cacheResult(cacheStatus, answer: status) {
                case "hit": events.append(SpanEvent(name: "cache hit", at: at))
                case "revalidated": events.append(SpanEvent(name: "cache revalidated", at: at))
                default: break
                }
            }
            guard index + 1 < transactions.count, let status else { continue }
            let next = transactions[index + 1].request.url
            var attributes = SpanAttributes()
            attributes["http.response.status_code"] = status
            if (300...399).contains(status) {
                if let next { attributes["url.full"] = redacted(next) }
                events.append(SpanEvent(name: "redirect", at: at, attributes: attributes))
            } else if status == 401 || status == 407 {
                events.append(SpanEvent(name: "authentication challenge", at: at, attributes: attributes))
            }
        }
        return events
    }

    /// A URL as a span may show it: no user or password, no fragment, and
    /// each query value replaced (a token or signature may be one).
    static func redacted(_ url: URL, text: String? = nil) -> String {
        let text = text ?? url.absoluteString
        // Most URLs have none of these parts: nothing to take out.
        if !text.utf8.contains(where: { $0 == UInt8(ascii: "@") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }) { return text }
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: true) else { return "" }
        components.user = nil
        components.password = nil
        components.fragment = nil
        if let items = components.percentEncodedQueryItems {
            components.percentEncodedQueryItems = items.map { URLQueryItem(name: $0.name, value: $0.value == nil ? nil : "REDACTED") }
        }
        return components.string ?? ""
    }

    private static func defaultPort(_ scheme: String?) -> Int? {
        switch scheme?.lowercased() {
        case "http", "ws": 80
        case "https", "wss": 443
        default: nil
        }
    }

    /// `http/1.1` → `1.1`, `h2` → `2`, `h3` → `3`.
    private static func protocolVersion(_ name: String?) -> String? {
        // libcurl's spelling, checked before lowercasing anything.
        if name == "http/1.1" { return "1.1" }
        return switch name?.lowercased() {
        case "http/1.0": "1.0"
        case "http/1.1": "1.1"
        case "h2", "h2c": "2"
        case "h3": "3"
        default: nil
        }
    }

    private static func instant(_ date: Date?) -> DefaultTracerClock.Instant {
        guard let date, date.timeIntervalSince1970 > 0 else { return DefaultTracerClock.now }
        return DefaultTracerClock.Instant(nanosecondsSinceEpoch: UInt64(date.timeIntervalSince1970 * 1_000_000_000))
    }
}

/// A request's fields, as a propagation writes into them.
private struct FieldCarrier {
    var fields: [(name: String, value: String)]
}

/// Writes a propagated value as a request field, replacing any of its name.
private struct FieldInjector: Injector {
    func inject(_ value: String, forKey key: String, into carrier: inout FieldCarrier) {
        carrier.fields.removeAll { HeaderFields.namesEqual($0.name, key) }
        carrier.fields.append((name: key, value: value))
    }
}
