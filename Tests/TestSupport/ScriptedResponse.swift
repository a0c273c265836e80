public import Foundation

/// One header field as sent on the wire (name case kept, duplicates allowed).
public struct HeaderField: Sendable, Equatable {
    public var name: String
    public var value: String
    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }
}

/// A response that a test scripts for a route, down to the bytes and timing
/// the origin sends.
public struct ScriptedResponse: Sendable {
    /// How the body's end is signalled.
    public enum Framing: Sendable, Equatable {
        /// `Content-Length` with the true length of the body parts.
        case contentLength
        /// `Content-Length` with this value, whatever is sent (a lying server).
        case declaredLength(Int)
        /// `Transfer-Encoding: chunked`, one chunk per part.
        case chunked
        /// No length: the body ends when the connection closes.
        case closeDelimited
        /// No framing headers added at all (for 204, 304 and HEAD replies).
        case none
    }

    /// A piece of the body, or an event between pieces.
    public enum Part: Sendable {
        /// These bytes.
        case bytes([UInt8])
        /// `count` bytes of the deterministic pattern `TestOrigin.patternByte(at:)`
        /// starting at `offset`, sent in 64 KiB writes that wait for the
        /// socket (so a 1 GiB body costs no memory).
        case pattern(offset: Int, count: Int)
        /// `count` bytes of `block` repeated end to end, starting at byte
        /// `offset` of that endless repetition: as cheap to send as a copy,
        /// for bodies of gigabytes (a block whose length is no power of two
        /// still shows a misplaced range).
        case cycle(of: [UInt8], offset: Int, count: Int)
        /// Wait this long before the next part.
        case pause(Duration)
        /// Close the connection now (a server that dies mid-body).
        case closeConnection
        /// Send nothing more until the test opens `gate` (what the test does
        /// meanwhile happens mid-body, however slow the machine).
        case waitFor(OriginGate)
    }

    /// The status code.
    public var status: Int
    /// The reason phrase; a standard one when nil.
    public var reason: String?
    /// Header fields, in order. Framing headers are added per `framing`.
    public var headers: [HeaderField]
    /// The body, in parts.
    public var parts: [Part]
    /// How the body's end is signalled.
    public var framing: Framing
    /// Wait this long before sending anything.
    public var delayBeforeHead: Duration?
    /// Bytes sent instead of the status line and headers (malformed or huge
    /// heads); the parts follow as given.
    public var rawHead: [UInt8]?
    /// Close the connection after this response even if the client keeps alive.
    public var closeAfterResponse: Bool

    /// A response.
    public init(
        status: Int = 200, reason: String? = nil, headers: [HeaderField] = [],
        parts: [Part] = [], framing: Framing = .contentLength,
        delayBeforeHead: Duration? = nil, closeAfterResponse: Bool = false
    ) {
        self.status = status
        self.reason = reason
        self.headers = headers
        self.parts = parts
        self.framing = framing
        self.delayBeforeHead = delayBeforeHead
        self.closeAfterResponse = closeAfterResponse
    }

    /// This response, sent after `delay`.
    public func with(delayBeforeHead delay: Duration) -> ScriptedResponse {
        var copy = self
        copy.delayBeforeHead = delay
        return copy
    }

    /// A response with a UTF-8 body.
    public init(status: Int = 200, headers: [HeaderField] = [], body: String) {
        self.init(status: status, headers: headers, parts: [.bytes(Array(body.utf8))])
    }

    /// A response with a binary body.
    public init(status: Int = 200, headers: [HeaderField] = [], body: [UInt8]) {
        self.init(status: status, headers: headers, parts: [.bytes(body)])
    }

    /// A 200 whose head holds about `bytes` of header lines (1 KB each), for
    /// clients that must refuse a head without holding it.
    public static func hugeHead(bytes: Int) -> ScriptedResponse {
        let line = Array("X-Filler: \(String(repeating: "a", count: 1000))\r\n".utf8)
        var head = Array("HTTP/1.1 200 OK\r\n".utf8)
        head.reserveCapacity(bytes + 64)
        for _ in 0..<(bytes / line.count) { head += line }
        var response = ScriptedResponse(body: "x")
        response.rawHead = head + Array("Content-Length: 1\r\n\r\n".utf8)
        return response
    }

    /// Adds a header field.
    public func adding(_ name: String, _ value: String) -> ScriptedResponse {
        var copy = self
        copy.headers.append(HeaderField(name, value))
        return copy
    }

    /// The total of the body's byte parts.
    public var bodyLength: Int {
        parts.reduce(0) { total, part in
            switch part {
            case .bytes(let bytes): return total + bytes.count
            case .pattern(_, let count), .cycle(_, _, let count): return total + count
            case .pause, .closeConnection, .waitFor: return total
            }
        }
    }

    /// The first value of a header field, compared case-insensitively.
    public func header(_ name: String) -> String? {
        headers.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
    }

    static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 100: "Continue"
        case 200: "OK"
        case 201: "Created"
        case 204: "No Content"
        case 206: "Partial Content"
        case 301: "Moved Permanently"
        case 302: "Found"
        case 303: "See Other"
        case 304: "Not Modified"
        case 307: "Temporary Redirect"
        case 308: "Permanent Redirect"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 407: "Proxy Authentication Required"
        case 412: "Precondition Failed"
        case 416: "Range Not Satisfiable"
        case 500: "Internal Server Error"
        case 503: "Service Unavailable"
        default: "Status \(status)"
        }
    }
}

/// A request as the origin received it.
public struct RecordedRequest: Sendable {
    /// The method, for example "GET".
    public var method: String
    /// The request target as sent, path and query.
    public var target: String
    /// Header fields in the order received.
    public var headers: [HeaderField]
    /// The body received (empty when the origin stored it in `bodyFile`).
    public var body: [UInt8]
    /// Where the body went, for a path whose bodies the origin stores in
    /// files (`TestOrigin.storeBodies(of:in:)`).
    public var bodyFile: URL?
    /// The body's length, wherever it went.
    public var bodyLength: Int
    /// Which connection carried it: 1 for the origin's first, and so on.
    public var connectionNumber: Int
    /// Whether it arrived over TLS.
    public var overTLS: Bool

    /// The path, without the query.
    public var path: String {
        String(target.prefix { $0 != "?" })
    }

    /// The query, without the `?`, or nil.
    public var query: String? {
        target.firstIndex(of: "?").map { String(target[target.index(after: $0)...]) }
    }

    /// The first value of a header field, compared case-insensitively.
    public func header(_ name: String) -> String? {
        headers.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
    }

    /// All values of a header field, compared case-insensitively.
    public func headerValues(_ name: String) -> [String] {
        headers.filter { $0.name.caseInsensitiveCompare(name) == .orderedSame }.map(\.value)
    }
}
