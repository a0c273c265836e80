public import Foundation
public import OpenAPIRuntime
public import URLLoading

/// A `ClientTransport` for clients that swift-openapi-generator made, on a
/// `Session`: the session's cache, cookies, credentials, redirects and
/// delegate apply to every call.
///
/// Bodies stream both ways, on Linux as elsewhere. A request `HTTPBody` is
/// read as the connection takes it (never gathered in memory; a known
/// length goes out as `Content-Length`). The response's `HTTPBody` yields
/// chunks as they arrive; while its reader is more than a mebibyte behind,
/// the transfer pauses. Cancelling the calling Swift task, or the one
/// reading the response body, cancels the transfer.
///
/// ```swift
/// let client = Client(serverURL: try Servers.Server1.url(), transport: SessionTransport())
/// let pets = try await client.listPets().ok.body.json
/// ```
///
/// A 307 or 308 redirect (and a challenge) sends the body again when the
/// `HTTPBody` can be iterated more than once; a body that can be iterated
/// only once then fails the call with `URLError.requestBodyStreamExhausted`.
public struct SessionTransport: ClientTransport {
    /// The session every call runs on.
    public let session: Session

    /// A transport on `session` (the shared session by default).
    public init(session: Session = .shared) {
        self.session = session
    }

    /// What a transport runs on, in the shape of swift-openapi-urlsession's
    /// `URLSessionTransport.Configuration` (code written for that transport
    /// compiles after the porting table's renames).
    public struct Configuration: Sendable {
        /// The session every call runs on.
        public var session: Session

        /// A configuration with `session` (the shared session by default).
        public init(session: Session = .shared) {
            self.session = session
        }
    }

    /// A transport with `configuration`'s session.
    public init(configuration: Configuration) {
        self.init(session: configuration.session)
    }

    /// Sends `request` to `baseURL` joined with the request's path.
    ///
    /// - Throws: `URLError` (`badURL` when the base URL and the path make
    ///   no URL, or hold a space or control byte); a 4xx or 5xx is a response.
    public func send(
        _ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String
    ) async throws -> (HTTPResponse, HTTPBody?) {
        let request = try Self.request(request, baseURL: baseURL)
        let (bytes, response): (Session.AsyncBytes, HTTPResponse)
        if let body {
            var length: Int64?
            if case .known(let known) = body.length { length = known }
            (bytes, response) = try await session.bytes(
                for: request, body: body, length: length, replayable: body.iterationBehavior == .multiple)
        } else {
            (bytes, response) = try await session.bytes(for: request)
        }
        switch request.method {
        case .head, .connect, .trace: return (response, nil)
        default: return (response, HTTPBody(ResponseChunks(bytes.chunks), length: Self.length(of: response), iterationBehavior: .single))
        }
    }

    /// The request with the base URL's scheme and authority, and the base
    /// URL's path followed by the request's path and query (generated code
    /// passes a path-only request). Joined as text: `URLComponents` cost
    /// 6% of a 1 KiB call's CPU.
    static func request(_ request: HTTPRequest, baseURL: URL) throws -> HTTPRequest {
        var path = request.path ?? ""
        // `HTTPRequest` takes a path as given; these bytes would change the request line.
        guard path.utf8.allSatisfy({ $0 > 0x20 && $0 != 0x7F }) else {
            throw SessionError(.badURL, failingURL: nil, message: "the request's path holds a space or a control character").urlError
        }
        guard let scheme = baseURL.scheme, let host = baseURL.host(percentEncoded: true), !host.isEmpty else {
            throw SessionError(.badURL, failingURL: nil, message: "the base URL has no scheme or host").urlError
        }
        var authority = host.contains(":") ? "[\(host)]" : host
        if let port = baseURL.port { authority += ":\(port)" }
        var basePath = baseURL.path(percentEncoded: true)
        // Trailing slashes of the base do not double the path's leading one.
        while basePath.hasSuffix("/") { basePath.removeLast() }
        if !path.hasPrefix("/") { path = "/" + path }
        var joined = request
        joined.scheme = scheme
        joined.authority = authority
        joined.path = basePath + path
        return joined
    }

    /// The body's length as the response declares it. Unknown when the
    /// body was encoded (the session decodes it, so the count differs) or
    /// the fields give no one plain length.
    static func length(of response: HTTPResponse) -> HTTPBody.Length {
        // One pass: each of `HTTPFields`' lookups by name walks the fields.
        var declared: String?
        for field in response.headerFields {
            if field.name == .contentEncoding { return .unknown }
            if field.name == .contentLength { declared = declared.map { "\($0), \(field.value)" } ?? field.value }
        }
        // Several fields must agree, as the session's own reading of them.
        return declared.flatMap(FieldNumber.length).map { .known($0) } ?? .unknown
    }
}

/// A response body's chunks in the type `HTTPBody` takes.
struct ResponseChunks: AsyncSequence, Sendable {
    typealias Element = ArraySlice<UInt8>
    let chunks: Session.AsyncBytes.Chunks

    init(_ chunks: Session.AsyncBytes.Chunks) { self.chunks = chunks }

    func makeAsyncIterator() -> Iterator { Iterator(chunks: chunks.makeAsyncIterator()) }

    struct Iterator: AsyncIteratorProtocol {
        var chunks: Session.AsyncBytes.Chunks.Iterator

        mutating func next() async throws -> ArraySlice<UInt8>? {
            guard let chunk = try await chunks.next() else { return nil }
            return ArraySlice(chunk)
        }
    }
}
