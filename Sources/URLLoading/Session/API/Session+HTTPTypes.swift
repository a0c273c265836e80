public import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
public import HTTPTypes
import Transport

/// The calls swift-http-types' `HTTPTypesFoundation` adds to `URLSession`,
/// with the same shapes. The response is made from the head the transport
/// read, not from Foundation's `HTTPURLResponse` (which is never built on
/// this path unless a delegate asks for it): its fields keep their order
/// and each repeated field (every `Set-Cookie`) stays a field of its own,
/// and the reason phrase is the server's.
extension Session {
    /// Loads `request` and returns the body and response. Cancelling the
    /// calling Swift task cancels the transfer.
    ///
    /// - Parameters:
    ///   - request: The request to send; it needs a scheme and an authority.
    ///   - delegate: A delegate for this task alone (redirects, metrics).
    /// - Throws: `URLError` for client-side failures (`badURL` for a request
    ///   without a scheme or authority, or with a space or control byte in
    ///   its authority or path); a 4xx or 5xx is a response.
    public func data(for request: HTTPRequest, delegate: (any SessionDelegate)? = nil) async throws -> (Data, HTTPResponse) {
        try await load(.data, request, body: nil, delegate: delegate)
    }

    /// Uploads the file at `fileURL` with `request`, streamed from disk.
    public func upload(for request: HTTPRequest, fromFile fileURL: URL, delegate: (any SessionDelegate)? = nil) async throws -> (Data, HTTPResponse) {
        try await load(.upload, request, body: Session.fileBodyOf(fileURL), delegate: delegate)
    }

    /// Uploads `bodyData` with `request`.
    public func upload(for request: HTTPRequest, from bodyData: Data, delegate: (any SessionDelegate)? = nil) async throws -> (Data, HTTPResponse) {
        try await load(.upload, request, body: .data(bodyData), delegate: delegate)
    }

    /// Downloads `request` to a file that the caller owns (and must delete).
    public func download(for request: HTTPRequest, delegate: (any SessionDelegate)? = nil) async throws -> (URL, HTTPResponse) {
        let urlRequest = try Self.converted(request)
        return try await run(delegate: delegate) { deliver, runner in
            makeTask(
                .download, urlRequest, body: .none,
                sink: DownloadSink(
                    keep: { location, ending in
                        if let error = ending.error { throw error }
                        guard let response = ending.fieldsResponse() else {
                            throw SessionError(.badServerResponse, failingURL: urlRequest.url, message: "no response").urlError
                        }
                        return (try Self.kept(location, url: urlRequest.url), response)
                    },
                    deliver: deliver), completionRunner: runner)
        }.0
    }

    /// Starts loading `request` and returns as soon as the response head
    /// arrives, with the body as a stream (`lines`, `characters` and
    /// `unicodeScalars` read it as text). Cancelling the calling Swift task
    /// cancels the transfer.
    ///
    /// - Throws: `URLError` when no response arrives, `badURL` as `data(for:)`.
    public func bytes(for request: HTTPRequest, delegate: (any SessionDelegate)? = nil) async throws -> (AsyncBytes, HTTPResponse) {
        try await stream(Self.converted(request), delegate: delegate, publishesHead: true) { $0.fields }
    }

    /// `bytes(for:)` with a request body produced while it is sent: the
    /// chunks are read as the connection takes them (at most 256 KiB ahead
    /// of it), never gathered; a known `length` goes out as
    /// `Content-Length`, else HTTP/1.1 sends the body chunked. When the body
    /// must be sent again (a 307 or 308 redirect, a challenge), `chunks` is
    /// read again if `replayable`; otherwise the task fails with
    /// `requestBodyStreamExhausted`. A chunk sequence that throws fails the
    /// task (the error's type, never its text, is in the message).
    package func bytes<Chunks: AsyncSequence & Sendable>(
        for request: HTTPRequest, body chunks: Chunks, length: Int64?, replayable: Bool, delegate: (any SessionDelegate)? = nil
    ) async throws -> (AsyncBytes, HTTPResponse) where Chunks.Element == ArraySlice<UInt8> {
        var urlRequest = try Self.converted(request)
        if let length, length >= 0 { urlRequest.setValue(String(length), forHTTPHeaderField: "Content-Length") }
        let produce = SessionTask.BodySource.producer { pipe in
            do {
                for try await chunk in chunks where !chunk.isEmpty {
                    guard await pipe.send(Data(chunk)) else { return }
                }
                pipe.finish()
            } catch {
                pipe.finish(error: "the request body's sequence failed (\(type(of: error)))")
            }
        }
        let body = SessionTask.StreamedBody(
            length: length.map { max($0, -1) } ?? -1, next: produce, remake: replayable ? .by({ produce }) : .once)
        return try await stream(urlRequest, streamedBody: body, delegate: delegate, publishesHead: true) { $0.fields }
    }

    private func load(
        _ kind: SessionTask.Kind, _ request: HTTPRequest, body: TransferRequest.Body?, delegate: (any SessionDelegate)?
    ) async throws -> (Data, HTTPResponse) {
        let urlRequest = try Self.converted(request)
        return try await run(delegate: delegate) { deliver, runner in
            rawTask(
                kind, with: urlRequest, body: body, completionRunner: runner,
                sink: CollectingSink { data, ending in
                    deliver(
                        Result {
                            if let error = ending.error { throw error }
                            // Made on the awaiting task (the completion runner), off the transport's thread.
                            guard let response = ending.fieldsResponse() else {
                                throw SessionError(.badServerResponse, failingURL: urlRequest.url, message: "no response").urlError
                            }
                            return (data ?? Data(), response)
                        })
                })
        }.0
    }

    private static func converted(_ request: HTTPRequest) throws -> URLRequest {
        do { return try request.urlRequest() } catch { throw error.urlError }
    }
}

extension Session {
    /// The body of a response as it arrives (Apple's `URLSession.AsyncBytes`).
    public typealias AsyncBytes = ByteStream
}

extension SessionTask {
    /// The request the task was made with, as swift-http-types' type.
    public var originalHTTPRequest: HTTPRequest? { originalRequest?.fieldsRequest }

    /// The request now being sent (after redirects), as swift-http-types' type.
    public var currentHTTPRequest: HTTPRequest? { currentRequest?.fieldsRequest }

    /// The response, once its head arrived, as swift-http-types' type: made
    /// from the head the transport read (fields in order, repeated fields
    /// apart, the reason phrase) without building Foundation's response.
    public var httpResponse: HTTPResponse? {
        let (head, response) = locked.withLock { ($0.head?.head, $0.head == nil ? $0.response : nil) }
        if let head { return HTTPResponse(head) }
        return response.flatMap { HTTPResponse(bridging: $0) }
    }
}
